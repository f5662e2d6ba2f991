#pragma once
// amsp::CudaAsync: the engine's execution space over CUDA device memory (nvcc only; the engine
// header itself stays host code). Use it as the Space parameter of ShardedOptimizer and pass the
// user's compute stream at construction:
//
//   amsp::ShardedOptimizer<Comm, amsp::optim::AdamW, amsp::bf16, amsp::bf16, amsp::CudaAsync> opt(
//       comm, mesh, plan, rule, buckets, options, amsp::CudaStreams{.user = my_stream});
//
// Memory: every store (P, G, OS, the fp32 OS gradients) and every scratch buffer is device memory
// (detail::stream_ordered_buffer, amsp/engine/detail/cuda_stream_memory.hpp). Stores and the step control are allocated at construction; the scratch pools
// grow only while the schedule reaches its high-water mark (the first micro-batches of the first
// step, and again only if the call pattern changes), never in a steady-state step.
//
// Streams (docs/engine.md, "The CUDA space"): the space owns two CUDA streams, each with one host
// worker thread (the two FIFOs of HostAsync): the communication stream (reductions, OS stage,
// update, spread) and the gather stream (the prefetch AllGathers, on a communicator of their own,
// each started once its bucket's update task has finished). The schedule's tasks run on the
// workers, which enqueue the device operations (amsp/engine/device_ops.cuh) on their stream and
// issue the collectives; a task's event completes once its device work has (the worker
// synchronises its stream at the end of each task). Before each collective the collective is
// ordered after the issuing stream's work so far: by an event when its communicator can order its
// own stream after another (order_after_stream: NCCL), else by synchronising the stream, which the
// threads backend over device memory needs ("the caller's writes are complete when it calls").
//   - the streams after the user (gradients handed in, buffers released, step): a CUDA event is
//     recorded on the user's stream by the caller and waited (cudaStreamWaitEvent) by each worker
//     at the task's position in its FIFO; the caller does not wait;
//   - the user after a stream (gather(b), a G store handed out): every ticketed task bumps its
//     stream's counter in host-mapped memory when its device work is done. CudaStreams::task_wait
//     chooses who waits for that counter to reach the task's ticket: the caller's thread
//     (on_host, the default), after which the user's stream needs no wait, the task's device work
//     being done; or a one-thread kernel on the user's stream that spins (with __nanosleep), so
//     that the caller never waits (on_device; it deadlocked on a GPU shared by several ranks of
//     one process, docs/engine.md, "Waiting for a task");
//   - a scratch slot handed back to the user (grad_buffer): the user's stream waits for an event
//     recorded on the communication stream, which covers every read of the slot enqueued before.
// The device-side wait is a spinning kernel rather than a host callback (cudaLaunchHostFunc):
// callbacks of different streams may be serialised on one runtime thread, and with several ranks
// on one GPU a blocked callback of one rank could stall another rank's, which that rank's
// collective waits for.

#if !defined(__CUDACC__)
#error "amsp/engine/cuda_space.cuh holds CUDA kernels: include it from a .cu file compiled by nvcc"
#endif

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/detail/ordered_worker.hpp"
#include "amsp/comm/handle.hpp"
#include "amsp/core/cuda_buffer.hpp"
#include "amsp/core/cuda_check.hpp"
#include "amsp/core/memory_space.hpp"
#include "amsp/engine/detail/cuda_stream_memory.hpp"
#include "amsp/engine/detail/cuda_wait_mode.hpp"
#include "amsp/engine/device_ops.cuh"
#include "amsp/engine/host_memory.hpp"
#include "amsp/engine/options.hpp"
#include "amsp/engine/space.hpp"
#include "amsp/engine/step_decision.hpp"

