#pragma once
// The NCCL backend (target amsp::nccl; needs CUDA and NCCL, not MPI): NcclCommunicator runs the
// collectives on CUDA device memory, enqueued on one CUDA stream. Host code: compiles with g++
// against the CUDA runtime and NCCL; no kernel of amsp's is involved. Three ways to get one
// (docs/collectives.md, "NCCL"):
//
//   NcclCommunicator::from_unique_id(id, rank, size)   the caller brought the unique id to every
//       rank (launcher, environment variable, file: amsp/comm/nccl_unique_id.hpp); amsp creates
//       and owns the ncclComm_t (nonblocking, so that the watchdog can abort it) and a stream, or
//       uses the caller's stream (overload with a cudaStream_t) without owning it.
//   NcclCommunicator::world(host)   rank 0 of any host communicator (MPI, threads) makes the id and
//       broadcasts it; then as from_unique_id. MPI users include amsp/comm/mpi.hpp themselves.
//   NcclCommunicator::adopt(comm, stream)   the caller's existing ncclComm_t and stream (an
//       llm.c-style trainer has both): amsp owns neither and finalises or destroys nothing.
// owns_communicator() / owns_stream() say which. split() (ncclCommSplit, color = group index,
// key = position) always owns the sub-communicator it creates, which shares its parent's stream,
// so that all operations stay in issue order; split_on_own_stream() gives it a new stream of its
// own, for collectives issued from another thread (an engine's gather stream).
//
// - Buffer conventions are NCCL's own, so nothing is translated; bf16 and fp16 are native NCCL
//   types (NCCL's reductions compute in fp32 and round to the element type at each step), avg is
//   ncclAvg, except on a one-rank communicator, where it is ncclSum: the same values, and NCCL
//   before 2.29.7 leaves the tail of a one-rank ncclAvg unwritten (NVIDIA/nccl#1950; seen here
//   on NCCL 2.28 on an H200: fp64, 4099 elements, the last one untouched).
// - Blocking collectives enqueue, record an event and wait for it; the asynchronous forms return
//   a Handle on such an event. Every wait polls the event and NCCL's asynchronous errors, with
//   NcclOptions::collective_timeout: an error or the timeout aborts every communicator of the
//   world and throws (comm.nccl_async_error, comm.timeout; afterwards comm.aborted). See
//   amsp/comm/detail/nccl_world.hpp and docs/reliability.md.
// - Use one communicator (and those split from it) from one thread at a time, as NCCL requires.
// - order_after_stream(s): later operations wait, on the communicator's stream, for what was
//   enqueued on stream s so far (an event; the host does not wait). An engine's CUDA space calls
//   it before each collective instead of synchronising its stream (docs/engine.md).
// - Mismatched counts across ranks cannot be detected cheaply here (NCCL would hang or corrupt;
//   with a timeout, the watchdog ends the hang): validate a new schedule on the MPI or threads
//   backend, or turn on the collective consistency check.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <utility>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/detail/nccl_event.hpp"
#include "amsp/comm/detail/nccl_world.hpp"
#include "amsp/comm/detail/unique_handle.hpp"
#include "amsp/comm/detail/watchdog_timing.hpp"
#include "amsp/comm/nccl_unique_id.hpp"
#include "amsp/core/cuda_check.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"

namespace amsp::comm {

/// Number of CUDA devices; 0 when the runtime finds none or cannot start (no driver).
[[nodiscard]] inline int cuda_device_count() noexcept {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess ? devices : 0;
}

/// Makes device (rank mod device count) current: one rank per GPU on a node. Needs a device.
inline void use_device_of_rank(int rank) {
  const int devices = cuda_device_count();
  check(devices > 0, "comm.cuda", "no CUDA device to run rank ", rank, " on");
  amsp::detail::check_cuda(cudaSetDevice(rank % devices), "comm.cuda", "cudaSetDevice");
}

struct NcclOptions {
  /// The watchdog, as ThreadsOptions / MpiOptions::collective_timeout: a wait for a collective
  /// (blocking call, Handle::wait, barrier), for the creation of a communicator or for a split
  /// that lasts longer than this aborts every communicator of the world and throws comm.timeout.
  /// Zero: no time limit; NCCL's asynchronous errors (a peer that died) are detected either way.
  std::chrono::milliseconds collective_timeout{0};
};

class NcclCommunicator {
public:
  using Options = NcclOptions;

