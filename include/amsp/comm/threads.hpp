#pragma once
// The threads backend, amsp's embedded default: the ranks of a world are threads of one process
// and collectives move data through shared memory, every rank working on its own part in
// parallel (ReduceScatter: each rank reduces its own chunk reading every input in rank order;
// AllGather: each rank copies every peer's block straight out of the peer's buffer). The reduction
// order is fixed by rank, so results are bitwise reproducible whatever the thread timing.
//
// Host memory always; CUDA device memory in a program that includes amsp/comm/threads_cuda.cuh
// in one of its nvcc-compiled files (that installs the device data mover; see there and
// docs/collectives.md). The buffers of one call must then be all host or all on one device.
//
//   amsp::comm::run_on_threads(4, [](amsp::comm::ThreadsCommunicator& comm) {
//     comm.all_reduce(grad.data(), grad.data(), grad.size(), amsp::comm::reduce_op::avg);
//   });

#include <chrono>
#include <cstddef>
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
#include "amsp/comm/detail/ordered_worker.hpp"
#include "amsp/comm/detail/threads_data.hpp"
#include "amsp/comm/detail/threads_device_hook.hpp"
#include "amsp/comm/detail/threads_group.hpp"
#include "amsp/comm/detail/watchdog_timing.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"
#include "amsp/core/memory_space.hpp"

namespace amsp::comm {

class ThreadsCommunicator;

/// How run_on_threads runs a world.
struct ThreadsOptions {
  /// The watchdog: a rank that waits longer than this for its peers to enter a collective (or a
  /// barrier or split) throws rule comm.timeout naming the ranks that did not come, and the world
  /// is aborted, so every other rank waiting in a collective throws comm.aborted with that
  /// reason. Zero: wait forever (the default).
  std::chrono::milliseconds collective_timeout{0};
};

template <class F>
void run_on_threads(int world_size, F&& f, ThreadsOptions options = {});

/// Whether this program's threads collectives accept CUDA device buffers: true once a file of it
/// includes amsp/comm/threads_cuda.cuh (from the start of main on).
[[nodiscard]] inline bool threads_device_memory_enabled() noexcept {
  return detail::threads_device_mover.load(std::memory_order_acquire) != nullptr;
}

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

  /// Loads the device data mover's kernels (amsp/comm/threads_cuda.cuh) on the current device now
  /// rather than at their first launch, which CUDA's lazy loading may make wait for the whole
  /// device; nothing without the mover. A CUDA engine calls it at construction.
  void preload_device_kernels() const {
    if (const detail::DeviceMover* mover = detail::threads_device_mover.load(std::memory_order_acquire))
      mover->preload();
  }

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
    g.barrier.arrive_and_wait(rank_, "split");
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
  friend void run_on_threads(int world_size, F&& f, ThreadsOptions options);

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
  static void execute(const std::shared_ptr<detail::ThreadsGroup>& group, int rank, detail::ThreadsSlot slot) {
    detail::ThreadsGroup& g = *group;
    detail::place_buffers(slot, rank);
    g.slots[static_cast<std::size_t>(rank)] = slot;
    g.barrier.arrive_and_wait(rank, detail::name_of(slot.op));
    validate_slots(g, rank);
    if (slot.send_place.kind == memory_kind::cuda) {
      move_on_device(g, rank);
      return;
    }
    if (slot.op != detail::ThreadsOp::barrier)
      visit_dtype(slot.type, [&](auto element) {
        using T = decltype(element);
        const detail::HostMover<T> mover{detail::full_elements(slot, g.size) * sizeof(T) >= detail::streaming_threshold};
        detail::run_collective<T>(g, rank, mover);
      });
    // Not abortable: a peer may still be copying from or into this rank's buffers.
    g.barrier.arrive_and_wait_uninterruptible();
  }

  // The data phase on device buffers (validated: every buffer of every rank on one device) and
  // the end-of-data barrier. A failed CUDA call must not skip the barrier either: the mover waits
  // for what it enqueued, this rank aborts the world, arrives, and throws; the peers, whose
  // results lack this rank's part, throw comm.aborted after the barrier instead of returning them.
  static void move_on_device(detail::ThreadsGroup& g, int rank) {
    std::exception_ptr failure;
    try {
      detail::threads_device_mover.load(std::memory_order_acquire)->move(g, rank);
    } catch (...) {
      failure = std::current_exception();
      g.world->abort("the device data movement of a collective failed on rank " + std::to_string(rank) + " of " +
                     std::to_string(g.size));
    }
    g.barrier.arrive_and_wait_uninterruptible();
    if (failure) std::rethrow_exception(failure);
    if (g.world->aborted()) g.world->throw_aborted();
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
    const detail::BufferPlace place = first.send_place;
    for (int r = 0; r < g.size; ++r) {
      const detail::ThreadsSlot& s = g.slots[static_cast<std::size_t>(r)];
      for (const auto& [which, other] : {std::pair{"send", s.send_place}, std::pair{"receive", s.recv_place}})
        if (other != place)
          fail_all("comm.memory_space_mismatch", detail::name_of(first.op), ": rank 0's buffers are in ",
                   detail::describe(place), " but rank ", r, "'s ", which, " buffer is in ", detail::describe(other),
                   ": the buffers of one collective must all be in host memory or all on one CUDA device");
    }
    if (place.kind == memory_kind::cuda && g.size > detail::threads_device_max_ranks)
      fail_all("comm.device_world_size", detail::name_of(first.op), ": ", g.size,
               " ranks on device buffers; the threads backend moves device data for at most ",
               detail::threads_device_max_ranks, " ranks");
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

  std::shared_ptr<detail::ThreadsGroup> group_;
  int rank_ = 0;
  std::unique_ptr<detail::OrderedWorker> worker_;
};

static_assert(communicator<ThreadsCommunicator>);

/// Runs `f(ThreadsCommunicator&)` on `world_size` threads, one per rank, and joins them. If any
/// rank throws, the world is aborted (every rank blocked in a collective throws rule
/// comm.aborted) and, after all threads joined, the first exception that was not such a
/// consequence is rethrown. `options`: the watchdog (ThreadsOptions).
template <class F>
void run_on_threads(int world_size, F&& f, ThreadsOptions options) {
  check(world_size >= 1, "comm.world_size", "run_on_threads needs at least one rank, got ", world_size);
  detail::check_collective_timeout(options.collective_timeout);
  auto abort_switch = std::make_shared<detail::AbortSwitch>(options.collective_timeout);
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
