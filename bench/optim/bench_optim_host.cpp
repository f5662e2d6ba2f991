// Host optimizer update against the memory-bandwidth bound of its own byte pattern.
//
// The bound of an in-place update is an in-place read-modify-write stream, not memcpy (a copy
// pays a read for ownership of every destination line). Each BM_<Rule>/<n> has a BM_Stream*/<n>
// partner that reads and writes exactly the same buffers with trivial arithmetic, through the
// same SIMD loads/stores, loop skeleton (detail::walk_lanes, with the same prefetches) and thread
// split (detail::for_each_block):
//   BM_Stream        read p g m v, write p m v          28 B/param  (AdamW, Adam)
//   BM_Stream_bf16   ... and write a bf16 parameter     30 B/param  (AdamW_bf16)
//   BM_Stream1       read p g s, write p s              20 B/param  (SgdMomentum, Lion)
// bytes_per_second counts bytes read plus bytes written. BM_AdamW runs with skip_nonfinite = false
// (the engine's path: its global sum of squares already proved the gradients finite);
// BM_AdamW_checked adds the pre-pass over the gradients that skip_nonfinite = true costs.
// All use every core (threads = 0). Run (see bench/README.md, "Optimizer update"):
//   bench_optim_host --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "amsp/core/buffer.hpp"
#include "amsp/optim.hpp"

namespace {

using amsp::bf16;
namespace optim = amsp::optim;
namespace detail = amsp::optim::detail;

/// One shard's buffers, filled with finite, non-zero values that stay finite under repetition.
struct Shard {
  amsp::host_buffer<float> master, grads, s0, s1;
  amsp::host_buffer<bf16> params;
  explicit Shard(std::size_t n) : master(n), grads(n), s0(n), s1(n), params(n) {
    for (std::size_t i = 0; i < n; ++i) {
      const float x = static_cast<float>(i % 1021) * (1.0f / 1021.0f);
      master[i] = 0.5f + x;
      grads[i] = x - 0.49f;
      s0[i] = 0.01f * x;
      s1[i] = 0.001f + 0.01f * x;
    }
  }
};

void report(benchmark::State& state, std::size_t n, std::size_t bytes_per_param) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n * bytes_per_param));
  state.counters["params"] = static_cast<double>(n);
}

/// The reference kernels: the rule's byte pattern, one add per stream, same loads/stores/split.
template <int States, bool WriteBf16>
void stream_pass(Shard& s, std::size_t n) {
  const int workers = detail::worker_count(n, 0);
  float* const p = s.master.data();
  const float* const g = s.grads.data();
  float* const a = s.s0.data();
  float* const b = s.s1.data();
  bf16* const out = s.params.data();
  detail::for_each_block(n, workers, [&](std::size_t begin, std::size_t end) {
    // update_range prefetches the same streams: master, states, gradients.
    std::array<detail::PrefetchStream, States + 2> streams;
    streams[0] = {p, sizeof(float)};
    streams[1] = {a, sizeof(float)};
    if constexpr (States == 2) streams[2] = {b, sizeof(float)};
    streams[States + 1] = {g, sizeof(float)};
    detail::walk_lanes(
        begin, end, streams,
        [&](std::size_t i) {
          const detail::simd_float gv = detail::load_lanes(g + i);
          const detail::simd_float pv = detail::load_lanes(p + i) + gv * 1e-9f;
          detail::store_lanes(p + i, pv);
          detail::store_lanes(a + i, detail::load_lanes(a + i) + gv * 1e-9f);
          if constexpr (States == 2) detail::store_lanes(b + i, detail::load_lanes(b + i) + gv * 1e-9f);
          if constexpr (WriteBf16) detail::store_lanes(out + i, pv);
        },
        [&](std::size_t i) {
          p[i] += g[i] * 1e-9f;
          a[i] += g[i] * 1e-9f;
          if constexpr (States == 2) b[i] += g[i] * 1e-9f;
          if constexpr (WriteBf16) out[i] = bf16::from_float(p[i]);
        });
  });
  benchmark::ClobberMemory();
}

template <int States, bool WriteBf16>
void BM_StreamPattern(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Shard s(n);
  for (auto _ : state) stream_pass<States, WriteBf16>(s, n);
  report(state, n, States == 2 ? 28 + (WriteBf16 ? 2 : 0) : 20);
}

template <class R, class P>
void run_rule(benchmark::State& state, const R& rule, bool skip_nonfinite) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Shard s(n);
  optim::ShardState<R> shard{s.master.span(), {}};
  shard.states[0] = s.s0.span();
  if constexpr (R::state_count == 2) shard.states[1] = s.s1.span();
  std::span<P> params;
  if constexpr (std::is_same_v<P, bf16>) params = s.params.span();
  std::int64_t step = 1;
  for (auto _ : state) {
    const auto result = optim::update_host(rule, shard, std::span<const float>(s.grads.span()), params,
                                           {step++, 0.5f, skip_nonfinite, 0});
    benchmark::DoNotOptimize(result);
    benchmark::ClobberMemory();
  }
  const std::size_t bytes = (R::state_count == 2 ? 28 : 20) + (std::is_same_v<P, bf16> ? 2 : 0);
  report(state, n, bytes);
}

void BM_AdamW(benchmark::State& state) { run_rule<optim::AdamW, float>(state, optim::AdamW{}, false); }
void BM_AdamW_checked(benchmark::State& state) { run_rule<optim::AdamW, float>(state, optim::AdamW{}, true); }
void BM_AdamW_bf16(benchmark::State& state) { run_rule<optim::AdamW, bf16>(state, optim::AdamW{}, false); }
void BM_Adam(benchmark::State& state) { run_rule<optim::Adam, float>(state, optim::Adam{}, false); }
void BM_SgdMomentum(benchmark::State& state) {
  run_rule<optim::SgdMomentum, float>(state, optim::SgdMomentum{}, false);
}
void BM_Lion(benchmark::State& state) { run_rule<optim::Lion, float>(state, optim::Lion{}, false); }

void BM_SumOfSquares(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Shard s(n);
  for (auto _ : state) benchmark::DoNotOptimize(optim::sum_of_squares_host(std::span<const float>(s.grads.span()), 0));
  report(state, n, 4);
}

void sizes(benchmark::internal::Benchmark* b) {
  // Process CPU time: the blocks of a pass go to whichever thread is free, so the calling
  // thread's own CPU time is no fixed share of the work.
  b->Arg(1 << 20)->Arg(1 << 24)->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
}

}  // namespace

BENCHMARK(BM_StreamPattern<2, false>)->Name("BM_Stream")->Apply(sizes);
BENCHMARK(BM_AdamW)->Apply(sizes);
BENCHMARK(BM_AdamW_checked)->Apply(sizes);
BENCHMARK(BM_Adam)->Apply(sizes);
BENCHMARK(BM_StreamPattern<2, true>)->Name("BM_Stream_bf16")->Apply(sizes);
BENCHMARK(BM_AdamW_bf16)->Apply(sizes);
BENCHMARK(BM_StreamPattern<1, false>)->Name("BM_Stream1")->Apply(sizes);
BENCHMARK(BM_SgdMomentum)->Apply(sizes);
BENCHMARK(BM_Lion)->Apply(sizes);
BENCHMARK(BM_SumOfSquares)->Apply(sizes);

BENCHMARK_MAIN();
