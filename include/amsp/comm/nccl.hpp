#pragma once
// The NCCL backend (target amsp::nccl): NcclCommunicator runs the collectives on CUDA device
// memory, enqueued on one CUDA stream. Host code: compiles with g++ against the CUDA runtime and
// NCCL; no kernel of amsp's is involved.
//
// - Bootstrap over MPI: rank 0 calls ncclGetUniqueId, MPI_Bcast shares it, every rank calls
//   ncclCommInitRank. Select the rank's GPU (cudaSetDevice) before NcclCommunicator::world().
// - Buffer conventions are NCCL's own, so nothing is translated; bf16 and fp16 are native NCCL
//   types (NCCL's reductions compute in fp32 and round to the element type at each step), avg is
//   ncclAvg.
// - Blocking collectives enqueue and then synchronise the stream; the asynchronous forms record a
//   CUDA event after the collective, and the Handle tests / synchronises that event.
// - split(): ncclCommSplit (color = group index, key = position). The sub-communicator shares the
//   parent's stream, so all operations stay in issue order.
// - Mismatched counts across ranks cannot be detected cheaply here (NCCL would hang or corrupt):
//   run the MPI or threads backend with the same call sequence to check a new schedule.
// - Destruction calls ncclCommFinalize, then ncclCommDestroy, before the stream is destroyed.

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/detail/unique_handle.hpp"
#include "amsp/comm/mpi.hpp"
#include "amsp/core/cuda_check.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"

namespace amsp::comm {

namespace detail {

inline void check_nccl(ncclResult_t result, const char* call) {
  if (result != ncclSuccess) [[unlikely]]
    fail("comm.nccl", call, " failed: ", ncclGetErrorString(result));
}

template <class T>
[[nodiscard]] constexpr ncclDataType_t nccl_datatype() {
  if constexpr (std::is_same_v<T, float>) return ncclFloat32;
  else if constexpr (std::is_same_v<T, double>) return ncclFloat64;
  else if constexpr (std::is_same_v<T, bf16>) return ncclBfloat16;
  else return ncclFloat16;
}
[[nodiscard]] constexpr ncclRedOp_t nccl_op(reduce_op op) { return op == reduce_op::avg ? ncclAvg : ncclSum; }

/// ncclCommFinalize (flushes outstanding work), then ncclCommDestroy.
struct FinalizeNcclComm {
  void operator()(ncclComm_t comm) const noexcept {
    ncclCommFinalize(comm);
    ncclCommDestroy(comm);
  }
};
struct CudaFree {
  void operator()(void* p) const noexcept { cudaFree(p); }
};

/// The stream every communicator of one world enqueues on; destroyed after the last of them.
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

/// Completion of an enqueued collective: a CUDA event recorded right after it.
class CudaEventState final : public HandleState {
public:
  explicit CudaEventState(cudaStream_t stream) {
    amsp::detail::check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "comm.cuda",
                             "cudaEventCreateWithFlags");
    amsp::detail::check_cuda(cudaEventRecord(event_, stream), "comm.cuda", "cudaEventRecord");
  }
  CudaEventState(const CudaEventState&) = delete;
  CudaEventState& operator=(const CudaEventState&) = delete;
  ~CudaEventState() override { cudaEventDestroy(event_); }
  bool test() override {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) return false;
    amsp::detail::check_cuda(status, "comm.cuda", "cudaEventQuery");
    return true;
  }
  void wait() override { amsp::detail::check_cuda(cudaEventSynchronize(event_), "comm.cuda", "cudaEventSynchronize"); }

private:
  cudaEvent_t event_{};
};

}  // namespace detail

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

