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
//       opt.release(b);  opt.reduce_gradients(b);
//     }
//   }
//   opt.step();
//
// The step schedule (docs/engine.md): every micro-batch reduces each bucket's gradients through
// the P group and the G split into the G shard; the last one also through the OS split and across
// OS replicas; step() takes the global norm, decides (clip, overflow skip), runs the fused update
// of the OS shard and spreads the new parameters asynchronously (gather(b) waits for bucket b
// only). With EngineOptions::update_in_backward (no norm needed) each bucket's update and spread
// follow its last reduction instead, in the backward. Reductions run in fp32. Each stage is a type
// per policy of its group (detail/engine_stages.hpp): over a group of one rank it holds no
// communicator and no scratch; the runtime Plan picks the type of each stage at construction.
//
// This header holds the class: its interface, documented, and its state (what it keeps per
// bucket: detail/engine_bucket.hpp). The bodies of the longer member functions live by purpose in
// amsp/engine/detail/ (included at the end): engine_setup.hpp (construction, sub-communicators,
// stores, parameter groups, set_tensor), engine_buffers.hpp (gathers and gradient buffers, ordered
// with the space's streams), engine_reduction.hpp (the reduction chain), engine_step.hpp (norm,
// decision, update and spread), engine_state_access.hpp (reports, shard access), engine_checks.hpp
// (call preconditions, the collective consistency check).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
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
#include "amsp/engine/detail/engine_bucket.hpp"
#include "amsp/engine/detail/engine_stages.hpp"
#include "amsp/engine/detail/staging_ring.hpp"
#include "amsp/engine/expected_traffic.hpp"
#include "amsp/engine/memory_report.hpp"
#include "amsp/engine/options.hpp"
#include "amsp/engine/param_groups.hpp"
#include "amsp/engine/space.hpp"
#include "amsp/engine/space_memory.hpp"
#include "amsp/sharding/groups.hpp"
#include "amsp/sharding/policy.hpp"

