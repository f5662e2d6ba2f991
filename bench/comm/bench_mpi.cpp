// MPI backend against the raw MPI calls it wraps, side by side: AllGather, ReduceScatter,
// AllReduce, Broadcast over 4 KiB .. 256 MiB on the ranks mpirun launched (out of place, fp32).
//   mpirun -np 8 --oversubscribe bench_comm_mpi --benchmark_filter=/67108864
// `amsp` is MpiCommunicator with its default argument check; `raw` is the bare MPI call.

#include <benchmark/benchmark.h>

#include <memory>

#include "amsp/comm/mpi.hpp"
#include "amsp/core/buffer.hpp"
#include "bench_common.hpp"
#include "mpi_bench_main.hpp"

namespace {
using amsp::comm::op_kind;

std::unique_ptr<amsp::comm::MpiCommunicator> world;

void BM_mpi(benchmark::State& state, op_kind kind, bool raw) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const int n = world->size();
  const std::size_t e = bytes / sizeof(float);
  const std::size_t block = e / static_cast<std::size_t>(n);
  amsp::host_buffer<float> send(e), recv(e);
  MPI_Comm comm = world->native();
  const int ib = static_cast<int>(block);
  const int ie = static_cast<int>(e);
  amsp::bench::time_on_all_ranks(state, comm, [&] {
    switch (kind) {
      case op_kind::all_gather:
        if (raw) MPI_Allgather(send.data(), ib, MPI_FLOAT, recv.data(), ib, MPI_FLOAT, comm);
        else world->all_gather(send.data(), recv.data(), block);
        break;
      case op_kind::reduce_scatter:
        if (raw) MPI_Reduce_scatter_block(send.data(), recv.data(), ib, MPI_FLOAT, MPI_SUM, comm);
        else world->reduce_scatter(send.data(), recv.data(), block);
        break;
      case op_kind::all_reduce:
        if (raw) MPI_Allreduce(send.data(), recv.data(), ie, MPI_FLOAT, MPI_SUM, comm);
        else world->all_reduce(send.data(), recv.data(), e);
        break;
      case op_kind::broadcast:
        if (raw) MPI_Bcast(send.data(), ie, MPI_FLOAT, 0, comm);
        else world->broadcast(send.data(), send.data(), e, 0);
        break;
      case op_kind::reduce: break;
    }
  });
  amsp::bench::bandwidth_counters(state, kind, static_cast<double>(bytes), n);
  state.counters["ranks"] = n;
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgName("bytes");
  for (std::int64_t s = amsp::bench::min_bytes; s <= amsp::bench::max_bytes; s *= 4) b->Arg(s);
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}
}  // namespace

BENCHMARK_CAPTURE(BM_mpi, all_gather_amsp, op_kind::all_gather, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_mpi, all_gather_raw, op_kind::all_gather, true)->Apply(sizes);
BENCHMARK_CAPTURE(BM_mpi, reduce_scatter_amsp, op_kind::reduce_scatter, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_mpi, reduce_scatter_raw, op_kind::reduce_scatter, true)->Apply(sizes);
BENCHMARK_CAPTURE(BM_mpi, all_reduce_amsp, op_kind::all_reduce, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_mpi, all_reduce_raw, op_kind::all_reduce, true)->Apply(sizes);
BENCHMARK_CAPTURE(BM_mpi, broadcast_amsp, op_kind::broadcast, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_mpi, broadcast_raw, op_kind::broadcast, true)->Apply(sizes);

int main(int argc, char** argv) {
  amsp::comm::MpiSession session(argc, argv);  // outlives `world`
  world = std::make_unique<amsp::comm::MpiCommunicator>(amsp::comm::MpiCommunicator::world());
  const int status = amsp::bench::mpi_benchmark_main(argc, argv);
  world.reset();
  return status;
}
