// Overlap of the engine's communication with the user's compute, MPI backend: the step of
// overlap_scenario.hpp on a 2x2 mesh, one process per rank; every rank runs every benchmark and
// rank 0 reports. Counters as in bench_overlap.cpp (vs_max target <= 1.15, speedup >= 1.25).
// MPI_THREAD_MULTIPLE: the HostAsync engine's two streams call MPI from two threads. Run:
//   mpirun --allow-run-as-root --oversubscribe -np 4
//       build/default/bench/engine/bench_engine_overlap_mpi --benchmark_counters_tabular=true
#include <string>

#include "amsp/comm/mpi.hpp"
#include "mpi_bench_main.hpp"
#include "overlap_counters.hpp"
#include "overlap_scenario.hpp"

namespace {

void BM_Overlap(benchmark::State& state, const std::string& plan_name) {
  amsp::comm::MpiCommunicator comm = amsp::comm::MpiCommunicator::world();
  const amsp::Mesh mesh(2, 2);
  amsp::bench::overlap::report(state, amsp::bench::overlap::measure(comm, mesh, amsp::parse_plan(plan_name, mesh)));
}

}  // namespace

int main(int argc, char** argv) {
  amsp::bench::overlap::register_plans(BM_Overlap);
  return amsp::bench::mpi_benchmark_main(argc, argv, MPI_THREAD_MULTIPLE);
}
