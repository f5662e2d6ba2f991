// Threads backend: AllGather, ReduceScatter, AllReduce, Broadcast over 4 KiB .. 256 MiB on 2, 4
// and 8 ranks (out of place, fp32), the memcpy reference that bounds them, and the flat collective
// against the two-level (intra-node, then inter-node) pattern on a simulated mesh.
//
// Each benchmark starts one threads world, times every iteration on rank 0 between two barriers
// (manual time), and also times a memcpy of S bytes on every rank at once in the same world, which
// gives `bound_fraction` = memcpy time / collective time. The memcpy is the bound because each of
// these collectives reads at most S bytes and writes at most S bytes per rank (AllGather: reads
// and writes S; ReduceScatter: reads S, writes S/n; AllReduce: reads S, writes S; Broadcast: reads
// and writes S), and a memcpy of S reads and writes S at once at the machine's copy rate.
//
// CUDA builds also make bench_comm_threads_cuda from this file: the same benchmarks plus
// BM_threads_device/<op> (ranks 2, 4, 8 on one GPU, S = 64 MiB of device memory), whose
// bound_fraction compares with every rank doing a cudaMemcpyAsync device-to-device of S at once.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/core/buffer.hpp"
#include "amsp/sharding/groups.hpp"
#include "bench_common.hpp"

#if defined(AMSP_HAS_CUDA)
#include <cuda_runtime_api.h>

#include "amsp/core/cuda_buffer.hpp"
#endif

namespace {
using amsp::comm::op_kind;
using amsp::comm::ThreadsCommunicator;
using Clock = std::chrono::steady_clock;

[[nodiscard]] double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Per-rank buffers of S bytes each, touched once so that page faults stay out of the timing.
struct HostBuffers {
  HostBuffers(int n, std::size_t elements) {
    for (int r = 0; r < n; ++r) {
      send.emplace_back(elements);
      recv.emplace_back(elements);
      std::iota(send.back().begin(), send.back().end(), 0.0f);
    }
  }
  static void copy(float* dst, const float* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void finish() {}
  std::vector<amsp::host_buffer<float>> send, recv;
};

#if defined(AMSP_HAS_CUDA)
// Per-rank buffers of S bytes of device memory; the reference copy is stream-ordered on the rank
// thread's per-thread stream (as the collectives' data phase) and synchronised by finish().
struct DeviceBuffers {
  DeviceBuffers(int n, std::size_t elements) {
    std::vector<float> ramp(elements);
    std::iota(ramp.begin(), ramp.end(), 0.0f);
    for (int r = 0; r < n; ++r) {
      send.emplace_back(elements);
      recv.emplace_back(elements);
      send.back().copy_from_host(ramp.data(), elements);
    }
  }
  static void copy(float* dst, const float* src, std::size_t bytes) {
    amsp::detail::check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cudaStreamPerThread),
                             "cuda.memcpy", "cudaMemcpyAsync device to device");
  }
  static void finish() {
    amsp::detail::check_cuda(cudaStreamSynchronize(cudaStreamPerThread), "cuda.sync", "cudaStreamSynchronize");
  }
  std::vector<amsp::cuda_buffer<float>> send, recv;
};
#endif

// Runs `op(comm, buffers of its rank)` `iterations` times on `n` threads; returns rank 0's time of
// each iteration and, in `memcpy_seconds`, the mean time of every rank copying S bytes at once.
template <class Buffers = HostBuffers, class Op>
std::vector<double> time_on_threads(int n, std::size_t elements, std::size_t iterations, double& memcpy_seconds,
                                    Op op) {
  Buffers buffers(n, elements);
  std::vector<double> times(iterations);
  amsp::comm::run_on_threads(n, [&](ThreadsCommunicator& comm) {
    float* send = buffers.send[static_cast<std::size_t>(comm.rank())].data();
    float* recv = buffers.recv[static_cast<std::size_t>(comm.rank())].data();
    op(comm, send, recv);  // warm-up
    for (std::size_t i = 0; i < iterations; ++i) {
      comm.barrier();
      const auto t0 = Clock::now();
      op(comm, send, recv);
      comm.barrier();
      if (comm.rank() == 0) times[i] = seconds_since(t0);
    }
    comm.barrier();
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < iterations; ++i) Buffers::copy(recv, send, elements * sizeof(float));
    Buffers::finish();
    comm.barrier();
    if (comm.rank() == 0) memcpy_seconds = seconds_since(t0) / static_cast<double>(iterations);
  });
  return times;
}

