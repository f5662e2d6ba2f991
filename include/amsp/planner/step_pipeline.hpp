#pragma once
// The overlapped step as the engine's schedule runs it, unit by unit (docs/planner.md, "Step
// time, overlap, MFU"). The phase windows of step_model.hpp let any call hide behind any compute
// of its phase; in the engine a call can only run once what it needs exists, and compute waits
// for what it needs:
//   - the spread of unit i (after the update) runs on the communication stream, unit by unit;
//   - the first forward starts once the update is done and the last rank has entered the step
//     (UnitSchedule::entry_skew: Cluster::entry_skew_s), and the rules below allow;
//   - a forward gathers unit i on the gather stream (after its spread in the first micro-batch),
//     unit 0 when the forward reaches it and unit i + 1 as a prefetch when unit i starts to
//     compute; unit i computes once its gather has ended (and UnitSchedule::gather_stall after
//     it where the gathers stay inside a node: Cluster::gather_stall_s);
//   - a backward gathers again from the last unit down (the last when the backward starts, unit
//     i − 1 as a prefetch beside unit i) unless the gathered weights were kept;
//   - unit i's gradient reduction runs on the communication stream once its backward has
//     computed (the OS stage and the replica AllReduce too in the last micro-batch); the next
//     micro-batch starts at once, the step ends when the stream has drained, then the norm.
// Each term's seconds are spread over the units in proportion to their parameters, and so is
// each pass's compute (the way a GPU layer's time goes with its weights, and the way
// amsp-train's emulated accelerator sleeps). κ (Cluster::overlap_slowdown) then slows the
// compute by κ × the communication that ran beside it:
//     T = T_schedule + κ · Σ_compute segments (time a stream was busy inside the segment).
// Two streams run at once. When both streams' calls cross nodes they share the node links: while
// both transfer, each moves at half its rate (the profile times each call alone), so a piece
// overlapping the other stream's transfers for o seconds lasts o / 2 longer; the schedule is
// run again against the other stream's transfers of the round before until it settles. (Without
// the sharing, 2026-12-04's runs q and s put ZeRO-3 with overlap 16-22 % under its measured step
// at 100 and 200 Mbit/s: its gathers and reductions overlap in the backward.)
// A gather or reduction that finds its stream idle is priced as its term is in the schedule
// without overlap (CommTerm::after_compute: a call after compute, links drained); one queued
// behind another piece of its stream as a call back to back (`chained_seconds`), which is what a
// slow link makes of the engine's calls: each waits for the one before. The spread's first piece
// finds the links idle too (since the step's last reduction, the norm and the update): priced
// from `gapped_seconds` (every call after an idle gap) when given. Per-rank traces at 1 Gbit/s
// (docs/planner-check-quiet-host.md) put ZeRO-1's first forward as late as DDP's, where the
// back-to-back price made it wait 1.2-1.5 ms; at 100 Mbit/s the spread's first call took its
// gapped price. A spread whose groups share a node link (CommTerm::groups_per_link > 1) keeps the
// link busy from its first piece on, so its later pieces queue at the back-to-back price even
// behind a smaller one (docs/planner-check-spread-pairs.md).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/planner/comm_model.hpp"

