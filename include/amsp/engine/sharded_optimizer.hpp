#pragma once
// ShardedOptimizer: owns the model states of a data-parallel job, sharded by a Plan, and moves
// them with the collectives of a Communicator. Bucket-granular: the user (or the overlap
// executor) makes a bucket's full parameters available, releases them, hands in a bucket's full
// gradients per micro-batch, and steps.
//
//   amsp::ShardedOptimizer opt(comm, mesh, plan, amsp::optim::AdamW{.lr = 1e-3f}, buckets);
//   opt.set_tensor("fc1.weight", std::span<const float>(init));       // same values on every rank
//   for (int m = 0; m < M; ++m) {
//     opt.start_micro_batch(/*last=*/m == M - 1);
//     for (int b = 0; b < L; ++b) forward(b, opt.gather(b));            // full params of bucket b
//     for (int b = L - 1; b >= 0; --b) {
//       backward(b, opt.grad_buffer(b));                                // write full gradients
//       opt.reduce_gradients(b);  opt.release(b);
//     }
//   }
//   opt.step();
//
// The step schedule (docs/engine.md):
//   every micro-batch  ReduceScatter in the P group (s_p > 1), then across the s_g/s_p ranks of
//                      the G group sharing the P shard (s_g > s_p); accumulate into the G shard.
//   last micro-batch   ReduceScatter across the s_os/s_g ranks sharing the G shard (s_os > s_g),
//                      AllReduce across the world/s_os ranks holding the same OS shard. Gradients
//                      cross OS replicas once per step, whatever the micro-batch count.
//   step               global norm over the OS group (each OS shard counted once), overflow skip on
//                      every rank together, fused update of the local OS shard, then the updated
//                      parameters spread back to the P shards (AllGather, or Broadcast for the
//                      whole-tensor layout), asynchronously: gather(b) waits for bucket b only.
// Reductions run in fp32 whatever the gradient dtype. A component whose factor is 1 allocates no
// scratch and issues no collective.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/consistency_check.hpp"
#include "amsp/core/buffer.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"
#include "amsp/core/tensor_traits.hpp"
#include "amsp/engine/bucket_geometry.hpp"
#include "amsp/engine/buffer_pool.hpp"
#include "amsp/engine/expected_traffic.hpp"
#include "amsp/engine/options.hpp"
#include "amsp/engine/param_groups.hpp"
#include "amsp/engine/space.hpp"
#include "amsp/engine/space_memory.hpp"
#include "amsp/sharding/groups.hpp"
#include "amsp/sharding/policy.hpp"

namespace amsp {

/// Bytes of model states one rank holds (MemoryReport::model_states() is the paper's
/// 2Φ/s_p + 2Φ/s_g + 12Φ/s_os for bf16 + AdamW, over the padded bucket sizes), plus scratch.
struct MemoryReport {
  std::size_t params = 0;            ///< P store: the parameter shard in the compute dtype
  std::size_t grads = 0;             ///< G store: the gradient-accumulation shard
  std::size_t optimizer_states = 0;  ///< OS store: fp32 master weights and the rule's states
  std::size_t scratch = 0;           ///< gather/reduce scratch high-water mark, fp32 OS gradients

  [[nodiscard]] std::size_t model_states() const { return params + grads + optimizer_states; }
};

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT = float, element_type GradT = ParamT,
          class Space = HostSerial>
class ShardedOptimizer {
  static_assert(std::is_same_v<ParamT, float> || std::is_same_v<ParamT, bf16>,
                "amsp: parameters are fp32 or bf16");
  static_assert(std::is_same_v<GradT, float> || std::is_same_v<GradT, bf16>, "amsp: gradients are fp32 or bf16");

public:
  using param_type = ParamT;
  using grad_type = GradT;
  using space_type = Space;
  /// The memory operations of Space (amsp::HostMemory for the host spaces): where the stores live.
  using memory_type = typename detail::space_traits<Space>::memory;
  template <class T>
  using store = typename memory_type::template buffer<T>;

  /// Collective over every rank of `world`, which must fill `mesh`. Validates the plan (its rule
  /// is named in the error) and the buckets, builds the sub-communicators, allocates the stores.
  /// `space` configures the execution space (amsp::CudaAsync: the user's compute stream).
  ShardedOptimizer(Comm& world, const Mesh& mesh, const Plan& plan, Rule rule, std::vector<BucketSpec> buckets,
                   EngineOptions options = {}, const space_config_t<Space>& space = {})
      : world_(&world), mesh_(checked_mesh(mesh, world)), groups_(mesh, plan), rule_(rule),
        options_(options), rank_(world.rank()),
        check_collectives_(options.check_collectives || comm::collective_checks_requested()),
        space_(detail::space_traits<Space>::make(space)), mem_(detail::space_traits<Space>::make_memory(space_)) {
    check(options.os_layout == OsLayout::even_split || plan.g == plan.p, "engine.whole_tensor_layout",
          "the whole-tensor optimizer-state layout needs s_g = s_p, but plan ", to_string(plan), " has s_g = ",
          to_string(plan.g), " and s_p = ", to_string(plan.p));
    check(!buckets.empty(), "engine.buckets", "a ShardedOptimizer needs at least one bucket");
    split_communicators();
    for (BucketSpec& spec : buckets) add_bucket(std::move(spec));
    assign_param_groups();
    set_rule(rule);
    if constexpr (requires { mem_.reserve_norm(std::size_t{}); }) {
      std::size_t largest = 0;  // a device space sizes its norm workspace once, here
      for (const Bucket& b : buckets_) largest = std::max(largest, os_elements(b));
      mem_.reserve_norm(largest);
    }
  }

