#pragma once
// An accelerator's compute time, emulated on the host (amsp-train --device-ms-per-sequence): the
// rank's thread sleeps where a GPU trainer's host would wait for its device's kernels, so the time
// passes without taking a CPU from the other ranks or the engine's worker. On the emulated cluster
// (docs/cluster.md) eight ranks share two cores, and compute done on the CPU makes every plan's
// step depend on how the ranks' compute segments interleave on those cores (docs/planner-check.md);
// a GPU cluster has no such term. With the model's real compute small (a small batch), the step
// is this emulated time plus the communication, as on GPUs. The arithmetic is unchanged: the real
// forward and backward still run, so the loss curve is the same with or without it.

#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

#include "amsp_train/gpt_config.hpp"

namespace amsp_train {

class EmulatedDevice {
public:
  /// ms_per_sequence per sequence of a micro-batch: a third in the forward, two thirds in the
  /// backward (a backward computes two products per forward one), each spread over the buckets in
  /// proportion to their parameters (a dense layer's work is parameters x tokens; the embedding's
  /// lookup costs a GPU less than its share, which runs m-o of docs/planner-check.md kept). 0 = off.
  EmulatedDevice(double ms_per_sequence, const std::vector<ParamBucket>& buckets) : ms_per_sequence_(ms_per_sequence) {
    std::size_t total = 0;
    for (const ParamBucket& b : buckets) total += b.numel;
    for (const ParamBucket& b : buckets) share_.push_back(total ? double(b.numel) / double(total) : 0.0);
  }

  [[nodiscard]] bool on() const { return ms_per_sequence_ > 0; }

  /// Waits for bucket b's forward (backward = false) or backward on `sequences` sequences.
  void compute(std::size_t b, bool backward, std::size_t sequences) const {
    if (!on()) return;
    const double ms = ms_per_sequence_ * double(sequences) * share_.at(b) * (backward ? 2.0 / 3.0 : 1.0 / 3.0);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  }

private:
  double ms_per_sequence_;
  std::vector<double> share_;  ///< each bucket's share of the parameters
};

}  // namespace amsp_train
