// GPU optimizer update against the bandwidth bound of its own byte pattern (CUDA events, manual
// time). Run on a GPU machine (one H200 is the reference):
//   bench_optim_cuda --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   BM_Copy/<n>          cudaMemcpyAsync device-to-device of 14 B/param: 28 B/param moved
//   BM_Stream/<n>        in place: read p g m v, write p m v, trivial arithmetic, 28 B/param
//   BM_AdamW/<n>         update_cuda, skip_nonfinite = false (the engine's path), 28 B/param
//   BM_AdamW_checked/<n> with the device finite pre-pass (reads g once more; counted as 28 B)
//   BM_AdamW_device/<n>  the device engine's path: grad_scale, skip word and step read from device
//                        memory, the coefficients computed on the device (DeviceStepControl), 28 B/param
//   BM_Stream_bf16/<n>, BM_AdamW_bf16/<n>   ... plus a bf16 parameter written, 30 B/param
//   BM_Accumulate/<n>, BM_Accumulate_bf16/<n>   amsp::device_ops::accumulate (a later micro-batch:
//                        g = g + z, z fp32, g fp32 or bf16): 12 or 8 B/param, against BM_Copy
// bytes_per_second counts bytes read plus written, so BM_AdamW / BM_Stream is the efficiency.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>

#include "amsp/core/cuda_buffer.hpp"
#include "amsp/engine/device_ops.cuh"
#include "amsp/optim/adam.hpp"
#include "amsp/optim/cuda_lanes.cuh"
#include "amsp/optim/update_cuda.cuh"

namespace {

using amsp::bf16;
namespace optim = amsp::optim;
namespace detail = amsp::optim::detail;

void check(cudaError_t status, const char* what) { amsp::detail::check_cuda(status, "cuda.runtime", what); }

__global__ void fill_kernel(float* master, float* grads, float* m, float* v, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float x = static_cast<float>(i % 1021) * (1.0f / 1021.0f);
    master[i] = 0.5f + x;
    grads[i] = x - 0.49f;
    m[i] = 0.01f * x;
    v[i] = 0.001f + 0.01f * x;
  }
}

/// The reference: AdamW's loads and stores with one add per stream, same lanes and geometry.
template <bool WriteBf16>
__global__ void stream_kernel(float* master, const float* grads, float* m, float* v, bf16* params, std::size_t vectors) {
  for (std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; t < vectors;
       t += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t i = t * detail::cuda_lanes;
    float p[detail::cuda_lanes], g[detail::cuda_lanes], a[detail::cuda_lanes], b[detail::cuda_lanes];
    detail::load8(master + i, p);
    detail::load8(grads + i, g);
    detail::load8(m + i, a);
    detail::load8(v + i, b);
    for (int l = 0; l < detail::cuda_lanes; ++l) {
      p[l] += 1e-9f * g[l];
      a[l] += 1e-9f * g[l];
      b[l] += 1e-9f * g[l];
    }
    detail::store8(master + i, p);
    detail::store8(m + i, a);
    detail::store8(v + i, b);
    if constexpr (WriteBf16) detail::store8(params + i, p);
  }
}

struct DeviceShard {
  std::size_t n;
  amsp::cuda_buffer<float> master, grads, m, v;
  amsp::cuda_buffer<bf16> params;
  explicit DeviceShard(std::size_t count) : n(count), master(count), grads(count), m(count), v(count), params(count) {
    fill_kernel<<<1024, 256>>>(master.data(), grads.data(), m.data(), v.data(), n);
    check(cudaDeviceSynchronize(), "fill");
  }
};

/// Times `launch` with CUDA events per iteration and reports bytes_per_second.
template <class Launch>
void timed(benchmark::State& state, std::size_t bytes_per_iteration, Launch&& launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  launch();  // warm-up
  for (auto _ : state) {
    check(cudaEventRecord(start), "cudaEventRecord");
    launch();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(static_cast<double>(ms) * 1e-3);
  }
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes_per_iteration));
}

bool have_gpu(benchmark::State& state) {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) return true;
  state.SkipWithError("no CUDA device");
  return false;
}

void BM_Copy(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const auto n = static_cast<std::size_t>(state.range(0));
  // 14 bytes per parameter copied: 28 bytes moved, AdamW's traffic.
  amsp::cuda_buffer<unsigned char> src(n * 14), dst(n * 14);
  timed(state, n * 28, [&] { check(cudaMemcpyAsync(dst.data(), src.data(), n * 14, cudaMemcpyDeviceToDevice), "copy"); });
}

