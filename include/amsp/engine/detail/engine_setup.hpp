#pragma once
// Part of ShardedOptimizer (amsp/engine/sharded_optimizer.hpp, which includes it at its end):
// Construction and parameters: the constructor's body and the destructor, the stages of the schedule, the stores of each bucket, the parameter
// groups' runs, and set_tensor's writes into the P and OS stores.

#include "amsp/engine/sharded_optimizer.hpp"

namespace amsp {

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::construct(std::vector<BucketSpec> buckets) -> void {
  const Plan& plan = groups_.plan();
  check(layout_supports(options_.os_layout, plan), "engine.whole_tensor_layout",
        "the whole-tensor optimizer-state layout needs s_g = s_p, but plan ", to_string(plan), " has s_g = ",
        to_string(plan.g), " and s_p = ", to_string(plan.p));
  check(!buckets.empty(), "engine.buckets", "a ShardedOptimizer needs at least one bucket");
  check_gradient_buffers_in_flight(options_.gradient_buffers_in_flight);
  check_update_in_backward();
  // A device space's kernels, and the device kernels of the communicator's collectives, are
  // loaded before the first collective below: no rank can be waiting on the device for a task
  // yet (amsp::device_ops::preload_kernels says why that matters).
  if constexpr (requires { mem_.template preload_kernels<Rule, ParamT>(); }) {
    mem_.template preload_kernels<Rule, ParamT>();
    if constexpr (requires { world_->preload_device_kernels(); }) world_->preload_device_kernels();
  }
  build_stages();
  for (BucketSpec& spec : buckets) add_bucket(std::move(spec));
  assign_param_groups();
  set_rule(Rule(rule_));  // validated, also as every parameter group sees it
  std::size_t largest = 0;  // the norm's scratch (a device space: its workspace) is sized once, here
  for (const Bucket& b : buckets_) largest = std::max(largest, os_elements(b));
  mem_.reserve_norm(buckets_.size(), largest);
  size_pools();
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::size_pools() -> void {
  // A buffer of the largest bucket's size serves any bucket, so a pool whose buffers in use at
  // once are bounded holds (that bound) x (largest bucket), as the planner's memory model prices,
  // in whatever order buckets of different sizes come: one reduction chain at a time in each fp32
  // pool, the gradient buffers in flight, and the gathers of the bucket in use and the prefetched
  // one. Gathers beyond two (a user who keeps gathered parameters from forward to backward holds
  // every bucket) get their own bucket's size (docs/engine.md, "Scratch").
  std::size_t full = 0, g_shard = 0, p_shard = 0;
  for (const Bucket& b : buckets_) {
    full = std::max(full, b.geo.n);
    g_shard = std::max(g_shard, b.geo.g.size());
    p_shard = std::max(p_shard, b.geo.p.size());
  }
  // The gradient buffers in flight: HostAsync waits for the oldest on the host, a device space
  // reuses the slots of its staging ring (docs/engine.md, "Gradient buffers in flight").
  if (options_.gradient_buffers_in_flight > 0) {
    const auto bound = static_cast<std::size_t>(options_.gradient_buffers_in_flight);
    grad_pool_.set_slot_elements(full, bound);
    if constexpr (detail::device_space<Space>) staging_ring_ = detail::StagingRing(bound);
  }
  full_work_pool_.set_slot_elements(full);
  g_work_pool_.set_slot_elements(g_shard);
  p_work_pool_.set_slot_elements(p_shard);
  std::visit(detail::on_stage{[](detail::SoloStage&) {}, [&](ShardedParams& p) { p.gather_pool.set_slot_elements(full, 2); }},
             params_);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::~ShardedOptimizer() {
  // Outstanding work reads and writes our stores: let it finish before the stores go.
  std::vector<comm::Handle> outstanding = std::move(reductions_);
  for (comm::Handle& h : deferred_) outstanding.push_back(std::move(h));
  for (Bucket& b : buckets_) {
    outstanding.push_back(std::move(b.gather_done));
    outstanding.push_back(std::move(b.update_done));
  }
  try {
    wait_all(outstanding);
  } catch (...) {  // an aborted world: nothing left to wait for
  }
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::build_stages() -> void {
  // The gather stream runs beside the communication stream: its AllGathers get a communicator
  // of their own (ShardedParams splits it right after the P group's).
  if constexpr (Space::concurrent_streams)
    check(groups_.p().group_size() == 1 || comm::concurrent_calls_allowed(*world_), "engine.concurrent_calls",
          "plan ", to_string(plan()), " shards P, so this space's gather stream issues collectives beside its "
          "communication stream, which this communicator does not allow (MPI: initialise with MPI_THREAD_MULTIPLE)");
  detail::build_stage(params_, *world_, groups_.p());
  detail::build_stage(g_split_, *world_, groups_.g_split());
  detail::build_stage(os_split_, *world_, groups_.os_split());
  detail::build_stage(spread_, *world_, groups_.spread());
  detail::build_stage(os_replica_, *world_, groups_.os_replica());
  detail::build_stage(os_norm_, *world_, groups_.os());
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::add_bucket(BucketSpec spec) -> void {
  check(!spec.tensors.empty(), "engine.buckets", "bucket '", spec.name, "' has no tensors");
  for (const Bucket& b : buckets_)
    check(b.spec.name != spec.name, "engine.buckets", "bucket name '", spec.name, "' appears twice");
  Bucket b;
  b.layout = bucket_layout(spec, dtype_of_v<ParamT>, plan(), options_.alignment_bytes);
  for (const Bucket& other : buckets_)
    for (const TensorSlot& s : b.layout.slots())
      for (const TensorSlot& o : other.layout.slots())
        check(s.name != o.name, "engine.buckets", "tensor name '", s.name, "' appears in two buckets");
  b.spec = std::move(spec);
  b.geo = bucket_geometry(b.layout.buffer_size(dtype_of_v<ParamT>), groups_, rank_);
  b.p_store = store<ParamT>(b.geo.p.size());
  b.g_store = store<GradT>(b.geo.g.size());
  const int p_index = groups_.shard_index(Component::params, rank_);
  const int os_index = groups_.shard_index(Component::optimizer_states, rank_);
  b.spread_position = os_index - p_index * (plan().os.size() / plan().p.size());
  std::size_t os_count = b.geo.os.size();
  if (whole_tensor()) {
    b.segments = owned_segments(b.layout, b.geo.p, plan().os.size() / plan().p.size());
    os_count = owned_elements(b.segments, b.spread_position);
  }
  b.master = store<float>(os_count);
  for (int s = 0; s < Rule::state_count; ++s) b.states.emplace_back(os_count);
  if (whole_tensor() || !std::is_same_v<GradT, float>) b.os_grad = store<float>(os_count);
  buckets_.push_back(std::move(b));
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::assign_param_groups() -> void {
  for (const auto& [name, group] : options_.param_groups) {
    bool found = false;
    for (const Bucket& b : buckets_)
      for (const TensorSlot& s : b.layout.slots()) found = found || s.name == name;
    check(found, "engine.unknown_tensor", "parameter group names tensor '", name, "', which is in no bucket");
  }
  for (Bucket& b : buckets_) {
    for (const TensorSlot& s : b.layout.slots()) {
      const auto it = options_.param_groups.find(s.name);
      b.slot_group.push_back(it == options_.param_groups.end() ? 0 : groups_table_.intern(it->second));
    }
    for (const OsPiece& piece : os_pieces(b))
      detail::append_group_runs(b.layout, b.slot_group, piece.bucket_offset, piece.os_offset, piece.count,
                                b.update_runs);
  }
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::os_pieces(const Bucket& b) const -> std::vector<OsPiece> {
  if (!whole_tensor()) return {OsPiece{b.geo.os.begin, 0, b.geo.os.size()}};
  std::vector<OsPiece> pieces;
  for (const OwnedSegment& s : b.segments)
    if (s.owner == b.spread_position) pieces.push_back({b.geo.p.begin + s.offset_in_p, s.offset_in_owner, s.size});
  return pieces;
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
template <tensor_like T>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::set_tensor(std::string_view name,
    const T& values) -> void {
  const tensor_view v = view_of(values);
  check(v.space == memory_kind::host || v.space == memory_type::kind, "engine.memory_space", "tensor '", name,
        "' is in ", name_of(v.space), " memory; this engine holds ", name_of(memory_type::kind), " memory");
  for (Bucket& b : buckets_)
    for (const TensorSlot& slot : b.layout.slots())
      if (slot.name == name) {
        check_equal(v.numel, slot.numel, "engine.tensor_size", "element count of tensor '" + slot.name + "'");
        visit_dtype(v.type, [&](auto tag) {
          using E = decltype(tag);
          set_slot(b, slot, static_cast<const E*>(v.data), v.space);
        });
        return;
      }
  fail("engine.unknown_tensor", "no tensor named '", name, "' in any bucket");
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
template <class E>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::set_slot(Bucket& b, const TensorSlot& slot,
    const E* values, memory_kind where) -> void {
  wait_spread(b);
  const ShardRange in_p = slot.range().intersect(b.geo.p);
  if (in_p.begin < in_p.end)
    mem_.upload(values + (in_p.begin - slot.offset), where, b.p_store.data() + (in_p.begin - b.geo.p.begin),
                in_p.end - in_p.begin);
  for (const OsPiece& piece : os_pieces(b)) {
    const ShardRange run = slot.range().intersect(ShardRange{piece.bucket_offset, piece.bucket_offset + piece.count});
    if (run.begin < run.end)
      mem_.upload(values + (run.begin - slot.offset), where,
                  b.master.data() + piece.os_offset + (run.begin - piece.bucket_offset), run.end - run.begin);
  }
}

}  // namespace amsp
