#pragma once
// Part of ShardedOptimizer (amsp/engine/sharded_optimizer.hpp, which includes it at its end):
// The step: the norm and the decision (on the host for host spaces, on the device for a device
// space), the fused update of each bucket's OS shard and the spread of the new parameters.

#include "amsp/engine/sharded_optimizer.hpp"

namespace amsp {

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::start_micro_batch(bool last) -> void {
  check(!last_, "engine.step_pending", "the last micro-batch was handed; call step() before starting another");
  if (open_) require_all_reduced("start_micro_batch");
  open_ = true;
  last_ = last;
  ++micro_batches_;
  for (Bucket& b : buckets_) b.reduced = false;
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::step(float loss_scale) -> StepResult {
  check(last_, "engine.step_without_gradients",
        "step() needs the gradients of a last micro-batch: call start_micro_batch(true) and hand every bucket");
  require_all_reduced("step");
  check_loss_scale(loss_scale);
  check(!options_.update_in_backward || loss_scale == 1.0f, "engine.update_in_backward", "step(", loss_scale,
        ") with update_in_backward: the updates were issued in the backward, unscaled (loss scale 1)");
  // Host spaces: the reduction chains' errors are thrown here. A device space leaves them to
  // the stream (the norm task comes after them in its FIFO) and reports errors later.
  retire_all(reductions_);
  StepResult result;
  if (options_.update_in_backward) {
    // Every bucket's update and spread were issued after its last reduction; nothing was decided
    // globally (no norm: grad_norm stays 0, clip_coefficient 1, never skipped).
    step_ = in_backward_args_.step;
    in_backward_rules_.reset();
  } else {
    // The step's stream work rewrites stores the user's compute may still read (the P store with P
    // replicated, the G store handed out by grad_buffer).
    detail::comm_after_user(space_);
    const std::optional<StepDecision> decision = decide(loss_scale, gradient_average());
    if (decision) result = StepResult{decision->skipped, decision->grad_norm, decision->clip_coefficient, decision->step};
    if (!decision || !decision->skipped) {
      // A device space decides on the device: it counts the steps issued here, its device
      // decision counts those applied (last_step_result()).
      step_ = decision ? decision->step : step_ + 1;
      const float grad_scale = decision ? decision->grad_scale : 1.0f;
      const std::shared_ptr<const std::vector<Rule>> group_rules = step_rules();
      for (Bucket& b : buckets_) update_and_spread(b, group_rules, UpdateArgs{step_, grad_scale});
    }
  }
  result.step = step_;
  open_ = last_ = false;
  micro_batches_ = 0;
  for (Bucket& b : buckets_) b.accumulated = b.reduced = false;
  last_result_ = result;
  return result;
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::gradient_average() const -> double {
  return options_.average_gradients ? 1.0 / (double(mesh_.world_size()) * micro_batches_) : 1.0;
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::step_rules() const
    -> std::shared_ptr<const std::vector<Rule>> {
  auto group_rules = std::make_shared<std::vector<Rule>>();
  for (const ParamGroup& g : groups_table_.values()) group_rules->push_back(detail::rule_for_group(rule_, g));
  return group_rules;
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::synchronize() -> void {
  wait_all(reductions_);
  wait_all(deferred_);
  for (Bucket& b : buckets_) {
    wait_spread(b);
    b.gather_done.wait();
  }
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::last_step_result() -> StepResult {
  if constexpr (requires { mem_.read_decision(); }) {
    synchronize();
    return mem_.read_decision();
  } else {
    return last_result_;
  }
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::decide(float loss_scale,
    double average) -> std::optional<StepDecision> {
  const bool need_norm = needs_norm();
  const IssueContext at = issue_context();
  const std::int64_t steps_so_far = step_;
  auto decision = std::make_shared<std::optional<StepDecision>>();
  comm::Handle decided = space_.submit([this, need_norm, loss_scale, average, at, steps_so_far, decision] {
    if (need_norm) {  // each bucket's part was taken at the end of its reduction chain (finish)
      double* const sum_sq = mem_.norm_sum();
      std::visit(detail::on_stage{[](detail::SoloStage&) {},  // one OS shard: the local sum is the norm's
                                  [&](Group& os) {
                                    agree<double>(os.comm, "OS group", comm::op_kind::all_reduce, 1, "grad_norm", at);
                                    os.comm.all_reduce(sum_sq, sum_sq, 1, comm::reduce_op::sum);
                                  }},
                 os_norm_);
    }
    *decision = mem_.decide(average, loss_scale, options_, steps_so_far);
    if (need_norm) mem_.reset_norm();
  });
  if constexpr (detail::device_space<Space>) {
    retire(decided);
    return std::nullopt;
  } else {
    decided.wait();
    return *decision;
  }
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::retire(comm::Handle& event) -> void {
  if constexpr (detail::device_space<Space>) {
    if (event.pending()) deferred_.push_back(std::move(event));
    for (std::size_t i = 0; i < deferred_.size();)  // forget the completed ones, throw their errors
      if (deferred_[i].test()) deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(i));
      else ++i;
  } else {
    event.wait();
  }
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::retire_all(std::vector<comm::Handle>& events) -> void {
  if constexpr (detail::device_space<Space>) {
    for (comm::Handle& h : events) retire(h);
    events.clear();
  } else {
    wait_all(events);
  }
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::update_and_spread(Bucket& b,
    std::shared_ptr<const std::vector<Rule>> group_rules, UpdateArgs args) -> void {
  retire(b.update_done);
  check(!b.gathered && b.gather_slot < 0, "engine.gathered_during_step", "bucket '", b.spec.name,
        "' is still gathered; release it before step() (update_in_backward: before its last reduce_gradients)");
  Bucket* bucket = &b;
  const IssueContext at = issue_context();
  b.update_done = space_.launch([this, bucket, group_rules, args, at] {
    update(*bucket, *group_rules, args);
    return spread_collectives(*bucket, at);
  });
  b.update_ticket = detail::last_ticket(space_);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::update(Bucket& b, const std::vector<Rule>& group_rules,
    const UpdateArgs& args) -> void {
  const float* grads = os_grads(b);
  for (const detail::GroupRun& run : b.update_runs) {
    optim::ShardState<Rule> shard;
    shard.master = {b.master.data() + run.shard_offset, run.count};
    for (int s = 0; s < Rule::state_count; ++s)
      shard.states[static_cast<std::size_t>(s)] = {b.states[static_cast<std::size_t>(s)].data() + run.shard_offset, run.count};
    mem_.update(group_rules[static_cast<std::size_t>(run.group)], shard, grads + run.shard_offset,
                b.p_store.data() + (run.bucket_offset - b.geo.p.begin), run.count, args);
  }
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::refresh_and_spread(Bucket& b) -> void {
  Bucket* bucket = &b;
  const IssueContext at = issue_context();
  b.update_done = space_.launch([this, bucket, at] {
    for (const OsPiece& piece : os_pieces(*bucket))
      mem_.convert(lane::comm, bucket->master.data() + piece.os_offset,
                   bucket->p_store.data() + (piece.bucket_offset - bucket->geo.p.begin), piece.count);
    return spread_collectives(*bucket, at);
  });
  b.update_ticket = detail::last_ticket(space_);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::spread_collectives(Bucket& b,
    const IssueContext& at) -> std::vector<comm::Handle> {
  std::vector<comm::Handle> handles;
  std::visit(detail::on_stage{
                 [](detail::SoloStage&) {},  // this rank's OS shard is its whole P shard: nothing to spread
                 [&](Group& spread) {
                   ParamT* p = b.p_store.data();
                   if (!whole_tensor()) {
                     agree<ParamT>(spread.comm, "spread group", comm::op_kind::all_gather, b.geo.os.size(),
                                   b.spec.name, at);
                     handles.push_back(spread.comm.all_gather_async(p + b.geo.os_in_p, p, b.geo.os.size()));
                   } else {
                     for (const OwnedSegment& s : b.segments) {
                       agree<ParamT>(spread.comm, "spread group", comm::op_kind::broadcast, s.size, b.spec.name, at,
                                     s.owner);
                       handles.push_back(
                           spread.comm.broadcast_async(p + s.offset_in_p, p + s.offset_in_p, s.size, s.owner));
                     }
                   }
                 }},
             spread_);
  return handles;
}

}  // namespace amsp