namespace amsp {

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
    construct(std::move(buckets));
  }

  /// The same, with the plan given as compile-time policy types.
  template <class KP, class KG, class KOS>
  ShardedOptimizer(Comm& world, const Mesh& mesh, ShardPolicy<KP> p, ShardPolicy<KG> g, ShardPolicy<KOS> os,
                   Rule rule, std::vector<BucketSpec> buckets, EngineOptions options = {},
                   const space_config_t<Space>& space = {})
      : ShardedOptimizer(world, mesh, plan_of(p, g, os, mesh), rule, std::move(buckets), options, space) {}

  ShardedOptimizer(const ShardedOptimizer&) = delete;
  ShardedOptimizer& operator=(const ShardedOptimizer&) = delete;

  ~ShardedOptimizer();

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
  [[nodiscard]] int bucket_index(std::string_view name) const;
  /// Optimizer steps taken (skipped overflow steps do not count). A device space decides on the
  /// device: there it counts the steps issued, and last_step_result().step those applied.
  [[nodiscard]] std::int64_t steps() const { return step_; }

  // ---- parameters ----------------------------------------------------------------------------
  /// Sets the full value of tensor `name` (every rank passes the same values; each keeps its
  /// shards). Converts from the tensor's dtype. Call before the first step or to overwrite.
  template <tensor_like T>
  void set_tensor(std::string_view name, const T& values);

  /// Starts the AllGather of bucket b's parameters without waiting (the executor's prefetch).
  void prefetch(int b);

  /// The full parameters of bucket b in the flat layout layout(b), valid until release(b). With
  /// P replicated this is the P store itself (no copy, no collective). The view is mutable so that
  /// C code holding `float*` needs no const_cast, but writes are not kept: the next step()
  /// rewrites every parameter from the fp32 master weights (use set_tensor to change parameters).
  [[nodiscard]] std::span<ParamT> gather(int b);

  /// Writes the full parameters of bucket b into the user's tensors (one per tensor of the
  /// bucket, in order, converting dtype), then releases the bucket.
  void gather_into(int b, std::span<const tensor_view> tensors);

  /// Gives back the gather scratch of bucket b (a no-op with P replicated).
  void release(int b);

  // ---- gradients -----------------------------------------------------------------------------
  /// Opens a micro-batch; `last` marks the one whose gradients complete the step. Every bucket's
  /// gradients must be handed once per micro-batch.
  void start_micro_batch(bool last = false);

  /// A buffer of layout(b).buffer_size elements for this micro-batch's full gradients of bucket b;
  /// write (or, with EngineOptions::zero_grad_buffers, the default, accumulate: it starts at zero)
  /// each tensor at its slot offset, then call reduce_gradients(b). Asked again within the
  /// micro-batch, it returns the same buffer with what was written so far.
  [[nodiscard]] std::span<GradT> grad_buffer(int b);

  /// Hands in the gradients written into grad_buffer(b).
  void reduce_gradients(int b);

  /// Hands in gradients that live in the user's tensors (one per tensor of the bucket, in order).
  void reduce_gradients(int b, std::span<const tensor_view> grads);

  // ---- step ----------------------------------------------------------------------------------
  /// Updates every rank's OS shard and spreads the new parameters. `loss_scale` is the factor the
  /// loss was multiplied by (its inverse is folded into the update). Collective over the world.
  StepResult step(float loss_scale = 1.0f);

  /// Waits for every outstanding spread (step() leaves them running to overlap the next forward)
  /// and gradient reduction (reduce_gradients leaves them running to overlap the backward).
  void synchronize();

  /// The outcome of the last step(). On a host space it is what step() returned. On a device
  /// space step() decides on the device and returns only `step` (the steps issued); this waits
  /// for the step's work (a host synchronisation: call it when the values are needed, e.g. for
  /// logging every N steps) and reads the decision back.
  [[nodiscard]] StepResult last_step_result();

  // ---- reports -------------------------------------------------------------------------------
  [[nodiscard]] MemoryReport memory() const;

  /// Frees the pooled scratch no bucket holds (gathers, gradient staging, fp32 reduction buffers)
  /// and returns the bytes freed: after an evaluation that gathered every bucket at once, say,
  /// which grows the gather pool to the whole model (DeepSpeed's empty_partition_cache). Waits for
  /// the engine's streams and, on a device space, the user's stream first. Local to the rank;
  /// buckets gathered or with gradient buffers open keep theirs. The next step grows the pools
  /// again to the training step's bound, allocating (docs/engine.md, "Scratch").
  std::size_t trim_scratch();

  /// Bytes this rank sends per step under this engine's plan, layout and options, for
  /// `micro_batches` micro-batches and `gathers_per_micro_batch` AllGathers of each bucket.
  [[nodiscard]] TrafficExpectation expected_traffic(int micro_batches, int gathers_per_micro_batch = 1) const;

  // ---- shard access (checkpoints: amsp/io) ---------------------------------------------------
  /// One contiguous run of this rank's optimizer-state shard of a bucket: `count` elements at
  /// `bucket_offset` of the bucket's flat layout, stored at `shard_offset` of master_shard(b) and
  /// of every state_shard(b, s). Even split: one run; whole-tensor layout: one per owned segment.
  struct OsShardRun {
    std::size_t bucket_offset = 0;
    std::size_t shard_offset = 0;
    std::size_t count = 0;
  };
  [[nodiscard]] std::vector<OsShardRun> os_shard_runs(int b) const;
  /// This rank's fp32 master weights of bucket b (os_shard_runs(b) says where each run sits).
  [[nodiscard]] std::span<float> master_shard(int b);
  /// This rank's optimizer state s (0 <= s < Rule::state_count, e.g. AdamW: 0 = m, 1 = v) of bucket b.
  [[nodiscard]] std::span<float> state_shard(int b, int s);
  /// Replaces the rule's hyperparameters (validated first, also as every parameter group sees
  /// them); the next step() uses them.
  void set_rule(const Rule& rule);
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
  [[nodiscard]] const ParamGroup& param_group(std::string_view name) const;
  /// Sets the optimizer step count (what steps() reports; the next step() applies step + 1).
  void set_steps(std::int64_t steps);
  /// Collective over the world: rewrites every P shard from the fp32 master weights (after they
  /// were written through master_shard(b)), exactly as step() writes parameters, then spreads
  /// them. Between micro-batches only.
  void refresh_params_from_master();

