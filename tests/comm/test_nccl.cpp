// The NCCL backend on a GPU machine (label gpu; exits 77, "skipped", without a GPU). Launched as
// one process it tests a one-rank communicator; under mpiexec on a multi-GPU node, one rank per
// GPU. The backend-independent sweep works on host vectors, so a thin adapter stages each call's
// buffers to device memory, keeping their in-place relations, and copies the results back.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>

#include "amsp/comm/nccl.hpp"
#include "collective_checks.hpp"
#include "report.hpp"

namespace {
using namespace amsp;
using comm::NcclCommunicator;

// Device copy of a host range; copied back to the host on request.
class DeviceCopy {
public:
  DeviceCopy(const void* host, std::size_t bytes) : bytes_(bytes) {
    comm::detail::check_cuda(cudaMalloc(&device_, bytes == 0 ? 1 : bytes), "cudaMalloc");
    if (bytes != 0) comm::detail::check_cuda(cudaMemcpy(device_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() { cudaFree(device_); }
  template <class T>
  [[nodiscard]] T* as() const {
    return static_cast<T*>(device_);
  }
  void back_to(void* host) const {
    if (bytes_ != 0) comm::detail::check_cuda(cudaMemcpy(host, device_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }

private:
  void* device_ = nullptr;
  std::size_t bytes_;
};

// Runs each blocking collective on device copies of the host buffers. `outer` is the buffer that
// may contain the other (recv for all_gather, send for reduce_scatter): the inner pointer maps to
// the same offset of the outer copy, so in-place calls stay in place on the device.
class DeviceStaged {
public:
  explicit DeviceStaged(NcclCommunicator& c) : c_(c) {}
  [[nodiscard]] int rank() const { return c_.rank(); }
  [[nodiscard]] int size() const { return c_.size(); }

  template <class T>
  void all_gather(const T* send, T* recv, std::size_t count) {
    stage(recv, count * n(), send, count, [&](T* outer, const T* inner) { c_.all_gather(inner, outer, count); }, true);
  }
  template <class T>
  void reduce_scatter(const T* send, T* recv, std::size_t count, comm::reduce_op op) {
    stage(const_cast<T*>(send), count * n(), recv, count,
          [&](T* outer, T* inner) { c_.reduce_scatter(outer, inner, count, op); }, false);
  }
  template <class T>
  void all_reduce(const T* send, T* recv, std::size_t count, comm::reduce_op op) {
    stage(recv, count, send, count, [&](T* outer, const T* inner) { c_.all_reduce(inner, outer, count, op); }, true);
  }
  template <class T>
  void broadcast(const T* send, T* recv, std::size_t count, int root) {
    stage(recv, count, send, count, [&](T* outer, const T* inner) { c_.broadcast(inner, outer, count, root); }, true);
  }
  template <class T>
  void reduce(const T* send, T* recv, std::size_t count, comm::reduce_op op, int root) {
    stage(recv, count, send, count, [&](T* outer, const T* inner) { c_.reduce(inner, outer, count, op, root); }, true);
  }
  // The sweep calls the async forms only when asked to; this test does not.
  template <class... A>
  comm::Handle all_gather_async(A...) { return {}; }
  template <class... A>
  comm::Handle reduce_scatter_async(A...) { return {}; }
  template <class... A>
  comm::Handle all_reduce_async(A...) { return {}; }
  template <class... A>
  comm::Handle broadcast_async(A...) { return {}; }
  template <class... A>
  comm::Handle reduce_async(A...) { return {}; }

private:
  [[nodiscard]] std::size_t n() const { return static_cast<std::size_t>(c_.size()); }

  // outer/inner: host ranges; `outer_written`: which of the two the collective writes.
  template <class T, class U, class Call>
  void stage(T* outer, std::size_t outer_count, U* inner, std::size_t inner_count, Call call, bool outer_written) {
    DeviceCopy outer_dev(outer, outer_count * sizeof(T));
    const auto* inner_bytes = reinterpret_cast<const unsigned char*>(inner);
    const auto* outer_bytes = reinterpret_cast<const unsigned char*>(outer);
    const bool nested = inner_bytes >= outer_bytes && inner_bytes < outer_bytes + outer_count * sizeof(T) && outer_count != 0;
    if (nested) {
      call(outer_dev.as<T>(), reinterpret_cast<U*>(outer_dev.as<unsigned char>() + (inner_bytes - outer_bytes)));
      outer_dev.back_to(outer);
      return;
    }
    DeviceCopy inner_dev(inner, inner_count * sizeof(T));
    call(outer_dev.as<T>(), inner_dev.as<std::remove_const_t<U>>());
    if (outer_written) outer_dev.back_to(outer);
    else inner_dev.back_to(const_cast<std::remove_const_t<U>*>(inner));
  }

  NcclCommunicator& c_;
};
}  // namespace

TEST_CASE("nccl: every collective, dtype and placement on device memory") {
  comm::MpiCommunicator mpi = comm::MpiCommunicator::world();
  NcclCommunicator nccl = NcclCommunicator::world(mpi);
  DeviceStaged staged(nccl);
  const auto failures = test::run_sweep(staged, {0, 1, 7, 4099, std::size_t{1} << 20}, test::all_dtypes);
  test::require_none(failures);
}

TEST_CASE("nccl: asynchronous collectives complete through CUDA events, waited in reverse order") {
  comm::MpiCommunicator mpi = comm::MpiCommunicator::world();
  NcclCommunicator nccl = NcclCommunicator::world(mpi);
  const std::size_t count = 1 << 16;
  std::vector<float> host(count * static_cast<std::size_t>(nccl.size()), 1.0f);
  DeviceCopy a(host.data(), host.size() * sizeof(float)), b(host.data(), host.size() * sizeof(float));
  comm::Handle h1 = nccl.all_reduce_async(a.as<float>(), a.as<float>(), host.size(), comm::reduce_op::sum);
  comm::Handle h2 = nccl.reduce_scatter_async(b.as<float>(), b.as<float>(), count, comm::reduce_op::avg);
  h2.wait();
  h1.wait();
  CHECK(h1.test());
  a.back_to(host.data());
  CHECK(host.front() == static_cast<float>(nccl.size()));
  nccl.barrier();
}

int main(int argc, char** argv) {
  if (amsp::comm::cuda_device_count() == 0) {
    std::puts("test_comm_nccl: no CUDA device, skipped");
    return 77;
  }
  amsp::comm::MpiSession session(argc, argv);
  const int rank = session.world_rank();
  amsp::comm::use_device_of_rank(rank);
  doctest::Context context(argc, argv);
  if (rank != 0) context.setOption("minimal", true);
  int failed = context.run() != 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return failed;
}
