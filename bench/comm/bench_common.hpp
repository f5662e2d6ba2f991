#pragma once
// What every collective benchmark shares: the size sweep and the nccl-tests bandwidth counters.
//   algbw = S / t            busbw = algbw × bus_bandwidth_factor(op, n)      (GB/s, 1e9-based)
// where S is the full buffer (gathered output of AllGather, input of ReduceScatter, the buffer of
// AllReduce and Broadcast) and t the mean time of one collective (manual time).

#include <benchmark/benchmark.h>

#include <cstdint>

#include "amsp/comm/op.hpp"
#include "amsp/comm/traffic.hpp"

namespace amsp::bench {

inline constexpr std::int64_t min_bytes = std::int64_t{4} << 10;    // 4 KiB
inline constexpr std::int64_t max_bytes = std::int64_t{256} << 20;  // 256 MiB

/// Registers {ranks, bytes} for every world size in `ranks` and S = 4 KiB, 16 KiB, ..., 256 MiB.
inline void rank_and_size_sweep(benchmark::internal::Benchmark* b, std::initializer_list<int> ranks) {
  b->ArgNames({"ranks", "bytes"});
  for (int n : ranks)
    for (std::int64_t s = min_bytes; s <= max_bytes; s *= 4) b->Args({n, s});
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}

/// Sets the `algbw` and `busbw` counters of a benchmark timing one `kind` over `n` ranks per
/// iteration, S = `full_bytes`.
inline void bandwidth_counters(benchmark::State& state, comm::op_kind kind, double full_bytes, int n) {
  using benchmark::Counter;
  state.counters["algbw"] = Counter(full_bytes / 1e9, Counter::kIsIterationInvariantRate);
  state.counters["busbw"] = Counter(full_bytes * comm::bus_bandwidth_factor(kind, n) / 1e9, Counter::kIsIterationInvariantRate);
}

}  // namespace amsp::bench
