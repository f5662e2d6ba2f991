#pragma once
// The MPI backend (target amsp::mpi): MpiCommunicator wraps an MPI communicator; blocking
// collectives call MPI's blocking collectives, asynchronous ones MPI-3's nonblocking ones
// (MPI_Iallgather, ...), split() calls MPI_Comm_split (color = group index, key = position).
//
// Differences from plain MPI, so that every backend behaves like NCCL:
// - reduce_scatter in place means recv == send + rank()*recv_count (MPI_Reduce_scatter_block with
//   MPI_IN_PLACE would leave the result at the start of the buffer); amsp reduces into a
//   temporary and copies, so the other chunks of the send buffer are left as they were.
// - avg is MPI_SUM followed by a division by size() on each rank.
// - bf16 and fp16 travel as 16-bit values (the bytes the traffic counter counts) and are summed by
//   a custom commutative MPI_Op that adds each pair in fp32 and rounds to the element type: with
//   more than two ranks a result may differ in the last bit from the threads backend, which rounds
//   once; MPI chooses the combination order.
// - with MpiOptions::check_calls (the default), each collective first compares kind, dtype, count,
//   reduce op and root across ranks with one small MPI_Allreduce, so that a mismatch throws
//   comm.count_mismatch (etc.) on every rank instead of hanging or corrupting memory.
// - with MpiOptions::collective_timeout (the watchdog, off by default), every wait polls with a
//   deadline, and a collective that does not complete in time ends the job with MPI_Abort and a
//   message naming the call and the rank (amsp/comm/detail/mpi_watchdog.hpp).
// - under MPI_THREAD_MULTIPLE, a handle's wait() polls MPI_Test instead of calling MPI_Wait (the
//   reason is at handle_wait_); blocking collectives still call MPI's blocking forms.
//
// MPI errors are returned, not fatal, on the communicators amsp owns, and thrown as rule comm.mpi.

#include <mpi.h>

#include <array>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/detail/mpi_ops.hpp"
#include "amsp/comm/detail/mpi_request.hpp"
#include "amsp/comm/detail/mpi_watchdog.hpp"
#include "amsp/comm/detail/unique_handle.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"

namespace amsp::comm {

namespace detail {
/// Frees the communicators an MpiCommunicator owns (its split() results).
struct FreeMpiComm {
  void operator()(MPI_Comm comm) const noexcept { MPI_Comm_free(&comm); }
};
}  // namespace detail

/// Initialises MPI and finalises it on destruction; for programs that do not manage MPI
/// themselves. The default thread level, MPI_THREAD_FUNNELED, is enough when amsp calls MPI from
/// the main thread only; an engine in the HostAsync space makes its calls from its worker threads
/// and needs MPI_THREAD_MULTIPLE when its plan shards P (the gather stream runs beside the
/// communication stream), else MPI_THREAD_SERIALIZED (docs/engine.md). A level the MPI library does not provide is
/// an error (rule comm.mpi_thread_level), also when MPI was initialised before.
class MpiSession {
public:
  MpiSession(int& argc, char**& argv, int thread_level = MPI_THREAD_FUNNELED) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = 0;
    if (initialized) {
      detail::check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
    } else {
      detail::check_mpi(MPI_Init_thread(&argc, &argv, thread_level, &provided), "MPI_Init_thread");
      owner_ = true;
    }
    if (provided < thread_level) {
      if (owner_) MPI_Finalize();
      fail("comm.mpi_thread_level", "this MPI provides thread level ", provided, ", below the ", thread_level,
           " asked for (the HostAsync engine space needs MPI_THREAD_MULTIPLE, or MPI_THREAD_SERIALIZED with P replicated)");
    }
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession() {
    if (owner_) MPI_Finalize();
  }

  /// This process's rank in MPI_COMM_WORLD.
  [[nodiscard]] int world_rank() const {
    int rank = 0;
    detail::check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    return rank;
  }

private:
  bool owner_ = false;
};

struct MpiOptions {
  /// Compare every collective's arguments across ranks first (one small MPI_Allreduce).
  bool check_calls = true;
  /// The watchdog: a collective (or barrier, or the check above) that a rank waits for longer
  /// than this ends the job with MPI_Abort and a message naming it (rule comm.timeout). Zero:
  /// wait forever (the default). Not for split(), whose MPI_Comm_split has no nonblocking form.
  std::chrono::milliseconds collective_timeout{0};
};

class MpiCommunicator {
public:
  using Options = MpiOptions;