namespace amsp {

/// What a CudaAsync engine is built with: the stream the user's forward and backward kernels run
/// on (default: the constructing thread's per-thread default stream), on the device current when
/// the engine is constructed (the engine's device: its worker thread makes it current). Not owned. Not the legacy
/// default stream (rule engine.cuda_stream); and while a step's work is in flight, issue nothing
/// on the legacy default stream either: with the threads backend, whose data phase runs on the
/// worker's per-thread stream (a blocking stream, ordered after legacy-stream work), such work
/// could wait behind a ticket wait on the user's stream for the task the worker is running.
struct CudaStreams {
  cudaStream_t user = cudaStreamPerThread;
  /// How the user's stream waits for a task (amsp::CudaTaskWait; default: the environment's
  /// AMSP_CUDA_TASK_WAIT, else on_host). on_device lets the caller's thread never wait, with a
  /// spinning kernel on the user's stream, which deadlocked on a GPU shared by several ranks of
  /// one process (docs/engine.md, "Waiting for a task").
  CudaTaskWait task_wait = detail::cuda_task_wait_from_environment();
};

namespace detail {

/// The user's stream waits until a worker has finished the task at `position` of its stream (a
/// template: a kernel defined in a header must not be defined once per translation unit).
template <class Counter>
__global__ void wait_for_ticket_kernel(const volatile Counter* completed, Counter position) {
  while (*completed < position) __nanosleep(2000);
}

/// One stream of CudaAsync: the CUDA stream, the worker thread that enqueues on it and issues its
/// collectives, and the count of its finished tasks in host-mapped memory (the user's stream
/// spins on it).
struct CudaSpaceStream {
  cudaStream_t stream{};
  volatile unsigned long long* completed = nullptr;   // host view of the counter
  unsigned long long* completed_on_device = nullptr;  // device view of the same word
  std::uint64_t submitted = 0;                        // caller's thread only
  std::optional<comm::detail::OrderedWorker> worker{std::in_place};
};

}  // namespace detail

class CudaMemory;

/// The CUDA execution space (see the header comment). One per engine; not movable.
class CudaAsync : public TwoStreamOperations<CudaAsync> {
public:
  static constexpr bool asynchronous = true;
  static constexpr bool concurrent_streams = true;  // the gather stream issues its own collectives
  using config = CudaStreams;
  using memory_type = CudaMemory;

