#pragma once
// Held-out evaluation and text sampling with the gathered model.
//
// ValidationSet: `count` windows evenly spaced over the validation text; rank r evaluates windows
// r, r + W, ..., and the mean over all windows is summed over the world (uncounted: it is not the
// engine's traffic). The set and the result do not depend on the plan; only the association order
// of the final sum depends on the world size.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/comm/op.hpp"
#include "amsp_train/counter_hash.hpp"
#include "amsp_train/gpt_model.hpp"
#include "amsp_train/text_data.hpp"

namespace amsp_train {

class ValidationSet {
public:
  ValidationSet(std::string_view text, std::size_t context, std::size_t count, int rank, int world_size)
      : text_(text), context_(context), count_(count) {
    amsp::check(count >= 1, "data.validation", "the validation set needs at least one window");
    const std::vector<std::size_t> all = spaced_windows(text.size(), context, count);
    for (std::size_t i = static_cast<std::size_t>(rank); i < all.size(); i += static_cast<std::size_t>(world_size))
      mine_.push_back(all[i]);
  }

  /// Mean loss (nats per byte) over every window of the set. Collective over `world`.
  template <class Comm>
  double loss(Gpt<float>& model, std::span<const float* const> params, Comm& world) const {
    constexpr std::size_t chunk = 8;  // windows per forward
    double sum = 0.0;
    for (std::size_t i = 0; i < mine_.size(); i += chunk) {
      const std::vector<std::size_t> starts(mine_.begin() + static_cast<std::ptrdiff_t>(i),
                                            mine_.begin() + static_cast<std::ptrdiff_t>(std::min(mine_.size(), i + chunk)));
      const TokenBatch batch = windows_at(text_, starts, context_);
      sum += model.forward(params, batch.tokens.data(), batch.targets.data(), batch.sequences) * double(starts.size());
    }
    world.all_reduce(&sum, &sum, 1, amsp::comm::reduce_op::sum);
    return sum / static_cast<double>(count_);
  }

private:
  std::string_view text_;
  std::size_t context_, count_;
  std::vector<std::size_t> mine_;
};

/// `bytes` bytes sampled after `prompt` at temperature 0.8 (deterministic: random numbers from
/// counter_hash(seed, position)). The model sees the last `context` bytes; positions past the
/// text are filled with byte 0 and, being later, cannot affect the prediction (causal attention).
inline std::string sample_text(Gpt<float>& model, std::span<const float* const> params, std::string prompt,
                               std::size_t bytes, std::uint64_t seed) {
  constexpr double temperature = 0.8;
  const auto context = static_cast<std::size_t>(model.config().context);
  std::string text = std::move(prompt);
  std::vector<std::int32_t> window(context);
  for (std::size_t k = 0; k < bytes; ++k) {
    const std::size_t first = text.size() > context ? text.size() - context : 0;
    const std::size_t used = text.size() - first;
    std::fill(window.begin(), window.end(), 0);
    for (std::size_t t = 0; t < used; ++t) window[t] = static_cast<unsigned char>(text[first + t]);
    model.forward(params, window.data(), nullptr, 1);
    const std::span<const float> p = model.probabilities().subspan((used - 1) * GptConfig::vocab, GptConfig::vocab);
    // p^(1/temperature), renormalised, sampled by inverse CDF.
    std::vector<double> w(GptConfig::vocab);
    double total = 0.0;
    for (std::size_t v = 0; v < w.size(); ++v) total += w[v] = std::pow(double(p[v]), 1.0 / temperature);
    double u = detail::unit_interval(detail::counter_hash(seed, 0x5A4D, k)) * total;
    std::size_t choice = 0;
    while (choice + 1 < w.size() && u >= w[choice]) u -= w[choice++];
    text.push_back(static_cast<char>(choice));
  }
  return text;
}

}  // namespace amsp_train
