#pragma once
// A device space simulated on the host, so that the engine's device-space code path runs where no
// GPU is (and under ThreadSanitizer): decisions left on the "device" (step() returns before the
// norm is known, the update reads the decision from a control block, as amsp::CudaAsync's
// StepControl), events retired without a host wait, tickets. Its two streams (communication and
// gather) are worker threads, like HostAsync's and CudaAsync's, so the gather stream's order after
// the update it reads is checked by ThreadSanitizer; its "device" memory is host memory; the user's
// "stream" is the caller's thread, so user_after waits on the host: the one thing a real device
// space does differently, and what test_engine_cuda checks on a GPU.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "amsp/comm/detail/ordered_worker.hpp"
#include "amsp/engine/host_memory.hpp"
#include "amsp/engine/space.hpp"
#include "amsp/engine/space_memory.hpp"
#include "amsp/engine/step_decision.hpp"

namespace amsp::test {

class SimulatedDeviceMemory;

class SimulatedDevice : public TwoStreamOperations<SimulatedDevice> {
public:
  static constexpr bool asynchronous = true;
  static constexpr bool concurrent_streams = true;
  using config = HostSpaceConfig;
  using memory_type = SimulatedDeviceMemory;

  explicit SimulatedDevice(const HostSpaceConfig& = {}) {}
  SimulatedDevice(const SimulatedDevice&) = delete;
  SimulatedDevice& operator=(const SimulatedDevice&) = delete;

  [[nodiscard]] std::uint64_t last_ticket() const { return last_ticket_; }
  void user_after(std::uint64_t ticket) {
    const Stream& s = stream(StreamTicket::stream(ticket));
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return s.completed >= StreamTicket::position(ticket); });
  }
  void comm_after_user() {}   // the user's writes happen before the submission of later tasks
  void user_after_comm() {}   // a slot is released by the task that read it, after reading it
  void wait_for_user() {}     // the user's compute runs on the caller's thread
  template <class Comm>
  void before_collective(Comm&) {}

private:
  friend class TwoStreamOperations<SimulatedDevice>;
  struct Stream {
    std::uint64_t submitted = 0;  // caller's thread only
    std::uint64_t completed = 0;  // under mutex_
  };
  Stream& stream(stream_id id) { return id == stream_id::gather ? gather_ : comm_; }

  comm::Handle enqueue(stream_id id, std::function<void()> task) {
    Stream& s = stream(id);
    const std::uint64_t position = ++s.submitted;
    last_ticket_ = StreamTicket::make(id, position);
    return (id == stream_id::gather ? gather_worker_ : worker_).submit([this, &s, t = std::move(task), position] {
      struct Publish {  // also when the task throws
        SimulatedDevice* space;
        Stream* stream;
        std::uint64_t position;
        ~Publish() {
          std::lock_guard lock(space->mutex_);
          stream->completed = position;
          space->done_.notify_all();
        }
      } publish{this, &s, position};
      t();
    });
  }

  Stream comm_;
  Stream gather_;
  std::uint64_t last_ticket_ = 0;  // caller's thread only
  std::mutex mutex_;
  std::condition_variable done_;
  comm::detail::OrderedWorker worker_;
  // Last: stopped first (its tasks may wait for the communication stream's).
  comm::detail::OrderedWorker gather_worker_;
};

/// Host memory whose step decision stays with the "device": decide() records it and returns
/// nothing, the update reads it (and does nothing on a skipped step), as on a GPU.
class SimulatedDeviceMemory : public HostMemory {
public:
  explicit SimulatedDeviceMemory(SimulatedDevice&) {}

  [[nodiscard]] std::optional<StepDecision> decide(double average, float loss_scale, const EngineOptions& options,
                                                   std::int64_t /*steps_so_far: kept here*/) {
    control_ = *HostMemory::decide(average, loss_scale, options, control_.step);
    return std::nullopt;
  }
  template <optim::update_rule R, class P>
  void update(const R& rule, const optim::ShardState<R>& shard, const float* grads, P* params, std::size_t n,
              const UpdateArgs& /*read from the control instead*/) {
    if (control_.skipped) return;
    HostMemory::update(rule, shard, grads, params, n, UpdateArgs{control_.step, control_.grad_scale});
  }
  [[nodiscard]] StepResult read_decision() const {
    return StepResult{control_.skipped, control_.grad_norm, control_.clip_coefficient, control_.step};
  }
  void set_steps(std::int64_t steps) { control_.step = steps; }

private:
  StepDecision control_;
};

}  // namespace amsp::test
