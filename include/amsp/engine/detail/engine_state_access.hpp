#pragma once
// Part of ShardedOptimizer (amsp/engine/sharded_optimizer.hpp, which includes it at its end):
// Reports and shard access (what checkpoints use): memory (and giving pooled scratch back) and
// traffic, the optimizer-state shards, hyperparameters and step count, and the parameters
// refreshed from the master weights.

#include "amsp/engine/sharded_optimizer.hpp"

namespace amsp {

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::bucket_index(std::string_view name) const -> int {
  for (std::size_t i = 0; i < buckets_.size(); ++i)
    if (buckets_[i].spec.name == name) return static_cast<int>(i);
  fail("engine.unknown_bucket", "no bucket named '", name, "'");
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::memory() const -> MemoryReport {
  MemoryReport m;
  for (const Bucket& b : buckets_) {
    m.params += b.p_store.size_bytes();
    m.grads += b.g_store.size_bytes();
    m.optimizer_states += b.master.size_bytes();
    for (const auto& s : b.states) m.optimizer_states += s.size_bytes();
    m.os_gradients += b.os_grad.size_bytes();
  }
  m.reduction_scratch = full_work_pool_.bytes() + g_work_pool_.bytes() + p_work_pool_.bytes();
  // P replicated: gather(b) hands out the P store, and there is no gather scratch.
  m.gather_scratch = std::visit(detail::on_stage{[](const detail::SoloStage&) -> std::size_t { return 0; },
                                                 [](const ShardedParams& p) { return p.gather_pool.bytes(); }},
                                params_);
  m.gradient_staging = grad_pool_.bytes();
  m.scratch = m.os_gradients + m.gradient_staging + m.reduction_scratch + m.gather_scratch;
  return m;
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::trim_scratch() -> std::size_t {
  synchronize();  // every task on the streams has given its buffers back
  detail::wait_for_user(space_);
  for (const int slot : staging_ring_.take_closed()) grad_pool_.release(slot);  // their reductions are done
  std::size_t freed = grad_pool_.trim() + full_work_pool_.trim() + g_work_pool_.trim() + p_work_pool_.trim();
  std::visit(detail::on_stage{[](detail::SoloStage&) {}, [&](ShardedParams& p) { freed += p.gather_pool.trim(); }},
             params_);
  return freed;
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::expected_traffic(int micro_batches,
    int gathers_per_micro_batch) const -> TrafficExpectation {
  std::vector<FlatLayout> layouts;
  for (const Bucket& b : buckets_) layouts.push_back(b.layout);
  TrafficScenario scenario;
  scenario.micro_batches = micro_batches;
  scenario.gathers_per_micro_batch = gathers_per_micro_batch;
  scenario.param_bytes = sizeof(ParamT);
  scenario.os_layout = options_.os_layout;
  scenario.grad_norm = options_.max_grad_norm > 0.0f || options_.skip_nonfinite;
  return amsp::expected_traffic(groups_, layouts, scenario, rank_);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::os_shard_runs(int b) const -> std::vector<OsShardRun> {
  std::vector<OsShardRun> runs;
  for (const OsPiece& piece : os_pieces(at(b))) runs.push_back({piece.bucket_offset, piece.os_offset, piece.count});
  return runs;
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::master_shard(int b) -> std::span<float> {
  Bucket& bucket = at(b);
  wait_spread(bucket);
  return {bucket.master.data(), bucket.master.size()};
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::state_shard(int b, int s) -> std::span<float> {
  Bucket& bucket = at(b);
  check(s >= 0 && s < Rule::state_count, "engine.unknown_state", "state index ", s, " is outside [0, ",
        Rule::state_count, ") for rule ", Rule::name);
  wait_spread(bucket);
  return {bucket.states[static_cast<std::size_t>(s)].data(), bucket.states[static_cast<std::size_t>(s)].size()};
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::set_rule(const Rule& rule) -> void {
  require_no_update_issued("set_rule");
  rule.validate();
  for (const ParamGroup& g : groups_table_.values()) detail::rule_for_group(rule, g).validate();
  rule_ = rule;
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::param_group(
    std::string_view name) const -> const ParamGroup& {
  for (const Bucket& b : buckets_)
    for (std::size_t k = 0; k < b.layout.slots().size(); ++k)
      if (b.layout.slots()[k].name == name) return groups_table_.values()[static_cast<std::size_t>(b.slot_group[k])];
  fail("engine.unknown_tensor", "no tensor named '", name, "' in any bucket");
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::set_steps(std::int64_t steps) -> void {
  check(steps >= 0, "engine.step_count", "step count ", steps, " must be >= 0");
  require_no_update_issued("set_steps");
  if constexpr (requires { mem_.set_steps(steps); }) {  // a device space's count lives on the device
    synchronize();
    mem_.set_steps(steps);
  }
  step_ = steps;
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::refresh_params_from_master() -> void {
  check(!open_, "engine.step_pending", "refresh_params_from_master() inside a micro-batch");
  for (Bucket& b : buckets_) {
    wait_spread(b);
    check(!b.gathered && b.gather_slot < 0, "engine.gathered_during_step", "bucket '", b.spec.name,
          "' is still gathered; release it before refresh_params_from_master()");
    refresh_and_spread(b);
  }
}

}  // namespace amsp
