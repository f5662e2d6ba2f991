#pragma once
// The overlap benchmarks' Google Benchmark side, shared by the threads and MPI forms: one
// benchmark per plan, the figures of overlap_scenario.hpp as counters.

#include <benchmark/benchmark.h>

#include <string>

#include "overlap_scenario.hpp"

namespace amsp::bench::overlap {

inline void report(benchmark::State& state, const Figures& f) {
  for (auto _ : state) state.SetIterationTime(f.overlap);
  state.counters["comm_ms"] = f.comm * 1e3;
  state.counters["compute_ms"] = f.compute * 1e3;
  state.counters["serial_ms"] = f.serial * 1e3;
  state.counters["overlap_ms"] = f.overlap * 1e3;
  state.counters["vs_max"] = f.vs_max();
  state.counters["speedup"] = f.speedup();
  state.counters["ib_ms"] = f.in_backward * 1e3;  // EngineOptions::update_in_backward
  state.counters["ib_vs_max"] = f.in_backward_vs_max();
  state.counters["ib_speedup"] = f.in_backward_speedup();
}

/// Registers BM_Overlap/<plan> for every plan: one iteration, the overlapped step as its time.
template <class Benchmark>
void register_plans(Benchmark body) {
  for (const char* plan : kPlans)
    benchmark::RegisterBenchmark(("BM_Overlap/" + std::string(plan)).c_str(), body, std::string(plan))
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
}

}  // namespace amsp::bench::overlap