  /// A communicator over MPI_COMM_WORLD, on a duplicate so that amsp's traffic and error
  /// handling never mix with the application's. Collective; MPI must be initialised.
  [[nodiscard]] static MpiCommunicator world(Options options = {}) {
    MPI_Comm dup{};
    detail::check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup");
    return MpiCommunicator(dup, true, options);
  }
  /// Wraps `comm` without owning it (it must outlive this object); its error handler is not
  /// changed, so MPI errors on it follow the application's choice.
  [[nodiscard]] static MpiCommunicator borrow(MPI_Comm comm, Options options = {}) {
    return MpiCommunicator(comm, false, options);
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] MPI_Comm native() const noexcept { return comm_.get(); }
  /// Two threads may call collectives at once only under MPI_THREAD_MULTIPLE.
  [[nodiscard]] bool concurrent_calls_allowed() const {
    int provided = 0;
    detail::check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
    return provided >= MPI_THREAD_MULTIPLE;
  }
  /// True when a handle's wait() polls MPI_Test rather than calling MPI_Wait: under
  /// MPI_THREAD_MULTIPLE (the reason is at handle_wait_).
  [[nodiscard]] bool handle_waits_poll() const noexcept { return handle_wait_ == detail::WaitMode::poll; }

  template <element_type T>
  void all_gather(const T* send, T* recv, std::size_t count) {
    start_all_gather(send, recv, count, false).wait();
  }
  template <element_type T>
  void reduce_scatter(const T* send, T* recv, std::size_t recv_count, reduce_op op = reduce_op::sum) {
    start_reduce_scatter(send, recv, recv_count, op, false).wait();
  }
  template <element_type T>
  void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op = reduce_op::sum) {
    start_all_reduce(send, recv, count, op, false).wait();
  }
  template <element_type T>
  void broadcast(const T* send, T* recv, std::size_t count, int root) {
    start_broadcast(send, recv, count, root, false).wait();
  }
  template <element_type T>
  void reduce(const T* send, T* recv, std::size_t count, reduce_op op, int root) {
    start_reduce(send, recv, count, op, root, false).wait();
  }

  template <element_type T>
  [[nodiscard]] Handle all_gather_async(const T* send, T* recv, std::size_t count) {
    return start_all_gather(send, recv, count, true);
  }
  template <element_type T>
  [[nodiscard]] Handle reduce_scatter_async(const T* send, T* recv, std::size_t recv_count,
                                            reduce_op op = reduce_op::sum) {
    return start_reduce_scatter(send, recv, recv_count, op, true);
  }
  template <element_type T>
  [[nodiscard]] Handle all_reduce_async(const T* send, T* recv, std::size_t count, reduce_op op = reduce_op::sum) {
    return start_all_reduce(send, recv, count, op, true);
  }
  template <element_type T>
  [[nodiscard]] Handle broadcast_async(const T* send, T* recv, std::size_t count, int root) {
    return start_broadcast(send, recv, count, root, true);
  }
  template <element_type T>
  [[nodiscard]] Handle reduce_async(const T* send, T* recv, std::size_t count, reduce_op op, int root) {
    return start_reduce(send, recv, count, op, root, true);
  }

  void barrier() {
    (void)issue(
        false, [&] { return MPI_Barrier(comm_.get()); }, [&](MPI_Request* r) { return MPI_Ibarrier(comm_.get(), r); },
        {}, "MPI_Barrier");
  }

  /// MPI_Comm_split with color = index of the caller's group, key = its position; see the
  /// communicator concept.
  [[nodiscard]] MpiCommunicator split(const GroupSet& groups) {
    detail::check_split(groups, size_);
    const int color = detail::group_index_of(groups, rank_);
    const RankGroup& group = groups.groups()[static_cast<std::size_t>(color)];
    const int key = group.position_of(rank_);
    if (options_.check_calls) {
      // Every rank's view of the whole set must agree: compare a fingerprint of it.
      std::uint64_t fingerprint = 1469598103934665603ull;
      const auto mix = [&](int v) { fingerprint = (fingerprint ^ static_cast<std::uint64_t>(v + 1)) * 1099511628211ull; };
      for (const RankGroup& g : groups.groups()) {
        mix(-g.size());  // group boundaries, so {0}{1} and {0,1} differ
        for (int r : g.ranks) mix(r);
      }
      verify(kSplit, 0, static_cast<long long>(fingerprint & 0x3fffffffffffffffull), 0, 0, "split",
             "comm.split_mismatch");
    }
    MPI_Comm sub{};
    detail::check_mpi(MPI_Comm_split(comm_.get(), color, key, &sub), "MPI_Comm_split");
    MpiCommunicator result(sub, true, options_);
    check(result.size() == group.size() && result.rank() == key, "comm.split_mismatch",
          "MPI_Comm_split gave rank ", result.rank(), " of ", result.size(), " for position ", key, " in a group of ",
          group.size());
    return result;
  }

private:
  static constexpr long long kSplit = 100;

