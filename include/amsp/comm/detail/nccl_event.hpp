#pragma once
// The NCCL backend's small parts (amsp/comm/nccl.hpp): NCCL's datatype and reduction op for amsp's,
// owners of CUDA events and device memory, and the state of a Handle on an enqueued collective,
// a CUDA event recorded right after it and waited through the communicator's watchdog.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <type_traits>
#include <utility>

#include "amsp/comm/handle.hpp"
#include "amsp/comm/op.hpp"
#include "amsp/comm/detail/nccl_world.hpp"
#include "amsp/comm/detail/unique_handle.hpp"
#include "amsp/core/cuda_check.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"

namespace amsp::comm {

namespace detail {

template <class T>
[[nodiscard]] constexpr ncclDataType_t nccl_datatype() {
  if constexpr (std::is_same_v<T, float>) return ncclFloat32;
  else if constexpr (std::is_same_v<T, double>) return ncclFloat64;
  else if constexpr (std::is_same_v<T, bf16>) return ncclBfloat16;
  else return ncclFloat16;
}
/// NCCL's op for `op` on a communicator of `ranks` ranks (avg over one rank is the sum: see the
/// header comment for why that matters).
[[nodiscard]] constexpr ncclRedOp_t nccl_op(reduce_op op, int ranks) {
  return op == reduce_op::avg && ranks > 1 ? ncclAvg : ncclSum;
}

struct CudaFree {
  void operator()(void* p) const noexcept { cudaFree(p); }
};
struct CudaEventDestroy {
  void operator()(cudaEvent_t e) const noexcept { cudaEventDestroy(e); }
};

[[nodiscard]] inline UniqueHandle<cudaEvent_t, CudaEventDestroy> new_cuda_event() {
  cudaEvent_t event{};
  amsp::detail::check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "comm.cuda",
                           "cudaEventCreateWithFlags");
  return {event, true};
}

/// Completion of an enqueued collective: a CUDA event recorded right after it, waited through the
/// communicator's watchdog (which the handle keeps alive).
class NcclEventState final : public HandleState {
public:
  NcclEventState(std::shared_ptr<NcclComm> comm, NcclCall call)
      : comm_(std::move(comm)), event_(new_cuda_event()), call_(call) {
    amsp::detail::check_cuda(cudaEventRecord(event_.get(), comm_->stream()), "comm.cuda", "cudaEventRecord");
  }
  bool test() override { return comm_->test_event(event_.get(), call_); }
  void wait() override { comm_->wait_event(event_.get(), call_); }
  /// Destroyed pending while an exception unwinds: its buffers are about to be freed, and freeing
  /// device memory waits for the device, which waits for peers that may never come. Abort the
  /// world, so that the kernels stop (as the threads backend does).
  void abandon() noexcept override {
    if (comm_->aborted() || cudaEventQuery(event_.get()) != cudaErrorNotReady) return;
    comm_->abort_world(amsp::detail::concat(describe(call_),
                                            " was still pending when its handle was destroyed by an exception"));
  }

private:
  std::shared_ptr<NcclComm> comm_;
  UniqueHandle<cudaEvent_t, CudaEventDestroy> event_;
  NcclCall call_;
};

}  // namespace detail

}  // namespace amsp::comm
