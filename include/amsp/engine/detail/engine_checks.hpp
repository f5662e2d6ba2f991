#pragma once
// Part of ShardedOptimizer (amsp/engine/sharded_optimizer.hpp, which includes it at its end):
// The checks of the schedule: what a call requires of the micro-batch, and the collective
// consistency check (the ranks agree on each collective before they issue it).

#include "amsp/engine/sharded_optimizer.hpp"

namespace amsp {

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::require_open(const Bucket& b) const -> void {
  check(open_, "engine.no_micro_batch", "bucket '", b.spec.name,
        "': call start_micro_batch(last) before handing gradients");
  check(!b.reduced, "engine.gradient_twice", "bucket '", b.spec.name,
        "': gradients were already handed in this micro-batch");
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::require_all_reduced(const char* caller) const -> void {
  std::string missing;
  for (const Bucket& b : buckets_)
    if (!b.reduced) missing += (missing.empty() ? "'" : ", '") + b.spec.name + "'";
  check(open_ && missing.empty(), caller == std::string_view("step") ? "engine.step_without_gradients" : "engine.incomplete_micro_batch",
        caller, "(): the current micro-batch lacks the gradients of bucket(s) ",
        missing.empty() ? std::string("(none: no micro-batch was started)") : missing);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
template <class T>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::agree(Comm& on, std::string_view group, comm::op_kind kind,
    std::size_t count, std::string_view label, const IssueContext& at, int root) -> void {
  detail::before_collective(space_, on);  // every collective of the schedule is issued right after this
  if (!check_collectives_) return;
  // Gathers may be issued ahead (prefetch), so they carry the step only; reductions also carry
  // the micro-batch and whether it is the last, so that a rank stepping early is caught at once.
  const bool gather = kind == comm::op_kind::all_gather && group == "P group";
  const bool stepping = group == "OS group" || (group == "spread group" && kind != comm::op_kind::reduce);
  const std::string_view phase = gather ? "forward" : stepping ? "step" : at.last ? "last backward" : "backward";
  // One checker per stream: each keeps per-communicator state that only its stream touches. With
  // concurrent streams the gather stream issues the P group's AllGathers (and nothing else) on
  // a communicator of its own.
  comm::CollectiveChecker& checker = Space::concurrent_streams && gather ? gather_checker_ : checker_;
  checker(on, comm::CollectiveCall{.kind = kind, .type = dtype_of_v<T>, .count = count, .root = root,
                                    .label = label, .group = group, .phase = phase, .group_size = on.size(),
                                    .step = at.step, .micro_batch = gather || stepping ? -1 : at.micro_batch});
}

}  // namespace amsp
