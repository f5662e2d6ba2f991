// The engine in the CUDA space (amsp::CudaAsync), step by step: a 50M-parameter model in 8 equal
// buckets, ranks as threads on one GPU (the threads backend over device memory), each phase of a
// training step timed alone from the caller's side up to the point its device work is done:
//   backward_ms  grad_buffer + reduce_gradients of every bucket (the reduction chains), until the
//                chains are done (synchronize)
//   step_ms      step(): norm, decision, fused update and spread, until done
//   forward_ms   gather + release of every bucket (the AllGathers with P sharded), until the
//                user's stream has passed them
//   issue_ms     what the caller's thread spent issuing all three (it never waits inside a step,
//                so this is the host overhead the user's compute has to cover)
// Medians over the repetitions, rank 0's view (the ranks meet in every collective). Needs a GPU;
// without one it reports an error per benchmark. Run:
//   build/gpu/bench/engine/bench_engine_cuda --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/comm/threads_cuda.cuh"
#include "amsp/engine/cuda_space.cuh"
#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "bench_model.hpp"
#include "step_timing.hpp"

namespace {

using Threads = amsp::comm::ThreadsCommunicator;
using Clock = std::chrono::steady_clock;
constexpr int kBuckets = 8;
constexpr std::int64_t kBucketParams = 6'291'456;  // 8 x 6.3M = 50.3M parameters
constexpr int kRepetitions = 5;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

template <class ParamT>
void BM_EngineCuda(benchmark::State& state, const std::string& plan_name, int ranks_per_node, int nodes) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const amsp::Mesh mesh(ranks_per_node, nodes);
  const amsp::Plan plan = amsp::parse_plan(plan_name, mesh);
  std::vector<double> backward, step, forward, issue;
  for (auto _ : state) {
    amsp::comm::run_on_threads(mesh.world_size(), [&](Threads& comm) {
      cudaStream_t user{};
      amsp::detail::check_cuda(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), "cuda.runtime", "stream");
      {
        amsp::ShardedOptimizer<Threads, amsp::optim::AdamW, ParamT, ParamT, amsp::CudaAsync> opt(
            comm, mesh, plan, amsp::optim::AdamW{.lr = 1e-4f}, amsp::bench::equal_buckets(kBuckets, kBucketParams),
            amsp::EngineOptions{}, amsp::CudaStreams{user});
        const auto drain = [&] {
          opt.synchronize();
          amsp::detail::check_cuda(cudaStreamSynchronize(user), "cuda.runtime", "cudaStreamSynchronize");
        };
        for (int r = 0; r < kRepetitions + 1; ++r) {  // the first reaches the pools' high-water mark
          double issued = 0;
          const double b = amsp::bench::timed(comm, [&] {
            const auto start = Clock::now();
            opt.start_micro_batch(true);
            for (int k = kBuckets - 1; k >= 0; --k) {
              (void)opt.grad_buffer(k);
              opt.reduce_gradients(k);
            }
            issued += seconds_since(start);
            drain();
          });
          const double s = amsp::bench::timed(comm, [&] {
            const auto start = Clock::now();
            (void)opt.step();
            issued += seconds_since(start);
            drain();
          });
          const double f = amsp::bench::timed(comm, [&] {
            const auto start = Clock::now();
            for (int k = 0; k < kBuckets; ++k) {
              (void)opt.gather(k);
              opt.release(k);
            }
            issued += seconds_since(start);
            drain();
          });
          if (comm.rank() == 0 && r > 0) {
            backward.push_back(b);
            step.push_back(s);
            forward.push_back(f);
            issue.push_back(issued);
          }
        }
      }
      (void)cudaStreamDestroy(user);
    });
  }
  state.counters["backward_ms"] = 1e3 * amsp::bench::median(backward);
  state.counters["step_ms"] = 1e3 * amsp::bench::median(step);
  state.counters["forward_ms"] = 1e3 * amsp::bench::median(forward);
  state.counters["issue_ms"] = 1e3 * amsp::bench::median(issue);
}

// Google Benchmark's macros take a plain function name.
void BM_EngineCudaFp32(benchmark::State& state, const std::string& plan, int ranks_per_node, int nodes) {
  BM_EngineCuda<float>(state, plan, ranks_per_node, nodes);
}
void BM_EngineCudaBf16(benchmark::State& state, const std::string& plan, int ranks_per_node, int nodes) {
  BM_EngineCuda<amsp::bf16>(state, plan, ranks_per_node, nodes);
}

}  // namespace

BENCHMARK_CAPTURE(BM_EngineCudaFp32, ddp_1x1, std::string("ddp"), 1, 1)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineCudaBf16, ddp_1x1, std::string("ddp"), 1, 1)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineCudaBf16, zero3_2x2, std::string("zero3"), 2, 2)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineCudaBf16, amsp13b_2x2, std::string("amsp-13b"), 2, 2)->Iterations(1)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
