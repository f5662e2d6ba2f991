#pragma once
// amsp::CudaAsync: the engine's execution space over CUDA device memory (nvcc only; the engine
// header itself stays host code). Use it as the Space parameter of ShardedOptimizer and pass the
// user's compute stream at construction:
//
//   amsp::ShardedOptimizer<Comm, amsp::optim::AdamW, amsp::bf16, amsp::bf16, amsp::CudaAsync> opt(
//       comm, mesh, plan, rule, buckets, options, amsp::CudaStreams{.user = my_stream});
//
// Memory: every store (P, G, OS, the fp32 OS gradients) and every scratch buffer is device memory
// (stream_ordered_buffer below). Stores and the step control are allocated at construction; the scratch pools
// grow only while the schedule reaches its high-water mark (the first micro-batches of the first
// step, and again only if the call pattern changes), never in a steady-state step.
//
// Streams (docs/engine.md, "The CUDA space"): the space owns a communication stream and one host
// worker thread (the FIFO of HostAsync). The schedule's tasks run on the worker, which enqueues
// the device operations (amsp/engine/device_ops.cuh) on the communication stream and issues the
// collectives; a task's event completes once its device work has (the worker synchronises the
// communication stream at the end of each task). Before each collective the collective is ordered
// after the stream's work so far: by an event when its communicator can order its own stream
// after another (order_after_stream: NCCL), else by synchronising the stream, which the threads
// backend over device memory needs ("the caller's writes are complete when it calls"). The
// caller's thread never waits inside a step:
//   - the stream after the user (gradients handed in, buffers released, step): a CUDA event is
//     recorded on the user's stream by the caller and waited (cudaStreamWaitEvent) by the worker
//     at the task's position in the FIFO;
//   - the user after the stream (gather(b), a G store handed out): every ticketed task bumps a
//     counter in host-mapped memory when its device work is done; a one-thread kernel on the
//     user's stream spins (with __nanosleep) until the counter reaches the task's ticket, so the
//     user's next kernels run after the gather without the caller waiting;
//   - a scratch slot handed back to the user (grad_buffer): the user's stream waits for an event
//     recorded on the communication stream, which covers every read of the slot enqueued before.
// Waiting on the user's stream with a spinning kernel rather than a host callback
// (cudaLaunchHostFunc) is deliberate: callbacks of different streams may be serialised on one
// runtime thread, and with several ranks on one GPU a blocked callback of one rank could stall
// another rank's, which that rank's collective waits for.

#if !defined(__CUDACC__)
#error "amsp/engine/cuda_space.cuh holds CUDA kernels: include it from a .cu file compiled by nvcc"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <type_traits>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/detail/ordered_worker.hpp"
#include "amsp/comm/handle.hpp"
#include "amsp/core/cuda_buffer.hpp"
#include "amsp/core/cuda_check.hpp"
#include "amsp/core/memory_space.hpp"
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
};

