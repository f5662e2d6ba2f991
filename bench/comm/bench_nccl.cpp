// NCCL backend on the GPUs of one machine (one MPI rank per GPU): AllGather, ReduceScatter,
// AllReduce, Broadcast over 4 KiB .. 256 MiB, timed with CUDA events around each collective (the
// slowest rank's time, as in the MPI benchmark). Built everywhere, run on a GPU machine:
//   mpirun -np <gpus> bench_comm_nccl          (one GPU: ./bench_comm_nccl)

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <memory>

#include "amsp/comm/mpi.hpp"
#include "amsp/comm/nccl.hpp"
#include "bench_common.hpp"
#include "mpi_bench_main.hpp"

namespace {
using amsp::comm::op_kind;

std::unique_ptr<amsp::comm::NcclCommunicator> nccl;

void BM_nccl(benchmark::State& state, op_kind kind) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const int n = nccl->size();
  const std::size_t e = bytes / sizeof(float);
  const std::size_t block = e / static_cast<std::size_t>(n);
  float* send = nullptr;
  float* recv = nullptr;
  amsp::detail::check_cuda(cudaMalloc(&send, bytes), "cuda.runtime", "cudaMalloc");
  amsp::detail::check_cuda(cudaMalloc(&recv, bytes), "cuda.runtime", "cudaMalloc");
  cudaEvent_t start{}, stop{};
  amsp::detail::check_cuda(cudaEventCreate(&start), "cuda.runtime", "cudaEventCreate");
  amsp::detail::check_cuda(cudaEventCreate(&stop), "cuda.runtime", "cudaEventCreate");
  const auto op = [&] {
    switch (kind) {
      case op_kind::all_gather: (void)nccl->all_gather_async(send, recv, block); break;
      case op_kind::reduce_scatter: (void)nccl->reduce_scatter_async(send, recv, block); break;
      case op_kind::all_reduce: (void)nccl->all_reduce_async(send, recv, e); break;
      case op_kind::broadcast: (void)nccl->broadcast_async(send, recv, e, 0); break;
      case op_kind::reduce: break;
    }
  };
  op();
  nccl->barrier();
  for (auto _ : state) {
    amsp::detail::check_cuda(cudaEventRecord(start, nccl->stream()), "cuda.runtime", "cudaEventRecord");
    op();
    amsp::detail::check_cuda(cudaEventRecord(stop, nccl->stream()), "cuda.runtime", "cudaEventRecord");
    amsp::detail::check_cuda(cudaEventSynchronize(stop), "cuda.runtime", "cudaEventSynchronize");
    float ms = 0;
    amsp::detail::check_cuda(cudaEventElapsedTime(&ms, start, stop), "cuda.runtime", "cudaEventElapsedTime");
    double seconds = ms * 1e-3;
    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    state.SetIterationTime(seconds);
  }
  amsp::bench::bandwidth_counters(state, kind, static_cast<double>(bytes), n);
  state.counters["ranks"] = n;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(send);
  cudaFree(recv);
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgName("bytes");
  for (std::int64_t s = amsp::bench::min_bytes; s <= amsp::bench::max_bytes; s *= 4) b->Arg(s);
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}
}  // namespace

BENCHMARK_CAPTURE(BM_nccl, all_gather, op_kind::all_gather)->Apply(sizes);
BENCHMARK_CAPTURE(BM_nccl, reduce_scatter, op_kind::reduce_scatter)->Apply(sizes);
BENCHMARK_CAPTURE(BM_nccl, all_reduce, op_kind::all_reduce)->Apply(sizes);
BENCHMARK_CAPTURE(BM_nccl, broadcast, op_kind::broadcast)->Apply(sizes);

int main(int argc, char** argv) {
  if (amsp::comm::cuda_device_count() == 0) {
    std::puts("bench_comm_nccl: no CUDA device, nothing to measure");
    return 0;
  }
  amsp::comm::MpiSession session(argc, argv);
  const int rank = session.world_rank();
  amsp::comm::use_device_of_rank(rank);
  {
    amsp::comm::MpiCommunicator mpi = amsp::comm::MpiCommunicator::world();
    nccl = std::make_unique<amsp::comm::NcclCommunicator>(amsp::comm::NcclCommunicator::world(mpi));
  }
  const int status = amsp::bench::mpi_benchmark_main(argc, argv);
  nccl.reset();
  return status;
}
