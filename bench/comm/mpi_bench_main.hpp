#pragma once
// Google Benchmark inside an MPI program: every rank runs every benchmark (the collectives need
// all of them), each iteration is timed between a barrier and the slowest rank's finish (an
// MPI_Allreduce(MAX) of the elapsed time, set as manual time), so that all ranks see identical
// times and therefore choose identical iteration counts. Only rank 0 reports.

#include <benchmark/benchmark.h>
#include <mpi.h>

#include <cstring>
#include <vector>

#include "amsp/comm/mpi.hpp"

namespace amsp::bench {

/// Times `op()` per iteration as described above, after one warm-up call.
template <class Op>
void time_on_all_ranks(benchmark::State& state, MPI_Comm comm, Op op) {
  op();
  for (auto _ : state) {
    MPI_Barrier(comm);
    const double t0 = MPI_Wtime();
    op();
    double elapsed = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, comm);
    state.SetIterationTime(elapsed);
  }
}

namespace detail {
class SilentReporter final : public benchmark::BenchmarkReporter {
public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};
}  // namespace detail

/// main() of an MPI benchmark binary: initialises MPI (at `thread_level`), runs the registered
/// benchmarks on every rank, prints (and writes --benchmark_out) on rank 0 only.
inline int mpi_benchmark_main(int argc, char** argv, int thread_level = MPI_THREAD_FUNNELED) {
  comm::MpiSession session(argc, argv, thread_level);
  const int rank = session.world_rank();
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i)  // only rank 0 writes the output file
    if (rank == 0 || std::strncmp(argv[i], "--benchmark_out", 15) != 0) args.push_back(argv[i]);
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    detail::SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  return 0;
}

}  // namespace amsp::bench