  explicit CudaAsync(const CudaStreams& streams = {}) : user_(streams.user), task_wait_(streams.task_wait) {
    check(user_ != nullptr && user_ != cudaStreamLegacy, "engine.cuda_stream",
          "the user's stream of a CudaAsync engine is the legacy default stream, which every blocking "
          "stream (the threads backend's per-thread streams among them) waits for: pass a stream of your own "
          "or cudaStreamPerThread");
    detail::cuda_call(cudaGetDevice(&device_), "cudaGetDevice");
    try {
      void* mapped = nullptr;
      detail::cuda_call(cudaHostAlloc(&mapped, 2 * sizeof(unsigned long long), cudaHostAllocMapped),
                        "cudaHostAlloc of the task counters");
      counters_ = static_cast<volatile unsigned long long*>(mapped);
      unsigned long long* on_device = nullptr;
      detail::cuda_call(cudaHostGetDevicePointer(&on_device, mapped, 0), "cudaHostGetDevicePointer");
      for (const stream_id id : {stream_id::communication, stream_id::gather}) {
        detail::CudaSpaceStream& s = stream(id);
        const auto index = static_cast<unsigned>(id);
        s.completed = counters_ + index;
        *s.completed = 0;
        s.completed_on_device = on_device + index;
        detail::cuda_call(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      }
      // Loaded now, not at its first launch: loading may synchronise the context (CUDA's lazy
      // loading), which another engine's spinning wait on the same device could hold up forever.
      device_ops::detail::load_kernel(&detail::wait_for_ticket_kernel<unsigned long long>, "the ticket wait");
    } catch (...) {
      release();
      throw;
    }
  }
  CudaAsync(const CudaAsync&) = delete;
  CudaAsync& operator=(const CudaAsync&) = delete;
  ~CudaAsync() {
    gather_.worker.reset();  // first: its tasks may wait for the communication stream's events
    comm_.worker.reset();    // runs every queued task: every ticket completes
    (void)cudaStreamSynchronize(gather_.stream);
    (void)cudaStreamSynchronize(comm_.stream);
    (void)cudaStreamSynchronize(user_);  // the spinning waits read the counters until they return
    release();
  }

  // The space operations of amsp/engine/space.hpp: TwoStreamOperations over enqueue() below.

  // ---- the hooks of amsp/engine/space_memory.hpp (called by the caller's thread) -----------------
  [[nodiscard]] std::uint64_t last_ticket() const { return last_ticket_; }

  void user_after(std::uint64_t ticket) {
    const detail::CudaSpaceStream& s = stream(StreamTicket::stream(ticket));
    const unsigned long long position = StreamTicket::position(ticket);
    const unsigned long long completed =
        __atomic_load_n(const_cast<const unsigned long long*>(s.completed), __ATOMIC_ACQUIRE);
    if (position == 0 || completed >= position) return;  // done already: nothing to wait for
    if (task_wait_ == CudaTaskWait::on_host) {
      // The task's device work is complete once its position is published (the worker
      // synchronises its stream first): nothing is left for the user's stream to wait for.
      for (int polls = 0;
           __atomic_load_n(const_cast<const unsigned long long*>(s.completed), __ATOMIC_ACQUIRE) < position; ++polls) {
        if (polls < 64) std::this_thread::yield();  // most waits are short: a prefetched gather
        else std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      return;
    }
    detail::wait_for_ticket_kernel<unsigned long long><<<1, 1, 0, user_>>>(s.completed_on_device, position);
    detail::cuda_call(cudaGetLastError(), "the launch of the ticket wait on the user's stream");
  }

  /// Both streams: the communication stream's reductions and update read the user's writes, the
  /// gather stream's AllGathers overwrite gather slots the user's kernels read before release().
  void comm_after_user() {
    for (detail::CudaSpaceStream* s : {&comm_, &gather_}) {
      const cudaEvent_t e = events_.take();
      detail::cuda_call(cudaEventRecord(e, user_), "cudaEventRecord on the user's stream");
      // At the task's place in the FIFO: a wait enqueued now could land before stream work of earlier
      // tasks that the user's stream itself waits for (a cycle).
      (void)s->worker->submit([this, s, e] {
        const cudaError_t current = cudaSetDevice(device_);
        const cudaError_t waited = current == cudaSuccess ? cudaStreamWaitEvent(s->stream, e, 0) : current;
        events_.give(e);
        detail::cuda_call(waited, "cudaStreamWaitEvent of the engine's stream on the user's");
      });
    }
  }

  void user_after_comm() {
    const cudaEvent_t e = events_.take();
    const cudaError_t recorded = cudaEventRecord(e, comm_.stream);
    const cudaError_t waited = recorded == cudaSuccess ? cudaStreamWaitEvent(user_, e, 0) : recorded;
    events_.give(e);
    detail::cuda_call(waited, "ordering the user's stream after the communication stream");
  }

  /// The host waits for the user's stream: its kernels may still read a gather slot released to
  /// the engine, which trim_scratch is about to free.
  void wait_for_user() { detail::cuda_call(cudaStreamSynchronize(user_), "cudaStreamSynchronize of the user's stream"); }

  /// On a worker, right before each collective on `comm`: the collective reads what the work
  /// enqueued on that worker's stream so far wrote (the gather stream: its waits for the user's
  /// reads of the slot it overwrites). A communicator that runs its collectives on a stream of its
  /// own and can order that stream after another (order_after_stream: NCCL) waits for an event
  /// there, and the worker does not wait; any other (the threads backend over device memory reads
  /// the buffers on the calling thread) gets the stream synchronised.
  template <class Comm>
  void before_collective(Comm& comm) {
    const cudaStream_t s = issuing_stream_ != nullptr ? issuing_stream_ : comm_.stream;
    if constexpr (comm::orders_after_stream<Comm, cudaStream_t>) comm.order_after_stream(s);
    else detail::cuda_call(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }

  [[nodiscard]] cudaStream_t comm_stream() const noexcept { return comm_.stream; }
  [[nodiscard]] cudaStream_t gather_stream() const noexcept { return gather_.stream; }
  [[nodiscard]] cudaStream_t user_stream() const noexcept { return user_; }

private:
  friend class TwoStreamOperations<CudaAsync>;
  detail::CudaSpaceStream& stream(stream_id id) { return id == stream_id::gather ? gather_ : comm_; }
  const detail::CudaSpaceStream& stream(stream_id id) const { return id == stream_id::gather ? gather_ : comm_; }

  // A ticketed task on stream `id`'s worker: run it, let its device work finish, then publish its
  // position (also when it failed, so that no user-stream wait outlives the task; the error
  // reaches the host through the handle). A gather task ordered after an update (launch_after)
  // starts once the update's task has finished, device work included, so the AllGather reads the
  // updated P store with no device-side wait of its own (docs/engine.md, "The CUDA space").
  comm::Handle enqueue(stream_id id, std::function<void()> task) {
    detail::CudaSpaceStream& s = stream(id);
    const std::uint64_t position = ++s.submitted;
    last_ticket_ = StreamTicket::make(id, position);
    return s.worker->submit([this, &s, t = std::move(task), position] {
      std::exception_ptr failure;
      try {
        // The worker's kernels, streams and allocations are on the engine's device.
        detail::cuda_call(cudaSetDevice(device_), "cudaSetDevice on the engine's worker thread");
        issuing_stream_ = s.stream;
        t();
      } catch (...) {
        failure = std::current_exception();
      }
      const cudaError_t synced = cudaStreamSynchronize(s.stream);
      __atomic_store_n(const_cast<unsigned long long*>(s.completed), position, __ATOMIC_RELEASE);
      if (failure) std::rethrow_exception(failure);
      detail::cuda_call(synced, "cudaStreamSynchronize at the end of a task");
    });
  }

  void release() noexcept {
    for (detail::CudaSpaceStream* s : {&comm_, &gather_})
      if (s->stream != nullptr) (void)cudaStreamDestroy(std::exchange(s->stream, nullptr));
    if (counters_ != nullptr) (void)cudaFreeHost(const_cast<unsigned long long*>(std::exchange(counters_, nullptr)));
  }

  // The stream whose worker is running the current task (each worker serves one stream of one space).
  static inline thread_local cudaStream_t issuing_stream_ = nullptr;

  cudaStream_t user_;
  CudaTaskWait task_wait_;
  int device_ = 0;  // the current device at construction: the engine's
  volatile unsigned long long* counters_ = nullptr;  // host-mapped: both streams' completion counters
  std::uint64_t last_ticket_ = 0;                    // caller's thread only
  detail::CudaEventPool events_;
  detail::CudaSpaceStream comm_;
  detail::CudaSpaceStream gather_;  // last: its worker is stopped first (the destructor does so explicitly too)
};

/// The memory operations of CudaAsync (the interface of amsp::HostMemory): device stores, the
/// stream-ordered device_ops on the lane's stream, and the step's control in device memory.
class CudaMemory {
public:
  static constexpr memory_kind kind = memory_kind::cuda;
  template <class T>
  using buffer = detail::stream_ordered_buffer<T>;

  explicit CudaMemory(CudaAsync& space)
      : user_(space.user_stream()), comm_(space.comm_stream()), control_(1) {}

  /// Every kernel the engine may launch, loaded before its first step (device_ops::preload_kernels
  /// says why).
  template <optim::update_rule R, class P>
  void preload_kernels() {
    device_ops::preload_kernels<R, P>(comm_);
  }

  template <class T>
  void fill_zero(lane l, T* data, std::size_t n) {
    device_ops::fill_zero(data, n, on(l));
  }
  template <class In, class Out>
  void convert(lane l, const In* in, Out* out, std::size_t n) {
    device_ops::convert(in, out, n, on(l));
  }
  template <class T>
  void copy(lane l, T* dst, const T* src, std::size_t n) {
    if (n == 0 || dst == src) return;
    detail::cuda_call(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyDeviceToDevice, on(l)), "cudaMemcpyAsync");
  }
  template <class G>
  void accumulate(lane l, G* g, const float* z, std::size_t n, bool first) {
    device_ops::accumulate(g, z, n, first, on(l));
  }
  /// set_tensor's values into a store: synchronous (a setup call, outside any step). Host values
  /// are converted on the host and copied; device values are read after the user's stream.
  template <class In, class Out>
  void upload(const In* in, memory_kind where, Out* out, std::size_t n) {
    if (n == 0) return;
    if (where == memory_kind::host) {
      std::vector<Out> converted(n);
      for (std::size_t i = 0; i < n; ++i) converted[i] = from_float<Out>(to_float(in[i]));
      detail::cuda_call(cudaMemcpyAsync(out, converted.data(), n * sizeof(Out), cudaMemcpyHostToDevice, comm_),
                        "cudaMemcpyAsync of set_tensor's values");
    } else {
      detail::cuda_call(cudaStreamSynchronize(user_), "cudaStreamSynchronize of the user's stream");
      device_ops::convert(in, out, n, comm_);
    }
    detail::cuda_call(cudaStreamSynchronize(comm_), "cudaStreamSynchronize after set_tensor");
  }

  // ---- the step decision, on the communication stream -----------------------------------------
  void reserve_norm(std::size_t /*buckets*/, std::size_t largest_os_shard) {
    workspace_ = detail::stream_ordered_buffer<unsigned char>(device_ops::sum_of_squares_workspace<float>(largest_os_shard));
  }
  /// Adds bucket b's part to control->sum_sq (in the order the chains finish: the device sums in
  /// its own order anyway; the sum is deterministic run to run).
  void norm_part(std::size_t /*bucket*/, const float* grads, std::size_t n) {
    device_ops::add_sum_of_squares(grads, n, control_.data(), workspace_.data(), workspace_.size(), comm_);
  }
  /// control->sum_sq in device memory: the engine's AllReduce over the OS group runs on it.
  [[nodiscard]] double* norm_sum() { return device_ops::sum_sq_word(control_.data()); }
  /// After the decision read it: the next step's parts add from zero (a fresh control is zero).
  void reset_norm() { device_ops::reset_sum_of_squares(control_.data(), comm_); }
  [[nodiscard]] std::optional<StepDecision> decide(double average, float loss_scale, const EngineOptions& options,
                                                   std::int64_t /*steps_so_far: on the device*/) {
    device_ops::decide_step(control_.data(), average, loss_scale, options.max_grad_norm, options.skip_nonfinite,
                            comm_);
    return std::nullopt;
  }
  template <optim::update_rule R, class P>
  void update(const R& rule, const optim::ShardState<R>& shard, const float* grads, P* params, std::size_t n,
              const UpdateArgs& /*read from the device control instead*/) {
    device_ops::update(rule, shard, grads, params, n, control_.data(), comm_);
  }

  /// The last decision, read back (the engine synchronised first).
  [[nodiscard]] StepResult read_decision() {
    device_ops::StepControl host{};
    detail::cuda_call(cudaMemcpyAsync(&host, control_.data(), sizeof host, cudaMemcpyDeviceToHost, comm_),
                      "cudaMemcpyAsync of the step control");
    detail::cuda_call(cudaStreamSynchronize(comm_), "cudaStreamSynchronize");
    return device_ops::step_result(host);
  }
  void set_steps(std::int64_t steps) {
    device_ops::set_step(control_.data(), steps, comm_);
    detail::cuda_call(cudaStreamSynchronize(comm_), "cudaStreamSynchronize after set_steps");
  }

private:
  [[nodiscard]] cudaStream_t on(lane l) const { return l == lane::user ? user_ : comm_; }

  cudaStream_t user_;
  cudaStream_t comm_;
  detail::stream_ordered_buffer<device_ops::StepControl> control_;
  detail::stream_ordered_buffer<unsigned char> workspace_;
};

}  // namespace amsp
