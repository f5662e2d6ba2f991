#pragma once
// The threads backend, amsp's embedded default: the ranks of a world are threads of one process
// and collectives move data through shared memory, every rank working on its own part in
// parallel (ReduceScatter: each rank reduces its own chunk reading every input in rank order;
// AllGather: each rank copies every peer's block straight out of the peer's buffer). The reduction
// order is fixed by rank, so results are bitwise reproducible whatever the thread timing.
//
// Host memory only for now. The data movement is isolated in run_collective(), which is where a
// CUDA build will dispatch device buffers to cudaMemcpy / a reduction kernel.
//
//   amsp::comm::run_on_threads(4, [](amsp::comm::ThreadsCommunicator& comm) {
//     comm.all_reduce(grad.data(), grad.data(), grad.size(), amsp::comm::reduce_op::avg);
//   });

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/detail/abortable_barrier.hpp"
#include "amsp/comm/detail/host_reduce.hpp"
#include "amsp/comm/detail/ordered_worker.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"

namespace amsp::comm {

class ThreadsCommunicator;
template <class F>
void run_on_threads(int world_size, F&& f);

namespace detail {

/// Everything the threads backend synchronises on: the collectives plus barrier and split.
enum class ThreadsOp : std::uint8_t { all_gather, reduce_scatter, all_reduce, broadcast, reduce, barrier, split };

[[nodiscard]] constexpr std::string_view name_of(ThreadsOp op) {
  switch (op) {
    case ThreadsOp::barrier: return "barrier";
    case ThreadsOp::split: return "split";
    default: return comm::name_of(static_cast<op_kind>(op));
  }
}

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

/// Elements of one rank's slice of an AllReduce / Reduce: whole cache lines, so that ranks never
/// write the same line.
template <class T>
[[nodiscard]] std::size_t slice_elements(std::size_t count, int n) {
  constexpr std::size_t line = 64 / sizeof(T);
  const std::size_t per_rank = (count + static_cast<std::size_t>(n) - 1) / static_cast<std::size_t>(n);
  return (per_rank + line - 1) / line * line;
}

/// True when rank `r`'s send and receive ranges overlap in a way other than the in-place layout:
/// peers would read what the rank is overwriting.
[[nodiscard]] inline bool bad_alias(const ThreadsSlot& s, int r, int n) {
  if (s.count == 0 || s.op == ThreadsOp::barrier || s.op == ThreadsOp::split) return false;
  if (s.op == ThreadsOp::broadcast && r != s.root) return false;  // send is not read
  if (s.op == ThreadsOp::reduce && r != s.root) return false;     // recv is not written
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

}  // namespace detail

/// One rank's handle on a threads world or on a sub-communicator split from it. Move-only; use it
/// from the thread run_on_threads gave it to (its async operations run on a progress thread of
/// its own).
class ThreadsCommunicator {
public:
  ThreadsCommunicator(ThreadsCommunicator&&) noexcept = default;
  ThreadsCommunicator& operator=(ThreadsCommunicator&&) noexcept = default;
  ~ThreadsCommunicator() {
    // Unwinding with collectives in flight: the peers would wait for this rank forever, and this
    // rank's progress thread for them. Abort the world so that both sides throw instead.
    if (worker_ && std::uncaught_exceptions() > 0) group_->world->abort("a rank unwound with collectives in flight");
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return group_->size; }

  template <element_type T>
  void all_gather(const T* send, T* recv, std::size_t count) {
    blocking(describe(detail::ThreadsOp::all_gather, send, recv, count, reduce_op::sum, 0));
  }
  template <element_type T>
  void reduce_scatter(const T* send, T* recv, std::size_t recv_count, reduce_op op = reduce_op::sum) {
    blocking(describe(detail::ThreadsOp::reduce_scatter, send, recv, recv_count, op, 0));
  }
  template <element_type T>
  void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op = reduce_op::sum) {
    blocking(describe(detail::ThreadsOp::all_reduce, send, recv, count, op, 0));
  }
  template <element_type T>
  void broadcast(const T* send, T* recv, std::size_t count, int root) {
    blocking(describe(detail::ThreadsOp::broadcast, send, recv, count, reduce_op::sum, root));
  }
  template <element_type T>
  void reduce(const T* send, T* recv, std::size_t count, reduce_op op, int root) {
    blocking(describe(detail::ThreadsOp::reduce, send, recv, count, op, root));
  }

