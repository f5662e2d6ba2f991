#pragma once
// The Communicator concept: what the engine needs from a collective library. Backends: threads
// (amsp/comm/threads.hpp, the embedded default), MPI (amsp/comm/mpi.hpp), NCCL
// (amsp/comm/nccl.hpp), and the traffic-counting wrapper (amsp/comm/counting.hpp).
//
// Buffer conventions are NCCL's (docs/collectives.md lists the differences from MPI):
//   all_gather(send, recv, count)          send: count elements; recv: size()*count, rank i's
//                                          block at recv + i*count. In place: send == recv + rank()*count.
//   reduce_scatter(send, recv, n, op)      send: size()*n elements; recv: n, the reduction of block
//                                          rank() of every send. In place: recv == send + rank()*n
//                                          (MPI_Reduce_scatter_block with MPI_IN_PLACE instead
//                                          leaves the result at the start of the buffer).
//   all_reduce(send, recv, count, op)      In place: send == recv.
//   broadcast(send, recv, count, root)     send is read on the root only. In place: send == recv.
//   reduce(send, recv, count, op, root)    recv is written on the root only. In place: send == recv.
// Every rank of the communicator calls every collective, in the same order, with the same count,
// element type, reduce op and root; backends detect a mismatch where they can (rule
// comm.count_mismatch and friends) instead of hanging.
//
// Asynchronous forms (`*_async`) return an amsp::comm::Handle. Every rank issues the same
// operations in the same order; several may be outstanding and their handles may be waited in any
// order. Only wait()/test() on its handle guarantee that an operation's buffers are ready (the
// threads and NCCL backends also complete earlier operations before a blocking call; MPI does not).
//
// Numerics: reductions combine ranks in rank order (fixed, so results are reproducible where the
// backend allows it); bf16 and fp16 accumulate in fp32 and round once to the element type.

#include <concepts>
#include <cstddef>

#include "amsp/comm/handle.hpp"
#include "amsp/comm/op.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/sharding/groups.hpp"

namespace amsp::comm {

/// The collectives of a communicator for one element type `T`.
template <class C, class T>
concept communicator_for = requires(C& c, const T* send, T* recv, std::size_t count, reduce_op op, int root) {
  { c.all_gather(send, recv, count) } -> std::same_as<void>;
  { c.reduce_scatter(send, recv, count, op) } -> std::same_as<void>;
  { c.all_reduce(send, recv, count, op) } -> std::same_as<void>;
  { c.broadcast(send, recv, count, root) } -> std::same_as<void>;
  { c.reduce(send, recv, count, op, root) } -> std::same_as<void>;
  { c.all_gather_async(send, recv, count) } -> std::same_as<Handle>;
  { c.reduce_scatter_async(send, recv, count, op) } -> std::same_as<Handle>;
  { c.all_reduce_async(send, recv, count, op) } -> std::same_as<Handle>;
  { c.broadcast_async(send, recv, count, root) } -> std::same_as<Handle>;
  { c.reduce_async(send, recv, count, op, root) } -> std::same_as<Handle>;
};

/// A communicator over size() ranks: collectives for fp32, fp64, bf16 and fp16, a barrier, and
/// split(groups), which is collective over all its ranks and returns the communicator of the
/// group that contains the caller, members in the order of RankGroup::ranks (ranks of this
/// communicator): position i of the group is rank i of the result and owns chunk i.
template <class C>
concept communicator = std::movable<C> && requires(C& c, const C& cc, const GroupSet& groups) {
  { cc.rank() } -> std::convertible_to<int>;
  { cc.size() } -> std::convertible_to<int>;
  { c.barrier() } -> std::same_as<void>;
  { c.split(groups) } -> std::same_as<C>;
} && communicator_for<C, float> && communicator_for<C, double> && communicator_for<C, bf16> &&
  communicator_for<C, fp16>;

/// Whether two threads may issue collectives on two different communicators of `c`'s backend at
/// the same time (an engine space with concurrent streams does). A backend that cannot says so
/// with a member `concurrent_calls_allowed()` (MPI below MPI_THREAD_MULTIPLE); one without that
/// member can.
template <class C>
[[nodiscard]] bool concurrent_calls_allowed(const C& c) {
  if constexpr (requires { c.concurrent_calls_allowed(); }) return c.concurrent_calls_allowed();
  else return true;
}

/// A communicator split from `c` for collectives issued from another thread beside those of c's
/// other communicators (an engine space's gather stream): `c.split_on_own_stream(groups)` where
/// the backend has it (NCCL, whose split communicators otherwise share their parent's stream, on
/// which two threads' collectives would queue in an order that differs between ranks: a
/// deadlock), else `c.split(groups)`. Collective.
template <class C>
[[nodiscard]] C split_for_concurrent_calls(C& c, const GroupSet& groups) {
  if constexpr (requires { c.split_on_own_stream(groups); }) return c.split_on_own_stream(groups);
  else return c.split(groups);
}

/// Whether `C` can order its own collectives after the work enqueued on `Stream` so far without
/// the caller waiting (a member `order_after_stream(Stream)`: NCCL records an event on the stream
/// and makes its own stream wait for it). A device execution space uses it before each
/// collective and synchronises the stream for a communicator without it (the threads backend
/// over device memory reads the buffers on the calling thread). The one definition of that
/// choice: amsp::CudaAsync, CountingCommunicator's forwarding and the tests use it.
template <class C, class Stream>
concept orders_after_stream = requires(C& c, Stream producer) { c.order_after_stream(producer); };

namespace detail {
/// Number of ranks in a group set (it partitions the communicator that is split).
[[nodiscard]] inline int ranks_in(const GroupSet& groups) {
  int total = 0;
  for (const RankGroup& g : groups.groups()) total += g.size();
  return total;
}
/// Index of the group holding `rank`, or -1.
[[nodiscard]] inline int group_index_of(const GroupSet& groups, int rank) {
  const auto& all = groups.groups();
  for (std::size_t g = 0; g < all.size(); ++g)
    if (all[g].contains(rank)) return static_cast<int>(g);
  return -1;
}
/// The checks split() makes before any communication. They depend only on the group set and the
/// communicator's size, so every rank passing the same set fails the same way and none is left
/// waiting: every rank of the communicator must be in a group, and nothing else may be.
inline void check_split(const GroupSet& groups, int size) {
  for (int r = 0; r < size; ++r)
    check(group_index_of(groups, r) >= 0, "comm.split_member", "rank ", r, " of the ", size,
          "-rank communicator being split is in no group of the group set (it covers ", ranks_in(groups),
          " ranks)");
  check(ranks_in(groups) == size, "comm.split_size", "the group set covers ", ranks_in(groups),
        " ranks but the communicator being split has ", size);
}
}  // namespace detail

}  // namespace amsp::comm