  MpiCommunicator(MPI_Comm comm, bool owned, Options options) : comm_(comm, owned), options_(options) {
    if (owned) detail::check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    detail::check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
    detail::check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
    if (concurrent_calls_allowed()) handle_wait_ = detail::WaitMode::poll;
  }

  // With check_calls: one MPI_Allreduce(MAX) over (v, -v) gives every rank the maximum and the
  // minimum of each argument; any difference is a mismatch, seen identically by all ranks.
  void verify(long long kind, long long type, long long count, long long op, long long root, std::string_view what,
              std::string_view count_rule = "comm.count_mismatch") {
    if (!options_.check_calls) return;
    const std::array<long long, 5> mine{kind, type, count, op, root};
    std::array<long long, 10> both{};
    for (std::size_t i = 0; i < 5; ++i) {
      both[i] = mine[i];
      both[i + 5] = -mine[i];
    }
    (void)issue(
        false, [&] { return MPI_Allreduce(MPI_IN_PLACE, both.data(), 10, MPI_LONG_LONG, MPI_MAX, comm_.get()); },
        [&](MPI_Request* r) {
          return MPI_Iallreduce(MPI_IN_PLACE, both.data(), 10, MPI_LONG_LONG, MPI_MAX, comm_.get(), r);
        },
        {}, "MPI_Allreduce", static_cast<std::size_t>(count), what);
    const std::array<std::string_view, 5> rules{"comm.op_mismatch", "comm.dtype_mismatch", count_rule,
                                                "comm.reduce_op_mismatch", "comm.root_mismatch"};
    for (std::size_t i = 0; i < 5; ++i)
      check(both[i] == -both[i + 5], rules[i], what, ": ranks disagree (values from ", -both[i + 5], " to ",
            both[i], ", rank ", rank_, " passes ", mine[i], ")");
  }

  template <class T>
  void verify_call(op_kind kind, std::size_t count, reduce_op op, int root) {
    verify(static_cast<long long>(kind), static_cast<long long>(dtype_of_v<T>), static_cast<long long>(count),
           static_cast<long long>(op), root, name_of(kind));
  }
  void check_root(op_kind kind, int root) const {
    check(root >= 0 && root < size_, "comm.root_range", name_of(kind), ": root ", root, " is not a rank of this ",
          size_, "-rank communicator");
  }

  // Issues a blocking call (and returns a completed handle after `finish`) or a nonblocking one.
  // With the watchdog, a blocking call is the nonblocking one waited for with a deadline.
  template <class Blocking, class Nonblocking>
  [[nodiscard]] Handle issue(bool async, Blocking blocking, Nonblocking nonblocking, std::function<void()> finish,
                             const char* name, std::size_t count = 0, std::string_view checking = {}) {
    const std::chrono::nanoseconds timeout = options_.collective_timeout;
    if (!async && timeout.count() == 0) {
      detail::check_mpi(blocking(), name);
      if (finish) finish();
      return Handle();
    }
    MPI_Request request = MPI_REQUEST_NULL;
    detail::check_mpi(nonblocking(&request), name);
    const detail::WatchedCall what{name, checking, static_cast<long long>(count), rank_, size_};
    if (!async) {
      detail::check_mpi(detail::wait_watched(request, timeout, what), name);
      if (finish) finish();
      return Handle();
    }
    return Handle(std::make_shared<detail::MpiRequestState>(request, std::move(finish), timeout, what, handle_wait_));
  }

  template <class T>
  [[nodiscard]] Handle start_all_gather(const T* send, T* recv, std::size_t count, bool async) {
    verify_call<T>(op_kind::all_gather, count, reduce_op::sum, 0);
    const int n = detail::mpi_count(count, "all_gather count");
    (void)detail::mpi_count(count * static_cast<std::size_t>(size_), "all_gather receive buffer");
    const MPI_Datatype type = detail::mpi_datatype<T>();
    const void* source = send == recv + static_cast<std::size_t>(rank_) * count ? MPI_IN_PLACE : send;
    return issue(
        async, [&] { return MPI_Allgather(source, n, type, recv, n, type, comm_.get()); },
        [&](MPI_Request* r) { return MPI_Iallgather(source, n, type, recv, n, type, comm_.get(), r); }, {}, "MPI_Allgather",
        count);
  }

