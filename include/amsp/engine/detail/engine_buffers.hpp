#pragma once
// Part of ShardedOptimizer (amsp/engine/sharded_optimizer.hpp, which includes it at its end):
// What the user's compute reads and writes: gathered parameters and gradient buffers, handed
// out and taken back in order with the space's stream.

#include "amsp/engine/sharded_optimizer.hpp"

namespace amsp {

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::prefetch(int b) -> void {
  Bucket& bucket = at(b);
  check(!bucket.gathered && bucket.gather_slot < 0, "engine.gather_twice", "bucket '", bucket.spec.name,
        "' is already gathered or being gathered; release it first");
  std::visit(detail::on_stage{[](detail::SoloStage&) {},  // gather(b) hands out the P store once its spread is done
                              [&](ShardedParams& p) { issue_gather(bucket, p); }},
             params_);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::issue_gather(Bucket& bucket, ShardedParams& p) -> void {
  bucket.gather_slot = p.gather_pool.acquire(bucket.geo.n);
  Comm* comm = &p.gather_comm();
  const ParamT* send = bucket.p_store.data();
  ParamT* recv = p.gather_pool.data(bucket.gather_slot);
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

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::gather(int b) -> std::span<ParamT> {
  Bucket& bucket = at(b);
  check(!bucket.gathered, "engine.gather_twice", "bucket '", bucket.spec.name,
        "' is already gathered; release it first");
  std::visit(detail::on_stage{[&](detail::SoloStage&) {  // the P store: its update and spread
                                detail::user_after(space_, bucket.update_done, bucket.update_ticket);
                              },
                              [&](ShardedParams&) {
                                if (bucket.gather_slot < 0) prefetch(b);
                                detail::user_after(space_, bucket.gather_done, bucket.gather_ticket);
                              }},
             params_);
  bucket.gathered = true;
  return full_params(bucket);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::full_params(Bucket& b) -> std::span<ParamT> {
  return std::visit(detail::on_stage{[&](detail::SoloStage&) {  // P replicated: the P store is the bucket
                                       return std::span<ParamT>(b.p_store.data(), b.p_store.size());
                                     },
                                     [&](ShardedParams& p) {
                                       return std::span<ParamT>(p.gather_pool.data(b.gather_slot), b.geo.n);
                                     }},
                    params_);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::gather_into(int b,
    std::span<const tensor_view> tensors) -> void {
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

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::release(int b) -> void {
  Bucket& bucket = at(b);
  retire(bucket.gather_done);
  // The next AllGather into this slot (or update of the P store) waits for the user's reads.
  detail::comm_after_user(space_);
  std::visit(detail::on_stage{[](detail::SoloStage&) {},  // nothing gathered: the P store was handed out
                              [&](ShardedParams& p) {
                                if (bucket.gather_slot >= 0) p.gather_pool.release(bucket.gather_slot);
                              }},
             params_);
  bucket.gather_slot = -1;
  bucket.gathered = false;
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::g_group_is_solo() const -> bool {
  return std::visit(detail::on_stage{[](const detail::SoloStage&, const detail::SoloStage&) { return true; },
                                     [](const auto&, const auto&) { return false; }},
                    params_, g_split_);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::grad_buffer(int b) -> std::span<GradT> {
  Bucket& bucket = at(b);
  require_open(bucket);
  if (bucket.grad_slot == detail::grads_in_g_store) return {bucket.g_store.data(), bucket.geo.n};
  if (bucket.grad_slot < 0) {
    // Nothing to reduce inside the G group and nothing accumulated yet: the user writes straight
    // into the G store, which saves DDP and ZeRO-1 a copy of the whole gradient.
    if (g_group_is_solo() && !bucket.accumulated) {
      // the last update read its gradients from the G store
      detail::user_after(space_, bucket.update_done, bucket.update_ticket);
      bucket.grad_slot = detail::grads_in_g_store;
      clear_grad_buffer(bucket.layout, bucket.g_store.data(), bucket.geo.n);
      return {bucket.g_store.data(), bucket.geo.n};
    }
    bucket.grad_slot = acquire_grad_staging(bucket.geo.n);
    clear_grad_buffer(bucket.layout, grad_pool_.data(bucket.grad_slot), bucket.geo.n);
  }
  return {grad_pool_.data(bucket.grad_slot), bucket.geo.n};
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::reduce_gradients(int b) -> void {
  Bucket& bucket = at(b);
  require_open(bucket);
  check(bucket.grad_slot != detail::no_grad_slot, "engine.no_gradients", "bucket '", bucket.spec.name,
        "': reduce_gradients(b) reads grad_buffer(b), which was not requested this micro-batch");
  const int slot = bucket.grad_slot == detail::grads_in_g_store ? -1 : bucket.grad_slot;
  bucket.grad_slot = detail::no_grad_slot;
  submit_reduction(bucket, slot);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::reduce_gradients(int b,
    std::span<const tensor_view> grads) -> void {
  Bucket& bucket = at(b);
  require_open(bucket);
  check_tensors(bucket, grads, "gradient");
  const int slot = acquire_grad_staging(bucket.geo.n);
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

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::clear_grad_buffer(const FlatLayout& layout, GradT* full,
    std::size_t n) -> void {
  if (options_.zero_grad_buffers) mem_.fill_zero(lane::user, full, n);
  else zero_padding(layout, full, n);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::zero_padding(const FlatLayout& layout, GradT* full,
    std::size_t n) -> void {
  std::size_t cursor = 0;
  for (const TensorSlot& s : layout.slots()) {
    if (s.offset > cursor) mem_.fill_zero(lane::user, full + cursor, s.offset - cursor);
    cursor = s.offset + s.numel;
  }
  if (n > cursor) mem_.fill_zero(lane::user, full + cursor, n - cursor);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::check_tensors(const Bucket& b,
    std::span<const tensor_view> tensors, const char* what) const -> void {
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

}  // namespace amsp