  /// The same, with the plan given as compile-time policy types.
  template <class KP, class KG, class KOS>
  ShardedOptimizer(Comm& world, const Mesh& mesh, ShardPolicy<KP> p, ShardPolicy<KG> g, ShardPolicy<KOS> os,
                   Rule rule, std::vector<BucketSpec> buckets, EngineOptions options = {},
                   const space_config_t<Space>& space = {})
      : ShardedOptimizer(world, mesh, plan_of(p, g, os, mesh), rule, std::move(buckets), options, space) {}

  ShardedOptimizer(const ShardedOptimizer&) = delete;
  ShardedOptimizer& operator=(const ShardedOptimizer&) = delete;

  ~ShardedOptimizer() {
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

  // ---- description ---------------------------------------------------------------------------
  [[nodiscard]] const Mesh& mesh() const { return mesh_; }
  [[nodiscard]] const Plan& plan() const { return groups_.plan(); }
  [[nodiscard]] const PlanGroups& groups() const { return groups_; }
  [[nodiscard]] const Rule& rule() const { return rule_; }
  [[nodiscard]] const EngineOptions& options() const { return options_; }
  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int bucket_count() const { return static_cast<int>(buckets_.size()); }
  [[nodiscard]] const BucketSpec& bucket(int b) const { return at(b).spec; }
  /// The flat layout of bucket b: where each tensor sits inside gather(b) and grad_buffer(b).
  [[nodiscard]] const FlatLayout& layout(int b) const { return at(b).layout; }
  [[nodiscard]] const BucketGeometry& geometry(int b) const { return at(b).geo; }
  [[nodiscard]] int bucket_index(std::string_view name) const {
    for (std::size_t i = 0; i < buckets_.size(); ++i)
      if (buckets_[i].spec.name == name) return static_cast<int>(i);
    fail("engine.unknown_bucket", "no bucket named '", name, "'");
  }
  /// Optimizer steps taken (skipped overflow steps do not count). A device space decides on the
  /// device: there it counts the steps issued, and last_step_result().step those applied.
  [[nodiscard]] std::int64_t steps() const { return step_; }

  // ---- parameters ----------------------------------------------------------------------------
  /// Sets the full value of tensor `name` (every rank passes the same values; each keeps its
  /// shards). Converts from the tensor's dtype. Call before the first step or to overwrite.
  template <tensor_like T>
  void set_tensor(std::string_view name, const T& values) {
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

  /// Starts the AllGather of bucket b's parameters without waiting (the executor's prefetch).
  void prefetch(int b) {
    Bucket& bucket = at(b);
    check(!bucket.gathered && bucket.gather_slot < 0, "engine.gather_twice", "bucket '", bucket.spec.name,
          "' is already gathered or being gathered; release it first");
    if (!p_comm_) return;  // gather(b) hands out the P store once its spread is done
    bucket.gather_slot = gather_pool_.acquire(bucket.geo.n);
    Comm* comm = p_gather_comm_ ? &*p_gather_comm_ : &*p_comm_;
    const ParamT* send = bucket.p_store.data();
    ParamT* recv = gather_pool_.data(bucket.gather_slot);
    const std::size_t count = bucket.geo.p.size();
    const IssueContext at = issue_context();
    Bucket* issuing = &bucket;
    // On the gather stream, after this bucket's update and spread (the AllGather reads what the
    // spread writes), not after the other buckets' updates.
    bucket.gather_done = space_.launch_after(bucket.update_done, [this, comm, send, recv, count, at, issuing] {
      agree<ParamT>(*comm, "P group", comm::op_kind::all_gather, count, issuing->spec.name, at);
      std::vector<comm::Handle> h;
      h.push_back(comm->all_gather_async(send, recv, count));
      return h;
    });
    bucket.gather_ticket = detail::last_ticket(space_);
  }

  /// The full parameters of bucket b in the flat layout layout(b), valid until release(b). With
  /// P replicated this is the P store itself (no copy, no collective). The view is mutable so that
  /// C code holding `float*` needs no const_cast, but writes are not kept: the next step()
  /// rewrites every parameter from the fp32 master weights (use set_tensor to change parameters).
  [[nodiscard]] std::span<ParamT> gather(int b) {
    Bucket& bucket = at(b);
    check(!bucket.gathered, "engine.gather_twice", "bucket '", bucket.spec.name,
          "' is already gathered; release it first");
    if (!p_comm_) {
      detail::user_after(space_, bucket.update_done, bucket.update_ticket);
    } else {
      if (bucket.gather_slot < 0) prefetch(b);
      detail::user_after(space_, bucket.gather_done, bucket.gather_ticket);
    }
    bucket.gathered = true;
    return full_params(bucket);
  }

  /// Writes the full parameters of bucket b into the user's tensors (one per tensor of the
  /// bucket, in order, converting dtype), then releases the bucket.
  void gather_into(int b, std::span<const tensor_view> tensors) {
    Bucket& bucket = at(b);
    check_tensors(bucket, tensors, "parameter");
    const std::span<const ParamT> full = gather(b);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const TensorSlot& slot = bucket.layout.slots()[i];
      visit_dtype(tensors[i].type, [&](auto tag) {
        using E = decltype(tag);
        mem_.convert(lane::user, full.data() + slot.offset, static_cast<E*>(tensors[i].data), slot.numel);
      });
    }
    release(b);
  }

  /// Gives back the gather scratch of bucket b (a no-op with P replicated).
  void release(int b) {
    Bucket& bucket = at(b);
    retire(bucket.gather_done);
    // The next AllGather into this slot (or update of the P store) waits for the user's reads.
    detail::comm_after_user(space_);
    if (bucket.gather_slot >= 0) gather_pool_.release(bucket.gather_slot);
    bucket.gather_slot = -1;
    bucket.gathered = false;
  }

  // ---- gradients -----------------------------------------------------------------------------
  /// Opens a micro-batch; `last` marks the one whose gradients complete the step. Every bucket's
  /// gradients must be handed once per micro-batch.
  void start_micro_batch(bool last = false) {
    check(!last_, "engine.step_pending", "the last micro-batch was handed; call step() before starting another");
    if (open_) require_all_reduced("start_micro_batch");
    open_ = true;
    last_ = last;
    ++micro_batches_;
    for (Bucket& b : buckets_) b.reduced = false;
  }

  /// A buffer of layout(b).buffer_size elements for this micro-batch's full gradients of bucket b;
  /// write (or, with EngineOptions::zero_grad_buffers, the default, accumulate: it starts at zero)
  /// each tensor at its slot offset, then call reduce_gradients(b). Asked again within the
  /// micro-batch, it returns the same buffer with what was written so far.
  [[nodiscard]] std::span<GradT> grad_buffer(int b) {
    Bucket& bucket = at(b);
    require_open(bucket);
    if (bucket.grad_slot == grads_in_g_store) return {bucket.g_store.data(), bucket.geo.n};
    if (bucket.grad_slot < 0) {
      // Nothing to reduce inside the G group and nothing accumulated yet: the user writes straight
      // into the G store, which saves DDP and ZeRO-1 a copy of the whole gradient.
      if (!p_comm_ && !g_split_comm_ && !bucket.accumulated) {
        // the last update read its gradients from the G store
        detail::user_after(space_, bucket.update_done, bucket.update_ticket);
        bucket.grad_slot = grads_in_g_store;
        clear_grad_buffer(bucket.layout, bucket.g_store.data(), bucket.geo.n);
        return {bucket.g_store.data(), bucket.geo.n};
      }
      bucket.grad_slot = grad_pool_.acquire(bucket.geo.n);
      detail::user_after_comm(space_);  // the slot's last reduction read it on the stream
      clear_grad_buffer(bucket.layout, grad_pool_.data(bucket.grad_slot), bucket.geo.n);
    }
    return {grad_pool_.data(bucket.grad_slot), bucket.geo.n};
  }

  /// Hands in the gradients written into grad_buffer(b).
  void reduce_gradients(int b) {
    Bucket& bucket = at(b);
    require_open(bucket);
    check(bucket.grad_slot != no_grad_slot, "engine.no_gradients", "bucket '", bucket.spec.name,
          "': reduce_gradients(b) reads grad_buffer(b), which was not requested this micro-batch");
    const int slot = bucket.grad_slot == grads_in_g_store ? -1 : bucket.grad_slot;
    bucket.grad_slot = no_grad_slot;
    submit_reduction(bucket, slot);
  }

  /// Hands in gradients that live in the user's tensors (one per tensor of the bucket, in order).
  void reduce_gradients(int b, std::span<const tensor_view> grads) {
    Bucket& bucket = at(b);
    require_open(bucket);
    check_tensors(bucket, grads, "gradient");
    const int slot = grad_pool_.acquire(bucket.geo.n);
    detail::user_after_comm(space_);  // the slot's last reduction read it on the stream
    GradT* full = grad_pool_.data(slot);
    zero_padding(bucket.layout, full, bucket.geo.n);
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const TensorSlot& s = bucket.layout.slots()[i];
      visit_dtype(grads[i].type, [&](auto tag) {
        using E = decltype(tag);
        mem_.convert(lane::user, static_cast<const E*>(grads[i].data), full + s.offset, s.numel);
      });
    }
    submit_reduction(bucket, slot);
  }