  /// Rank `rank` of a new `size`-rank communicator on the current CUDA device (select it first,
  /// e.g. use_device_of_rank), with a new non-blocking stream. Every rank passes the same `id`
  /// (new_unique_id() on one rank, handed to the others). Owns both; collective.
  [[nodiscard]] static NcclCommunicator from_unique_id(const ncclUniqueId& id, int rank, int size,
                                                       Options options = {}) {
    auto stream = std::make_shared<detail::CudaStream>();
    const cudaStream_t raw = stream->get();
    return create(id, rank, size, {std::move(stream), raw}, options);
  }
  /// The same on the caller's `stream` (kept alive by the caller longer than this communicator,
  /// those split from it and their handles): owns the communicator, not the stream.
  [[nodiscard]] static NcclCommunicator from_unique_id(const ncclUniqueId& id, int rank, int size,
                                                       cudaStream_t stream, Options options = {}) {
    return create(id, rank, size, {nullptr, stream}, options);
  }
  /// The caller's communicator and stream, owned by neither this object nor amsp: destruction
  /// finalises and destroys nothing; both must outlive this communicator and its handles. If the
  /// watchdog fires or NCCL reports an asynchronous error, `comm` is aborted (ncclCommAbort frees
  /// it: do not destroy it again). A blocking `comm` (NCCL's default) can still block inside an
  /// NCCL call when a peer is gone; create it with ncclConfig_t::blocking = 0 for a full watchdog.
  [[nodiscard]] static NcclCommunicator adopt(ncclComm_t comm, cudaStream_t stream, Options options = {}) {
    check(comm != nullptr, "comm.nccl_adopt", "NcclCommunicator::adopt: the ncclComm_t is null");
    detail::check_collective_timeout(options.collective_timeout);
    auto core = std::make_shared<detail::NcclComm>(comm, false, detail::NcclStream{nullptr, stream},
                                                   std::make_shared<detail::NcclWorld>(), options.collective_timeout,
                                                   -1, -1);
    core->wait_ready({"adopting the communicator"});  // one still being created (nonblocking) first completes
    return NcclCommunicator(std::move(core));
  }
  /// Collective over `host`'s ranks (a host communicator: MPI, threads): its rank 0 makes the
  /// unique id and broadcasts it, then from_unique_id(id, host.rank(), host.size(), options).
  template <communicator HostComm>
  [[nodiscard]] static NcclCommunicator world(HostComm& host, Options options = {}) {
    ncclUniqueId id{};
    if (host.rank() == 0) id = new_unique_id();
    // As 16-bit words: every backend's broadcast moves bf16 elements bit for bit.
    std::array<bf16, sizeof id / sizeof(bf16)> words{};
    static_assert(sizeof id == sizeof words);
    std::memcpy(words.data(), &id, sizeof id);
    host.broadcast(words.data(), words.data(), words.size(), 0);
    std::memcpy(&id, words.data(), sizeof id);
    return from_unique_id(id, host.rank(), host.size(), options);
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  /// The NCCL communicator (comm.aborted once the watchdog aborted it).
  [[nodiscard]] ncclComm_t native() const { return comm_->get(); }
  /// The stream every operation is enqueued on (the engine's communication stream).
  [[nodiscard]] cudaStream_t stream() const noexcept { return comm_->stream(); }
  /// False for an adopted communicator: then nothing is finalised or destroyed.
  [[nodiscard]] bool owns_communicator() const noexcept { return comm_->owned(); }
  /// False for the caller's stream (adopt, from_unique_id with a stream, and what split from those).
  [[nodiscard]] bool owns_stream() const noexcept { return comm_->stream_ref().owned != nullptr; }
  /// True once an error or the watchdog aborted this communicator's world: it is dead.
  [[nodiscard]] bool aborted() const noexcept { return comm_->aborted(); }

  /// Operations issued after this call run after the work enqueued on `producer` so far: an event
  /// recorded there and waited by this communicator's stream (cudaStreamWaitEvent), so the caller
  /// does not wait. `producer` is a stream of the communicator's device.
  void order_after_stream(cudaStream_t producer) {
    const detail::CurrentDevice device(comm_->device());
    if (!order_event_.owned()) order_event_ = detail::new_cuda_event();
    // The wait captures the event's state now, so one event serves every call (one thread at a time).
    amsp::detail::check_cuda(cudaEventRecord(order_event_.get(), producer), "comm.cuda",
                             "cudaEventRecord on the stream to order after");
    amsp::detail::check_cuda(cudaStreamWaitEvent(stream(), order_event_.get(), 0), "comm.cuda",
                             "cudaStreamWaitEvent of the communicator's stream");
  }

  template <element_type T>
  void all_gather(const T* send, T* recv, std::size_t count) {
    blocking(call(op_kind::all_gather, count),
             [&](const auto& what) { enqueue_all_gather(send, recv, count, what); });
  }
  template <element_type T>
  void reduce_scatter(const T* send, T* recv, std::size_t recv_count, reduce_op op = reduce_op::sum) {
    blocking(call(op_kind::reduce_scatter, recv_count),
             [&](const auto& what) { enqueue_reduce_scatter(send, recv, recv_count, op, what); });
  }
  template <element_type T>
  void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op = reduce_op::sum) {
    blocking(call(op_kind::all_reduce, count),
             [&](const auto& what) { enqueue_all_reduce(send, recv, count, op, what); });
  }
  template <element_type T>
  void broadcast(const T* send, T* recv, std::size_t count, int root) {
    blocking(call(op_kind::broadcast, count),
             [&](const auto& what) { enqueue_broadcast(send, recv, count, root, what); });
  }
  template <element_type T>
  void reduce(const T* send, T* recv, std::size_t count, reduce_op op, int root) {
    blocking(call(op_kind::reduce, count),
             [&](const auto& what) { enqueue_reduce(send, recv, count, op, root, what); });
  }