  template <element_type T>
  [[nodiscard]] Handle all_gather_async(const T* send, T* recv, std::size_t count) {
    return async(describe(detail::ThreadsOp::all_gather, send, recv, count, reduce_op::sum, 0));
  }
  template <element_type T>
  [[nodiscard]] Handle reduce_scatter_async(const T* send, T* recv, std::size_t recv_count,
                                            reduce_op op = reduce_op::sum) {
    return async(describe(detail::ThreadsOp::reduce_scatter, send, recv, recv_count, op, 0));
  }
  template <element_type T>
  [[nodiscard]] Handle all_reduce_async(const T* send, T* recv, std::size_t count, reduce_op op = reduce_op::sum) {
    return async(describe(detail::ThreadsOp::all_reduce, send, recv, count, op, 0));
  }
  template <element_type T>
  [[nodiscard]] Handle broadcast_async(const T* send, T* recv, std::size_t count, int root) {
    return async(describe(detail::ThreadsOp::broadcast, send, recv, count, reduce_op::sum, root));
  }
  template <element_type T>
  [[nodiscard]] Handle reduce_async(const T* send, T* recv, std::size_t count, reduce_op op, int root) {
    return async(describe(detail::ThreadsOp::reduce, send, recv, count, op, root));
  }

  /// Returns once every rank has entered the barrier (after this rank's outstanding operations).
  void barrier() { blocking(detail::ThreadsSlot{}); }

  /// Collective over all ranks of this communicator: see the communicator concept. Every rank
  /// must pass the same group set (checked: rule comm.split_mismatch).
  [[nodiscard]] ThreadsCommunicator split(const GroupSet& groups) {
    detail::check_split(groups, size());
    drain();
    const int index = detail::group_index_of(groups, rank_);
    const RankGroup& group = groups.groups()[static_cast<std::size_t>(index)];
    const int position = group.position_of(rank_);
    detail::ThreadsGroup& g = *group_;
    detail::ThreadsSlot& mine = g.slots[static_cast<std::size_t>(rank_)];
    mine = detail::ThreadsSlot{};
    mine.op = detail::ThreadsOp::split;
    mine.count = static_cast<std::size_t>(index);
    mine.root = position;
    if (position == 0) mine.child = std::make_shared<detail::ThreadsGroup>(g.world, group.size());
    g.barrier.arrive_and_wait();
    validate_slots(g, rank_);
    for (int r = 0; r < size(); ++r) {
      const detail::ThreadsSlot& peer = g.slots[static_cast<std::size_t>(r)];
      const int expected = detail::group_index_of(groups, r);
      if (peer.count != static_cast<std::size_t>(expected) ||
          peer.root != groups.groups()[static_cast<std::size_t>(expected)].position_of(r))
        fail_together("comm.split_mismatch", "rank ", r, " passed split() a different group set than rank ", rank_);
    }
    std::shared_ptr<detail::ThreadsGroup> child = g.slots[static_cast<std::size_t>(group.ranks.front())].child;
    g.barrier.arrive_and_wait_uninterruptible();  // peers may still read this rank's slot
    mine.child.reset();
    return ThreadsCommunicator(std::move(child), position);
  }

private:
  template <class F>
  friend void run_on_threads(int world_size, F&& f);

  ThreadsCommunicator(std::shared_ptr<detail::ThreadsGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}

  template <class T>
  [[nodiscard]] static detail::ThreadsSlot describe(detail::ThreadsOp op, const T* send, T* recv, std::size_t count,
                                                    reduce_op reduction, int root) {
    detail::ThreadsSlot slot;
    slot.op = op;
    slot.type = dtype_of_v<T>;
    slot.reduction = reduction;
    slot.root = root;
    slot.count = count;
    slot.send = send;
    slot.recv = recv;
    return slot;
  }

  void drain() {
    if (worker_) worker_->drain();
  }
  void blocking(const detail::ThreadsSlot& slot) {
    drain();
    execute(group_, rank_, slot);
  }
  [[nodiscard]] Handle async(const detail::ThreadsSlot& slot) {
    if (!worker_) worker_ = std::make_unique<detail::OrderedWorker>();
    return worker_->submit([group = group_, rank = rank_, slot] { execute(group, rank, slot); },
                           [world = group_->world] { world->abort("a rank unwound with a collective in flight"); });
  }

