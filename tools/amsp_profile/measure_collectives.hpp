#pragma once
// amsp-profile's measurement: for every collective a planner prices (op × group shape × message
// size), the mean time of one collective when every group of that shape on the mesh runs it at
// once, as the engine does. Works on any Communicator. The entries and their JSON document are
// the library's (amsp/planner/bandwidth_profile.hpp: the format's one home, reader and writer).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/op.hpp"
#include "amsp/core/buffer.hpp"
#include "amsp/planner/bandwidth_profile.hpp"
#include "amsp/planner/comm_model.hpp"
#include "amsp/sharding/groups.hpp"

namespace amsp_profile {

using namespace amsp;
using planner::ProfileEntry;

/// Every aligned-block group shape of the mesh with at least two ranks (a | R, b | N, b > 1 only
/// if a = R), smallest first.
[[nodiscard]] inline std::vector<Factor> group_shapes(const Mesh& mesh) {
  std::vector<Factor> shapes;
  for (int b = 1; b <= mesh.nodes(); ++b)
    for (int a = 1; a <= mesh.ranks_per_node(); ++a)
      if (mesh.ranks_per_node() % a == 0 && mesh.nodes() % b == 0 && (b == 1 || a == mesh.ranks_per_node()) &&
          a * b >= 2)
        shapes.push_back(Factor{a, b});
  return shapes;
}

/// The group sets the engine uses for each of `plans` (P, the G split, the OS split, the spread,
/// the OS replicas), one per shape p0 × p1 (the first one met), including the strided shapes no
/// aligned block has (one rank per node across nodes, 1xN; a few ranks on several nodes). A
/// profile keyed by shape then prices every term of those plans by measurement.
[[nodiscard]] inline std::vector<std::pair<Factor, GroupSet>> plan_group_sets(const Mesh& mesh,
                                                                               const std::vector<Plan>& plans) {
  std::vector<std::pair<Factor, GroupSet>> sets;
  const auto add = [&](const GroupSet& set) {
    const Factor shape = planner::group_shape(set, mesh);
    if (shape.size() < 2) return;
    for (const auto& [known, _] : sets)
      if (known.intra == shape.intra && known.inter == shape.inter) return;
    sets.emplace_back(shape, set);
  };
  for (const Plan& plan : plans) {
    const PlanGroups groups(mesh, plan);
    for (const GroupSet* set : {&groups.p(), &groups.g_split(), &groups.os_split(), &groups.spread(), &groups.os_replica()})
      add(*set);
  }
  return sets;
}

/// The aligned blocks of `shapes` as group sets.
[[nodiscard]] inline std::vector<std::pair<Factor, GroupSet>> block_group_sets(const Mesh& mesh,
                                                                                const std::vector<Factor>& shapes) {
  std::vector<std::pair<Factor, GroupSet>> sets;
  for (const Factor& shape : shapes) sets.emplace_back(shape, factor_groups(mesh, shape));
  return sets;
}

/// How the profile issues each collective: as the engine does (the default), every one blocking,
/// or every one nonblocking (its asynchronous call waited for at once).
enum class CallForms { engine, blocking, nonblocking };

/// How a call after a gap is timed: alone (a world barrier, the gap, the call; the slowest rank's
/// time), or paced (every rank loops gap, call, with no barrier between: the loop's time per
/// call less the gap, what a training loop of equal compute segments pays per call, where a rank
/// that returns early also starts its next call early), or chained (a world barrier, the gap, a
/// chain of calls back to back: how much later the chain's last call ended on its slowest rank
/// than the call before it did on its own, the median over the repeats). Chained times the k-th
/// call of a chain, as the engine's reductions queue on its communication thread: a back-to-back
/// loop of hundreds of calls settles into a pace that the first calls of a chain do not have (on
/// the emulated cluster the blocking ReduceScatter of 200 KB runs at the wire as the second or
/// third call of a chain and 1.5x the wire from the fourth at 200 Mbit/s, from the third at 100;
/// docs/planner-check-chains.md). The median, not the mean: a chained call either stalls for a
/// whole call's worth of the link or does not, and the cluster check compares median steps.
enum class GapTiming { slowest_call, paced, chained };

/// True when `op` is timed through its asynchronous call. The engine issues the gathers and
/// broadcasts asynchronously (the prefetch and the parameter spread: engine_buffers.hpp,
/// engine_step.hpp) and the reductions as blocking calls on its communication thread
/// (engine_reduction.hpp), so a profile of the calls the engine makes times them so.
[[nodiscard]] inline bool issued_nonblocking(CallForms forms, comm::op_kind op) {
  switch (forms) {
    case CallForms::blocking: return false;
    case CallForms::nonblocking: return true;
    case CallForms::engine: return op == comm::op_kind::all_gather || op == comm::op_kind::broadcast;
  }
  return false;
}

/// Collectives per measurement: enough to move about 256 MiB, between 2 and `max_iterations`
/// (200). A function of the size alone, so that every rank runs the same number.
[[nodiscard]] inline int iterations_for(std::uint64_t bytes, int max_iterations = 200) {
  const std::uint64_t target = std::uint64_t{256} << 20;
  const auto most = static_cast<std::uint64_t>(std::max(max_iterations, 2));
  return static_cast<int>(std::clamp<std::uint64_t>(target / std::max<std::uint64_t>(bytes, 1), 2, most));
}

/// Of the groups of `set`, the latest time by which a group's first pair of partners half the
/// group apart (ranks i and i + n/2 in group order) had both ended, `ends` indexed by world rank;
/// a group of one rank ends with its rank.
[[nodiscard]] inline double last_groups_first_pair(const GroupSet& set, const std::vector<double>& ends) {
  double latest = 0;
  for (const RankGroup& g : set.groups()) {
    const std::size_t n = g.ranks.size(), half = n / 2;
    double first = n == 1 ? ends.at(static_cast<std::size_t>(g.ranks[0])) : std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < half; ++i)
      first = std::min(first, std::max(ends.at(static_cast<std::size_t>(g.ranks[i])),
                                       ends.at(static_cast<std::size_t>(g.ranks[i + half]))));
    latest = std::max(latest, first);
  }
  return latest;
}