private:
  // What a collective's check records about the host's position in the schedule, taken when the
  // host issues the work (the stream may run it later, when the host has moved on).
  struct IssueContext {
    std::int64_t step = 0;
    int micro_batch = 0;
    bool last = false;
  };
  [[nodiscard]] IssueContext issue_context() const { return {step_, micro_batches_ - 1, last_}; }

  using Group = detail::GroupStage<Comm>;
  using ShardedParams = detail::ShardedParams<Comm, ParamT, memory_type::template buffer, Space::concurrent_streams>;

  using Bucket = detail::EngineBucket<ParamT, GradT, memory_type::template buffer>;
  using OsPiece = detail::OsPiece;

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
  [[nodiscard]] bool needs_norm() const { return needs_grad_norm(options_.max_grad_norm, options_.skip_nonfinite); }
  // 1 / (world x micro-batches) when averaging; each parameter group's copy of the current rule.
  [[nodiscard]] double gradient_average() const;
  [[nodiscard]] std::shared_ptr<const std::vector<Rule>> step_rules() const;
  // update_in_backward (engine_in_backward.hpp): its constraints; bucket b's update and spread after
  // its last reduction; a hyperparameter change once the step's first such update was issued.
  void check_update_in_backward() const;
  void issue_update_in_backward(Bucket& b);
  void require_no_update_issued(const char* caller) const;

  // The constructor's body: the options' and plan's checks, the stages, the buckets' stores.
  void construct(std::vector<BucketSpec> buckets);

  // Each stage of the schedule from the plan: its group's communicator split from the world (in a
  // fixed order on every rank), or SoloStage for a group of one, which is never split.
  void build_stages();
  void add_bucket(BucketSpec spec);
  // The pools' buffers of bounded use at the largest bucket's size (BufferPool::set_slot_elements).
  void size_pools();
  // Every tensor gets its group; the OS shard of every bucket is cut into runs of one group.
  void assign_param_groups();

  [[nodiscard]] std::vector<OsPiece> os_pieces(const Bucket& b) const;
  [[nodiscard]] std::size_t os_elements(const Bucket& b) const { return b.master.size(); }
  [[nodiscard]] float* os_grads(Bucket& b) {
    return b.os_grad.empty() && !whole_tensor() ? reinterpret_cast<float*>(b.g_store.data()) + b.geo.os_in_g
                                                : b.os_grad.data();
  }

  // `values` in memory `where` (host, or the engine's own memory kind).
  template <class E>
  void set_slot(Bucket& b, const TensorSlot& slot, const E* values, memory_kind where);

  // The full parameters of a gathered bucket: the P store (P replicated) or its gather slot.
  [[nodiscard]] std::span<ParamT> full_params(Bucket& b);
  // The AllGather of bucket b's parameters into a slot of the P stage's gather scratch.
  void issue_gather(Bucket& b, ShardedParams& p);
  // Nothing to reduce inside the G group (P and the G split are groups of one): the G shard is
  // the whole bucket, and the user's gradients can be written straight into the G store.
  [[nodiscard]] bool g_group_is_solo() const;

  // The host reads or writes the stores the last update and spread touched.
  void wait_spread(Bucket& b) { b.update_done.wait(); }

  // What grad_buffer(b) hands out: all zeros (EngineOptions::zero_grad_buffers), else only the
  // padding is zeroed and the user overwrites every tensor element.
  // On the user's lane: the buffer is the user's until reduce_gradients(b).
  void clear_grad_buffer(const FlatLayout& layout, GradT* full, std::size_t n);

  void zero_padding(const FlatLayout& layout, GradT* full, std::size_t n);

  void check_tensors(const Bucket& b, std::span<const tensor_view> tensors, const char* what) const;

  void require_open(const Bucket& b) const;

  void require_all_reduced(const char* caller) const;

  // Hands the bucket's gradients of this micro-batch (in grad-pool slot `slot`, or already in the
  // G store when slot < 0) to the communication stream: the whole chain runs there in order, and
  // the host keeps only the decisions (first micro-batch? last?) it took now.
  void submit_reduction(Bucket& b, int slot);

  // A grad-pool slot for a bucket's full gradients that the user's compute may write now: once
  // fewer than EngineOptions::gradient_buffers_in_flight staging buffers wait for or are in their
  // reduction (HostAsync), or the staging ring's next slot once its last reduction is done on the
  // device (device spaces).
  int acquire_grad_staging(std::size_t count);

  // One micro-batch's full gradients of a bucket: ReduceScatter through the P group and the G
  // split (fp32), accumulate into the G shard (the first micro-batch writes it). Runs on the
  // communication stream.
  void reduce(Bucket& b, const GradT* full, bool first, const IssueContext& at);

  void accumulate(Bucket& b, const float* z, bool first);

  // Last micro-batch: G shard -> OS shard (ReduceScatter, or Reduce to the owner), then the
  // AllReduce across OS replicas. Runs on the communication stream.
  void finish(Bucket& b, const IssueContext& at);

  // The global norm and the step's decision, one task on the communication stream after every
  // reduction chain: each rank's sum of squares of its OS shards, the AllReduce over the OS group
  // (each OS shard counted once; every OS group computes bitwise the same sum, so every rank takes
  // the same decision), then norm, clip coefficient and overflow skip. A host space waits for it
  // (the caller learns the decision now); a device space leaves it on the stream, and its updates
  // read the decision there.
  std::optional<StepDecision> decide(float loss_scale, double average);

  // Host spaces: the host is done with what the event's work wrote, so wait now (its errors are
  // thrown here). A device space never waits on the host inside a step: the event's work is
  // ordered on the stream already, and its errors are thrown by synchronize() or the destructor.
  void retire(comm::Handle& event);

  // retire() for several events; a host space waits every one and throws the first error only
  // once all have completed (none of their buffers is in use any more).
  void retire_all(std::vector<comm::Handle>& events);

  // The fused update of the bucket's OS shard and the spread of the new parameters, one task on
  // the communication stream (HostSerial: run now, the spread left in flight), so that with an
  // asynchronous space step() returns once the norm is known and the update of bucket b overlaps
  // the next forward up to gather(b). update_done is its event.
  void update_and_spread(Bucket& b, std::shared_ptr<const std::vector<Rule>> group_rules, UpdateArgs args);

  void update(Bucket& b, const std::vector<Rule>& group_rules, const UpdateArgs& args);

  // The P store rewritten from the master weights (ParamT rounding, as step() writes it), then
  // the spread, one task on the communication stream.
  void refresh_and_spread(Bucket& b);

  // The updated parameters of this rank's OS shard go back to every rank sharing its P shard.
  std::vector<comm::Handle> spread_collectives(Bucket& b, const IssueContext& at);

  // check_collectives: the ranks of `on` agree on the collective they issue on it next (rule
  // comm.collective_mismatch), before they issue it.
  template <class T>
  void agree(Comm& on, std::string_view group, comm::op_kind kind, std::size_t count, std::string_view label,
             const IssueContext& at, int root = 0);

  Comm* world_;
  Mesh mesh_;
  PlanGroups groups_;
  Rule rule_;
  EngineOptions options_;
  int rank_;
  detail::GroupTable groups_table_;
  // The stages of the schedule, each SoloStage or its group's type (build_stages).
  detail::ParamsStage<Comm, ParamT, memory_type::template buffer, Space::concurrent_streams> params_;
  detail::Stage<Comm> g_split_, os_split_, spread_, os_replica_, os_norm_;
  std::vector<Bucket> buckets_;
  detail::BufferPool<GradT, memory_type::template buffer> grad_pool_;
  // fp32 scratch of the reduction chains, one pool per size so that a slot of the largest bucket's
  // size serves every bucket: the full bucket (bf16 gradients widened), the G shard (a reduction
  // stage's result, or the bf16 G store widened) and the P shard (between the P group's
  // ReduceScatter and the G split's). One chain runs at a time, so each holds one slot.
  detail::BufferPool<float, memory_type::template buffer> full_work_pool_, g_work_pool_, p_work_pool_;
  std::vector<comm::Handle> reductions_;  // events of the reduction chains since the last step
  // HostAsync: the chains that read a grad-pool slot, oldest first, each a second waiter on its
  // event (the host's is in reductions_, which gets the error).
  std::deque<std::shared_ptr<detail::SharedEventState>> staging_reductions_;
  detail::StagingRing staging_ring_;  // device spaces: the gradient buffers in flight
  std::vector<comm::Handle> deferred_;    // device spaces: events nobody waited for yet (retire)
  StepResult last_result_;
  std::shared_ptr<const std::vector<Rule>> in_backward_rules_;  // update_in_backward: set once issued
  UpdateArgs in_backward_args_;                                 // ...with these
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

#include "amsp/engine/detail/engine_reduction.hpp"
#include "amsp/engine/detail/engine_step.hpp"
#include "amsp/engine/detail/engine_setup.hpp"
#include "amsp/engine/detail/engine_state_access.hpp"
#include "amsp/engine/detail/engine_checks.hpp"
#include "amsp/engine/detail/engine_buffers.hpp"
#include "amsp/engine/detail/engine_in_backward.hpp"
