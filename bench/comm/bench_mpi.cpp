// MPI backend against the raw MPI calls it wraps, side by side: AllGather, ReduceScatter,
// AllReduce, Broadcast over 4 KiB .. 256 MiB on the ranks mpirun launched (out of place, fp32).
//   mpirun -np 8 --oversubscribe bench_comm_mpi --benchmark_filter=/67108864
// `amsp` is MpiCommunicator with its default argument check; `raw` is the bare MPI call;
// `BM_mpi_overhead` alternates the two inside each iteration and reports `overhead_pct`.

#include <benchmark/benchmark.h>

#include <memory>

#include "amsp/comm/mpi.hpp"
#include "amsp/core/buffer.hpp"
#include "bench_common.hpp"
#include "mpi_bench_main.hpp"

namespace {
using amsp::comm::op_kind;

std::unique_ptr<amsp::comm::MpiCommunicator> world;

// One collective of `kind` on S = `send.size()` fp32 bytes, through amsp or as the bare MPI call.
struct Collective {
  Collective(op_kind k, std::size_t bytes)
      : kind(k), elements(bytes / sizeof(float)), block(elements / static_cast<std::size_t>(world->size())),
        send(elements), recv(elements) {}

  void operator()(bool raw) {
    MPI_Comm comm = world->native();
    const int ib = static_cast<int>(block);
    const int ie = static_cast<int>(elements);
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
        else world->all_reduce(send.data(), recv.data(), elements);
        break;
      case op_kind::broadcast:
        if (raw) MPI_Bcast(send.data(), ie, MPI_FLOAT, 0, comm);
        else world->broadcast(send.data(), send.data(), elements, 0);
        break;
      case op_kind::reduce: break;
    }
  }

  op_kind kind;
  std::size_t elements, block;
  amsp::host_buffer<float> send, recv;
};

void BM_mpi(benchmark::State& state, op_kind kind, bool raw) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Collective collective(kind, bytes);
  amsp::bench::time_on_all_ranks(state, world->native(), [&] { collective(raw); });
  amsp::bench::bandwidth_counters(state, kind, static_cast<double>(bytes), world->size());
  state.counters["ranks"] = world->size();
}

// amsp and the raw call alternately in every iteration (order swapped each time), so that both
// see the same machine load: manual time is amsp's, `overhead_pct` = 100 (amsp / raw - 1).
void BM_mpi_overhead(benchmark::State& state, op_kind kind) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Collective collective(kind, bytes);
  MPI_Comm comm = world->native();
  const auto timed = [&](bool raw) {
    MPI_Barrier(comm);
    const double t0 = MPI_Wtime();
    collective(raw);
    double elapsed = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, comm);
    return elapsed;
  };
  collective(true);
  collective(false);
  double amsp_total = 0, raw_total = 0;
  bool raw_first = true;
  for (auto _ : state) {
    const double first = timed(raw_first);
    const double second = timed(!raw_first);
    const double amsp = raw_first ? second : first;
    raw_total += raw_first ? first : second;
    amsp_total += amsp;
    state.SetIterationTime(amsp);
    raw_first = !raw_first;
  }
  amsp::bench::bandwidth_counters(state, kind, static_cast<double>(bytes), world->size());
  state.counters["overhead_pct"] = 100.0 * (amsp_total / raw_total - 1.0);
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
BENCHMARK_CAPTURE(BM_mpi_overhead, all_gather, op_kind::all_gather)->Apply(sizes);
BENCHMARK_CAPTURE(BM_mpi_overhead, reduce_scatter, op_kind::reduce_scatter)->Apply(sizes);
BENCHMARK_CAPTURE(BM_mpi_overhead, all_reduce, op_kind::all_reduce)->Apply(sizes);
BENCHMARK_CAPTURE(BM_mpi_overhead, broadcast, op_kind::broadcast)->Apply(sizes);

int main(int argc, char** argv) {
  amsp::comm::MpiSession session(argc, argv);  // outlives `world`
  world = std::make_unique<amsp::comm::MpiCommunicator>(amsp::comm::MpiCommunicator::world());
  const int status = amsp::bench::mpi_benchmark_main(argc, argv);
  world.reset();
  return status;
}