/// Of the groups of `set`, the widest spread of its ranks' ends (last minus first), `ends`
/// indexed by world rank, every rank's end timed from its own release; 0 for groups of one rank.
[[nodiscard]] inline double widest_end_spread(const GroupSet& set, const std::vector<double>& ends) {
  double widest = 0;
  for (const RankGroup& g : set.groups()) {
    const auto [first, last] = std::minmax_element(g.ranks.begin(), g.ranks.end(), [&](int a, int b) {
      return ends.at(static_cast<std::size_t>(a)) < ends.at(static_cast<std::size_t>(b));
    });
    widest = std::max(widest, ends.at(static_cast<std::size_t>(*last)) - ends.at(static_cast<std::size_t>(*first)));
  }
  return widest;
}

/// How much later the second of two chained calls ended on its slowest rank than the first did on
/// its own: `ends` holds each rank's (end of the first call, end of the second), rank after rank,
/// both from the rank's own start.
[[nodiscard]] inline double chained_second_seconds(const std::vector<double>& ends) {
  check(!ends.empty() && ends.size() % 2 == 0, "profile.chain", "need each rank's two ends, got ", ends.size(),
        " values");
  double first = 0, second = 0;
  for (std::size_t r = 0; r < ends.size(); r += 2)
    first = std::max(first, ends[r]), second = std::max(second, ends[r + 1]);
  return second - first;
}

