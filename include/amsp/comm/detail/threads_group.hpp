#pragma once
// The state the ranks of one threads communicator share: the slot in which each rank publishes the
// call it entered, the barrier they meet at, and the checks on one published call that do not
// depend on the peers (which buffers a rank touches, whether they alias illegally).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "amsp/comm/detail/abortable_barrier.hpp"
#include "amsp/comm/op.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/memory_space.hpp"

namespace amsp::comm::detail {

/// Everything the threads backend synchronises on: the collectives plus barrier and split.
enum class ThreadsOp : std::uint8_t { all_gather, reduce_scatter, all_reduce, broadcast, reduce, barrier, split };

[[nodiscard]] constexpr std::string_view name_of(ThreadsOp op) {
  switch (op) {
    case ThreadsOp::barrier: return "barrier";
    case ThreadsOp::split: return "split";
    default: return comm::name_of(static_cast<op_kind>(op));
  }
}

/// Where one buffer lives: host memory, or the memory of CUDA device `device` (device or managed
/// memory). Only a program with the CUDA data mover installed ever sees a cuda place.
struct BufferPlace {
  memory_kind kind = memory_kind::host;
  int device = -1;
  friend bool operator==(const BufferPlace&, const BufferPlace&) = default;
};

struct ThreadsGroup;

/// One rank's description of the collective it entered; peers read it between the two barriers
/// of the collective. Cache-line aligned so that ranks publishing at once do not share a line.
struct alignas(64) ThreadsSlot {
  ThreadsOp op = ThreadsOp::barrier;
  dtype type = dtype::fp32;
  reduce_op reduction = reduce_op::sum;
  int root = 0;
  std::size_t count = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  // Where send and recv live; a buffer the rank does not touch takes the other one's place.
  BufferPlace send_place;
  BufferPlace recv_place;
  std::shared_ptr<ThreadsGroup> child;  // split: the new group, published by its first member
};

/// The state shared by the ranks of one communicator.
struct ThreadsGroup {
  ThreadsGroup(std::shared_ptr<AbortSwitch> abort_switch, int n)
      : world(std::move(abort_switch)), size(n), barrier(*world, n), slots(static_cast<std::size_t>(n)) {}

  std::shared_ptr<AbortSwitch> world;
  int size;
  AbortableBarrier barrier;
  std::vector<ThreadsSlot> slots;
};

/// Whether rank `r` reads its send buffer in the call `s` (a broadcast's non-roots do not).
[[nodiscard]] inline bool reads_send(const ThreadsSlot& s, int r) {
  return s.op != ThreadsOp::broadcast || r == s.root;
}
/// Whether rank `r`'s receive buffer is written in the call `s` (a reduce's non-roots' is not).
[[nodiscard]] inline bool writes_recv(const ThreadsSlot& s, int r) { return s.op != ThreadsOp::reduce || r == s.root; }

/// True when rank `r`'s send and receive ranges overlap in a way other than the in-place layout:
/// peers would read what the rank is overwriting.
[[nodiscard]] inline bool bad_alias(const ThreadsSlot& s, int r, int n) {
  if (s.count == 0 || s.op == ThreadsOp::barrier || s.op == ThreadsOp::split) return false;
  if (!reads_send(s, r) || !writes_recv(s, r)) return false;
  const std::size_t bytes = s.count * size_of(s.type);
  const auto n_bytes = bytes * static_cast<std::size_t>(n);
  const auto send = reinterpret_cast<std::uintptr_t>(s.send);
  const auto recv = reinterpret_cast<std::uintptr_t>(s.recv);
  const std::size_t send_bytes = s.op == ThreadsOp::reduce_scatter ? n_bytes : bytes;
  const std::size_t recv_bytes = s.op == ThreadsOp::all_gather ? n_bytes : bytes;
  if (send + send_bytes <= recv || recv + recv_bytes <= send) return false;  // disjoint
  const auto own_block = static_cast<std::uintptr_t>(r) * bytes;
  switch (s.op) {
    case ThreadsOp::all_gather: return send != recv + own_block;
    case ThreadsOp::reduce_scatter: return recv != send + own_block;
    default: return send != recv;
  }
}

}  // namespace amsp::comm::detail