  template <element_type T>
  [[nodiscard]] Handle all_gather_async(const T* send, T* recv, std::size_t count) {
    return async(call(op_kind::all_gather, count),
                 [&](const auto& what) { enqueue_all_gather(send, recv, count, what); });
  }
  template <element_type T>
  [[nodiscard]] Handle reduce_scatter_async(const T* send, T* recv, std::size_t recv_count,
                                            reduce_op op = reduce_op::sum) {
    return async(call(op_kind::reduce_scatter, recv_count),
                 [&](const auto& what) { enqueue_reduce_scatter(send, recv, recv_count, op, what); });
  }
  template <element_type T>
  [[nodiscard]] Handle all_reduce_async(const T* send, T* recv, std::size_t count, reduce_op op = reduce_op::sum) {
    return async(call(op_kind::all_reduce, count),
                 [&](const auto& what) { enqueue_all_reduce(send, recv, count, op, what); });
  }
  template <element_type T>
  [[nodiscard]] Handle broadcast_async(const T* send, T* recv, std::size_t count, int root) {
    return async(call(op_kind::broadcast, count),
                 [&](const auto& what) { enqueue_broadcast(send, recv, count, root, what); });
  }
  template <element_type T>
  [[nodiscard]] Handle reduce_async(const T* send, T* recv, std::size_t count, reduce_op op, int root) {
    return async(call(op_kind::reduce, count),
                 [&](const auto& what) { enqueue_reduce(send, recv, count, op, root, what); });
  }

  /// A one-element all_reduce on device scratch memory, waited like a blocking collective.
  void barrier() {
    blocking({"barrier"}, [&](const auto& what) {
      if (!scratch_.owned()) {
        float* scratch = nullptr;
        amsp::detail::check_cuda(cudaMalloc(&scratch, sizeof(float)), "comm.cuda", "cudaMalloc");
        scratch_ = detail::UniqueHandle<float*, detail::CudaFree>(scratch, true);
      }
      enqueue_all_reduce(scratch_.get(), scratch_.get(), 1, reduce_op::sum, what);
    });
  }