void report(benchmark::State& state, const std::vector<double>& times, op_kind kind, double full_bytes, int n,
            double memcpy_seconds) {
  std::size_t i = 0;
  for (auto _ : state) state.SetIterationTime(times[i++]);
  amsp::bench::bandwidth_counters(state, kind, full_bytes, n);
  const double mean = std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
  state.counters["bound_fraction"] = memcpy_seconds / mean;
}

template <class Buffers>
void time_collective(benchmark::State& state, op_kind kind) {
  const int n = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const std::size_t e = bytes / sizeof(float);
  const std::size_t block = e / static_cast<std::size_t>(n);
  double memcpy_seconds = 0;
  const auto times = time_on_threads<Buffers>(
      n, e, static_cast<std::size_t>(state.max_iterations), memcpy_seconds,
      [&](ThreadsCommunicator& comm, float* send, float* recv) {
        switch (kind) {
          case op_kind::all_gather: comm.all_gather(send, recv, block); break;
          case op_kind::reduce_scatter: comm.reduce_scatter(send, recv, block); break;
          case op_kind::all_reduce: comm.all_reduce(send, recv, e); break;
          case op_kind::broadcast: comm.broadcast(send, recv, e, 0); break;
          case op_kind::reduce: comm.reduce(send, recv, e, amsp::comm::reduce_op::sum, 0); break;
        }
      });
  report(state, times, kind, static_cast<double>(bytes), n, memcpy_seconds);
}

void BM_threads(benchmark::State& state, op_kind kind) { time_collective<HostBuffers>(state, kind); }

#if defined(AMSP_HAS_CUDA)
// The collectives on device buffers (the CUDA data mover comes with threads_cuda_mover.cu).
void BM_threads_device(benchmark::State& state, op_kind kind) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    state.SkipWithError("no usable CUDA device");
    return;
  }
  time_collective<DeviceBuffers>(state, kind);
}

void device_sweep(benchmark::internal::Benchmark* b) {
  b->ArgNames({"ranks", "bytes"});
  for (int n : {2, 4, 8}) b->Args({n, std::int64_t{64} << 20});
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}
#endif

// Every rank copies S bytes at once: the bound of an out-of-place AllGather of S (same counters,
// so busbw compares directly).
void BM_memcpy_reference(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  double memcpy_seconds = 0;
  const auto times = time_on_threads(n, bytes / sizeof(float), static_cast<std::size_t>(state.max_iterations),
                                     memcpy_seconds, [&](ThreadsCommunicator&, float* send, float* recv) {
                                       std::memcpy(recv, send, bytes);
                                     });
  report(state, times, op_kind::all_gather, static_cast<double>(bytes), n, memcpy_seconds);
}

// The groups of a (n/2) x 2 mesh: ranks of one node, and ranks with the same local index.
struct TwoLevel {
  explicit TwoLevel(int n) : mesh(n / 2, 2) {
    intra = amsp::factor_groups(mesh, amsp::Factor{mesh.ranks_per_node(), 1});
    std::vector<amsp::RankGroup> groups;
    for (int local = 0; local < mesh.ranks_per_node(); ++local)
      groups.push_back(amsp::RankGroup{{mesh.rank_of(0, local), mesh.rank_of(1, local)}, false});
    inter = amsp::GroupSet(mesh, std::move(groups));
  }
  amsp::Mesh mesh;
  amsp::GroupSet intra, inter;
};