  // ---- step ----------------------------------------------------------------------------------
  /// Updates every rank's OS shard and spreads the new parameters. `loss_scale` is the factor the
  /// loss was multiplied by (its inverse is folded into the update). Collective over the world.
  StepResult step(float loss_scale = 1.0f) {
    check(last_, "engine.step_without_gradients",
          "step() needs the gradients of a last micro-batch: call start_micro_batch(true) and hand every bucket");
    require_all_reduced("step");
    check_loss_scale(loss_scale);
    const double average = options_.average_gradients ? 1.0 / (double(mesh_.world_size()) * micro_batches_) : 1.0;
    // Host spaces: the reduction chains' errors are thrown here. A device space leaves them to
    // the stream (the norm task comes after them in its FIFO) and reports errors later.
    retire_all(reductions_);
    // The step's stream work rewrites stores the user's compute may still read (the P store with P
    // replicated, the G store handed out by grad_buffer).
    detail::comm_after_user(space_);
    const std::optional<StepDecision> decision = decide(loss_scale, average);
    StepResult result;
    if (decision) result = StepResult{decision->skipped, decision->grad_norm, decision->clip_coefficient, decision->step};
    if (!decision || !decision->skipped) {
      // A device space decides on the device: it counts the steps issued here, its device
      // decision counts those applied (last_step_result()).
      step_ = decision ? decision->step : step_ + 1;
      auto group_rules = std::make_shared<std::vector<Rule>>();
      for (const ParamGroup& g : groups_table_.values()) group_rules->push_back(detail::rule_for_group(rule_, g));
      const float grad_scale = decision ? decision->grad_scale : 1.0f;
      for (Bucket& b : buckets_) update_and_spread(b, group_rules, UpdateArgs{step_, grad_scale});
    }
    result.step = step_;
    open_ = last_ = false;
    micro_batches_ = 0;
    for (Bucket& b : buckets_) b.accumulated = b.reduced = false;
    last_result_ = result;
    return result;
  }