  // Runs on the calling thread (blocking) or on the progress thread (async); static so that a
  // queued operation does not depend on the communicator object, which may move.
  static void execute(const std::shared_ptr<detail::ThreadsGroup>& group, int rank, const detail::ThreadsSlot& slot) {
    detail::ThreadsGroup& g = *group;
    g.slots[static_cast<std::size_t>(rank)] = slot;
    g.barrier.arrive_and_wait();
    validate_slots(g, rank);
    if (slot.op != detail::ThreadsOp::barrier)
      visit_dtype(slot.type, [&](auto element) { run_collective<decltype(element)>(g, rank); });
    // Not abortable: a peer may still be copying from or into this rank's buffers.
    g.barrier.arrive_and_wait_uninterruptible();
  }

  // Every rank runs the same comparison on the same published slots, so every rank throws the
  // same error (after one more barrier, so nobody rewrites its slot while others still read it).
  static void validate_slots(detail::ThreadsGroup& g, int rank) {
    const auto fail_all = [&](std::string_view rule, const auto&... parts) {
      const std::string message = amsp::detail::concat(parts...);
      g.barrier.arrive_and_wait();
      fail(rule, message, " (seen by rank ", rank, ")");
    };
    const detail::ThreadsSlot& first = g.slots.front();
    for (int r = 1; r < g.size; ++r) {
      const detail::ThreadsSlot& s = g.slots[static_cast<std::size_t>(r)];
      if (s.op != first.op)
        fail_all("comm.op_mismatch", "rank 0 entered ", detail::name_of(first.op), " but rank ", r, " entered ",
                 detail::name_of(s.op), ": every rank must issue the same collectives in the same order");
      if (first.op == detail::ThreadsOp::barrier || first.op == detail::ThreadsOp::split) continue;
      if (s.type != first.type)
        fail_all("comm.dtype_mismatch", detail::name_of(first.op), ": rank 0 passes ", name_of(first.type),
                 " but rank ", r, " passes ", name_of(s.type));
      if (s.count != first.count)
        fail_all("comm.count_mismatch", detail::name_of(first.op), ": rank 0 passes count ", first.count,
                 " but rank ", r, " passes count ", s.count);
      if (s.reduction != first.reduction &&
          (first.op == detail::ThreadsOp::reduce_scatter || first.op == detail::ThreadsOp::all_reduce ||
           first.op == detail::ThreadsOp::reduce))
        fail_all("comm.reduce_op_mismatch", detail::name_of(first.op), ": rank 0 passes ", name_of(first.reduction),
                 " but rank ", r, " passes ", name_of(s.reduction));
      if (s.root != first.root && (first.op == detail::ThreadsOp::broadcast || first.op == detail::ThreadsOp::reduce))
        fail_all("comm.root_mismatch", detail::name_of(first.op), ": rank 0 passes root ", first.root, " but rank ",
                 r, " passes root ", s.root);
    }
    if ((first.op == detail::ThreadsOp::broadcast || first.op == detail::ThreadsOp::reduce) &&
        (first.root < 0 || first.root >= g.size))
      fail_all("comm.root_range", detail::name_of(first.op), ": root ", first.root, " is not a rank of this ",
               g.size, "-rank communicator");
    for (int r = 0; r < g.size; ++r)
      if (detail::bad_alias(g.slots[static_cast<std::size_t>(r)], r, g.size))
        fail_all("comm.buffer_alias", detail::name_of(first.op), ": the send and receive buffers of rank ", r,
                 " overlap but are not the in-place layout (all_gather: send == recv + rank*count; "
                 "reduce_scatter: recv == send + rank*count; others: send == recv)");
  }

  template <class... Parts>
  [[noreturn]] void fail_together(std::string_view rule, const Parts&... parts) {
    group_->barrier.arrive_and_wait();
    fail(rule, parts...);
  }