namespace amsp::planner {

/// The compute of one step, unit by unit, for pipelined_step_seconds.
struct UnitSchedule {
  std::vector<double> shares;  ///< each unit's share of the parameters, forward order (sums to 1)
  double forward = 0;          ///< seconds of one micro-batch's forward (all units)
  double backward = 0;         ///< seconds of one micro-batch's backward
  int micro_batches = 1;
  double update = 0;          ///< the optimizer update before the spread (nothing overlaps it)
  bool gather_in_backward = true;  ///< the backward gathers again (ScheduleOptions::reshard_after_forward)
  /// Seconds a unit's compute waits after the gather it needs when the gathers stay inside a node
  /// (Cluster::gather_stall_s).
  double gather_stall = 0;
  /// Seconds from the step's start before the last rank enters it (Cluster::entry_skew_s): the
  /// first forward starts no earlier.
  double entry_skew = 0;
};

/// Where the overlapped step's time goes, in seconds from the step's start (the update's start):
/// when the first forward's compute starts (after its spread or gather), when the last
/// micro-batch's forward and backward computes end, and the step's end as pipelined_step_seconds
/// returns it (κ's slowdown included; the schedule's other phases are before it). Per-rank traces
/// give the same phases (scripts/cluster/trace_phases.py); check.py --phase-traces sets the two
/// side by side, plan against plan, to show which phase of the model is off.
struct StepPhases {
  double first_forward_start = 0, forward_end = 0, backward_end = 0, end = 0;
};

/// Each unit's share of the parameters of `units`.
[[nodiscard]] inline std::vector<double> parameter_shares(std::span<const Module> units) {
  double total = 0;
  for (const Module& m : units) total += static_cast<double>(m.params);
  check(!units.empty() && total > 0, "planner.units", "a step needs units with parameters, got ", units.size(),
        " units of ", total, " parameters");
  std::vector<double> shares;
  for (const Module& m : units) shares.push_back(static_cast<double>(m.params) / total);
  return shares;
}

namespace detail {
using Intervals = std::vector<std::pair<double, double>>;  // [start, end), in time order, disjoint

/// Seconds of [from, to) that `runs` (in time order) cover.
[[nodiscard]] inline double covered_seconds(double from, double to, const Intervals& runs) {
  double total = 0;
  for (const auto& [start, end] : runs) {
    if (start >= to) break;
    total += std::max(0.0, std::min(end, to) - std::max(start, from));
  }
  return total;
}

/// A stream: work queued on it runs one piece after another, each once it is ready and the
/// piece before it has ended. A stream whose calls cross nodes shares the node links with the
/// other stream's crossing calls (`sharing`, that stream's transfers of the previous round): while
/// both transfer, each moves at half the rate, so a piece of `s` seconds alone that overlaps the
/// other's transfers for o seconds lasts s + o / 2.
struct PipelineStream {
  double free_at = -std::numeric_limits<double>::infinity();  // nothing has run yet
  Intervals runs;
  bool crosses_nodes = false;
  const Intervals* sharing = nullptr;
  double last_idle_seconds = 0;  // the idle price of the piece before
  bool keeps_links_busy = false;  // a queued piece always takes its queued price
  /// Runs a piece ready at `ready`: `idle_seconds` long when the stream went idle before it was
  /// ready, `queued_seconds` when it starts as (or after) the piece before ends: a prefetch issued
  /// the moment the previous gather completes follows it back to back. A piece queued behind a
  /// smaller one (a lower idle price) still takes its idle price: the back-to-back profile times
  /// a call behind one of its own size, and in the traces the spread's second call (200 KB behind
  /// 74 KB) ran near its gapped price in five of six configurations, its third (behind 200 KB) at
  /// its back-to-back one in all six (docs/planner-check-queued-and-norm.md). Not so where the
  /// pieces keep the links busy (`keeps_links_busy`: several groups on each node link), which
  /// leaves the next piece nothing of an idle link's start (docs/planner-check-spread-pairs.md).
  double run(double ready, double idle_seconds, double queued_seconds) {
    const bool queued = !(ready > free_at) && (keeps_links_busy || !(last_idle_seconds < idle_seconds));
    const double alone = queued ? queued_seconds : idle_seconds;
    last_idle_seconds = idle_seconds;
    const double start = std::max(ready, free_at);
    double seconds = alone;
    if (crosses_nodes && sharing && alone > 0)
      for (int round = 0; round < 64; ++round) {  // s = alone + o(s) / 2 contracts by at least 1/2
        const double next = alone + 0.5 * covered_seconds(start, start + seconds, *sharing);
        if (std::abs(next - seconds) <= 1e-12 * (1.0 + next)) break;
        seconds = next;
      }
    free_at = start + seconds;
    if (seconds > 0) runs.emplace_back(start, free_at);
    return free_at;
  }
};

/// Seconds where `a` and `b` overlap (both in time order and disjoint: one merge pass).
[[nodiscard]] inline double overlap_seconds(const Intervals& a, const Intervals& b) {
  double total = 0;
  for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    total += std::max(0.0, std::min(a[i].second, b[j].second) - std::max(a[i].first, b[j].first));
    (a[i].second < b[j].second ? i : j) += 1;
  }
  return total;
}
}  // namespace detail

