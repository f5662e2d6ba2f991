#pragma once
// The NCCL backend's state and error handling (docs/reliability.md, "NCCL"): one NcclComm per
// ncclComm_t (its ownership, its stream, its watchdog timeout), shared by the NcclCommunicator and
// by every Handle of an operation issued on it; one NcclWorld per world created or adopted,
// shared by every communicator split from it in this process.
//
// Every wait polls instead of blocking in CUDA: cudaEventQuery for completion, and
// ncclCommGetAsyncError for NCCL's asynchronous errors (a peer that died, a network failure) and
// for the "still in progress" state of a nonblocking communicator (ncclConfig_t::blocking = 0,
// which amsp's own communicators use, so that no NCCL call can block forever on a dead peer). An
// asynchronous error, or a wait longer than the collective timeout, aborts every communicator of
// the world (ncclCommAbort: the device kernels stop, the handles are freed, also those of adopted
// communicators) and throws rule comm.nccl_async_error or comm.timeout; every later use of any of
// them throws comm.aborted. ncclCommAbort is the only way NCCL offers out of a hung collective,
// and a sub-communicator of a world with a dead peer cannot complete either.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amsp/comm/detail/watchdog_timing.hpp"
#include "amsp/core/cuda_check.hpp"
#include "amsp/core/error.hpp"

namespace amsp::comm::detail {

/// A failed NCCL call that left the communicator usable (e.g. an invalid argument): rule comm.nccl.
inline void check_nccl(ncclResult_t result, const char* call) {
  if (result != ncclSuccess) [[unlikely]]
    fail("comm.nccl", call, " failed: ", ncclGetErrorString(result));
}

/// What a watched wait is for, for the messages: "all_reduce (count 4096)".
struct NcclCall {
  std::string_view name;
  long long count = -1;  // -1: not a collective (creation, split, barrier)
};

[[nodiscard]] inline std::string describe(const NcclCall& call) {
  if (call.count < 0) return std::string(call.name);
  return amsp::detail::concat(call.name, " (count ", call.count, ")");
}

/// The stream a world's communicators enqueue on when amsp created it; destroyed after the last.
class CudaStream {
public:
  CudaStream() {
    amsp::detail::check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "comm.cuda",
                             "cudaStreamCreateWithFlags");
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream() { cudaStreamDestroy(stream_); }
  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }

private:
  cudaStream_t stream_{};
};

/// A stream either owned (shared by the communicators split from the one that created it) or
/// borrowed from the caller (who keeps it alive longer than every communicator using it).
struct NcclStream {
  std::shared_ptr<CudaStream> owned;
  cudaStream_t stream{};
};

/// Makes `device` current for a scope and then restores the caller's: a communicator, its stream
/// and its events belong to one device, and the calling thread (an engine's worker, a thread that
/// never called cudaSetDevice) may have another one current.
class CurrentDevice {
public:
  explicit CurrentDevice(int device) {
    amsp::detail::check_cuda(cudaGetDevice(&previous_), "comm.cuda", "cudaGetDevice");
    if (previous_ == device) previous_ = -1;
    else amsp::detail::check_cuda(cudaSetDevice(device), "comm.cuda", "cudaSetDevice");
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
  ~CurrentDevice() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }

private:
  int previous_ = -1;
};

class NcclComm;

/// Every communicator of one world in this process: the world and those split from it. The
/// first fatal error aborts them all.
class NcclWorld {
public:
  [[nodiscard]] bool aborted() const noexcept { return aborted_.load(std::memory_order_acquire); }
  [[noreturn]] void throw_aborted() const {
    std::lock_guard lock(mutex_);
    fail("comm.aborted", "the NCCL communicator was aborted after an earlier error and cannot be used any more: ",
         reason_);
  }
  /// ncclCommAbort on every communicator of the world that is still alive (the first reason wins).
  inline void abort_all(const std::string& reason) noexcept;

private:
  friend class NcclComm;
  void enroll(NcclComm* c) {
    std::lock_guard lock(mutex_);
    comms_.push_back(c);
  }
  void withdraw(NcclComm* c) noexcept {
    std::lock_guard lock(mutex_);
    comms_.erase(std::remove(comms_.begin(), comms_.end(), c), comms_.end());
  }

