#pragma once
// The data phase of one threads collective for one rank: which ranges of which peers' buffers the
// rank copies or reduces (its own part of the work, so that all ranks work in parallel). The
// partition is written once, here, for every memory space; a Mover does the element work:
//
//   mover.copy(T* dst, const T* src, std::size_t count)          dst may equal src: no copy
//   mover.reduce(T* const* outputs, int n_out, const T* const* inputs, int n_in,
//                std::size_t count, reduce_op op)                 in rank order, see host_reduce.hpp
//
// HostMover is the host one (memcpy and the blocked reduction loop); the CUDA one lives in
// amsp/comm/threads_cuda.cuh.

#include <algorithm>
#include <cstddef>
#include <vector>

#include "amsp/comm/detail/host_reduce.hpp"
#include "amsp/comm/detail/threads_group.hpp"

namespace amsp::comm::detail {

/// Elements of one rank's slice of an AllReduce / Reduce: whole cache lines, so that ranks never
/// write the same line.
template <class T>
[[nodiscard]] std::size_t slice_elements(std::size_t count, int n) {
  constexpr std::size_t line = 64 / sizeof(T);
  const std::size_t per_rank = (count + static_cast<std::size_t>(n) - 1) / static_cast<std::size_t>(n);
  return (per_rank + line - 1) / line * line;
}

/// S of a call, in elements: the full buffer (n*count for all_gather and reduce_scatter, count
/// for the others).
[[nodiscard]] inline std::size_t full_elements(const ThreadsSlot& s, int n) {
  const bool blocks = s.op == ThreadsOp::all_gather || s.op == ThreadsOp::reduce_scatter;
  return blocks ? static_cast<std::size_t>(n) * s.count : s.count;
}

/// Host memory: memcpy and reduce_into, with non-temporal stores for buffers far beyond the
/// caches (S of at least streaming_threshold bytes).
template <class T>
struct HostMover {
  bool streaming = false;

  void copy(T* dst, const T* src, std::size_t count) const { copy_bytes(dst, src, count * sizeof(T), streaming); }
  void reduce(T* const* outputs, int n_out, const T* const* inputs, int n_in, std::size_t count, reduce_op op) const {
    reduce_into(outputs, n_out, inputs, n_in, count, op, streaming);
  }
};

/// Rank `rank`'s part of the collective every rank of `g` published (and validated): the slots of
/// all ranks are read, only this rank's share of the output is written.
template <class T, class Mover>
void run_collective(const ThreadsGroup& g, int rank, Mover& mover) {
  const auto n = static_cast<std::size_t>(g.size);
  const auto peer = [&](std::size_t r) -> const ThreadsSlot& { return g.slots[r]; };
  const auto send_of = [&](std::size_t r) { return static_cast<const T*>(peer(r).send); };
  const auto recv_of = [&](std::size_t r) { return static_cast<T*>(peer(r).recv); };
  const auto me = static_cast<std::size_t>(rank);
  const ThreadsSlot& mine = peer(me);
  const std::size_t count = mine.count;
  std::vector<const T*> inputs(n);
  switch (mine.op) {
    case ThreadsOp::all_gather:
      // Start at the own block and walk the ring, so that ranks read different peers at once.
      for (std::size_t step = 0; step < n; ++step) {
        const std::size_t j = (me + step) % n;
        mover.copy(recv_of(me) + j * count, send_of(j), count);
      }
      return;
    case ThreadsOp::reduce_scatter: {
      for (std::size_t j = 0; j < n; ++j) inputs[j] = send_of(j) + me * count;
      T* const outputs[1] = {recv_of(me)};
      mover.reduce(outputs, 1, inputs.data(), g.size, count, mine.reduction);
      return;
    }
    case ThreadsOp::all_reduce:
    case ThreadsOp::reduce: {
      const std::size_t slice = slice_elements<T>(count, g.size);
      const std::size_t begin = std::min(count, slice * me);
      const std::size_t length = std::min(count - begin, slice);
      for (std::size_t j = 0; j < n; ++j) inputs[j] = send_of(j) + begin;
      std::vector<T*> outputs;
      if (mine.op == ThreadsOp::reduce) outputs.push_back(recv_of(static_cast<std::size_t>(mine.root)) + begin);
      else for (std::size_t k = 0; k < n; ++k) outputs.push_back(recv_of(k) + begin);
      mover.reduce(outputs.data(), static_cast<int>(outputs.size()), inputs.data(), g.size, length, mine.reduction);
      return;
    }
    case ThreadsOp::broadcast:
      mover.copy(recv_of(me), send_of(static_cast<std::size_t>(mine.root)), count);
      return;
    case ThreadsOp::barrier:
    case ThreadsOp::split: return;
  }
}

}  // namespace amsp::comm::detail
