#pragma once
// Which examples each rank trains on, at each step and micro-batch.
//
// Contract (what makes loss curves comparable across plans AND meshes):
// - The global batch of step s is the list of G example indices
//     global(s)[j] = hash(seed, s, j) mod example_count,   j = 0 .. G-1,
//   i.e. G draws with replacement, a pure function of (seed, s, j). It does not depend on the
//   plan, the mesh, the number of ranks or the number of micro-batches.
// - A split of that batch over W data-parallel ranks and M micro-batches per rank cuts it into
//   W·M equal consecutive parts of b = G / (W·M) examples (G must be divisible by W·M): rank r's
//   micro-batch m is global(s)[(r·M + m)·b, (r·M + m + 1)·b).
// - Hence the union of all ranks' micro-batches is exactly the global batch, whatever W and M,
//   and since all parts have the same size b, the mean of the W·M micro-batch mean losses (and
//   gradients) is the mean over the global batch: for any split, the reduced gradient
//   (1 / (W·M)) Σ_ranks Σ_micro ∇(micro-batch mean loss) equals ∇(global-batch mean loss), up to
//   floating-point summation order.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "amsp/core/error.hpp"
#include "counter_hash.hpp"
#include "example_set.hpp"

namespace amsp_train {

/// How the global batch is cut: W data-parallel ranks times M micro-batches per rank.
struct BatchSplit {
  int world_size = 1;
  int micro_batches = 1;
};

/// Copies the examples at `indices` of `source`, in that order.
[[nodiscard]] inline ExampleSet gather(ExampleView source, std::span<const std::size_t> indices) {
  ExampleSet out;
  out.context = source.context;
  const auto c = static_cast<std::size_t>(source.context);
  out.contexts.resize(indices.size() * c);
  out.targets.resize(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::size_t e = indices[i];
    amsp::check(e < source.size(), "data.example_index", "example index ", e, " is out of range for ",
                source.size(), " examples");
    for (std::size_t k = 0; k < c; ++k) out.contexts[i * c + k] = source.contexts[e * c + k];
    out.targets[i] = source.targets[e];
  }
  return out;
}

class BatchSampler {
public:
  /// Samples global batches of `global_batch` indices into a set of `example_count` examples.
  BatchSampler(std::size_t example_count, std::size_t global_batch, std::uint64_t seed)
      : example_count_(example_count), global_batch_(global_batch), seed_(seed) {
    amsp::check(example_count > 0, "data.empty", "cannot sample batches from an empty example set");
    amsp::check(global_batch > 0, "data.batch_size", "global batch size must be positive");
  }

  [[nodiscard]] std::size_t example_count() const noexcept { return example_count_; }
  [[nodiscard]] std::size_t global_batch() const noexcept { return global_batch_; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }

  /// global(step)[position]: the example at `position` of the global batch of `step`.
  [[nodiscard]] std::size_t example_index(std::uint64_t step, std::size_t position) const {
    amsp::check(position < global_batch_, "data.batch_position", "position ", position,
                " is outside the global batch of ", global_batch_);
    return static_cast<std::size_t>(detail::counter_hash(seed_, step, position) % example_count_);
  }

  /// The whole global batch of `step`.
  [[nodiscard]] std::vector<std::size_t> global_indices(std::uint64_t step) const {
    return indices(step, 0, global_batch_);
  }

  /// b = G / (W·M), the size of every micro-batch of `split`; fails unless W·M divides G.
  [[nodiscard]] std::size_t micro_batch_size(BatchSplit split) const {
    amsp::check(split.world_size >= 1 && split.micro_batches >= 1, "data.batch_split", "world size ",
                split.world_size, " and micro-batch count ", split.micro_batches, " must both be at least 1");
    const auto parts = static_cast<std::size_t>(split.world_size) * static_cast<std::size_t>(split.micro_batches);
    amsp::check(global_batch_ % parts == 0, "data.batch_split", "global batch ", global_batch_,
                " is not divisible by world size ", split.world_size, " x micro-batches ", split.micro_batches);
    return global_batch_ / parts;
  }

  /// The example indices of micro-batch `micro` of `rank` at `step` (see the contract above).
  [[nodiscard]] std::vector<std::size_t> micro_batch_indices(std::uint64_t step, BatchSplit split, int rank,
                                                             int micro) const {
    const std::size_t b = micro_batch_size(split);
    amsp::check(rank >= 0 && rank < split.world_size, "data.batch_rank", "rank ", rank,
                " is outside the world of ", split.world_size);
    amsp::check(micro >= 0 && micro < split.micro_batches, "data.batch_micro", "micro-batch ", micro,
                " is outside the ", split.micro_batches, " micro-batches of a step");
    const auto part = static_cast<std::size_t>(rank) * static_cast<std::size_t>(split.micro_batches) +
                      static_cast<std::size_t>(micro);
    return indices(step, part * b, b);
  }

  /// The examples of that micro-batch, gathered from `source` (which must hold example_count()).
  [[nodiscard]] ExampleSet micro_batch(ExampleView source, std::uint64_t step, BatchSplit split, int rank,
                                       int micro) const {
    amsp::check_equal(source.size(), example_count_, "data.example_count", "size of the sampled example set");
    return gather(source, micro_batch_indices(step, split, rank, micro));
  }

private:
  [[nodiscard]] std::vector<std::size_t> indices(std::uint64_t step, std::size_t first, std::size_t count) const {
    std::vector<std::size_t> out(count);
    for (std::size_t j = 0; j < count; ++j) out[j] = example_index(step, first + j);
    return out;
  }

  std::size_t example_count_;
  std::size_t global_batch_;
  std::uint64_t seed_;
};

}  // namespace amsp_train
