#pragma once
// What ShardedOptimizer (amsp/engine/sharded_optimizer.hpp) keeps per bucket: the bucket's
// description, its stores in the space's memory, and the host-side bookkeeping of the schedule
// (which gather slot, which gradient buffer, the events of its gather and of its update).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "amsp/comm/handle.hpp"
#include "amsp/engine/bucket_geometry.hpp"
#include "amsp/engine/options.hpp"
#include "amsp/engine/param_groups.hpp"
#include "amsp/sharding/layout.hpp"

namespace amsp::detail {

inline constexpr int no_grad_slot = -1;
inline constexpr int grads_in_g_store = -2;  // grad_buffer(b) handed out the G store itself

/// One bucket of the engine; `Buffer<T>` is the space's store type (amsp::HostMemory's for the
/// host spaces).
template <class ParamT, class GradT, template <class> class Buffer>
struct EngineBucket {
  BucketSpec spec;
  FlatLayout layout;
  BucketGeometry geo;
  Buffer<ParamT> p_store;              // the P shard (the full bucket when P is replicated)
  Buffer<GradT> g_store;               // the G shard, accumulated over micro-batches
  Buffer<float> master;                // the OS shard: fp32 master weights...
  std::vector<Buffer<float>> states;   // ...and the rule's states
  Buffer<float> os_grad;               // fp32 OS-shard gradients when they cannot live in the G store
  std::vector<OwnedSegment> segments;  // whole-tensor layout: this P shard's segments and owners
  std::vector<int> slot_group;         // each tensor's parameter group
  std::vector<GroupRun> update_runs;   // the OS shard cut into runs of one group each
  int spread_position = 0;             // position in the spread group (owner index)
  // per micro-batch / step; host-side bookkeeping, touched by the caller's thread only
  int gather_slot = -1;
  comm::Handle gather_done;            // event: the AllGather into the gather slot
  std::uint64_t gather_ticket = 0;     // its position on the space's stream (device spaces)
  bool gathered = false;
  int grad_slot = no_grad_slot;
  comm::Handle update_done;            // event: the update of the OS shard and the spread to the P store
  std::uint64_t update_ticket = 0;     // its position on the space's stream (device spaces)
  bool reduced = false;
  bool accumulated = false;
};

/// A contiguous run of the OS shard: `count` elements at `os_offset` of the OS store that sit at
/// `bucket_offset` of the bucket.
struct OsPiece {
  std::size_t bucket_offset;
  std::size_t os_offset;
  std::size_t count;
};

}  // namespace amsp::detail
