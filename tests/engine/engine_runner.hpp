#pragma once
// Runs the synthetic job of engine_harness.hpp through a ShardedOptimizer on any communicator,
// and the float64 reference of the same job without one.

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
#include "engine_harness.hpp"

namespace amsp::test {

/// Every tensor of the engine set to the harness's initial values (the same on every rank).
template <class Engine>
void set_initial_values(Engine& opt) {
  std::size_t t = 0;
  for (int b = 0; b < opt.bucket_count(); ++b)
    for (const TensorSlot& slot : opt.layout(b).slots()) {
      std::vector<float> init(slot.numel);
      for (std::size_t i = 0; i < init.size(); ++i) init[i] = static_cast<float>(initial_value(t, i));
      opt.set_tensor(slot.name, std::span<const float>(init));
      ++t;
    }
}

struct JobConfig {
  int steps = 10;
  int micro_batches = 1;
  float max_grad_norm = 0.0f;
  OsLayout os_layout = OsLayout::even_split;
  std::uint64_t seed = 42;
  /// Learning rate of each step (0-based), set before it; empty: the rule's own.
  std::function<float(int)> lr_at;
  /// EngineOptions::param_groups of the run.
  std::map<std::string, ParamGroup, std::less<>> param_groups;
  /// Backward adds into grad_buffer(b) (+=, llm.c's style) instead of assigning.
  bool accumulate_grads = false;
  /// EngineOptions::zero_grad_buffers of the run.
  bool zero_grad_buffers = true;
  /// EngineOptions::check_collectives of the run.
  bool check_collectives = false;
  /// EngineOptions::skip_nonfinite and update_in_backward of the run.
  bool skip_nonfinite = true;
  bool update_in_backward = false;
};

/// One rank's optimizer-state shards: per bucket, its master weights then each of the rule's states.
using OsShards = std::vector<std::vector<float>>;

/// Final full parameters, one vector per tensor in model order.
using Params = std::vector<std::vector<float>>;

/// How the job's host code reads and writes the buffers the engine hands out. Host spaces: in
/// place. A device space's test specialises it (tests/engine/engine_cuda_driver.cu copies through
/// the user's stream), so the same job runs on every space.
template <class Space>
struct JobMemory {
  /// A host view of `buffer` (its contents; `scratch` may hold them).
  template <class T>
  static std::span<T> host_view(std::span<T> buffer, std::vector<std::remove_const_t<T>>& /*scratch*/) {
    return buffer;
  }
  /// Makes what was written through host_view's result the buffer's contents.
  template <class T>
  static void write_back(std::span<T> /*buffer*/, std::span<const T> /*written*/) {}
};

/// The full parameters of every tensor of the engine, in model order, widened to float (each
/// bucket gathered and released).
template <class Space, class Engine>
Params final_params(Engine& opt) {
  using ParamT = typename Engine::param_type;
  Params out;
  for (int b = 0; b < opt.bucket_count(); ++b) {
    std::vector<ParamT> full_copy;
    const std::span<const ParamT> full = JobMemory<Space>::host_view(std::span<const ParamT>(opt.gather(b)), full_copy);
    for (const TensorSlot& slot : opt.layout(b).slots()) {
      std::vector<float> values(slot.numel);
      for (std::size_t i = 0; i < slot.numel; ++i) values[i] = to_float(full[slot.offset + i]);
      out.push_back(std::move(values));
    }
    opt.release(b);
  }
  return out;
}

/// Runs the job on this rank with parameters and gradients in `ParamT`; returns the final full
/// parameters it sees, widened to float.
template <class Comm, class Rule, class ParamT = float, class Space = HostSerial>
Params run_job(Comm& comm, const Mesh& mesh, const Plan& plan, const Rule& rule, const JobConfig& job,
               MemoryReport* memory = nullptr, OsShards* os_shards = nullptr) {
  EngineOptions options;
  options.os_layout = job.os_layout;
  options.max_grad_norm = job.max_grad_norm;
  options.param_groups = job.param_groups;
  options.zero_grad_buffers = job.zero_grad_buffers;
  options.check_collectives = job.check_collectives;
  options.skip_nonfinite = job.skip_nonfinite;
  options.update_in_backward = job.update_in_backward;
  ShardedOptimizer<Comm, Rule, ParamT, ParamT, Space> opt(comm, mesh, plan, rule, odd_model(), options);
  set_initial_values(opt);
  for (int step = 0; step < job.steps; ++step) {
    if (job.lr_at) {
      if constexpr (requires { opt.set_lr(1.0f); }) opt.set_lr(job.lr_at(step));
    }
    for (int m = 0; m < job.micro_batches; ++m) {
      opt.start_micro_batch(m == job.micro_batches - 1);
      std::size_t tensor = 0;
      for (int b = 0; b < opt.bucket_count(); ++b) {
        std::vector<ParamT> full_copy, grads_copy;
        const std::span<const ParamT> full = JobMemory<Space>::host_view(std::span<const ParamT>(opt.gather(b)), full_copy);
        if (b + 1 < opt.bucket_count()) opt.prefetch(b + 1);  // the next bucket's AllGather overlaps this one's work
        const std::span<ParamT> grad_buffer = opt.grad_buffer(b);
        const std::span<ParamT> grads = JobMemory<Space>::host_view(grad_buffer, grads_copy);
        for (const TensorSlot& slot : opt.layout(b).slots()) {
          for (std::size_t i = 0; i < slot.numel; ++i) {
            const float g = static_cast<float>(
                gradient(job.seed, step, m, comm.rank(), tensor, i, to_float(full[slot.offset + i])));
            ParamT& out = grads[slot.offset + i];
            out = job.accumulate_grads ? from_float<ParamT>(to_float(out) + g) : from_float<ParamT>(g);
          }
          ++tensor;
        }
        JobMemory<Space>::write_back(grad_buffer, std::span<const ParamT>(grads));
        opt.release(b);
        opt.reduce_gradients(b);
      }
    }
    opt.step();
  }
  Params out = final_params<Space>(opt);
  if (memory != nullptr) *memory = opt.memory();
  for (int b = 0; os_shards != nullptr && b < opt.bucket_count(); ++b) {  // read as the job reads its buffers
    const auto read = [&](std::span<const float> shard) {
      std::vector<float> copy;
      const std::span<const float> host = JobMemory<Space>::host_view(shard, copy);
      os_shards->emplace_back(host.begin(), host.end());
    };
    read(opt.master_shard(b));
    for (int s = 0; s < Rule::state_count; ++s) read(opt.state_shard(b, s));
  }
  return out;
}

/// What a job ends with: the final full parameters (every rank's the same) and, when asked for,
/// every rank's optimizer-state shards, rank by rank.
struct JobOutcome {
  Params params;
  OsShards os_shards;
};

/// run_job on every rank of a threads world of mesh's size; checks that every rank sees the same
/// final parameters and returns them, with every rank's OS shards if `with_os_shards`.
template <class Rule, class ParamT = float, class Space = HostSerial>
JobOutcome run_threads_outcome(const Mesh& mesh, const Plan& plan, const Rule& rule, const JobConfig& job,
                               bool with_os_shards = true) {
  const auto world = static_cast<std::size_t>(mesh.world_size());
  std::vector<Params> per_rank(world);
  std::vector<OsShards> shards(world);
  comm::run_on_threads(mesh.world_size(), [&](comm::ThreadsCommunicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    per_rank[r] = run_job<comm::ThreadsCommunicator, Rule, ParamT, Space>(comm, mesh, plan, rule, job, nullptr,
                                                                          with_os_shards ? &shards[r] : nullptr);
  });
  for (const Params& p : per_rank) check(p == per_rank.front(), "test.ranks_differ", "ranks ended with different parameters");
  JobOutcome out{per_rank.front(), {}};
  for (OsShards& s : shards) out.os_shards.insert(out.os_shards.end(), s.begin(), s.end());
  return out;
}

/// The final parameters of run_threads_outcome.
template <class Rule, class ParamT = float, class Space = HostSerial>
Params run_threads(const Mesh& mesh, const Plan& plan, const Rule& rule, const JobConfig& job) {
  return run_threads_outcome<Rule, ParamT, Space>(mesh, plan, rule, job, /*with_os_shards=*/false).params;
}

/// How the parity suite (parity_cases.hpp) and the update-in-backward cases run their job in
/// Space: run_threads and run_threads_outcome, unless a test specialises it.
template <class Space>
struct ParityRunner {
  template <class Rule, class ParamT>
  static Params run(const Mesh& mesh, const Plan& plan, const Rule& rule, const JobConfig& job) {
    return run_threads<Rule, ParamT, Space>(mesh, plan, rule, job);
  }
  template <class Rule, class ParamT>
  static JobOutcome outcome(const Mesh& mesh, const Plan& plan, const Rule& rule, const JobConfig& job) {
    return run_threads_outcome<Rule, ParamT, Space>(mesh, plan, rule, job);
  }
};

/// The same job in float64 without sharding: every rank's gradients summed, averaged over
/// ranks × micro-batches, clipped by the global norm, and applied by `update` (the test's own
/// float64 statement of the rule).
template <class Update>
std::vector<std::vector<double>> reference_job(int world, const JobConfig& job, Update&& update) {
  std::vector<std::vector<double>> params;
  std::size_t t = 0;
  for (const BucketSpec& b : odd_model())
    for (const TensorSpec& spec : b.tensors) {
      std::vector<double> p(spec.numel());
      for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<double>(static_cast<float>(initial_value(t, i)));
      params.push_back(std::move(p));
      ++t;
    }
  for (int step = 0; step < job.steps; ++step) {
    std::vector<std::vector<double>> grads;
    double sum_sq = 0.0;
    for (std::size_t k = 0; k < params.size(); ++k) {
      std::vector<double> g(params[k].size(), 0.0);
      for (int r = 0; r < world; ++r)
        for (int m = 0; m < job.micro_batches; ++m)
          for (std::size_t i = 0; i < g.size(); ++i) g[i] += gradient(job.seed, step, m, r, k, i, params[k][i]);
      for (double& x : g) {
        x /= static_cast<double>(world * job.micro_batches);
        sum_sq += x * x;
      }
      grads.push_back(std::move(g));
    }
    const double norm = std::sqrt(sum_sq);
    const double clip = job.max_grad_norm > 0 && norm > job.max_grad_norm ? job.max_grad_norm / (norm + 1e-6) : 1.0;
    for (std::size_t k = 0; k < params.size(); ++k) update(k, step + 1, params[k], grads[k], clip);
  }
  return params;
}

}  // namespace amsp::test
