#pragma once
// Part of ShardedOptimizer (amsp/engine/sharded_optimizer.hpp, which includes it at its end):
// The gradient reduction chain of one bucket and micro-batch: handed to the space's communication
// stream by reduce_gradients(b), it reduces through the P group and the G split, accumulates into
// the G store, and on the last micro-batch reduces to the OS shard and across OS replicas.

#include "amsp/engine/sharded_optimizer.hpp"

namespace amsp {

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::submit_reduction(Bucket& b, int slot) -> void {
  detail::comm_after_user(space_);  // the chain reads what the user's compute wrote
  const bool first = !b.accumulated;
  const IssueContext at = issue_context();
  b.accumulated = true;
  b.reduced = true;
  Bucket* bucket = &b;
  // A slot of the staging ring stays the engine's: reused after this reduction's ticket.
  const bool ring_slot = slot >= 0 && staging_ring_.owns(slot);
  comm::Handle chain = space_.submit([this, bucket, slot, ring_slot, first, at] {
    if (slot >= 0) {
      // Given back also when the reduction fails: reused, not leaked past the bound.
      struct GiveBack {
        decltype(grad_pool_)& pool;
        int slot;
        ~GiveBack() {
          if (slot >= 0) pool.release(slot);
        }
      } give_back{grad_pool_, ring_slot ? -1 : slot};
      reduce(*bucket, grad_pool_.data(slot), first, at);
    }
    if (at.last) finish(*bucket, at);
  });
  if (ring_slot) staging_ring_.handed_in(slot, detail::last_ticket(space_));
  // A host space only: a device space bounds its staging with the ring (acquire_grad_staging),
  // whose waits are for tickets (docs/engine.md, "Gradient buffers in flight", says why a host
  // wait for the chain's event there would cost the overlap).
  if constexpr (Space::asynchronous && !detail::device_space<Space>) {
    if (slot >= 0 && options_.gradient_buffers_in_flight > 0) {
      auto shared = std::make_shared<detail::SharedEventState>(std::move(chain));
      staging_reductions_.push_back(shared);
      chain = comm::Handle(shared);
    }
  }
  reductions_.push_back(std::move(chain));
  // update_in_backward: the bucket's update and spread follow its last chain on the same stream.
  if (at.last && options_.update_in_backward) issue_update_in_backward(b);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::acquire_grad_staging(std::size_t count) -> int {
  // Without the bound a backward that outruns its reductions (a slow link) takes a new bucket-sized
  // buffer for every bucket it runs ahead, up to the whole model's gradients: the memory a
  // sharded G saves. The oldest chain gives its slot back when it has read it.
  if constexpr (detail::device_space<Space>) {
    // The ring's next slot, once the reduction that last read it is done (user_after its ticket,
    // as for a gather: on the user's stream, or on the host in CudaTaskWait::on_host), or a new
    // slot while the ring fills.
    if (const auto reuse = staging_ring_.next()) {
      space_.user_after(reuse->second);
      return reuse->first;
    }
    const bool keep = staging_ring_.has_room();
    const int slot = grad_pool_.acquire(count);
    if (keep) staging_ring_.add(slot);
    detail::user_after_comm(space_);  // a slot from the pool: its last reduction was issued on the stream
    return slot;
  } else {
    const auto bound = static_cast<std::size_t>(options_.gradient_buffers_in_flight);
    while (bound > 0 && staging_reductions_.size() >= bound) {
      (void)staging_reductions_.front()->settled();  // its error is thrown where its event is waited
      staging_reductions_.pop_front();
    }
    return grad_pool_.acquire(count);
  }
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::reduce(Bucket& b, const GradT* full, bool first,
    const IssueContext& at) -> void {
  const BucketGeometry& geo = b.geo;
  int x_slot = -1;
  const float* x = nullptr;
  if constexpr (std::is_same_v<GradT, float>) {
    x = full;
  } else {
    x_slot = full_work_pool_.acquire(geo.n);
    float* wide = full_work_pool_.data(x_slot);
    mem_.convert(lane::comm, full, wide, geo.n);
    x = wide;
  }
  // Where the last reduction stage writes: straight into the G store when it can.
  const bool direct = std::is_same_v<GradT, float> && first;
  int z_slot = -1;
  // The G-shard gradient's buffer, for a stage that reduces into one.
  const auto reduced = [&]() -> float* {
    if (direct) return reinterpret_cast<float*>(b.g_store.data());
    z_slot = g_work_pool_.acquire(geo.g.size());
    return g_work_pool_.data(z_slot);
  };
  // Through the P group and the G split, each of their four combinations with the scratch it needs.
  float* const z = std::visit(detail::on_stage{
      [&](detail::SoloStage&, detail::SoloStage&) {
        return const_cast<float*>(x);  // nothing to reduce inside the G group: the G shard is the full bucket
      },
      [&](ShardedParams& p, detail::SoloStage&) {
        float* out = reduced();
        agree<float>(p.comm, "P group", comm::op_kind::reduce_scatter, geo.g.size(), b.spec.name, at);
        p.comm.reduce_scatter(x, out, geo.g.size(), comm::reduce_op::sum);
        return out;
      },
      [&](detail::SoloStage&, Group& g_split) {
        float* out = reduced();
        agree<float>(g_split.comm, "G split", comm::op_kind::reduce_scatter, geo.g.size(), b.spec.name, at);
        g_split.comm.reduce_scatter(x, out, geo.g.size(), comm::reduce_op::sum);
        return out;
      },
      [&](ShardedParams& p, Group& g_split) {
        float* out = reduced();
        const int y_slot = p_work_pool_.acquire(geo.p.size());  // the P-shard gradient, between the stages
        float* y = p_work_pool_.data(y_slot);
        agree<float>(p.comm, "P group", comm::op_kind::reduce_scatter, geo.p.size(), b.spec.name, at);
        p.comm.reduce_scatter(x, y, geo.p.size(), comm::reduce_op::sum);
        agree<float>(g_split.comm, "G split", comm::op_kind::reduce_scatter, geo.g.size(), b.spec.name, at);
        g_split.comm.reduce_scatter(y, out, geo.g.size(), comm::reduce_op::sum);
        p_work_pool_.release(y_slot);
        return out;
      }},
      params_, g_split_);
  if (!(direct && z == reinterpret_cast<float*>(b.g_store.data()))) accumulate(b, z, first);
  if (z_slot >= 0) g_work_pool_.release(z_slot);
  if (x_slot >= 0) full_work_pool_.release(x_slot);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::accumulate(Bucket& b, const float* z, bool first) -> void {
  mem_.accumulate(lane::comm, b.g_store.data(), z, b.g_store.size(), first);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::finish(Bucket& b, const IssueContext& at) -> void {
  const BucketGeometry& geo = b.geo;
  int wide_slot = -1;
  float* g32 = nullptr;
  if constexpr (std::is_same_v<GradT, float>) {
    g32 = b.g_store.data();
  } else {
    wide_slot = g_work_pool_.acquire(geo.g.size());
    g32 = g_work_pool_.data(wide_slot);
    mem_.convert(lane::comm, b.g_store.data(), g32, geo.g.size());
  }
  if (!whole_tensor()) {
    std::visit(detail::on_stage{[](detail::SoloStage&) {},  // the OS shard is the G shard, in place
                                [&](Group& os_split) {
                                  agree<float>(os_split.comm, "OS split", comm::op_kind::reduce_scatter, geo.os.size(),
                                               b.spec.name, at);
                                  os_split.comm.reduce_scatter(g32, g32 + geo.os_in_g, geo.os.size(),
                                                               comm::reduce_op::sum);
                                }},
               os_split_);
    if (!b.os_grad.empty()) mem_.copy(lane::comm, b.os_grad.data(), g32 + geo.os_in_g, geo.os.size());
  } else {
    for (const OwnedSegment& s : b.segments) {
      float* seg = g32 + s.offset_in_p;
      std::visit(detail::on_stage{[](detail::SoloStage&) {},  // this rank owns every segment of its P shard
                                  [&](Group& spread) {
                                    agree<float>(spread.comm, "spread group", comm::op_kind::reduce, s.size,
                                                 b.spec.name, at, s.owner);
                                    spread.comm.reduce(seg, seg, s.size, comm::reduce_op::sum, s.owner);
                                  }},
                 spread_);
      if (s.owner == b.spread_position) mem_.copy(lane::comm, b.os_grad.data() + s.offset_in_owner, seg, s.size);
    }
  }
  std::visit(detail::on_stage{[](detail::SoloStage&) {},  // one OS group: no replica to agree with
                              [&](Group& os_replica) {
                                if (os_elements(b) == 0) return;
                                agree<float>(os_replica.comm, "OS replicas", comm::op_kind::all_reduce, os_elements(b),
                                             b.spec.name, at);
                                os_replica.comm.all_reduce(os_grads(b), os_grads(b), os_elements(b),
                                                           comm::reduce_op::sum);
                              }},
             os_replica_);
  if (wide_slot >= 0) g_work_pool_.release(wide_slot);
  // The bucket's part of the global norm, here on the stream while the backward goes on rather
  // than over the whole model inside step(), where nothing overlaps it.
  if (needs_norm()) mem_.norm_part(static_cast<std::size_t>(&b - buckets_.data()), os_grads(b), os_elements(b));
}

}  // namespace amsp