  /// ncclCommSplit with color = the caller's group index and key = its position; the result is
  /// owned (whatever the parent), shares the parent's stream, world and options. Collective.
  [[nodiscard]] NcclCommunicator split(const GroupSet& groups) { return split_onto(groups, comm_->stream_ref()); }

  /// As split(), but the result enqueues on a new stream of its own (owned, on this communicator's
  /// device): for collectives issued from another thread beside this world's other communicators
  /// (an engine's gather stream, comm::split_for_concurrent_calls). On one shared stream the two
  /// threads' collectives would queue in one FIFO in an order that differs between ranks, each
  /// rank's kernel waiting for a peer's queued behind another: a deadlock. Collective.
  [[nodiscard]] NcclCommunicator split_on_own_stream(const GroupSet& groups) {
    const detail::CurrentDevice device(comm_->device());
    auto stream = std::make_shared<detail::CudaStream>();
    const cudaStream_t raw = stream->get();
    return split_onto(groups, {std::move(stream), raw});
  }

private:
  [[nodiscard]] NcclCommunicator split_onto(const GroupSet& groups, detail::NcclStream stream) {
    detail::check_split(groups, size_);
    const detail::CurrentDevice device(comm_->device());
    const int color = detail::group_index_of(groups, rank_);
    const RankGroup& group = groups.groups()[static_cast<std::size_t>(color)];
    const int key = group.position_of(rank_);
    const detail::NcclCall what{"split (ncclCommSplit)"};
    // Nonblocking: NCCL writes the new handle when the split completes, which the parent reports.
    const ncclComm_t parent = comm_->get();
    auto sub = std::make_unique<ncclComm_t>(nullptr);
    try {
      comm_->finish_call(ncclCommSplit(parent, color, key, sub.get(), nullptr), what);  // the parent's config
    } catch (...) {
      (void)sub.release();  // an aborted split may still write it: leak 8 bytes rather than free them
      throw;
    }
    check(*sub != nullptr, "comm.nccl", "ncclCommSplit returned no communicator for group ", color);
    auto core = std::make_shared<detail::NcclComm>(*sub, true, std::move(stream), comm_->world(), comm_->timeout(),
                                                   key, group.size());
    core->wait_ready(what);
    NcclCommunicator result_comm(std::move(core));
    check(result_comm.rank() == key && result_comm.size() == group.size(), "comm.split_mismatch",
          "ncclCommSplit gave rank ", result_comm.rank(), " of ", result_comm.size(), " for position ", key, " of ",
          group.size());
    return result_comm;
  }

  explicit NcclCommunicator(std::shared_ptr<detail::NcclComm> comm) : comm_(std::move(comm)) {
    int device = 0;
    detail::check_nccl(ncclCommUserRank(comm_->get(), &rank_), "ncclCommUserRank");
    detail::check_nccl(ncclCommCount(comm_->get(), &size_), "ncclCommCount");
    detail::check_nccl(ncclCommCuDevice(comm_->get(), &device), "ncclCommCuDevice");
    comm_->identify(rank_, size_, device);
    const detail::CurrentDevice on_device(device);
    sync_event_ = detail::new_cuda_event();
  }

  static NcclCommunicator create(const ncclUniqueId& id, int rank, int size, detail::NcclStream stream,
                                 Options options) {
    check(size >= 1, "comm.world_size", "an NCCL communicator needs at least one rank, got ", size);
    check(rank >= 0 && rank < size, "comm.rank_range", "rank ", rank, " is not a rank of a ", size,
          "-rank communicator");
    detail::check_collective_timeout(options.collective_timeout);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // no NCCL call blocks: the watchdog can always abort
    ncclComm_t comm{};
    const ncclResult_t result = ncclCommInitRankConfig(&comm, size, id, rank, &config);
    if (comm == nullptr) detail::check_nccl(result, "ncclCommInitRankConfig");
    check(comm != nullptr, "comm.nccl", "ncclCommInitRankConfig returned no communicator");
    auto core = std::make_shared<detail::NcclComm>(comm, true, std::move(stream), std::make_shared<detail::NcclWorld>(),
                                                   options.collective_timeout, rank, size);
    core->finish_call(result, {"creation (ncclCommInitRankConfig)"});
    return NcclCommunicator(std::move(core));
  }