// AllGather as intra-node AllGather then inter-node AllGather; ReduceScatter as inter-node then
// intra-node. Node-major ranks make both land every chunk where the flat collective puts it.
void BM_threads_two_level(benchmark::State& state, op_kind kind) {
  const int n = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const std::size_t e = bytes / sizeof(float);
  const std::size_t block = e / static_cast<std::size_t>(n);
  const TwoLevel levels(n);
  const int R = levels.mesh.ranks_per_node();
  const std::size_t node_block = block * static_cast<std::size_t>(R);
  double memcpy_seconds = 0;
  std::vector<amsp::host_buffer<float>> scratch;
  for (int r = 0; r < n; ++r) scratch.emplace_back(node_block);
  struct Subs {
    ThreadsCommunicator intra, inter;
  };
  // Sub-communicators are made per rank on first use (split is collective: the warm-up call).
  std::vector<std::unique_ptr<Subs>> subs(static_cast<std::size_t>(n));
  const auto times = time_on_threads(
      n, e, static_cast<std::size_t>(state.max_iterations), memcpy_seconds,
      [&](ThreadsCommunicator& comm, float* send, float* recv) {
        auto& s = subs[static_cast<std::size_t>(comm.rank())];
        if (!s) {
          ThreadsCommunicator intra = comm.split(levels.intra);
          ThreadsCommunicator inter = comm.split(levels.inter);
          s = std::make_unique<Subs>(Subs{std::move(intra), std::move(inter)});
        }
        const auto node = static_cast<std::size_t>(levels.mesh.node_of(comm.rank()));
        if (kind == op_kind::all_gather) {
          s->intra.all_gather(send, recv + node * node_block, block);
          s->inter.all_gather(recv + node * node_block, recv, node_block);
        } else {
          float* partial = scratch[static_cast<std::size_t>(comm.rank())].data();
          s->inter.reduce_scatter(send, partial, node_block);
          s->intra.reduce_scatter(partial, recv, block);
        }
      });
  subs.clear();
  report(state, times, kind, static_cast<double>(bytes), n, memcpy_seconds);
}

void sweep(benchmark::internal::Benchmark* b) { amsp::bench::rank_and_size_sweep(b, {2, 4, 8}); }
void mesh_sweep(benchmark::internal::Benchmark* b) { amsp::bench::rank_and_size_sweep(b, {4, 8}); }
}  // namespace

BENCHMARK_CAPTURE(BM_threads, all_gather, op_kind::all_gather)->Apply(sweep);
BENCHMARK_CAPTURE(BM_threads, reduce_scatter, op_kind::reduce_scatter)->Apply(sweep);
BENCHMARK_CAPTURE(BM_threads, all_reduce, op_kind::all_reduce)->Apply(sweep);
BENCHMARK_CAPTURE(BM_threads, broadcast, op_kind::broadcast)->Apply(sweep);
BENCHMARK(BM_memcpy_reference)->Apply(sweep);
BENCHMARK_CAPTURE(BM_threads_two_level, all_gather, op_kind::all_gather)->Apply(mesh_sweep);
BENCHMARK_CAPTURE(BM_threads_two_level, reduce_scatter, op_kind::reduce_scatter)->Apply(mesh_sweep);
#if defined(AMSP_HAS_CUDA)
BENCHMARK_CAPTURE(BM_threads_device, all_gather, op_kind::all_gather)->Apply(device_sweep);
BENCHMARK_CAPTURE(BM_threads_device, reduce_scatter, op_kind::reduce_scatter)->Apply(device_sweep);
BENCHMARK_CAPTURE(BM_threads_device, all_reduce, op_kind::all_reduce)->Apply(device_sweep);
BENCHMARK_CAPTURE(BM_threads_device, broadcast, op_kind::broadcast)->Apply(device_sweep);
#endif

BENCHMARK_MAIN();