namespace detail {

/// The user's stream waits until the worker has finished the task with `ticket` (a template: a
/// kernel defined in a header must not be defined once per translation unit).
template <class Counter>
__global__ void wait_for_ticket_kernel(const volatile Counter* completed, Counter ticket) {
  while (*completed < ticket) __nanosleep(2000);
}

inline void cuda_call(cudaError_t result, const char* what) { check_cuda(result, "cuda.runtime", what); }

/// Events recorded by one thread and waited by another; reused once waited (a wait captures the
/// event's state when it is enqueued), so a steady-state step creates none.
class CudaEventPool {
public:
  CudaEventPool() = default;
  CudaEventPool(const CudaEventPool&) = delete;
  CudaEventPool& operator=(const CudaEventPool&) = delete;
  ~CudaEventPool() {
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
  }
  [[nodiscard]] cudaEvent_t take() {
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        const cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    cudaEvent_t e{};
    cuda_call(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
  }
  void give(cudaEvent_t e) {
    std::lock_guard lock(mutex_);
    free_.push_back(e);
  }

private:
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

/// The stream device memory of the current device is allocated and zeroed on: one of its own per
/// device (never destroyed), so that an allocation neither waits for nor is waited by the engine's
/// or the user's streams.
inline cudaStream_t allocation_stream() {
  int device = 0;
  cuda_call(cudaGetDevice(&device), "cudaGetDevice");
  static std::mutex mutex;
  static std::vector<cudaStream_t> streams;  // by device
  std::lock_guard lock(mutex);
  if (streams.size() <= static_cast<std::size_t>(device)) streams.resize(static_cast<std::size_t>(device) + 1);
  cudaStream_t& stream = streams[static_cast<std::size_t>(device)];
  if (stream == nullptr)
    cuda_call(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (allocations)");
  return stream;
}

/// The stores and scratch of CudaAsync: zeroed device memory from cudaMallocAsync and
/// cudaMemsetAsync on allocation_stream(), synchronised with that stream alone. Not cuda_buffer's
/// cudaMalloc + cudaMemset on purpose: cudaMemset runs on the legacy default stream, which waits
/// for every blocking stream, and the user's stream (e.g. the per-thread default stream) may hold
/// a ticket wait for the very task that grows a scratch pool in the first step: a deadlock.
template <class T>
class stream_ordered_buffer {
  static_assert(std::is_trivially_copyable_v<T>);

public:
  stream_ordered_buffer() = default;
  explicit stream_ordered_buffer(std::size_t count) : size_(count) {
    if (count == 0) return;
    check(count <= std::numeric_limits<std::size_t>::max() / sizeof(T), "buffer.size", "device buffer of ", count,
          " elements of ", sizeof(T), " bytes overflows size_t");
    const cudaStream_t stream = allocation_stream();
    void* p = nullptr;
    check_cuda(cudaMallocAsync(&p, count * sizeof(T), stream), "cuda.malloc", "cudaMallocAsync of ",
               count * sizeof(T), " bytes");
    data_ = static_cast<T*>(p);
    const cudaError_t zeroed = cudaMemsetAsync(p, 0, count * sizeof(T), stream);
    const cudaError_t synced = zeroed == cudaSuccess ? cudaStreamSynchronize(stream) : zeroed;
    if (synced != cudaSuccess) {
      release();
      check_cuda(synced, "cuda.memset", "zeroing a new device buffer");
    }
  }
  stream_ordered_buffer(const stream_ordered_buffer&) = delete;
  stream_ordered_buffer& operator=(const stream_ordered_buffer&) = delete;
  stream_ordered_buffer(stream_ordered_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  stream_ordered_buffer& operator=(stream_ordered_buffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  /// The engine destroys its buffers after its space synchronised every stream that used them.
  ~stream_ordered_buffer() { release(); }

  [[nodiscard]] T* data() noexcept { return data_; }
  [[nodiscard]] const T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

private:
  void release() noexcept {
    if (data_ != nullptr) (void)cudaFreeAsync(data_, allocation_stream());
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace detail

class CudaMemory;

/// The CUDA execution space (see the header comment). One per engine; not movable.
class CudaAsync : public FifoStreamOperations<CudaAsync> {
public:
  static constexpr bool asynchronous = true;
  static constexpr bool concurrent_streams = false;  // one FIFO issues every collective
  using config = CudaStreams;
  using memory_type = CudaMemory;

  explicit CudaAsync(const CudaStreams& streams = {}) : user_(streams.user) {
    check(user_ != nullptr && user_ != cudaStreamLegacy, "engine.cuda_stream",
          "the user's stream of a CudaAsync engine is the legacy default stream, which every blocking "
          "stream (the threads backend's per-thread streams among them) waits for: pass a stream of your own "
          "or cudaStreamPerThread");
    detail::cuda_call(cudaGetDevice(&device_), "cudaGetDevice");
    detail::cuda_call(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    void* mapped = nullptr;
    const cudaError_t allocated = cudaHostAlloc(&mapped, sizeof(unsigned long long), cudaHostAllocMapped);
    if (allocated != cudaSuccess) {
      (void)cudaStreamDestroy(comm_);
      detail::cuda_call(allocated, "cudaHostAlloc of the task counter");
    }
    completed_ = static_cast<volatile unsigned long long*>(mapped);
    *completed_ = 0;
    detail::cuda_call(cudaHostGetDevicePointer(&completed_on_device_, mapped, 0), "cudaHostGetDevicePointer");
  }
  CudaAsync(const CudaAsync&) = delete;
  CudaAsync& operator=(const CudaAsync&) = delete;
  ~CudaAsync() {
    worker_.reset();  // runs every queued task: every ticket completes
    (void)cudaStreamSynchronize(comm_);
    (void)cudaStreamSynchronize(user_);  // the spinning waits read the counter until they return
    (void)cudaFreeHost(const_cast<unsigned long long*>(completed_));
    (void)cudaStreamDestroy(comm_);
  }

  // The space operations of amsp/engine/space.hpp: FifoStreamOperations (one FIFO and one stream,
  // every event is already in order).

  // ---- the hooks of amsp/engine/space_memory.hpp (called by the caller's thread) -----------------
  [[nodiscard]] std::uint64_t last_ticket() const { return submitted_; }

  void user_after(std::uint64_t ticket) {
    const unsigned long long completed =
        __atomic_load_n(const_cast<const unsigned long long*>(completed_), __ATOMIC_ACQUIRE);
    if (ticket == 0 || completed >= ticket) return;  // done already: nothing to wait for
    detail::wait_for_ticket_kernel<unsigned long long><<<1, 1, 0, user_>>>(completed_on_device_,
                                                                          static_cast<unsigned long long>(ticket));
    detail::cuda_call(cudaGetLastError(), "the launch of the ticket wait on the user's stream");
  }

  void comm_after_user() {
    const cudaEvent_t e = events_.take();
    detail::cuda_call(cudaEventRecord(e, user_), "cudaEventRecord on the user's stream");
    // At the task's place in the FIFO: a wait enqueued now could land before stream work of earlier
    // tasks that the user's stream itself waits for (a cycle).
    (void)worker_->submit([this, e] {
      const cudaError_t current = cudaSetDevice(device_);
      const cudaError_t waited = current == cudaSuccess ? cudaStreamWaitEvent(comm_, e, 0) : current;
      events_.give(e);
      detail::cuda_call(waited, "cudaStreamWaitEvent of the communication stream");
    });
  }

  void user_after_comm() {
    const cudaEvent_t e = events_.take();
    const cudaError_t recorded = cudaEventRecord(e, comm_);
    const cudaError_t waited = recorded == cudaSuccess ? cudaStreamWaitEvent(user_, e, 0) : recorded;
    events_.give(e);
    detail::cuda_call(waited, "ordering the user's stream after the communication stream");
  }

  /// On the worker, right before each collective on `comm`: the collective reads what the work
  /// enqueued on the communication stream so far wrote. A communicator that runs its collectives
  /// on a stream of its own and can order that stream after another (order_after_stream: NCCL)
  /// waits for an event there, and the worker does not wait; any other (the threads backend over
  /// device memory reads the buffers on the calling thread) gets the stream synchronised.
  template <class Comm>
  void before_collective(Comm& comm) {
    if constexpr (comm::orders_after_stream<Comm, cudaStream_t>) comm.order_after_stream(comm_);
    else detail::cuda_call(cudaStreamSynchronize(comm_), "cudaStreamSynchronize");
  }

  [[nodiscard]] cudaStream_t comm_stream() const noexcept { return comm_; }
  [[nodiscard]] cudaStream_t user_stream() const noexcept { return user_; }

private:
  friend class FifoStreamOperations<CudaAsync>;
  // A ticketed task: run it, let its device work finish, then publish its ticket (also when it
  // failed, so that no user-stream wait outlives the task; the error reaches the host through the
  // handle).
  comm::Handle enqueue(std::function<void()> task) {
    const std::uint64_t ticket = ++submitted_;
    return worker_->submit([this, t = std::move(task), ticket] {
      std::exception_ptr failure;
      try {
        // The worker's kernels, streams and allocations are on the engine's device.
        detail::cuda_call(cudaSetDevice(device_), "cudaSetDevice on the engine's worker thread");
        t();
      } catch (...) {
        failure = std::current_exception();
      }
      const cudaError_t synced = cudaStreamSynchronize(comm_);
      __atomic_store_n(const_cast<unsigned long long*>(completed_), ticket, __ATOMIC_RELEASE);
      if (failure) std::rethrow_exception(failure);
      detail::cuda_call(synced, "cudaStreamSynchronize at the end of a task");
    });
  }

  cudaStream_t user_;
  int device_ = 0;  // the current device at construction: the engine's
  cudaStream_t comm_{};
  volatile unsigned long long* completed_ = nullptr;     // host view of the counter
  unsigned long long* completed_on_device_ = nullptr;    // device view of the same memory
  std::uint64_t submitted_ = 0;                          // caller's thread only
  detail::CudaEventPool events_;
  std::optional<comm::detail::OrderedWorker> worker_{std::in_place};  // last: stopped first
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