/// The median of `values` (the mean of the middle two of an even count); `values` is reordered.
[[nodiscard]] inline double median(std::vector<double>& values) {
  check(!values.empty(), "profile.chain", "the median of no values");
  const auto mid = values.begin() + std::ptrdiff_t(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  if (values.size() % 2 == 1) return *mid;
  return (*mid + *std::max_element(values.begin(), mid)) / 2;
}

/// The bytes `op` is timed with for a requested size on a group of shape `shape`: whole fp32
/// elements per rank for all_gather and reduce_scatter (a multiple of 4 × group size), whole
/// elements for the ops that hold the whole buffer on every rank; 0 when not one fits.
[[nodiscard]] inline std::uint64_t rounded_message_bytes(comm::op_kind op, std::uint64_t requested, Factor shape) {
  const bool blocks = op == comm::op_kind::all_gather || op == comm::op_kind::reduce_scatter;
  const std::uint64_t unit = blocks ? 4 * static_cast<std::uint64_t>(shape.size()) : 4;
  return requested / unit * unit;
}

/// Measures every (op, group set, size) on `world` (collective: every rank calls it with the same
/// arguments; the times are rank 0's, between two world barriers), every group of a set at once.
/// Sizes are rounded down to whole fp32 elements: for all_gather and reduce_scatter a multiple of
/// 4 × group size bytes (every rank holds a whole block), for the ops that hold the whole buffer on
/// every rank (all_reduce, broadcast, reduce) a multiple of 4. A size too small for one op's
/// rounding is skipped for that op (since 2026-12-05: the gradient norm's 8-byte AllReduce, which
/// Open MPI runs by recursive doubling where a 4 KB one runs as a ring, is timed at its own size);
/// a size no op of any set can take is an error (rule profile.size). With a `gap`, every call
/// instead follows a world barrier and an idle `gap` on every rank (links drained, token buckets
/// refilled, TCP idle: what a call meets in training after a compute segment, which back-to-back
/// calls never do), and the mean over the
/// calls of the slowest rank's time of each is kept (before 2026-12-04: rank 0's), of the
/// first pair's (ProfileEntry::first_pair_seconds, since 2026-12-04) and of the spread of the
/// ranks' ends (ProfileEntry::end_spread_seconds, since 2026-12-07). `forms` says
/// which ops are timed as their asynchronous call waited for at once (MPI: MPI_Iallgather, ... in
/// libnbc) instead of the blocking one (MPI: the tuned component): a different implementation,
/// which on the emulated cluster moves a different number of bytes or paces them differently
/// (docs/cluster.md, "Blocking and nonblocking calls").
template <comm::communicator C>
[[nodiscard]] std::vector<ProfileEntry> measure(C& world, const Mesh& mesh, const std::vector<comm::op_kind>& ops,
                                                const std::vector<std::pair<Factor, GroupSet>>& sets,
                                                const std::vector<std::uint64_t>& sizes, int max_iterations = 200,
                                                std::chrono::microseconds gap = std::chrono::microseconds{0},
                                                CallForms forms = CallForms::engine,
                                                GapTiming timing = GapTiming::slowest_call, int chain_calls = 2) {
  mesh.check_world_size(world.size());
  check(chain_calls >= 2, "profile.chain", "a chain needs at least 2 calls, got ", chain_calls);
  using Clock = std::chrono::steady_clock;
  for (std::uint64_t requested : sizes) {
    const bool fits = std::any_of(sets.begin(), sets.end(), [&](const auto& shape_set) {
      return std::any_of(ops.begin(), ops.end(), [&](comm::op_kind op) {
        return rounded_message_bytes(op, requested, shape_set.first) > 0;
      });
    });
    check(fits, "profile.size", "message size ", requested,
          " fits no op and group measured: all_gather and reduce_scatter need one fp32 element per rank of the "
          "group, the other ops one element");
  }
  std::vector<ProfileEntry> entries;
  for (const auto& [shape, set] : sets) {
    C group = world.split(set);
    const auto g = static_cast<std::uint64_t>(shape.size());
    for (comm::op_kind op : ops)
      for (std::uint64_t requested : sizes) {
        const std::uint64_t bytes = rounded_message_bytes(op, requested, shape);
        if (bytes == 0) continue;  // too small for this op on this group; measured for another
        const std::size_t elements = bytes / 4;
        const std::size_t block = elements / g;
        host_buffer<float> send(elements), recv(elements);
        const bool nonblocking = issued_nonblocking(forms, op);
        const auto once = [&] {
          if (nonblocking) {
            switch (op) {
              case comm::op_kind::all_gather: group.all_gather_async(send.data(), recv.data(), block).wait(); return;
              case comm::op_kind::reduce_scatter: group.reduce_scatter_async(send.data(), recv.data(), block).wait(); return;
              case comm::op_kind::all_reduce: group.all_reduce_async(send.data(), recv.data(), elements).wait(); return;
              case comm::op_kind::broadcast: group.broadcast_async(send.data(), recv.data(), elements, 0).wait(); return;
              case comm::op_kind::reduce:
                group.reduce_async(send.data(), recv.data(), elements, comm::reduce_op::sum, 0).wait();
                return;
            }
          }
          switch (op) {
            case comm::op_kind::all_gather: group.all_gather(send.data(), recv.data(), block); break;
            case comm::op_kind::reduce_scatter: group.reduce_scatter(send.data(), recv.data(), block); break;
            case comm::op_kind::all_reduce: group.all_reduce(send.data(), recv.data(), elements); break;
            case comm::op_kind::broadcast: group.broadcast(send.data(), recv.data(), elements, 0); break;
            case comm::op_kind::reduce: group.reduce(send.data(), recv.data(), elements, comm::reduce_op::sum, 0); break;
          }
        };
        once();  // warm-up: first touch, connection setup
        const int iterations = iterations_for(bytes, max_iterations);
        // The first pair and the ends' spread: timed alone after a gap only.
        double seconds = 0, first_pair_seconds = 0, end_spread_seconds = 0;
        if (gap.count() > 0 && timing == GapTiming::paced) {
          world.barrier();
          const auto t0 = Clock::now();
          for (int i = 0; i < iterations; ++i) {
            std::this_thread::sleep_for(gap);
            once();
          }
          world.barrier();
          const double per_call = std::chrono::duration<double>(Clock::now() - t0).count() / iterations;
          seconds = std::max(per_call - std::chrono::duration<double>(gap).count(), 0.0);
        } else if (gap.count() > 0 && timing == GapTiming::chained) {
          std::vector<double> both(2), every(2 * static_cast<std::size_t>(world.size())), seconds_each;
          for (int i = 0; i < iterations; ++i) {
            world.barrier();
            std::this_thread::sleep_for(gap);
            const auto t0 = Clock::now();
            for (int k = 1; k < chain_calls; ++k) once();
            both[0] = std::chrono::duration<double>(Clock::now() - t0).count();
            once();
            both[1] = std::chrono::duration<double>(Clock::now() - t0).count();
            world.all_gather(both.data(), every.data(), 2);
            seconds_each.push_back(chained_second_seconds(every));
          }
          world.barrier();
          seconds = std::max(median(seconds_each), 0.0);
        } else if (gap.count() > 0) {
          std::vector<double> every(static_cast<std::size_t>(world.size()));  // each rank's time of a call
          for (int i = 0; i < iterations; ++i) {
            world.barrier();
            std::this_thread::sleep_for(gap);
            const auto t0 = Clock::now();
            once();
            const double mine = std::chrono::duration<double>(Clock::now() - t0).count();
            // The call is over when its slowest rank is: on a shared link the ranks' transfers
            // finish one after another, and rank 0's alone read up to 4x faster than the link
            // (docs/cluster.md, "Blocking and nonblocking calls").
            world.all_gather(&mine, every.data(), 1);
            seconds += *std::max_element(every.begin(), every.end()) / iterations;
            // ... and a pair done early goes on while the others still receive: the first pair of
            // partners half a group apart (recursive doubling's last exchange, recursive
            // halving's first) to have both ended, in the group where that came last (the
            // engine's next reductions couple the groups).
            first_pair_seconds += last_groups_first_pair(set, every) / iterations;
            // ... and the ranks leave it that far apart, so reach the next call after equal
            // compute as far apart (Cluster::arrival_spread_seconds).
            end_spread_seconds += widest_end_spread(set, every) / iterations;
          }
          world.barrier();
        } else {
          world.barrier();
          const auto t0 = Clock::now();
          for (int i = 0; i < iterations; ++i) once();
          world.barrier();
          seconds = std::chrono::duration<double>(Clock::now() - t0).count() / iterations;
        }
        entries.push_back(ProfileEntry{op, shape, bytes, seconds, first_pair_seconds, end_spread_seconds});
      }
  }
  return entries;
}

/// The same over the aligned blocks of `shapes`.
template <comm::communicator C>
[[nodiscard]] std::vector<ProfileEntry> measure(C& world, const Mesh& mesh, const std::vector<comm::op_kind>& ops,
                                                const std::vector<Factor>& shapes,
                                                const std::vector<std::uint64_t>& sizes, int max_iterations = 200,
                                                std::chrono::microseconds gap = std::chrono::microseconds{0}) {
  return measure(world, mesh, ops, block_group_sets(mesh, shapes), sizes, max_iterations, gap);
}

}  // namespace amsp_profile