  std::atomic<bool> aborted_{false};
  mutable std::mutex mutex_;  // guards comms_, reason_ and each enrolled NcclComm's abort
  std::vector<NcclComm*> comms_;
  std::string reason_;
};

/// One ncclComm_t: released (owned: finalised and destroyed; adopted: left alone) when the
/// communicator and the last handle of an operation on it are gone.
class NcclComm {
public:
  /// `comm` may still be initialising (a nonblocking creation or split): call wait_ready before
  /// anything else. `rank` and `size`: what the caller asked for, for messages (-1: not known yet).
  NcclComm(ncclComm_t comm, bool owned, NcclStream stream, std::shared_ptr<NcclWorld> world,
           std::chrono::nanoseconds timeout, int rank, int size)
      : stream_(std::move(stream)),
        world_(std::move(world)),
        comm_(comm),
        owned_(owned),
        timeout_(timeout),
        rank_(rank),
        size_(size) {
    world_->enroll(this);
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ~NcclComm() {
    world_->withdraw(this);
    if (!owned_ || aborted_) return;
    // Unwinding from an error (ours or the caller's): peers may be gone, and finalising would wait
    // for them; aborting lets them see the failure instead.
    if (std::uncaught_exceptions() > 0 || !finalize()) ncclCommAbort(comm_);
    else ncclCommDestroy(comm_);
  }

  [[nodiscard]] ncclComm_t get() const {
    if (world_->aborted()) world_->throw_aborted();
    return comm_;
  }
  [[nodiscard]] bool owned() const noexcept { return owned_; }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_.stream; }
  [[nodiscard]] const NcclStream& stream_ref() const noexcept { return stream_; }
  [[nodiscard]] const std::shared_ptr<NcclWorld>& world() const noexcept { return world_; }
  [[nodiscard]] std::chrono::nanoseconds timeout() const noexcept { return timeout_; }
  [[nodiscard]] bool aborted() const noexcept { return world_->aborted(); }
  /// Once the communicator is ready: its rank, size and CUDA device as NCCL reports them.
  void identify(int rank, int size, int device) noexcept {
    rank_ = rank;
    size_ = size;
    device_ = device;
  }
  [[nodiscard]] int device() const noexcept { return device_; }

  /// After an NCCL call on this communicator returned `result`: ncclInProgress (nonblocking mode)
  /// waits until the call took effect; an error aborts the world if NCCL reports the
  /// communicator broken (comm.nccl_async_error), else throws comm.nccl (still usable).
  void finish_call(ncclResult_t result, const NcclCall& call) {
    if (result == ncclInProgress) return wait_ready(call);
    if (result == ncclSuccess) [[likely]] return;
    const ncclResult_t state = async_state();
    if (state != ncclSuccess && state != ncclInProgress) fail_async(state, call);
    fail("comm.nccl", describe(call), " failed: ", ncclGetErrorString(result), " (", ncclGetLastError(comm_), ")");
  }

  /// Waits until NCCL no longer reports this communicator in progress (a nonblocking creation,
  /// split or enqueue), with the watchdog.
  void wait_ready(const NcclCall& call) {
    watch(call, [](ncclResult_t state) { return state == ncclSuccess; });
  }

  /// Waits until `event` completed, polling NCCL's asynchronous errors, with the watchdog.
  void wait_event(cudaEvent_t event, const NcclCall& call) {
    watch(call, [event](ncclResult_t) { return event_done(event); });
  }
  /// Aborts every communicator of the world (later calls throw comm.aborted with `reason`).
  void abort_world(const std::string& reason) noexcept { world_->abort_all(reason); }

  /// One poll of the asynchronous errors and of `event`; no timeout.
  [[nodiscard]] bool test_event(cudaEvent_t event, const NcclCall& call) {
    if (const ncclResult_t state = async_state(); state != ncclSuccess && state != ncclInProgress)
      fail_async(state, call);
    return event_done(event);
  }

private:
  friend class NcclWorld;

