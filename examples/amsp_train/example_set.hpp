#pragma once
// Character-level examples as the model consumes them: for each example, the token ids of the C
// previous characters (the context) and the token id of the next character (the target).

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "amsp/core/error.hpp"

namespace amsp_train {

/// A non-owning run of examples: `contexts` is row-major (size() × context), oldest character
/// first; `targets` holds one token per example.
struct ExampleView {
  int context = 0;
  std::span<const std::uint8_t> contexts;
  std::span<const std::uint8_t> targets;

  [[nodiscard]] std::size_t size() const noexcept { return targets.size(); }

  /// Examples [first, first + count).
  [[nodiscard]] ExampleView slice(std::size_t first, std::size_t count) const {
    amsp::check(first <= size() && count <= size() - first, "data.slice", "slice [", first, ", ",
                first + count, ") of ", size(), " examples is out of range");
    const auto c = static_cast<std::size_t>(context);
    return {context, contexts.subspan(first * c, count * c), targets.subspan(first, count)};
  }
};

/// An owning set of examples (a whole split, or one gathered batch).
struct ExampleSet {
  int context = 0;
  std::vector<std::uint8_t> contexts;
  std::vector<std::uint8_t> targets;

  [[nodiscard]] std::size_t size() const noexcept { return targets.size(); }
  [[nodiscard]] ExampleView view() const noexcept { return {context, contexts, targets}; }
};

}  // namespace amsp_train