  // The data movement of one collective for this rank; the slots of all ranks are published.
  template <class T>
  static void run_collective(detail::ThreadsGroup& g, int rank) {
    const auto n = static_cast<std::size_t>(g.size);
    const auto peer = [&](std::size_t r) -> const detail::ThreadsSlot& { return g.slots[r]; };
    const detail::ThreadsSlot& mine = peer(static_cast<std::size_t>(rank));
    const std::size_t count = mine.count;
    T* const recv = static_cast<T*>(mine.recv);
    std::vector<const T*> inputs(n);
    // Collectives on buffers far beyond the caches write with non-temporal stores. S is the full
    // buffer: n*count elements for all_gather and reduce_scatter, count for the others.
    const std::size_t full = (mine.op == detail::ThreadsOp::all_gather || mine.op == detail::ThreadsOp::reduce_scatter)
                                 ? n * count
                                 : count;
    const bool streaming = full * sizeof(T) >= detail::streaming_threshold;
    switch (mine.op) {
      case detail::ThreadsOp::all_gather:
        // Start at the own block and walk the ring, so that ranks read different peers at once.
        for (std::size_t step = 0; step < n; ++step) {
          const std::size_t j = (static_cast<std::size_t>(rank) + step) % n;
          detail::copy_bytes(recv + j * count, peer(j).send, count * sizeof(T), streaming);
        }
        return;
      case detail::ThreadsOp::reduce_scatter: {
        for (std::size_t j = 0; j < n; ++j)
          inputs[j] = static_cast<const T*>(peer(j).send) + static_cast<std::size_t>(rank) * count;
        T* const outputs[1] = {recv};
        detail::reduce_into(outputs, 1, inputs.data(), g.size, count, mine.reduction, streaming);
        return;
      }
      case detail::ThreadsOp::all_reduce:
      case detail::ThreadsOp::reduce: {
        const std::size_t slice = detail::slice_elements<T>(count, g.size);
        const std::size_t begin = std::min(count, slice * static_cast<std::size_t>(rank));
        const std::size_t length = std::min(count - begin, slice);
        for (std::size_t j = 0; j < n; ++j) inputs[j] = static_cast<const T*>(peer(j).send) + begin;
        std::vector<T*> outputs;
        if (mine.op == detail::ThreadsOp::reduce) outputs.push_back(static_cast<T*>(peer(static_cast<std::size_t>(mine.root)).recv) + begin);
        else for (std::size_t k = 0; k < n; ++k) outputs.push_back(static_cast<T*>(peer(k).recv) + begin);
        detail::reduce_into(outputs.data(), static_cast<int>(outputs.size()), inputs.data(), g.size, length,
                            mine.reduction, streaming);
        return;
      }
      case detail::ThreadsOp::broadcast:
        detail::copy_bytes(recv, peer(static_cast<std::size_t>(mine.root)).send, count * sizeof(T), streaming);
        return;
      case detail::ThreadsOp::barrier:
      case detail::ThreadsOp::split: return;
    }
  }

  std::shared_ptr<detail::ThreadsGroup> group_;
  int rank_ = 0;
  std::unique_ptr<detail::OrderedWorker> worker_;
};

static_assert(communicator<ThreadsCommunicator>);

/// Runs `f(ThreadsCommunicator&)` on `world_size` threads, one per rank, and joins them. If any
/// rank throws, the world is aborted (every rank blocked in a collective throws rule
/// comm.aborted) and, after all threads joined, the first exception that was not such a
/// consequence is rethrown.
template <class F>
void run_on_threads(int world_size, F&& f) {
  check(world_size >= 1, "comm.world_size", "run_on_threads needs at least one rank, got ", world_size);
  auto abort_switch = std::make_shared<detail::AbortSwitch>();
  auto world = std::make_shared<detail::ThreadsGroup>(abort_switch, world_size);
  std::mutex mutex;
  std::exception_ptr first_error;
  std::exception_ptr first_abort;
  const auto rank_main = [&](int rank) {
    ThreadsCommunicator comm(world, rank);
    try {
      f(comm);
    } catch (...) {
      std::string reason = "rank " + std::to_string(rank) + " threw";
      bool consequence = false;
      try {
        throw;
      } catch (const error& e) {
        consequence = e.rule() == "comm.aborted";
        reason += std::string(": ") + e.what();
      } catch (const std::exception& e) {
        reason += std::string(": ") + e.what();
      } catch (...) {
      }
      {
        std::lock_guard lock(mutex);
        std::exception_ptr& slot = consequence ? first_abort : first_error;
        if (!slot) slot = std::current_exception();
      }
      abort_switch->abort(reason);
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) threads.emplace_back(rank_main, r);
  for (std::thread& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
  if (first_abort) std::rethrow_exception(first_abort);
}

}  // namespace amsp::comm