  template <class T>
  [[nodiscard]] Handle start_reduce_scatter(const T* send, T* recv, std::size_t recv_count, reduce_op op, bool async) {
    verify_call<T>(op_kind::reduce_scatter, recv_count, op, 0);
    const int n = detail::mpi_count(recv_count, "reduce_scatter count");
    (void)detail::mpi_count(recv_count * static_cast<std::size_t>(size_), "reduce_scatter send buffer");
    const bool in_place = recv == send + static_cast<std::size_t>(rank_) * recv_count && recv_count != 0;
    // In place (NCCL's convention) the result must land inside the send buffer, which MPI does not
    // allow to alias the receive buffer: reduce into a temporary, copy when complete.
    auto temporary = std::make_shared<std::vector<T>>(in_place ? recv_count : 0);
    T* target = in_place ? temporary->data() : recv;
    std::function<void()> finish;
    if (in_place || op == reduce_op::avg)
      finish = [temporary, target, recv, recv_count, in_place, op, size = size_] {
        if (op == reduce_op::avg) detail::divide_by(target, recv_count, size);
        if (in_place) std::memcpy(recv, target, recv_count * sizeof(T));
      };
    const MPI_Datatype type = detail::mpi_datatype<T>();
    const MPI_Op sum = detail::mpi_sum_op<T>();
    return issue(
        async, [&] { return MPI_Reduce_scatter_block(send, target, n, type, sum, comm_.get()); },
        [&](MPI_Request* r) { return MPI_Ireduce_scatter_block(send, target, n, type, sum, comm_.get(), r); },
        std::move(finish), "MPI_Reduce_scatter_block", recv_count);
  }

  template <class T>
  [[nodiscard]] Handle start_all_reduce(const T* send, T* recv, std::size_t count, reduce_op op, bool async) {
    verify_call<T>(op_kind::all_reduce, count, op, 0);
    const int n = detail::mpi_count(count, "all_reduce count");
    const void* source = send == recv ? MPI_IN_PLACE : send;
    std::function<void()> finish;
    if (op == reduce_op::avg) finish = [recv, count, size = size_] { detail::divide_by(recv, count, size); };
    const MPI_Datatype type = detail::mpi_datatype<T>();
    const MPI_Op sum = detail::mpi_sum_op<T>();
    return issue(
        async, [&] { return MPI_Allreduce(source, recv, n, type, sum, comm_.get()); },
        [&](MPI_Request* r) { return MPI_Iallreduce(source, recv, n, type, sum, comm_.get(), r); }, std::move(finish),
        "MPI_Allreduce", count);
  }

  template <class T>
  [[nodiscard]] Handle start_broadcast(const T* send, T* recv, std::size_t count, int root, bool async) {
    verify_call<T>(op_kind::broadcast, count, reduce_op::sum, root);
    check_root(op_kind::broadcast, root);
    const int n = detail::mpi_count(count, "broadcast count");
    // MPI broadcasts one buffer in place: the root first copies send into recv.
    if (rank_ == root && count != 0 && send != recv) std::memcpy(recv, send, count * sizeof(T));
    const MPI_Datatype type = detail::mpi_datatype<T>();
    return issue(
        async, [&] { return MPI_Bcast(recv, n, type, root, comm_.get()); },
        [&](MPI_Request* r) { return MPI_Ibcast(recv, n, type, root, comm_.get(), r); }, {}, "MPI_Bcast", count);
  }

  template <class T>
  [[nodiscard]] Handle start_reduce(const T* send, T* recv, std::size_t count, reduce_op op, int root, bool async) {
    verify_call<T>(op_kind::reduce, count, op, root);
    check_root(op_kind::reduce, root);
    const int n = detail::mpi_count(count, "reduce count");
    const bool is_root = rank_ == root;
    const void* source = is_root && send == recv ? MPI_IN_PLACE : send;
    std::function<void()> finish;
    if (op == reduce_op::avg && is_root) finish = [recv, count, size = size_] { detail::divide_by(recv, count, size); };
    const MPI_Datatype type = detail::mpi_datatype<T>();
    const MPI_Op sum = detail::mpi_sum_op<T>();
    return issue(
        async, [&] { return MPI_Reduce(source, recv, n, type, sum, root, comm_.get()); },
        [&](MPI_Request* r) { return MPI_Ireduce(source, recv, n, type, sum, root, comm_.get(), r); }, std::move(finish),
        "MPI_Reduce", count);
  }

  detail::UniqueHandle<MPI_Comm, detail::FreeMpiComm> comm_;
  int rank_ = 0;
  int size_ = 1;
  Options options_{};
  // How a handle's wait() completes its request. Under MPI_THREAD_MULTIPLE, Open MPI 4.1's
  // MPI_Wait parks a thread on a condition variable while another thread drives progress, and the
  // thread runs again only when the scheduler gets to it: with an engine's two streams waiting at
  // once on a busy machine that cost milliseconds per collective (docs/cluster.md, "Waiting for
  // MPI from two threads"). Polling with MPI_Test drives progress on every waiting thread.
  detail::WaitMode handle_wait_ = detail::WaitMode::block;
};

static_assert(communicator<MpiCommunicator>);

}  // namespace amsp::comm