  /// Waits for every outstanding spread (step() leaves them running to overlap the next forward)
  /// and gradient reduction (reduce_gradients leaves them running to overlap the backward).
  void synchronize() {
    wait_all(reductions_);
    wait_all(deferred_);
    for (Bucket& b : buckets_) {
      wait_spread(b);
      b.gather_done.wait();
    }
  }

  /// The outcome of the last step(). On a host space it is what step() returned. On a device
  /// space step() decides on the device and returns only `step` (the steps issued); this waits
  /// for the step's work (a host synchronisation: call it when the values are needed, e.g. for
  /// logging every N steps) and reads the decision back.
  [[nodiscard]] StepResult last_step_result() {
    if constexpr (requires { mem_.read_decision(); }) {
      synchronize();
      return mem_.read_decision();
    } else {
      return last_result_;
    }
  }

  // ---- reports -------------------------------------------------------------------------------
  [[nodiscard]] MemoryReport memory() const {
    MemoryReport m;
    for (const Bucket& b : buckets_) {
      m.params += b.p_store.size_bytes();
      m.grads += b.g_store.size_bytes();
      m.optimizer_states += b.master.size_bytes();
      for (const auto& s : b.states) m.optimizer_states += s.size_bytes();
      m.scratch += b.os_grad.size_bytes();
    }
    m.scratch += gather_pool_.bytes() + grad_pool_.bytes() + work_pool_.bytes();
    return m;
  }