  /// ncclCommGetAsyncError, or comm.aborted once the world was aborted (the handle is freed then).
  [[nodiscard]] ncclResult_t async_state() const {
    ncclResult_t state = ncclSuccess;
    {
      std::lock_guard lock(world_->mutex_);  // another thread's abort_all cannot free comm_ meanwhile
      if (!aborted_) {
        check_nccl(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
        return state;
      }
    }
    world_->throw_aborted();
  }
  [[nodiscard]] static bool event_done(cudaEvent_t event) {
    const cudaError_t status = cudaEventQuery(event);
    if (status == cudaErrorNotReady) return false;
    amsp::detail::check_cuda(status, "comm.cuda", "cudaEventQuery");
    return true;
  }

  /// Polls NCCL's state until `done(state)`: an asynchronous error, or a wait longer than the
  /// timeout, aborts the world and throws.
  template <class Done>
  void watch(const NcclCall& call, Done done) {
    const auto start = std::chrono::steady_clock::now();
    for (PollBackoff backoff;; backoff.pause()) {
      const ncclResult_t state = async_state();
      if (state != ncclSuccess && state != ncclInProgress) fail_async(state, call);
      if (done(state)) return;
      if (timeout_.count() > 0 && std::chrono::steady_clock::now() - start > timeout_) fail_timeout(call);
    }
  }

  [[noreturn]] void fail_async(ncclResult_t state, const NcclCall& call) {
    const std::string message =
        amsp::detail::concat(describe(call), " on rank ", rank_of_message(), ": NCCL reported an asynchronous error: ",
                             ncclGetErrorString(state), " (", ncclGetLastError(comm_),
                             "); a peer died or the network failed. Every communicator of this NCCL world was "
                             "aborted (ncclCommAbort) and cannot be used again");
    world_->abort_all(message);
    fail("comm.nccl_async_error", message);
  }
  [[noreturn]] void fail_timeout(const NcclCall& call) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout_).count();
    const std::string message =
        amsp::detail::concat(describe(call), " did not complete within ", ms, " ms on rank ", rank_of_message(),
                             ": a rank stopped, died or issued different collectives, or the stream is blocked by "
                             "other work. Every communicator of this NCCL world was aborted (ncclCommAbort) and "
                             "cannot be used again");
    world_->abort_all(message);
    fail("comm.timeout", message);
  }
  [[nodiscard]] std::string rank_of_message() const {
    if (rank_ < 0) return "? of an NCCL communicator";
    return amsp::detail::concat(rank_, " of a ", size_, "-rank NCCL communicator");
  }

  /// ncclCommFinalize, polled: true once it completed, false on an error or the timeout.
  bool finalize() noexcept {
    if (const ncclResult_t r = ncclCommFinalize(comm_); r != ncclSuccess && r != ncclInProgress) return false;
    const auto start = std::chrono::steady_clock::now();
    for (PollBackoff backoff;; backoff.pause()) {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return false;
      if (state == ncclSuccess) return true;
      if (state != ncclInProgress) return false;
      if (timeout_.count() > 0 && std::chrono::steady_clock::now() - start > timeout_) return false;
    }
  }

  NcclStream stream_;  // before comm_: the stream outlives the communicator
  std::shared_ptr<NcclWorld> world_;
  ncclComm_t comm_;
  bool owned_;
  bool aborted_ = false;  // guarded by world_->mutex_
  std::chrono::nanoseconds timeout_;
  int rank_;
  int size_;
  int device_ = 0;
};

inline void NcclWorld::abort_all(const std::string& reason) noexcept {
  std::lock_guard lock(mutex_);
  if (reason_.empty()) reason_ = reason;
  aborted_.store(true, std::memory_order_release);
  for (NcclComm* c : comms_) {
    if (c->aborted_) continue;
    c->aborted_ = true;
    ncclCommAbort(c->comm_);
  }
}

}  // namespace amsp::comm::detail