template <bool WriteBf16>
void BM_StreamKernel(benchmark::State& state) {
  if (!have_gpu(state)) return;
  DeviceShard s(static_cast<std::size_t>(state.range(0)));
  const std::size_t vectors = s.n / detail::cuda_lanes;
  const unsigned grid = detail::grid_for(vectors);
  timed(state, s.n * (WriteBf16 ? 30 : 28), [&] {
    stream_kernel<WriteBf16><<<grid, detail::cuda_block>>>(s.master.data(), s.grads.data(), s.m.data(), s.v.data(),
                                                           s.params.data(), vectors);
  });
}

template <class P>
void run_adamw(benchmark::State& state, bool skip_nonfinite) {
  if (!have_gpu(state)) return;
  DeviceShard s(static_cast<std::size_t>(state.range(0)));
  amsp::cuda_buffer<unsigned> flag(1);
  optim::ShardState<optim::AdamW> shard{{s.master.data(), s.n}, {std::span<float>(s.m.data(), s.n), std::span<float>(s.v.data(), s.n)}};
  std::span<P> params;
  if constexpr (std::is_same_v<P, bf16>) params = {s.params.data(), s.n};
  std::int64_t step = 1;
  timed(state, s.n * (std::is_same_v<P, bf16> ? 30 : 28), [&] {
    optim::update_cuda(optim::AdamW{}, shard, std::span<const float>(s.grads.data(), s.n), params,
                       {step++, 0.5f, skip_nonfinite}, flag.data(), cudaStream_t{});
  });
}

/// update_cuda with its control in device memory, as amsp::device_ops::update runs it.
void BM_AdamW_device(benchmark::State& state) {
  if (!have_gpu(state)) return;
  DeviceShard s(static_cast<std::size_t>(state.range(0)));
  optim::ShardState<optim::AdamW> shard{{s.master.data(), s.n}, {std::span<float>(s.m.data(), s.n), std::span<float>(s.v.data(), s.n)}};
  amsp::cuda_buffer<unsigned> skipped(1);  // zeroed: not skipped
  amsp::cuda_buffer<float> grad_scale(1);
  amsp::cuda_buffer<std::int64_t> step(1);
  const float scale = 0.5f;
  const std::int64_t t = 1;
  grad_scale.copy_from_host(&scale, 1);
  step.copy_from_host(&t, 1);
  const optim::DeviceStepControl control{skipped.data(), grad_scale.data(), step.data()};
  timed(state, s.n * 28, [&] {
    optim::update_cuda(optim::AdamW{}, shard, std::span<const float>(s.grads.data(), s.n), std::span<float>{}, control,
                       cudaStream_t{});
  });
}

/// The engine's gradient accumulation over micro-batches, a pure stream kernel: its bandwidth
/// against BM_Copy's is its efficiency.
template <class G>
void BM_Accumulate(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const auto n = static_cast<std::size_t>(state.range(0));
  amsp::cuda_buffer<G> g(n);
  amsp::cuda_buffer<float> z(n);
  timed(state, n * (2 * sizeof(G) + sizeof(float)),
        [&] { amsp::device_ops::accumulate(g.data(), z.data(), n, false, cudaStream_t{}); });
}

void BM_AdamW(benchmark::State& state) { run_adamw<float>(state, false); }
void BM_AdamW_checked(benchmark::State& state) { run_adamw<float>(state, true); }
void BM_AdamW_bf16(benchmark::State& state) { run_adamw<bf16>(state, false); }

void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(1 << 24)->Arg(1 << 26)->Arg(1 << 28)->UseManualTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_Copy)->Apply(sizes);
BENCHMARK(BM_StreamKernel<false>)->Name("BM_Stream")->Apply(sizes);
BENCHMARK(BM_AdamW)->Apply(sizes);
BENCHMARK(BM_AdamW_checked)->Apply(sizes);
BENCHMARK(BM_AdamW_device)->Apply(sizes);
BENCHMARK(BM_StreamKernel<true>)->Name("BM_Stream_bf16")->Apply(sizes);
BENCHMARK(BM_AdamW_bf16)->Apply(sizes);
BENCHMARK(BM_Accumulate<float>)->Name("BM_Accumulate")->Apply(sizes);
BENCHMARK(BM_Accumulate<bf16>)->Name("BM_Accumulate_bf16")->Apply(sizes);

BENCHMARK_MAIN();