  /// Bytes this rank sends per step under this engine's plan, layout and options, for
  /// `micro_batches` micro-batches and `gathers_per_micro_batch` AllGathers of each bucket.
  [[nodiscard]] TrafficExpectation expected_traffic(int micro_batches, int gathers_per_micro_batch = 1) const {
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

  // ---- shard access (checkpoints: amsp/io) ---------------------------------------------------
  /// One contiguous run of this rank's optimizer-state shard of a bucket: `count` elements at
  /// `bucket_offset` of the bucket's flat layout, stored at `shard_offset` of master_shard(b) and
  /// of every state_shard(b, s). Even split: one run; whole-tensor layout: one per owned segment.
  struct OsShardRun {
    std::size_t bucket_offset = 0;
    std::size_t shard_offset = 0;
    std::size_t count = 0;
  };
  [[nodiscard]] std::vector<OsShardRun> os_shard_runs(int b) const {
    std::vector<OsShardRun> runs;
    for (const OsPiece& piece : os_pieces(at(b))) runs.push_back({piece.bucket_offset, piece.os_offset, piece.count});
    return runs;
  }
  /// This rank's fp32 master weights of bucket b (os_shard_runs(b) says where each run sits).
  [[nodiscard]] std::span<float> master_shard(int b) {
    Bucket& bucket = at(b);
    wait_spread(bucket);
    return {bucket.master.data(), bucket.master.size()};
  }
  /// This rank's optimizer state s (0 <= s < Rule::state_count, e.g. AdamW: 0 = m, 1 = v) of bucket b.
  [[nodiscard]] std::span<float> state_shard(int b, int s) {
    Bucket& bucket = at(b);
    check(s >= 0 && s < Rule::state_count, "engine.unknown_state", "state index ", s, " is outside [0, ",
          Rule::state_count, ") for rule ", Rule::name);
    wait_spread(bucket);
    return {bucket.states[static_cast<std::size_t>(s)].data(), bucket.states[static_cast<std::size_t>(s)].size()};
  }
  /// Replaces the rule's hyperparameters (validated first, also as every parameter group sees
  /// them); the next step() uses them.
  void set_rule(const Rule& rule) {
    rule.validate();
    for (const ParamGroup& g : groups_table_.values()) detail::rule_for_group(rule, g).validate();
    rule_ = rule;
  }
  /// Sets the learning rate the next step() uses (a schedule calls it before each step); each
  /// parameter group scales it by its lr_scale.
  void set_lr(float lr)
    requires requires(Rule& r) { r.lr = lr; }
  {
    Rule changed = rule_;
    changed.lr = lr;
    set_rule(changed);
  }
  /// The group tensor `name` is updated with (ParamGroup{} unless EngineOptions::param_groups names it).
  [[nodiscard]] const ParamGroup& param_group(std::string_view name) const {
    for (const Bucket& b : buckets_)
      for (std::size_t k = 0; k < b.layout.slots().size(); ++k)
        if (b.layout.slots()[k].name == name) return groups_table_.values()[static_cast<std::size_t>(b.slot_group[k])];
    fail("engine.unknown_tensor", "no tensor named '", name, "' in any bucket");
  }
  /// Sets the optimizer step count (what steps() reports; the next step() applies step + 1).
  void set_steps(std::int64_t steps) {
    check(steps >= 0, "engine.step_count", "step count ", steps, " must be >= 0");
    if constexpr (requires { mem_.set_steps(steps); }) {  // a device space's count lives on the device
      synchronize();
      mem_.set_steps(steps);
    }
    step_ = steps;
  }
  /// Collective over the world: rewrites every P shard from the fp32 master weights (after they
  /// were written through master_shard(b)), exactly as step() writes parameters, then spreads
  /// them. Between micro-batches only.
  void refresh_params_from_master() {
    check(!open_, "engine.step_pending", "refresh_params_from_master() inside a micro-batch");
    for (Bucket& b : buckets_) {
      wait_spread(b);
      check(!b.gathered && b.gather_slot < 0, "engine.gathered_during_step", "bucket '", b.spec.name,
            "' is still gathered; release it before refresh_params_from_master()");
      refresh_and_spread(b);
    }
  }

private:
  // What a collective's check records about the host's position in the schedule, taken when the
  // host issues the work (the stream may run it later, when the host has moved on).
  struct IssueContext {
    std::int64_t step = 0;
    int micro_batch = 0;
    bool last = false;
  };
  [[nodiscard]] IssueContext issue_context() const { return {step_, micro_batches_ - 1, last_}; }

  static constexpr int no_grad_slot = -1;
  static constexpr int grads_in_g_store = -2;  // grad_buffer(b) handed out the G store itself

  struct Bucket {
    BucketSpec spec;
    FlatLayout layout;
    BucketGeometry geo;
    store<ParamT> p_store;              // the P shard (the full bucket when P is replicated)
    store<GradT> g_store;               // the G shard, accumulated over micro-batches
    store<float> master;                // the OS shard: fp32 master weights...
    std::vector<store<float>> states;   // ...and the rule's states
    store<float> os_grad;               // fp32 OS-shard gradients when they cannot live in the G store
    std::vector<OwnedSegment> segments; // whole-tensor layout: this P shard's segments and owners
    std::vector<int> slot_group;        // each tensor's parameter group
    std::vector<detail::GroupRun> update_runs;  // the OS shard cut into runs of one group each
    int spread_position = 0;            // position in the spread group (owner index)
    // per micro-batch / step
    // per micro-batch / step; host-side bookkeeping, touched by the caller's thread only
    int gather_slot = -1;
    comm::Handle gather_done;           // event: the AllGather into the gather slot
    std::uint64_t gather_ticket = 0;    // its position on the space's stream (device spaces)
    bool gathered = false;
    int grad_slot = no_grad_slot;
    comm::Handle update_done;           // event: the update of the OS shard and the spread to the P store
    std::uint64_t update_ticket = 0;    // its position on the space's stream (device spaces)
    bool reduced = false;
    bool accumulated = false;
  };

  // A contiguous run of the OS shard: `count` elements at `os_offset` of the OS store that sit at
  // `bucket_offset` of the bucket.
  struct OsPiece {
    std::size_t bucket_offset;
    std::size_t os_offset;
    std::size_t count;
  };

  static const Mesh& checked_mesh(const Mesh& mesh, const Comm& world) {
    mesh.check_world_size(world.size());
    return mesh;
  }

  [[nodiscard]] Bucket& at(int b) {
    check(b >= 0 && b < bucket_count(), "engine.unknown_bucket", "bucket index ", b, " is outside [0, ",
          bucket_count(), ")");
    return buckets_[static_cast<std::size_t>(b)];
  }
  [[nodiscard]] const Bucket& at(int b) const { return const_cast<ShardedOptimizer*>(this)->at(b); }

  [[nodiscard]] bool whole_tensor() const { return options_.os_layout == OsLayout::whole_tensor; }

  // Sub-communicators are split in a fixed order on every rank; a group of one is never built.
  void split_communicators() {
    const auto make = [&](const GroupSet& set, std::optional<Comm>& out) {
      if (set.group_size() > 1) out.emplace(world_->split(set));
    };
    make(groups_.p(), p_comm_);
    make(groups_.g_split(), g_split_comm_);
    make(groups_.os_split(), os_split_comm_);
    make(groups_.spread(), spread_comm_);
    make(groups_.os_replica(), os_replica_comm_);
    make(groups_.os(), os_comm_);
    // The gather stream runs beside the communication stream: its AllGathers get a communicator
    // of their own, split last so that every rank splits in the same order.
    if constexpr (Space::concurrent_streams) {
      check(groups_.p().group_size() == 1 || comm::concurrent_calls_allowed(*world_), "engine.concurrent_calls",
            "plan ", to_string(plan()), " shards P, so this space's gather stream issues collectives beside its "
            "communication stream, which this communicator does not allow (MPI: initialise with MPI_THREAD_MULTIPLE)");
      make(groups_.p(), p_gather_comm_);
    }
  }

  void add_bucket(BucketSpec spec) {
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

  // Every tensor gets its group; the OS shard of every bucket is cut into runs of one group.
  void assign_param_groups() {
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

  [[nodiscard]] std::vector<OsPiece> os_pieces(const Bucket& b) const {
    if (!whole_tensor()) return {OsPiece{b.geo.os.begin, 0, b.geo.os.size()}};
    std::vector<OsPiece> pieces;
    for (const OwnedSegment& s : b.segments)
      if (s.owner == b.spread_position) pieces.push_back({b.geo.p.begin + s.offset_in_p, s.offset_in_owner, s.size});
    return pieces;
  }
  [[nodiscard]] std::size_t os_elements(const Bucket& b) const { return b.master.size(); }
  [[nodiscard]] float* os_grads(Bucket& b) {
    return b.os_grad.empty() && !whole_tensor() ? reinterpret_cast<float*>(b.g_store.data()) + b.geo.os_in_g
                                                : b.os_grad.data();
  }

  // `values` in memory `where` (host, or the engine's own memory kind).
  template <class E>
  void set_slot(Bucket& b, const TensorSlot& slot, const E* values, memory_kind where) {
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

  [[nodiscard]] std::span<ParamT> full_params(Bucket& b) {
    if (!p_comm_) return {b.p_store.data(), b.p_store.size()};
    return {gather_pool_.data(b.gather_slot), b.geo.n};
  }

  // The host reads or writes the stores the last update and spread touched.
  void wait_spread(Bucket& b) { b.update_done.wait(); }

  // What grad_buffer(b) hands out: all zeros (EngineOptions::zero_grad_buffers), else only the
  // padding is zeroed and the user overwrites every tensor element.
  // On the user's lane: the buffer is the user's until reduce_gradients(b).
  void clear_grad_buffer(const FlatLayout& layout, GradT* full, std::size_t n) {
    if (options_.zero_grad_buffers) mem_.fill_zero(lane::user, full, n);
    else zero_padding(layout, full, n);
  }

  void zero_padding(const FlatLayout& layout, GradT* full, std::size_t n) {
    std::size_t cursor = 0;
    for (const TensorSlot& s : layout.slots()) {
      if (s.offset > cursor) mem_.fill_zero(lane::user, full + cursor, s.offset - cursor);
      cursor = s.offset + s.numel;
    }
    if (n > cursor) mem_.fill_zero(lane::user, full + cursor, n - cursor);
  }

  void check_tensors(const Bucket& b, std::span<const tensor_view> tensors, const char* what) const {
    check_equal(tensors.size(), b.layout.slots().size(), "engine.tensor_count",
                std::string("number of ") + what + " tensors handed for bucket '" + b.spec.name + "'");
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const TensorSlot& s = b.layout.slots()[i];
      check_equal(tensors[i].numel, s.numel, "engine.tensor_size",
                  std::string(what) + " element count of tensor '" + s.name + "'");
      check(tensors[i].space == memory_type::kind, "engine.memory_space", what, " tensor '", s.name, "' is in ",
            name_of(tensors[i].space), " memory; this engine holds ", name_of(memory_type::kind), " memory");
    }
  }

  void require_open(const Bucket& b) const {
    check(open_, "engine.no_micro_batch", "bucket '", b.spec.name,
          "': call start_micro_batch(last) before handing gradients");
    check(!b.reduced, "engine.gradient_twice", "bucket '", b.spec.name,
          "': gradients were already handed in this micro-batch");
  }

  void require_all_reduced(const char* caller) const {
    std::string missing;
    for (const Bucket& b : buckets_)
      if (!b.reduced) missing += (missing.empty() ? "'" : ", '") + b.spec.name + "'";
    check(open_ && missing.empty(), caller == std::string_view("step") ? "engine.step_without_gradients" : "engine.incomplete_micro_batch",
          caller, "(): the current micro-batch lacks the gradients of bucket(s) ",
          missing.empty() ? std::string("(none: no micro-batch was started)") : missing);
  }

  // Hands the bucket's gradients of this micro-batch (in grad-pool slot `slot`, or already in the
  // G store when slot < 0) to the communication stream: the whole chain runs there in order, and
  // the host keeps only the decisions (first micro-batch? last?) it took now.
  void submit_reduction(Bucket& b, int slot) {
    detail::comm_after_user(space_);  // the chain reads what the user's compute wrote
    const bool first = !b.accumulated;
    const IssueContext at = issue_context();
    b.accumulated = true;
    b.reduced = true;
    Bucket* bucket = &b;
    reductions_.push_back(space_.submit([this, bucket, slot, first, at] {
      if (slot >= 0) {
        reduce(*bucket, grad_pool_.data(slot), first, at);
        grad_pool_.release(slot);
      }
      if (at.last) finish(*bucket, at);
    }));
  }

  // One micro-batch's full gradients of a bucket: ReduceScatter through the P group and the G
  // split (fp32), accumulate into the G shard (the first micro-batch writes it). Runs on the
  // communication stream.
  void reduce(Bucket& b, const GradT* full, bool first, const IssueContext& at) {
    const BucketGeometry& geo = b.geo;
    int x_slot = -1;
    const float* x = nullptr;
    if constexpr (std::is_same_v<GradT, float>) {
      x = full;
    } else {
      x_slot = work_pool_.acquire(geo.n);
      float* wide = work_pool_.data(x_slot);
      mem_.convert(lane::comm, full, wide, geo.n);
      x = wide;
    }
    // Where the last reduction stage writes: straight into the G store when it can.
    const bool direct = std::is_same_v<GradT, float> && first;
    int z_slot = -1;
    float* z = nullptr;
    if (p_comm_ || g_split_comm_) {
      if (direct) z = reinterpret_cast<float*>(b.g_store.data());
      else {
        z_slot = work_pool_.acquire(geo.g.size());
        z = work_pool_.data(z_slot);
      }
    }
    if (p_comm_ && g_split_comm_) {
      const int y_slot = work_pool_.acquire(geo.p.size());
      float* y = work_pool_.data(y_slot);
      agree<float>(*p_comm_, "P group", comm::op_kind::reduce_scatter, geo.p.size(), b.spec.name, at);
      p_comm_->reduce_scatter(x, y, geo.p.size(), comm::reduce_op::sum);
      agree<float>(*g_split_comm_, "G split", comm::op_kind::reduce_scatter, geo.g.size(), b.spec.name, at);
      g_split_comm_->reduce_scatter(y, z, geo.g.size(), comm::reduce_op::sum);
      work_pool_.release(y_slot);
    } else if (p_comm_) {
      agree<float>(*p_comm_, "P group", comm::op_kind::reduce_scatter, geo.g.size(), b.spec.name, at);
      p_comm_->reduce_scatter(x, z, geo.g.size(), comm::reduce_op::sum);
    } else if (g_split_comm_) {
      agree<float>(*g_split_comm_, "G split", comm::op_kind::reduce_scatter, geo.g.size(), b.spec.name, at);
      g_split_comm_->reduce_scatter(x, z, geo.g.size(), comm::reduce_op::sum);
    } else {
      z = const_cast<float*>(x);  // nothing to reduce inside the G group: the G shard is the full bucket
    }
    if (!(direct && z == reinterpret_cast<float*>(b.g_store.data()))) accumulate(b, z, first);
    if (z_slot >= 0) work_pool_.release(z_slot);
    if (x_slot >= 0) work_pool_.release(x_slot);
  }

  void accumulate(Bucket& b, const float* z, bool first) {
    mem_.accumulate(lane::comm, b.g_store.data(), z, b.g_store.size(), first);
  }

  // Last micro-batch: G shard -> OS shard (ReduceScatter, or Reduce to the owner), then the
  // AllReduce across OS replicas. Runs on the communication stream.
  void finish(Bucket& b, const IssueContext& at) {
    const BucketGeometry& geo = b.geo;
    int wide_slot = -1;
    float* g32 = nullptr;
    if constexpr (std::is_same_v<GradT, float>) {
      g32 = b.g_store.data();
    } else {
      wide_slot = work_pool_.acquire(geo.g.size());
      g32 = work_pool_.data(wide_slot);
      mem_.convert(lane::comm, b.g_store.data(), g32, geo.g.size());
    }
    if (!whole_tensor()) {
      if (os_split_comm_) agree<float>(*os_split_comm_, "OS split", comm::op_kind::reduce_scatter, geo.os.size(), b.spec.name, at);
      if (os_split_comm_) os_split_comm_->reduce_scatter(g32, g32 + geo.os_in_g, geo.os.size(), comm::reduce_op::sum);
      if (!b.os_grad.empty()) mem_.copy(lane::comm, b.os_grad.data(), g32 + geo.os_in_g, geo.os.size());
    } else {
      for (const OwnedSegment& s : b.segments) {
        float* seg = g32 + s.offset_in_p;
        if (spread_comm_) agree<float>(*spread_comm_, "spread group", comm::op_kind::reduce, s.size, b.spec.name, at, s.owner);
        if (spread_comm_) spread_comm_->reduce(seg, seg, s.size, comm::reduce_op::sum, s.owner);
        if (s.owner == b.spread_position) mem_.copy(lane::comm, b.os_grad.data() + s.offset_in_owner, seg, s.size);
      }
    }
    if (os_replica_comm_ && os_elements(b) > 0)
      agree<float>(*os_replica_comm_, "OS replicas", comm::op_kind::all_reduce, os_elements(b), b.spec.name, at);
    if (os_replica_comm_ && os_elements(b) > 0)
      os_replica_comm_->all_reduce(os_grads(b), os_grads(b), os_elements(b), comm::reduce_op::sum);
    if (wide_slot >= 0) work_pool_.release(wide_slot);
  }

  // The global norm and the step's decision, one task on the communication stream after every
  // reduction chain: each rank's sum of squares of its OS shards, the AllReduce over the OS group
  // (each OS shard counted once; every OS group computes bitwise the same sum, so every rank takes
  // the same decision), then norm, clip coefficient and overflow skip. A host space waits for it
  // (the caller learns the decision now); a device space leaves it on the stream, and its updates
  // read the decision there.
  std::optional<StepDecision> decide(float loss_scale, double average) {
    const bool need_norm = needs_grad_norm(options_.max_grad_norm, options_.skip_nonfinite);
    const IssueContext at = issue_context();
    const std::int64_t steps_so_far = step_;
    auto decision = std::make_shared<std::optional<StepDecision>>();
    comm::Handle decided = space_.submit([this, need_norm, loss_scale, average, at, steps_so_far, decision] {
      if (need_norm) {
        mem_.reset_norm();
        for (Bucket& b : buckets_) mem_.add_sum_of_squares(os_grads(b), os_elements(b));
        if (os_comm_) {
          agree<double>(*os_comm_, "OS group", comm::op_kind::all_reduce, 1, "grad_norm", at);
          os_comm_->all_reduce(mem_.norm_sum(), mem_.norm_sum(), 1, comm::reduce_op::sum);
        }
      }
      *decision = mem_.decide(average, loss_scale, options_, steps_so_far);
    });
    if constexpr (detail::device_space<Space>) {
      retire(decided);
      return std::nullopt;
    } else {
      decided.wait();
      return *decision;
    }
  }

  // Host spaces: the host is done with what the event's work wrote, so wait now (its errors are
  // thrown here). A device space never waits on the host inside a step: the event's work is
  // ordered on the stream already, and its errors are thrown by synchronize() or the destructor.
  void retire(comm::Handle& event) {
    if constexpr (detail::device_space<Space>) {
      if (event.pending()) deferred_.push_back(std::move(event));
      for (std::size_t i = 0; i < deferred_.size();)  // forget the completed ones, throw their errors
        if (deferred_[i].test()) deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(i));
        else ++i;
    } else {
      event.wait();
    }
  }

  // retire() for several events; a host space waits every one and throws the first error only
  // once all have completed (none of their buffers is in use any more).
  void retire_all(std::vector<comm::Handle>& events) {
    if constexpr (detail::device_space<Space>) {
      for (comm::Handle& h : events) retire(h);
      events.clear();
    } else {
      wait_all(events);
    }
  }

  // The fused update of the bucket's OS shard and the spread of the new parameters, one task on
  // the communication stream (HostSerial: run now, the spread left in flight), so that with an
  // asynchronous space step() returns once the norm is known and the update of bucket b overlaps
  // the next forward up to gather(b). update_done is its event.
  void update_and_spread(Bucket& b, std::shared_ptr<const std::vector<Rule>> group_rules, UpdateArgs args) {
    retire(b.update_done);
    check(!b.gathered && b.gather_slot < 0, "engine.gathered_during_step", "bucket '", b.spec.name,
          "' is still gathered; release it before step()");
    Bucket* bucket = &b;
    const IssueContext at = issue_context();
    b.update_done = space_.launch([this, bucket, group_rules, args, at] {
      update(*bucket, *group_rules, args);
      return spread_collectives(*bucket, at);
    });
    b.update_ticket = detail::last_ticket(space_);
  }

  void update(Bucket& b, const std::vector<Rule>& group_rules, const UpdateArgs& args) {
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

  // The P store rewritten from the master weights (ParamT rounding, as step() writes it), then
  // the spread, one task on the communication stream.
  void refresh_and_spread(Bucket& b) {
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

  // The updated parameters of this rank's OS shard go back to every rank sharing its P shard.
  std::vector<comm::Handle> spread_collectives(Bucket& b, const IssueContext& at) {
    std::vector<comm::Handle> handles;
    if (!spread_comm_) return handles;
    ParamT* p = b.p_store.data();
    if (!whole_tensor()) {
      agree<ParamT>(*spread_comm_, "spread group", comm::op_kind::all_gather, b.geo.os.size(), b.spec.name, at);
      handles.push_back(spread_comm_->all_gather_async(p + b.geo.os_in_p, p, b.geo.os.size()));
    } else {
      for (const OwnedSegment& s : b.segments) {
        agree<ParamT>(*spread_comm_, "spread group", comm::op_kind::broadcast, s.size, b.spec.name, at, s.owner);
        handles.push_back(spread_comm_->broadcast_async(p + s.offset_in_p, p + s.offset_in_p, s.size, s.owner));
      }
    }
    return handles;
  }

  // check_collectives: the ranks of `on` agree on the collective they issue on it next (rule
  // comm.collective_mismatch), before they issue it.
  template <class T>
  void agree(Comm& on, std::string_view group, comm::op_kind kind, std::size_t count, std::string_view label,
             const IssueContext& at, int root = 0) {
    detail::before_collective(space_);  // every collective of the schedule is issued right after this
    if (!check_collectives_) return;
    // Gathers may be issued ahead (prefetch), so they carry the step only; reductions also carry
    // the micro-batch and whether it is the last, so that a rank stepping early is caught at once.
    const bool gather = kind == comm::op_kind::all_gather && group == "P group";
    const bool stepping = group == "OS group" || (group == "spread group" && kind != comm::op_kind::reduce);
    const std::string_view phase = gather ? "forward" : stepping ? "step" : at.last ? "last backward" : "backward";
    // One checker per stream: each keeps per-communicator state that only its stream touches.
    comm::CollectiveChecker& checker = p_gather_comm_ && &on == &*p_gather_comm_ ? gather_checker_ : checker_;
    checker(on, comm::CollectiveCall{.kind = kind, .type = dtype_of_v<T>, .count = count, .root = root,
                                      .label = label, .group = group, .phase = phase, .group_size = on.size(),
                                      .step = at.step, .micro_batch = gather || stepping ? -1 : at.micro_batch});
  }

  Comm* world_;
  Mesh mesh_;
  PlanGroups groups_;
  Rule rule_;
  EngineOptions options_;
  int rank_;
  detail::GroupTable groups_table_;
  std::optional<Comm> p_comm_, g_split_comm_, os_split_comm_, spread_comm_, os_replica_comm_, os_comm_;
  std::optional<Comm> p_gather_comm_;  // the P group again, for the gather stream (concurrent streams only)
  std::vector<Bucket> buckets_;
  detail::BufferPool<ParamT, memory_type::template buffer> gather_pool_;
  detail::BufferPool<GradT, memory_type::template buffer> grad_pool_;
  detail::BufferPool<float, memory_type::template buffer> work_pool_;
  std::vector<comm::Handle> reductions_;  // events of the reduction chains since the last step
  std::vector<comm::Handle> deferred_;    // device spaces: events nobody waited for yet (retire)
  StepResult last_result_;
  bool open_ = false;
  bool last_ = false;
  int micro_batches_ = 0;
  std::int64_t step_ = 0;
  bool check_collectives_ = false;
  comm::CollectiveChecker checker_;         // used on the space's communication stream only
  comm::CollectiveChecker gather_checker_;  // used on the space's gather stream only
  Space space_;  // destroyed before the stores, so its streams finish before anything they touch goes
  memory_type mem_;  // the space's memory operations (a device space: its step control, workspaces)
};

}  // namespace amsp
