#pragma once
// An accelerator's compute time, emulated on the host (amsp-train --device-ms-per-sequence): the
// rank's thread sleeps where a GPU trainer's host would wait for its device's kernels, so the time
// passes without taking a CPU from the other ranks or the engine's worker. On the emulated cluster
// (docs/cluster.md) eight ranks share two cores, and compute done on the CPU makes every plan's
// step depend on how the ranks' compute segments interleave on those cores (docs/planner-check.md);
// a GPU cluster has no such term. With the model's real compute small (a small batch), the step
// is this emulated time plus the communication, as on GPUs. The arithmetic is unchanged: the real
// forward and backward still run, so the loss curve is the same with or without it.
//
// Two timings (--device-timing):
// - blocking: each bucket's forward or backward sleeps its duration from the moment the host asks
//   for it, so the host's own work between buckets (the real arithmetic, the engine's calls, a
//   late wake-up on a busy core) adds to the step, as if the host waited for every kernel.
// - queued: the device runs its kernels back to back, as a GPU does when the host has launched
//   them ahead; a kernel starts when the previous one ends, or later when the host blocked in a
//   wait (a gather, a bounded gradient buffer, the step) that the kernel would be ordered after,
//   began the micro-batch, or could not have launched the kernel yet: a host that never waits for
//   the device launches each kernel after its own work since the last one. The host's work and a
//   late wake-up are hidden while they are shorter than the kernels, as on a GPU
//   (docs/planner-check-device-queue.md).

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

#include "amsp_train/gpt_config.hpp"

namespace amsp_train {

enum class DeviceTiming { blocking, queued };

/// The host's clock and sleep (a test substitutes a simulated one).
struct SteadyHostClock {
  using time_point = std::chrono::steady_clock::time_point;
  [[nodiscard]] time_point now() const { return std::chrono::steady_clock::now(); }
  void sleep_until(time_point t) const { std::this_thread::sleep_until(t); }
};

template <class HostClock = SteadyHostClock>
class BasicEmulatedDevice {
public:
  using time_point = typename HostClock::time_point;
  /// A host call that returns within this did not block: what it waited for was ready before the
  /// call, so the kernels after it need not start after it. A blocking wait (a condition
  /// variable's wake-up) takes longer; a call preempted on a busy core for longer counts as a
  /// wait, which only delays the device as the blocking timing always does.
  static constexpr std::chrono::microseconds blocked_after{50};

  /// ms_per_sequence per sequence of a micro-batch: a third in the forward, two thirds in the
  /// backward (a backward computes two products per forward one), each spread over the buckets in
  /// proportion to their parameters (a dense layer's work is parameters x tokens; the embedding's
  /// lookup costs a GPU less than its share, which runs m-o of docs/planner-check.md kept). 0 = off.
  BasicEmulatedDevice(double ms_per_sequence, const std::vector<ParamBucket>& buckets,
                      DeviceTiming timing = DeviceTiming::blocking, HostClock clock = {})
      : ms_per_sequence_(ms_per_sequence), timing_(timing), clock_(clock) {
    std::size_t total = 0;
    for (const ParamBucket& b : buckets) total += b.numel;
    for (const ParamBucket& b : buckets) share_.push_back(total ? double(b.numel) / double(total) : 0.0);
  }

  [[nodiscard]] bool on() const { return ms_per_sequence_ > 0; }

  /// The host begins a micro-batch: no kernel of it starts earlier (the host launches them).
  void host_begins() {
    host_ = mark_ = clock_.now();
    blocked_ = {};
  }

  /// The host spent [start, end) in a call that the next kernels are ordered after. If it blocked
  /// (blocked_after), they start no earlier than its end, and its time is not the host's work.
  void host_waited(time_point start, time_point end) {
    if (end - start <= blocked_after) return;
    inputs_ready_ = std::max(inputs_ready_, end);
    blocked_ += end - start;
  }

  /// Waits for bucket b's forward (backward = false) or backward on `sequences` sequences.
  void compute(std::size_t b, bool backward, std::size_t sequences) {
    if (!on()) return;
    const double ms = ms_per_sequence_ * double(sequences) * share_.at(b) * (backward ? 2.0 / 3.0 : 1.0 / 3.0);
    const auto duration = std::chrono::duration_cast<typename time_point::duration>(
        std::chrono::duration<double, std::milli>(ms));
    if (timing_ == DeviceTiming::blocking) {
      clock_.sleep_until(clock_.now() + duration);
      return;
    }
    // The host, had it not waited for the device, would launch this kernel after its own work
    // since the last one (the time since then, less its blocking waits).
    host_ += clock_.now() - mark_ - blocked_;
    busy_until_ = std::max({busy_until_, inputs_ready_, host_}) + duration;
    clock_.sleep_until(busy_until_);
    mark_ = clock_.now();
    blocked_ = {};
  }

private:
  using duration = typename time_point::duration;
  double ms_per_sequence_;
  DeviceTiming timing_;
  HostClock clock_;
  std::vector<double> share_;  ///< each bucket's share of the parameters
  // queued timing only:
  time_point busy_until_{};    ///< when the last kernel ends
  time_point inputs_ready_{};  ///< the end of the host's last blocking wait
  time_point host_{};          ///< when a host that never waits for the device launches the next kernel
  time_point mark_{};          ///< the host's last launch or wake-up
  duration blocked_{};         ///< the host's blocking waits since mark_
};

using EmulatedDevice = BasicEmulatedDevice<>;

}  // namespace amsp_train