/// The overlapped step's seconds (without StepCompute::wait) for engine-mode terms
/// (comm_model.hpp, CommMode::engine) and their seconds (as CommTerm::seconds prices them), or a
/// negative value when a term is not one of the engine's (the paper's terms: step_model.hpp's
/// windows price those). `chained_seconds` (one per term, every call priced back to back) prices
/// a gather or reduction queued behind another; without it `term_seconds` prices every piece.
/// `gapped_seconds` (one per term, every call priced after an idle gap) prices the spread's first
/// piece; without it `term_seconds` does. `phases`, when given, receives the schedule's phases.
[[nodiscard]] inline double pipelined_step_seconds(const UnitSchedule& u, double overlap_slowdown,
                                                   const std::vector<CommTerm>& terms,
                                                   const std::vector<double>& term_seconds,
                                                   const std::vector<double>* chained_seconds = nullptr,
                                                   const std::vector<double>* gapped_seconds = nullptr,
                                                   StepPhases* phases = nullptr) {
  const std::size_t n = u.shares.size();
  check(n > 0 && u.micro_batches >= 1 && term_seconds.size() == terms.size() &&
            (!chained_seconds || chained_seconds->size() == terms.size()) &&
            (!gapped_seconds || gapped_seconds->size() == terms.size()),
        "planner.pipeline", "need units, micro-batches >= 1 and one time per term, got ", n, " units, ",
        u.micro_batches, " micro-batches, ", term_seconds.size(), " times (",
        chained_seconds ? chained_seconds->size() : term_seconds.size(), " chained, ",
        gapped_seconds ? gapped_seconds->size() : term_seconds.size(), " gapped) for ", terms.size(), " terms");
  const int M = u.micro_batches;
  // Per-step seconds of each slot of the schedule: [0] as the terms price it, [1] queued.
  double gathers[2] = {}, each_reduction[2] = {}, last_reduction[2] = {}, spread = 0, norm = 0;
  double spread_first = 0;  // the spread's price on idle links (its first piece)
  bool spread_shares_links = false;  // several of the spread's groups on each node link
  bool gathers_cross = false, comm_crosses = false;  // whether each stream's calls use the node links
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const std::string& name = terms[i].name;
    const double t = term_seconds[i], queued = chained_seconds ? (*chained_seconds)[i] : t;
    const bool crosses = !terms[i].intra_node();
    // Adds the term to a slot of the communication stream (the norm's one double shares nothing).
    const auto add = [&](double (&slot)[2]) { slot[0] += t, slot[1] += queued, comm_crosses |= crosses; };
    if (name == name_of(TrafficTerm::param_gather)) gathers[0] += t, gathers[1] += queued, gathers_cross |= crosses;
    else if (name == name_of(TrafficTerm::grad_reduce_p) || name == name_of(TrafficTerm::grad_reduce_g)) add(each_reduction);
    else if (name == name_of(TrafficTerm::grad_reduce_os) || name == name_of(TrafficTerm::grad_replicas)) add(last_reduction);
    else if (name == name_of(TrafficTerm::param_spread))
      spread += t, spread_first += gapped_seconds ? (*gapped_seconds)[i] : t, comm_crosses |= crosses,
      spread_shares_links |= crosses && terms[i].groups_per_link > 1;
    else if (name == name_of(TrafficTerm::grad_norm)) norm += t;
    else return -1.0;
  }
  const double passes = u.gather_in_backward ? 2.0 : 1.0;
  // A unit's compute that needed a gather inside a node starts `stall` after both the gather and
  // the compute before it.
  const double stall = gathers[0] > 0 && !gathers_cross ? u.gather_stall : 0.0;
  // One pass over the schedule; `gathers_share` and `comm_share` are the other stream's crossing
  // transfers of the round before (none in the first round).
  struct Round {
    double end = 0, beside = 0, first_forward_start = 0, forward_end = 0, backward_end = 0;
    detail::Intervals gathers, comm;
  };
  const auto schedule = [&](const detail::Intervals* gathers_share, const detail::Intervals* comm_share) {
    detail::PipelineStream comm, gather_stream;
    comm.crosses_nodes = comm_crosses, comm.sharing = comm_share;
    gather_stream.crosses_nodes = gathers_cross, gather_stream.sharing = gathers_share;
    // Runs unit i's gather on the gather stream once ready.
    const auto gather = [&](double ready, std::size_t i) {
      const double share = u.shares[i] / (M * passes);
      return gather_stream.run(ready, gathers[0] * share, gathers[1] * share);
    };
    detail::Intervals compute;  // each unit's compute
    Round r;
    std::vector<double> spread_end(n);
    comm.keeps_links_busy = spread_shares_links;
    for (std::size_t i = 0; i < n; ++i)  // all ready at the update: the first runs on the idle stream
      spread_end[i] = comm.run(u.update, spread_first * u.shares[i], spread * u.shares[i]);
    comm.keeps_links_busy = false;
    // The first forward waits for the update, for the last rank to enter the step and (below) for
    // its spread or gather; the spread and the gathers run from the update on, so a spread or
    // gather at the start hides the entry skew.
    double t = std::max(u.update, u.entry_skew);
    for (int m = 0; m < M; ++m) {
      // The first micro-batch's use of unit i waits for its spread.
      const auto after_spread = [&](std::size_t i, double at) { return m == 0 ? std::max(at, spread_end[i]) : at; };
      // Forward: unit 0 gathered when reached, unit i + 1 prefetched as unit i starts.
      double gathered = gather(after_spread(0, t), 0);
      for (std::size_t i = 0; i < n; ++i) {
        const double start = after_spread(i, std::max(t, gathered) + stall);
        if (i + 1 < n) gathered = gather(after_spread(i + 1, start), i + 1);
        if (m == 0 && i == 0) r.first_forward_start = start;
        t = start + u.forward * u.shares[i];
        compute.emplace_back(start, t);
      }
      r.forward_end = t;
      // Backward: the last unit gathered again when the backward starts, unit i − 1 beside unit i.
      gathered = u.gather_in_backward ? gather(t, n - 1) : t;
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = n - 1 - k;
        const double start = std::max(t, gathered) + (u.gather_in_backward ? stall : 0.0);
        if (u.gather_in_backward && i > 0) gathered = gather(start, i - 1);
        t = start + u.backward * u.shares[i];
        compute.emplace_back(start, t);
        const auto reduction = [&](int q) {
          return (each_reduction[q] / M + (m == M - 1 ? last_reduction[q] : 0.0)) * u.shares[i];
        };
        comm.run(t, reduction(0), reduction(1));
      }
      r.backward_end = t;
    }
    r.end = std::max(t, comm.free_at) + norm;
    // The communication that ran beside compute.
    r.beside = detail::overlap_seconds(compute, comm.runs) + detail::overlap_seconds(compute, gather_stream.runs);
    r.gathers = std::move(gather_stream.runs);
    r.comm = std::move(comm.runs);
    return r;
  };
  // Rounds until the two streams' sharing of the links settles: each round prices every piece
  // against the other stream's transfers of the round before; two overlapping pieces approach
  // their shared end from alternate sides, the gap halving each round.
  const auto same = [](const detail::Intervals& a, const detail::Intervals& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (std::abs(a[i].first - b[i].first) + std::abs(a[i].second - b[i].second) > 1e-12 * (1.0 + a[i].second))
        return false;
    return true;
  };
  Round r = schedule(nullptr, nullptr);
  if (gathers_cross && comm_crosses)
    for (int round = 0; round < 200; ++round) {
      Round next = schedule(&r.comm, &r.gathers);
      const bool settled = same(next.gathers, r.gathers) && same(next.comm, r.comm);
      r = std::move(next);
      if (settled) break;
    }
  const double end = r.end + overlap_slowdown * r.beside;
  if (phases) *phases = {r.first_forward_start, r.forward_end, r.backward_end, end};
  return end;
}

}  // namespace amsp::planner
