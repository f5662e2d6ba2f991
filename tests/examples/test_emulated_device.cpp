// amsp-train's emulated accelerator (--device-ms-per-sequence, --device-timing) on a simulated
// host clock: when each bucket's kernel ends, against timelines worked out by hand for a GPU whose
// host launches ahead (queued) and for a host that waits for every kernel (blocking).
#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include "amsp_train/emulated_device.hpp"

namespace emulated_device_test {

using namespace amsp_train;
using std::chrono::microseconds;
using std::chrono::milliseconds;

/// A host clock that moves only when the test says the host works or when the device sleeps; a
/// sleep wakes `late` after its time, as a thread does on a busy core.
struct SimulatedHostClock {
  using time_point = std::chrono::steady_clock::time_point;
  time_point* now_;
  const microseconds* late_;
  [[nodiscard]] time_point now() const { return *now_; }
  void sleep_until(time_point t) const { *now_ = std::max(*now_, t) + *late_; }
};

/// Two buckets of equal size at 30 ms per sequence, one sequence: forwards of 5 ms, backwards of 10.
struct Fixture {
  SimulatedHostClock::time_point now{std::chrono::seconds(100)};
  microseconds late{0};
  const SimulatedHostClock::time_point t0 = now;
  std::vector<ParamBucket> buckets = std::vector<ParamBucket>(2);
  BasicEmulatedDevice<SimulatedHostClock> device(DeviceTiming timing) {
    buckets[0].numel = buckets[1].numel = 1000;
    return BasicEmulatedDevice<SimulatedHostClock>(30.0, buckets, timing, SimulatedHostClock{&now, &late});
  }
  /// A device whose host has just begun a micro-batch.
  BasicEmulatedDevice<SimulatedHostClock> begun(DeviceTiming timing) {
    auto d = device(timing);
    d.host_begins();
    return d;
  }
  void work(microseconds d) { now += d; }
  [[nodiscard]] double ms() const { return std::chrono::duration<double, std::milli>(now - t0).count(); }
  /// A wait of d from now that the device's next kernels are ordered after.
  template <class Device>
  void wait(Device& device, microseconds d) {
    const auto start = now;
    now += d;
    device.host_waited(start, now);
  }
};

/// One micro-batch of the two buckets (forwards 0 and 1, backwards 1 and 0) with `gaps` of host work
/// between the kernels: the host's clock, in ms, after each kernel.
std::vector<double> micro_batch(Fixture& f, DeviceTiming timing, const std::vector<microseconds>& gaps) {
  auto device = f.begun(timing);
  const std::size_t order[] = {0, 1, 1, 0};
  std::vector<double> ends;
  for (std::size_t k = 0; k < 4; ++k) {
    if (k > 0) f.work(gaps.at(k - 1));
    device.compute(order[k], k >= 2, 1);
    ends.push_back(f.ms());
  }
  return ends;
}

TEST_CASE("emulated device: blocking timing adds the host's work between kernels to the step") {
  Fixture f;
  const std::vector<double> ends = micro_batch(f, DeviceTiming::blocking, {milliseconds(1), milliseconds(1), milliseconds(1)});
  CHECK(ends[0] == doctest::Approx(5.0));
  CHECK(ends[3] == doctest::Approx(33.0));  // 5 + 5 + 10 + 10 of kernels, 3 of host work
}

TEST_CASE("emulated device: queued timing hides host work shorter than the kernels") {
  Fixture f;
  const std::vector<double> ends = micro_batch(f, DeviceTiming::queued, {milliseconds(1), milliseconds(1), microseconds(2500)});
  // Back to back: the host launched the kernels 1, 2 and 4.5 ms in.
  CHECK(ends[0] == doctest::Approx(5.0));
  CHECK(ends[1] == doctest::Approx(10.0));
  CHECK(ends[2] == doctest::Approx(20.0));
  CHECK(ends[3] == doctest::Approx(30.0));
}

TEST_CASE("emulated device: a late wake-up is hidden by the next kernel, not counted as host work") {
  Fixture f;
  auto device = f.begun(DeviceTiming::queued);
  f.late = milliseconds(3);
  device.compute(0, false, 1);  // the kernel ends at 5, the host wakes at 8
  CHECK(f.ms() == doctest::Approx(8.0));
  f.late = microseconds(0);
  device.compute(1, false, 1);  // launched at 0 by a host that never waited: runs 5 to 10
  CHECK(f.ms() == doctest::Approx(10.0));
  f.work(microseconds(500));
  device.compute(1, true, 1);  // 10 to 20
  CHECK(f.ms() == doctest::Approx(20.0));

  Fixture g;  // the same late wake-up with blocking timing: every millisecond of it is added
  auto blocking = g.begun(DeviceTiming::blocking);
  g.late = milliseconds(3);
  blocking.compute(0, false, 1);
  g.late = microseconds(0);
  blocking.compute(1, false, 1);
  g.work(microseconds(500));
  blocking.compute(1, true, 1);
  CHECK(g.ms() == doctest::Approx(23.5));
}

TEST_CASE("emulated device: queued timing cannot run a kernel before the host launches it") {
  Fixture f;
  auto device = f.begun(DeviceTiming::queued);
  device.compute(0, false, 1);      // 0 to 5
  f.work(milliseconds(7));          // host work for bucket 0 longer than kernel 1: launched at 7
  device.compute(1, false, 1);      // 7 to 12
  CHECK(f.ms() == doctest::Approx(12.0));
  f.work(milliseconds(12));         // launched at 7 + 12 = 19 (the host's work, not the kernels')
  device.compute(1, true, 1);       // 19 to 29; the host is at 24 and sleeps to 29
  CHECK(f.ms() == doctest::Approx(29.0));
}

TEST_CASE("emulated device: a blocking wait orders the next kernel after it, a call that returns at once does not") {
  Fixture f;
  auto device = f.begun(DeviceTiming::queued);
  device.compute(0, false, 1);  // 0 to 5
  f.wait(device, milliseconds(4));  // a gather that was not ready: blocked from 5 to 9
  device.compute(1, false, 1);      // 9 to 14
  CHECK(f.ms() == doctest::Approx(14.0));
  f.wait(device, microseconds(20));  // a call that found its work done: not ordered after, and
  f.work(milliseconds(1));           // with this, 1.02 ms of host work, hidden by kernel 2
  device.compute(1, true, 1);        // 14 to 24
  CHECK(f.ms() == doctest::Approx(24.0));
  // A wait longer than the threshold by a hair is a wait.
  f.wait(device, BasicEmulatedDevice<SimulatedHostClock>::blocked_after + microseconds(1));
  device.compute(0, true, 1);
  CHECK(f.ms() == doctest::Approx(34.051));
}

TEST_CASE("emulated device: a blocking wait is not host work: a GPU's host would not have waited") {
  Fixture f;
  auto device = f.begun(DeviceTiming::queued);
  f.wait(device, milliseconds(4));  // the first gather, not ready: blocked from 0 to 4
  f.work(milliseconds(1));          // then 1 ms of host work: a host that never waits launched at 1
  device.compute(0, false, 1);      // from 4, when its input is ready, to 9
  CHECK(f.ms() == doctest::Approx(9.0));
}

TEST_CASE("emulated device: a micro-batch begins when the host begins it, and off means no time") {
  Fixture f;
  auto device = f.begun(DeviceTiming::queued);
  device.compute(0, false, 1);  // 0 to 5
  f.work(milliseconds(20));     // the step's end, a loss AllReduce, the next batch: the host syncs
  device.host_begins();         // at 25
  device.compute(0, false, 2);  // two sequences: 10 ms, 25 to 35
  CHECK(f.ms() == doctest::Approx(35.0));

  const BasicEmulatedDevice<SimulatedHostClock> off(0.0, f.buckets, DeviceTiming::queued, SimulatedHostClock{&f.now, &f.late});
  CHECK_FALSE(off.on());
}

}  // namespace emulated_device_test
