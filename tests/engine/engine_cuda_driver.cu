// Device half of the CUDA space's engine tests (engine_cuda_driver.hpp). Compiled by nvcc with
// --fmad=false (tests/engine/CMakeLists.txt), so that the fused update does the host loop's float
// operations and an fp32 run can match the host engine bit for bit. Including threads_cuda.cuh
// installs the threads backend's device data mover in this program.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <span>
#include <thread>
#include <vector>

#include "amsp/comm/threads.hpp"
#if defined(AMSP_HAS_NCCL)
#include "amsp/comm/nccl.hpp"
#endif
#include "amsp/comm/threads_cuda.cuh"
#include "amsp/engine/cuda_space.cuh"
#include "amsp/optim/adam.hpp"
#include "amsp/optim/sgd_momentum.hpp"
#include "amsp/sharding/presets.hpp"
#include "engine_cuda_driver.hpp"

namespace amsp::test {

namespace {
void cuda_ok(cudaError_t status, const char* what) { amsp::detail::check_cuda(status, "cuda.runtime", what); }
}  // namespace

/// The job reads and writes device buffers through the user's stream (the rank thread's
/// per-thread default stream, CudaStreams' default), after the engine ordered that stream.
template <>
struct JobMemory<CudaAsync> {
  template <class T>
  static std::span<T> host_view(std::span<T> buffer, std::vector<std::remove_const_t<T>>& scratch) {
    scratch.resize(buffer.size());
    if (buffer.empty()) return {scratch.data(), 0};  // e.g. a rank that owns no OS segment of a bucket
    cuda_ok(cudaMemcpyAsync(scratch.data(), buffer.data(), buffer.size_bytes(), cudaMemcpyDeviceToHost,
                            cudaStreamPerThread),
            "cudaMemcpyAsync of a buffer to the host");
    cuda_ok(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");
    return {scratch.data(), scratch.size()};
  }
  template <class T>
  static void write_back(std::span<T> buffer, std::span<const T> written) {
    cuda_ok(cudaMemcpyAsync(buffer.data(), written.data(), written.size_bytes(), cudaMemcpyHostToDevice,
                            cudaStreamPerThread),
            "cudaMemcpyAsync of gradients to the device");
    cuda_ok(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");  // `written` is freed next
  }
};

bool cuda_device_present() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

template <class Rule, class ParamT>
Params run_threads_cuda(const Mesh& mesh, const Plan& plan, const Rule& rule, const JobConfig& job) {
  return run_threads<Rule, ParamT, CudaAsync>(mesh, plan, rule, job);
}

template Params run_threads_cuda<optim::AdamW, float>(const Mesh&, const Plan&, const optim::AdamW&, const JobConfig&);
template Params run_threads_cuda<optim::AdamW, bf16>(const Mesh&, const Plan&, const optim::AdamW&, const JobConfig&);
template Params run_threads_cuda<optim::SgdMomentum, float>(const Mesh&, const Plan&, const optim::SgdMomentum&,
                                                            const JobConfig&);

template <class Rule, class ParamT>
JobOutcome run_threads_cuda_outcome(const Mesh& mesh, const Plan& plan, const Rule& rule, const JobConfig& job) {
  return run_threads_outcome<Rule, ParamT, CudaAsync>(mesh, plan, rule, job);
}

template JobOutcome run_threads_cuda_outcome<optim::AdamW, float>(const Mesh&, const Plan&, const optim::AdamW&,
                                                                  const JobConfig&);
template JobOutcome run_threads_cuda_outcome<optim::AdamW, bf16>(const Mesh&, const Plan&, const optim::AdamW&,
                                                                 const JobConfig&);

InBackwardCounts cuda_in_backward_counts() { return in_backward_counts<CudaAsync>(); }

#if defined(AMSP_HAS_NCCL)
Params run_nccl_one_rank_cuda(const JobConfig& job) {
  comm::NcclCommunicator nccl = comm::NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 1);
  const Mesh mesh(1, 1);
  return run_job<comm::NcclCommunicator, optim::AdamW, float, CudaAsync>(nccl, mesh, parse_plan("ddp", mesh),
                                                                       optim::AdamW{.lr = 1e-2f}, job);
}
#endif

std::string rule_for_legacy_user_stream() {
  std::string rule = "(no error)";
  comm::run_on_threads(1, [&](comm::ThreadsCommunicator& comm) {
    const Mesh mesh(1, 1);
    try {
      ShardedOptimizer<comm::ThreadsCommunicator, optim::AdamW, float, float, CudaAsync> opt(
          comm, mesh, parse_plan("ddp", mesh), optim::AdamW{}, odd_model(), EngineOptions{}, CudaStreams{nullptr});
    } catch (const amsp::error& e) {
      rule = e.rule();
    }
  });
  return rule;
}

MemorySpaceReport cuda_engine_memory_spaces() {
  MemorySpaceReport report;
  comm::run_on_threads(1, [&](comm::ThreadsCommunicator& comm) {
    const Mesh mesh(1, 1);
    ShardedOptimizer<comm::ThreadsCommunicator, optim::AdamW, float, float, CudaAsync> opt(
        comm, mesh, parse_plan("ddp", mesh), optim::AdamW{}, odd_model());
    const std::vector<TensorSlot>& slots = opt.layout(0).slots();
    std::vector<std::vector<float>> host_values;
    std::vector<cuda_buffer<float>> device_in, device_out;
    std::vector<tensor_view> host_views, device_views;
    for (const TensorSlot& slot : slots) {
      std::vector<float> values(slot.numel);
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i) - 3.0f;
      device_in.emplace_back(slot.numel);
      device_in.back().copy_from_host(values.data(), values.size());
      device_out.emplace_back(slot.numel);
      opt.set_tensor(slot.name, RawTensor<float, CudaSpace>{device_in.back().data(), slot.numel});
      host_views.push_back(view_of(std::span<float>(values)));
      device_views.push_back(view_of(RawTensor<float, CudaSpace>{device_out.back().data(), slot.numel}));
      host_values.push_back(std::move(values));
    }
    const auto rule_of = [](auto&& call) -> std::string {
      try {
        call();
      } catch (const amsp::error& e) {
        return e.rule();
      }
      return "(no error)";
    };
    opt.start_micro_batch(true);
    report.reduce_host_rule = rule_of([&] { opt.reduce_gradients(0, host_views); });
    report.gather_into_host_rule = rule_of([&] { opt.gather_into(0, host_views); });
    opt.gather_into(0, device_views);
    cuda_ok(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");
    bool same = true;
    for (std::size_t t = 0; t < slots.size(); ++t) {
      std::vector<float> back(slots[t].numel);
      device_out[t].copy_to_host(back.data(), back.size());
      same = same && back == host_values[t];
    }
    report.device_tensors_round_trip = same;
  });
  return report;
}

namespace {

__device__ unsigned long long global_nanoseconds() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Spins until *flag != 0, or at most timeout_ns (a failing check must not hang a GPU).
__device__ void spin_until_released(const volatile unsigned* flag, unsigned long long timeout_ns) {
  const unsigned long long start = global_nanoseconds();
  while (*flag == 0u && global_nanoseconds() - start < timeout_ns) __nanosleep(10000);
}

/// Holds the stream until released.
__global__ void hold_until_released(const volatile unsigned* flag, unsigned long long timeout_ns) {
  spin_until_released(flag, timeout_ns);
}

/// Holds the stream until released, then *out = value (what a collective issued meanwhile must read).
__global__ void hold_then_write(const volatile unsigned* flag, unsigned long long timeout_ns, float* out, float value) {
  spin_until_released(flag, timeout_ns);
  *out = value;
}

/// A flag in host-mapped memory: the host sets it, a kernel reads it through device_view.
class MappedFlag {
public:
  MappedFlag() {
    void* mapped = nullptr;
    cuda_ok(cudaHostAlloc(&mapped, sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
    host_ = static_cast<volatile unsigned*>(mapped);
    *host_ = 0;
    cuda_ok(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), mapped, 0), "cudaHostGetDevicePointer");
  }
  MappedFlag(const MappedFlag&) = delete;
  MappedFlag& operator=(const MappedFlag&) = delete;
  ~MappedFlag() { (void)cudaFreeHost(const_cast<unsigned*>(host_)); }
  void release() { *host_ = 1u; }
  [[nodiscard]] const unsigned* device_view() const { return device_; }

private:
  volatile unsigned* host_ = nullptr;
  unsigned* device_ = nullptr;
};

template <class Engine>
void one_step(Engine& opt) {
  opt.start_micro_batch(/*last=*/true);
  for (int b = 0; b < opt.bucket_count(); ++b) {
    (void)opt.gather(b);
    if (b + 1 < opt.bucket_count()) opt.prefetch(b + 1);
    (void)opt.grad_buffer(b);  // zeros, written on the user's stream
    opt.release(b);
    opt.reduce_gradients(b);
  }
  (void)opt.step();
}

}  // namespace

NoHostSyncReport step_while_user_stream_held(const Mesh& mesh, const std::string& plan_name, double hold_seconds) {
  const Plan plan = parse_plan(plan_name, mesh);
  const int world = mesh.world_size();
  MappedFlag flag;

  NoHostSyncReport report;
  report.hold_seconds = hold_seconds;
  std::atomic<int> issued{0};
  std::atomic<bool> all_held{true};
  std::vector<double> seconds(static_cast<std::size_t>(world));
  std::vector<std::size_t> staging(static_cast<std::size_t>(world));
  comm::run_on_threads(world, [&](comm::ThreadsCommunicator& comm) {
    cudaStream_t user{};
    cuda_ok(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    {
      ShardedOptimizer<comm::ThreadsCommunicator, optim::AdamW, float, float, CudaAsync> opt(
          comm, mesh, plan, optim::AdamW{}, odd_model(), EngineOptions{},
          CudaStreams{.user = user, .task_wait = CudaTaskWait::on_device});  // the mode that never waits
      set_initial_values(opt);
      one_step(opt);  // the scratch pools reach their high-water mark: the held step allocates nothing
      opt.synchronize();
      cuda_ok(cudaStreamSynchronize(user), "cudaStreamSynchronize");

      hold_until_released<<<1, 1, 0, user>>>(flag.device_view(), static_cast<unsigned long long>(hold_seconds * 1e9));
      cuda_ok(cudaGetLastError(), "the launch of the hold kernel");
      const auto start = std::chrono::steady_clock::now();
      one_step(opt);
      for (int b = 0; b < opt.bucket_count(); ++b) {  // the next forward
        (void)opt.gather(b);
        opt.release(b);
      }
      seconds[static_cast<std::size_t>(comm.rank())] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (cudaStreamQuery(user) != cudaErrorNotReady) all_held = false;
      ++issued;
      if (comm.rank() == 0) {
        while (issued.load() < world) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        flag.release();
      }
      cuda_ok(cudaStreamSynchronize(user), "cudaStreamSynchronize");
      const StepResult last = opt.last_step_result();
      if (comm.rank() == 0) report.applied_steps = last.step;
      std::size_t largest = 0;
      for (int b = 0; b < opt.bucket_count(); ++b)
        largest = std::max(largest, opt.layout(b).buffer_size(dtype::fp32) * sizeof(float));
      staging[static_cast<std::size_t>(comm.rank())] = opt.memory().gradient_staging;
      if (comm.rank() == 0)
        report.staging_bound_bytes = static_cast<std::size_t>(EngineOptions{}.gradient_buffers_in_flight) * largest;
    }
    cuda_ok(cudaStreamDestroy(user), "cudaStreamDestroy");
  });
  for (const double s : seconds) report.slowest_issue_seconds = std::max(report.slowest_issue_seconds, s);
  for (const std::size_t s : staging) report.gradient_staging_bytes = std::max(report.gradient_staging_bytes, s);
  report.user_stream_still_held = all_held.load();
  return report;
}

#if defined(AMSP_HAS_NCCL)
NcclOrderReport nccl_after_held_comm_stream(double hold_seconds) {
  comm::NcclCommunicator nccl = comm::NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 1);
  CudaAsync space;
  MappedFlag flag;
  cuda_buffer<float> send(1), received(1);  // zeroed on the legacy stream, which the space's and NCCL's
  cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // non-blocking streams do not wait for
  NcclOrderReport report;
  report.hold_seconds = hold_seconds;
  hold_then_write<<<1, 1, 0, space.comm_stream()>>>(flag.device_view(),
                                                    static_cast<unsigned long long>(hold_seconds * 1e9), send.data(), 42.0f);
  cuda_ok(cudaGetLastError(), "the launch of the hold kernel");
  const auto start = std::chrono::steady_clock::now();
  space.before_collective(nccl);
  report.before_collective_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  comm::Handle reduced = nccl.all_reduce_async(send.data(), received.data(), 1);
  report.comm_stream_still_held = cudaStreamQuery(space.comm_stream()) == cudaErrorNotReady;
  flag.release();
  reduced.wait();
  cuda_ok(cudaStreamSynchronize(space.comm_stream()), "cudaStreamSynchronize");
  received.copy_to_host(&report.received, 1);
  return report;
}
#endif

}  // namespace amsp::test
