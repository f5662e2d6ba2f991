#pragma once
// The stages of ShardedOptimizer's step schedule as types, one per policy of the group a stage
// runs over (docs/engine.md, "Stage types"):
//
//   stage        group (amsp/sharding/groups.hpp)   collectives
//   params       P group        (s_p)               AllGather of parameters, ReduceScatter of gradients
//   g_split      G split        (s_g / s_p)         ReduceScatter of the P-shard gradient into G shards
//   os_split     OS split       (s_os / s_g)        ReduceScatter of the G shard into OS shards
//   spread       spread group   (s_os / s_p)        AllGather (or Reduce/Broadcast, whole-tensor layout)
//   os_replica   OS replicas    (world / s_os)      AllReduce of the OS-shard gradient
//   os_norm      OS group       (s_os)              AllReduce of the sum of squares
//
// A stage whose group is one rank (its component Replica, or sharded no further than the
// component it splits) is SoloStage: what one rank does alone is nothing, so the type holds no
// communicator and no scratch, and a schedule that never meets it allocates none. A stage over
// groups of several ranks holds its communicator (GroupStage), and the P group also its gather
// scratch (ShardedParams). The engine holds each stage as a std::variant built from the runtime
// Plan at construction and calls it through std::visit, so the choice is made per stage at run
// time while the engine is compiled once per (Comm, Rule, ParamT, GradT, Space): instantiating it
// per plan (3 × 3 × 3 policy kinds) would multiply its compile time.

#include <type_traits>
#include <utility>
#include <variant>

#include "amsp/comm/communicator.hpp"
#include "amsp/engine/buffer_pool.hpp"
#include "amsp/sharding/groups.hpp"

namespace amsp::detail {

/// A stage over a group of one rank: the collective of a group of one is the identity, so the
/// stage does nothing (or the schedule uses its input where the group's output would be).
struct SoloStage {};

/// A stage over groups of several ranks: this rank's communicator of its group.
template <class Comm>
struct GroupStage {
  explicit GroupStage(Comm c) : comm(std::move(c)) {}
  Comm comm;
};

template <class Comm>
using Stage = std::variant<SoloStage, GroupStage<Comm>>;

// The communicator the gathers are issued on: with concurrent streams one of their own (the
// gather stream issues them beside the communication stream), else the P group's own.
template <class Comm, bool own>
struct GatherComm {
  explicit GatherComm(Comm c) : comm(std::move(c)) {}
  Comm& of(Comm& /*p_group*/) { return comm; }
  Comm comm;
};
template <class Comm>
struct GatherComm<Comm, false> {
  Comm& of(Comm& p_group) { return p_group; }
};

/// The P group's stage when P is sharded: its communicator, the gathers' communicator and the
/// gather scratch (full buckets in the parameter dtype, pooled over the buckets in flight).
template <class Comm, class ParamT, template <class> class Buffer, bool own_gather_comm>
struct ShardedParams {
  // The P group is split first, then (concurrent streams) the gathers' copy of it: the same
  // order on every rank, as every split must be.
  ShardedParams(Comm& world, const GroupSet& p_groups)
      : comm(world.split(p_groups)), gather(split_gather(world, p_groups)) {}

  Comm& gather_comm() { return gather.of(comm); }

  Comm comm;
  GatherComm<Comm, own_gather_comm> gather;
  BufferPool<ParamT, Buffer> gather_pool;

private:
  static GatherComm<Comm, own_gather_comm> split_gather(Comm& world, const GroupSet& p_groups) {
    if constexpr (own_gather_comm) return GatherComm<Comm, true>(comm::split_for_concurrent_calls(world, p_groups));
    else return {};
  }
};

template <class Comm, class ParamT, template <class> class Buffer, bool own_gather_comm>
using ParamsStage = std::variant<SoloStage, ShardedParams<Comm, ParamT, Buffer, own_gather_comm>>;

/// The runtime dispatch: the stage of `groups` (split from `world` unless it is a group of one).
/// Collective over `world` when the group has several ranks.
template <class Comm>
void build_stage(Stage<Comm>& stage, Comm& world, const GroupSet& groups) {
  if (groups.group_size() > 1) stage.template emplace<GroupStage<Comm>>(world.split(groups));
}
template <class Comm, class ParamT, template <class> class Buffer, bool own>
void build_stage(ParamsStage<Comm, ParamT, Buffer, own>& stage, Comm& world, const GroupSet& groups) {
  if (groups.group_size() > 1) stage.template emplace<ShardedParams<Comm, ParamT, Buffer, own>>(world, groups);
}

/// The schedule's dispatch helper: one callable per stage type, e.g.
/// std::visit(on_stage{[](SoloStage&) {...}, [](GroupStage<Comm>& s) {...}}, stage).
template <class... F>
struct on_stage : F... {
  using F::operator()...;
};
template <class... F>
on_stage(F...) -> on_stage<F...>;

}  // namespace amsp::detail
