#pragma once
// Loss of the example's model over a whole example set (validation), forward only, in chunks so
// that the activations stay small whatever the set's size.

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "batch_sampler.hpp"
#include "char_mlp.hpp"
#include "example_set.hpp"

namespace amsp_train {

/// Mean cross-entropy (nats) of `model` with `layer_params` over every example of `examples`.
[[nodiscard]] inline float mean_loss(CharMlp& model, std::span<const float* const> layer_params,
                                     ExampleView examples, std::size_t chunk = 1024) {
  amsp::check(examples.size() > 0 && chunk > 0, "data.empty", "mean_loss needs examples and a positive chunk size");
  double total = 0.0;
  for (std::size_t first = 0; first < examples.size(); first += chunk) {
    const std::size_t count = std::min(chunk, examples.size() - first);
    total += static_cast<double>(model.forward(layer_params, examples.slice(first, count))) * static_cast<double>(count);
  }
  return static_cast<float>(total / static_cast<double>(examples.size()));
}

/// At most `max_examples` examples spread evenly over `examples` (every k-th one): a cheap,
/// deterministic stand-in for the whole set that, unlike a prefix, covers all of the alphabet.
[[nodiscard]] inline ExampleSet spread_subset(ExampleView examples, std::size_t max_examples) {
  amsp::check(max_examples > 0, "data.batch_size", "subset size must be positive");
  const std::size_t stride = std::max<std::size_t>(1, (examples.size() + max_examples - 1) / max_examples);
  std::vector<std::size_t> indices;
  for (std::size_t e = 0; e < examples.size(); e += stride) indices.push_back(e);
  return gather(examples, indices);
}

}  // namespace amsp_train