class NcclCommunicator {
public:
  /// Collective over `mpi`'s ranks: one NCCL communicator with the same ranks, on the current
  /// CUDA device, with a new non-blocking stream.
  [[nodiscard]] static NcclCommunicator world(MpiCommunicator& mpi) {
    ncclUniqueId id{};
    if (mpi.rank() == 0) detail::check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    detail::check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi.native()), "MPI_Bcast");
    auto stream = std::make_shared<detail::CudaStream>();
    ncclComm_t comm{};
    detail::check_nccl(ncclCommInitRank(&comm, mpi.size(), id, mpi.rank()), "ncclCommInitRank");
    return NcclCommunicator(comm, std::move(stream));
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] ncclComm_t native() const noexcept { return comm_.get(); }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_->get(); }

  template <element_type T>
  void all_gather(const T* send, T* recv, std::size_t count) {
    enqueue_all_gather(send, recv, count);
    synchronize();
  }
  template <element_type T>
  void reduce_scatter(const T* send, T* recv, std::size_t recv_count, reduce_op op = reduce_op::sum) {
    enqueue_reduce_scatter(send, recv, recv_count, op);
    synchronize();
  }
  template <element_type T>
  void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op = reduce_op::sum) {
    enqueue_all_reduce(send, recv, count, op);
    synchronize();
  }
  template <element_type T>
  void broadcast(const T* send, T* recv, std::size_t count, int root) {
    enqueue_broadcast(send, recv, count, root);
    synchronize();
  }
  template <element_type T>
  void reduce(const T* send, T* recv, std::size_t count, reduce_op op, int root) {
    enqueue_reduce(send, recv, count, op, root);
    synchronize();
  }

  template <element_type T>
  [[nodiscard]] Handle all_gather_async(const T* send, T* recv, std::size_t count) {
    enqueue_all_gather(send, recv, count);
    return completion();
  }
  template <element_type T>
  [[nodiscard]] Handle reduce_scatter_async(const T* send, T* recv, std::size_t recv_count,
                                            reduce_op op = reduce_op::sum) {
    enqueue_reduce_scatter(send, recv, recv_count, op);
    return completion();
  }
  template <element_type T>
  [[nodiscard]] Handle all_reduce_async(const T* send, T* recv, std::size_t count, reduce_op op = reduce_op::sum) {
    enqueue_all_reduce(send, recv, count, op);
    return completion();
  }
  template <element_type T>
  [[nodiscard]] Handle broadcast_async(const T* send, T* recv, std::size_t count, int root) {
    enqueue_broadcast(send, recv, count, root);
    return completion();
  }
  template <element_type T>
  [[nodiscard]] Handle reduce_async(const T* send, T* recv, std::size_t count, reduce_op op, int root) {
    enqueue_reduce(send, recv, count, op, root);
    return completion();
  }

  /// A one-element all_reduce on device scratch memory, then a stream synchronisation.
  void barrier() {
    if (!scratch_.owned()) {
      float* scratch = nullptr;
      amsp::detail::check_cuda(cudaMalloc(&scratch, sizeof(float)), "comm.cuda", "cudaMalloc");
      scratch_ = detail::UniqueHandle<float*, detail::CudaFree>(scratch, true);
    }
    enqueue_all_reduce(scratch_.get(), scratch_.get(), 1, reduce_op::sum);
    synchronize();
  }

  /// ncclCommSplit with color = the caller's group index and key = its position.
  [[nodiscard]] NcclCommunicator split(const GroupSet& groups) {
    detail::check_split(groups, size_);
    const int color = detail::group_index_of(groups, rank_);
    const int key = groups.groups()[static_cast<std::size_t>(color)].position_of(rank_);
    ncclComm_t sub{};
    detail::check_nccl(ncclCommSplit(comm_.get(), color, key, &sub, nullptr), "ncclCommSplit");
    NcclCommunicator result(sub, stream_);
    check(result.rank() == key, "comm.split_mismatch", "ncclCommSplit gave rank ", result.rank(), " for position ", key);
    return result;
  }

private:
  NcclCommunicator(ncclComm_t comm, std::shared_ptr<detail::CudaStream> stream)
      : stream_(std::move(stream)), comm_(comm, true) {
    detail::check_nccl(ncclCommUserRank(comm, &rank_), "ncclCommUserRank");
    detail::check_nccl(ncclCommCount(comm, &size_), "ncclCommCount");
  }

  void synchronize() {
    amsp::detail::check_cuda(cudaStreamSynchronize(stream()), "comm.cuda", "cudaStreamSynchronize");
  }
  [[nodiscard]] Handle completion() { return Handle(std::make_shared<detail::CudaEventState>(stream())); }
  void check_root(op_kind kind, int root) const {
    check(root >= 0 && root < size_, "comm.root_range", name_of(kind), ": root ", root, " is not a rank of this ",
          size_, "-rank communicator");
  }

  template <class T>
  void enqueue_all_gather(const T* send, T* recv, std::size_t count) {
    detail::check_nccl(ncclAllGather(send, recv, count, detail::nccl_datatype<T>(), comm_.get(), stream()), "ncclAllGather");
  }
  template <class T>
  void enqueue_reduce_scatter(const T* send, T* recv, std::size_t recv_count, reduce_op op) {
    detail::check_nccl(ncclReduceScatter(send, recv, recv_count, detail::nccl_datatype<T>(), detail::nccl_op(op), comm_.get(),
                                         stream()),
                       "ncclReduceScatter");
  }
  template <class T>
  void enqueue_all_reduce(const T* send, T* recv, std::size_t count, reduce_op op) {
    detail::check_nccl(
        ncclAllReduce(send, recv, count, detail::nccl_datatype<T>(), detail::nccl_op(op), comm_.get(), stream()),
        "ncclAllReduce");
  }
  template <class T>
  void enqueue_broadcast(const T* send, T* recv, std::size_t count, int root) {
    check_root(op_kind::broadcast, root);
    detail::check_nccl(ncclBroadcast(send, recv, count, detail::nccl_datatype<T>(), root, comm_.get(), stream()),
                       "ncclBroadcast");
  }
  template <class T>
  void enqueue_reduce(const T* send, T* recv, std::size_t count, reduce_op op, int root) {
    check_root(op_kind::reduce, root);
    detail::check_nccl(
        ncclReduce(send, recv, count, detail::nccl_datatype<T>(), detail::nccl_op(op), root, comm_.get(), stream()),
        "ncclReduce");
  }

  // Declared before comm_, so destroyed after it: the stream outlives the communicator.
  std::shared_ptr<detail::CudaStream> stream_;
  detail::UniqueHandle<ncclComm_t, detail::FinalizeNcclComm> comm_;
  detail::UniqueHandle<float*, detail::CudaFree> scratch_;
  int rank_ = 0;
  int size_ = 1;
};

static_assert(communicator<NcclCommunicator>);

}  // namespace amsp::comm
