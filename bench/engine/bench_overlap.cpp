// Overlap of the engine's communication with the user's compute, threads backend: 4 ranks on a
// 2x2 mesh, the step of overlap_scenario.hpp. Per plan, side by side in one run:
//   comm_ms, compute_ms, serial_ms, overlap_ms   see overlap_scenario.hpp
//   vs_max    overlap_ms / max(compute_ms, comm_ms)   target <= 1.15
//   speedup   serial_ms / overlap_ms                   target >= 1.25
//   ib_ms, ib_vs_max, ib_speedup   the same for the overlapped step with update_in_backward
// Run:
//   build/default/bench/engine/bench_engine_overlap --benchmark_counters_tabular=true
// The MPI form is bench_overlap_mpi.cpp; where the time goes: overlap_breakdown.cpp.
#include <benchmark/benchmark.h>

#include <string>

#include "amsp/comm/threads.hpp"
#include "overlap_counters.hpp"
#include "overlap_scenario.hpp"

namespace {

void BM_Overlap(benchmark::State& state, const std::string& plan_name) {
  const amsp::Mesh mesh(2, 2);
  const amsp::Plan plan = amsp::parse_plan(plan_name, mesh);
  amsp::bench::overlap::Figures figures;
  amsp::comm::run_on_threads(mesh.world_size(), [&](amsp::comm::ThreadsCommunicator& comm) {
    const amsp::bench::overlap::Figures mine = amsp::bench::overlap::measure(comm, mesh, plan);
    if (comm.rank() == 0) figures = mine;
  });
  amsp::bench::overlap::report(state, figures);
}

}  // namespace

int main(int argc, char** argv) {
  amsp::bench::overlap::register_plans(BM_Overlap);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