  [[nodiscard]] static detail::NcclCall call(op_kind kind, std::size_t count) {
    return {name_of(kind), static_cast<long long>(count)};
  }
  /// Enqueues on the communicator's device (the calling thread's current device is restored
  /// after), then waits for an event recorded behind it.
  template <class Enqueue>
  void blocking(const detail::NcclCall& what, Enqueue enqueue) {
    const detail::CurrentDevice device(comm_->device());
    enqueue(what);
    amsp::detail::check_cuda(cudaEventRecord(sync_event_.get(), stream()), "comm.cuda", "cudaEventRecord");
    comm_->wait_event(sync_event_.get(), what);
  }
  /// Enqueues on the communicator's device; the handle waits for an event recorded behind it.
  template <class Enqueue>
  [[nodiscard]] Handle async(const detail::NcclCall& what, Enqueue enqueue) {
    const detail::CurrentDevice device(comm_->device());
    enqueue(what);
    return Handle(std::make_shared<detail::NcclEventState>(comm_, what));
  }
  void check_root(op_kind kind, int root) const {
    check(root >= 0 && root < size_, "comm.root_range", name_of(kind), ": root ", root, " is not a rank of this ",
          size_, "-rank communicator");
  }

  template <class T>
  void enqueue_all_gather(const T* send, T* recv, std::size_t count, const detail::NcclCall& what) {
    comm_->finish_call(ncclAllGather(send, recv, count, detail::nccl_datatype<T>(), comm_->get(), stream()), what);
  }
  template <class T>
  void enqueue_reduce_scatter(const T* send, T* recv, std::size_t recv_count, reduce_op op,
                              const detail::NcclCall& what) {
    comm_->finish_call(ncclReduceScatter(send, recv, recv_count, detail::nccl_datatype<T>(),
                                         detail::nccl_op(op, size()), comm_->get(), stream()),
                       what);
  }
  template <class T>
  void enqueue_all_reduce(const T* send, T* recv, std::size_t count, reduce_op op, const detail::NcclCall& what) {
    comm_->finish_call(ncclAllReduce(send, recv, count, detail::nccl_datatype<T>(), detail::nccl_op(op, size()),
                                     comm_->get(), stream()),
                       what);
  }
  template <class T>
  void enqueue_broadcast(const T* send, T* recv, std::size_t count, int root, const detail::NcclCall& what) {
    check_root(op_kind::broadcast, root);
    comm_->finish_call(ncclBroadcast(send, recv, count, detail::nccl_datatype<T>(), root, comm_->get(), stream()),
                       what);
  }
  template <class T>
  void enqueue_reduce(const T* send, T* recv, std::size_t count, reduce_op op, int root, const detail::NcclCall& what) {
    check_root(op_kind::reduce, root);
    comm_->finish_call(ncclReduce(send, recv, count, detail::nccl_datatype<T>(), detail::nccl_op(op, size()),
                                  root, comm_->get(), stream()),
                       what);
  }

  std::shared_ptr<detail::NcclComm> comm_;  // shared with the handles of operations on it
  detail::UniqueHandle<cudaEvent_t, detail::CudaEventDestroy> sync_event_;
  detail::UniqueHandle<cudaEvent_t, detail::CudaEventDestroy> order_event_;  // order_after_stream's, made on first use
  detail::UniqueHandle<float*, detail::CudaFree> scratch_;
  int rank_ = 0;
  int size_ = 1;
};

static_assert(communicator<NcclCommunicator>);

}  // namespace amsp::comm
