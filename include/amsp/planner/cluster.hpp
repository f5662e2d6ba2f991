#pragma once
// Cluster descriptions: the mesh, GPU memory, compute peak and efficiency, memory bandwidth, the
// α–β link figures of the analytic fallback, and optionally a measured bandwidth profile; plus the
// built-in description of the paper's testbed.
//
// The paper's testbed (arXiv 2311.00257 §6.1): 128 nodes × 8 NVIDIA A800-SXM4-80GB,
// NVLink inside a node, 4 × HDR InfiniBand (200 Gb/s each) per node, no SHARP. Figures we use and
// where they come from:
//   - bf16 dense peak 312 TFLOP/s and HBM2e 2.039 TB/s: NVIDIA's A100 80GB SXM datasheet (the A800
//     is the A100 with NVLink cut from 600 to 400 GB/s; its compute and memory are unchanged).
//   - NVLink 400 GB/s is both directions together: 200 GB/s per GPU and direction. We take 80 % of
//     it (160 GB/s), the fraction nccl-tests' busbw typically reaches on NVSwitch systems. This is
//     our assumption, not a measurement on A800s.
//   - 4 × HDR 200 Gb/s = 100 GB/s per node and direction; again 80 % (80 GB/s) is assumed usable.
//   - latencies 3 µs per intra-node step and 6 µs per inter-node step: typical NCCL figures,
//     assumed; they matter only for small messages.
//   - compute efficiency 0.65: calibrated, not derived. The paper's single-node 7B run reaches 64 %
//     MFU with M = 128, where our model says communication is entirely hidden, so the kernels alone
//     must run at about 65 % of peak (FlashAttention-2, bf16 GEMMs at h = 4096).
//   - overlap slowdown 0.1: compute loses 10 % of the time communication runs beside it. Assumed
//     (NCCL's kernels occupy a few SMs and share HBM bandwidth); it makes hidden traffic cheap but
//     not free, so that among plans that hide everything the one moving less data wins.
//   - 2 GB per GPU reserved for the CUDA context, NCCL buffers and allocator fragmentation: assumed.

#include <algorithm>
#include <optional>
#include <string>

#include "amsp/comm/op.hpp"
#include "amsp/core/error.hpp"
#include "amsp/planner/bandwidth_profile.hpp"
#include "amsp/planner/collective_cost.hpp"
#include "amsp/sharding/mesh.hpp"

namespace amsp::planner {

struct Cluster {
  std::string name = "custom";
  Mesh mesh{1, 1};
  double gpu_memory_bytes = 0;      ///< per GPU (1e9-based GB, as GPU makers count)
  double reserved_bytes = 0;        ///< per GPU, unavailable to amsp (context, NCCL, fragmentation)
  double peak_flops = 0;            ///< per GPU, dense bf16
  double compute_efficiency = 1.0;  ///< fraction of peak the model's kernels reach
  double hbm_bytes_per_second = 0;  ///< per GPU; prices the optimizer update (memory bound)
  /// Compute slows by this fraction of the communication running beside it (NCCL kernels take SMs
  /// and HBM bandwidth from the model's kernels); see step_model.hpp.
  double overlap_slowdown = 0;
  /// Seconds the step with overlap grows per collective call of the step, beyond its schedule
  /// and κ: each call's hand-over between the host and its stream and its progress, polled on the
  /// cores that compute. On the emulated cluster at 1 Gbit/s (2x4) the overlapped step's excess
  /// over the schedule follows a plan's calls more closely than its communication beside compute
  /// (in 7 of 9 runs), and the plan κ is calibrated on loses no compute beside communication:
  /// calibrated from that plan's step, 0.06–0.09 ms a call there (docs/planner-check-overlap-slowdown.md).
  /// 0 by default (a GPU's streams take their calls without the host's cores).
  double overlap_call_s = 0;
  Links links{};
  std::optional<BandwidthProfile> profile;  ///< measured; the analytic model fills its gaps
  /// Measured with every call after an idle gap (amsp-profile --gap-us): prices the transfer of
  /// the calls that sit between two compute segments (the every-micro-batch window), where
  /// `profile`, timed back to back, prices chained calls. A call after compute finds the links
  /// idle; one chained behind another finds them busy, and on the emulated cluster back-to-back
  /// ReduceScatters of 200 KB ran 1.5-1.9x the wire (docs/cluster.md, "Blocking and nonblocking
  /// calls"). Absent: `profile` prices both.
  std::optional<BandwidthProfile> profile_after_compute;
  /// Measured with each rank starting its next call as soon as its own last one ended, no barrier
  /// between calls (amsp-profile --gap-timing paced: a training loop of equal compute segments):
  /// prices the AllReduce after compute of a group that holds every rank of two or more nodes
  /// (paced_allreduce), before profile_after_compute. Such a group shares its node links with no
  /// other group, and in training its ranks arrive as they left the call before, not released
  /// together by a barrier: on the emulated cluster DDP's 200 KB world AllReduce took 12.21 ms in
  /// training, 12.01-12.04 paced, 12.80 after the gapped profile's barrier
  /// (docs/planner-check-paced-allreduce.md). Not for other groups: two groups that share node
  /// links drift apart in a paced loop and stop sharing them (paced 5.5-6.1 ms, training
  /// 10.55); nor for ReduceScatter, which training pays as the gapped profile does. Absent: the
  /// model before 2026-12-07 (thirty-sixth session).
  std::optional<BandwidthProfile> profile_paced;
  /// True: a paced AllReduce is priced by how far apart its ranks arrive (arrival_spread_seconds),
  /// where profile_after_compute measured how far apart the ranks leave such a call
  /// (BandwidthProfile::end_spread). In training the ranks leave a world AllReduce up to a third of
  /// its time apart (its ring's order) and reach the next one after equal compute as far apart: a
  /// call behind a smaller one then costs more than profile_paced (its own spread), the first
  /// after compute what profile_after_compute says (docs/planner-check-arrival-spread.md). False:
  /// profile_paced prices every such call, the model of 2026-12-07's thirty-sixth session.
  bool arrival_spread = true;
  /// Seconds every collective call costs on top of its transfer, profiled or analytic: the wait
  /// for the group's last rank to arrive from compute. A profile times collectives back to back,
  /// every rank already waiting, so it cannot see it; in training each call waits for the slowest
  /// rank's compute to end (on an oversubscribed CPU a scheduling slice: milliseconds, the emulated
  /// cluster of docs/cluster.md; on GPUs launch and synchronisation skew: microseconds). Calibrated
  /// from a training run (docs/planner-check.md); 0 by default.
  double call_overhead_s = 0;
  /// The same wait counted per hand-over step of the collective's algorithm instead
  /// (algorithm_steps: a ring's n − 1, 2(n − 1) for all_reduce; ⌈log2 n⌉ for recursive doubling /
  /// halving): a call waits once for every peer it hands data to, each of which may be computing.
  /// 0 by default; docs/planner-check-history.md compares the two on the emulated cluster.
  double step_overhead_s = 0;
  /// The algorithm of all_gather and reduce_scatter, which sets their number of hand-overs for
  /// step_overhead_s: rings (NCCL) by default; the emulated cluster pins recursive doubling /
  /// halving (docs/cluster.md).
  GatherScatterAlgorithm gather_scatter = GatherScatterAlgorithm::ring;
  /// True: a call lasts the longer of its transfer and its waits for peers (collective_seconds);
  /// false: their sum, the model before 2026-12-03's reanalysis (kept to reproduce it).
  bool waits_overlap_transfer = true;
  /// Seconds every call *between two compute segments* waits on top of the above (the calls of
  /// the every-micro-batch window: parameter gathers and per-unit gradient reductions, which the
  /// engine issues between the compute of two units; comm_model.hpp's CommTerm::seconds). Such a
  /// call cannot start before the slowest rank of its group has finished its own compute segment,
  /// and on time-shared cores the ranks of a group finish a segment at different times (up to a
  /// scheduling slice each). Calls chained after other calls (the end-of-step reductions behind
  /// the chain's first, the spread) find their peers already synchronised by the call before and
  /// do not pay it; neither does a back-to-back profile. The first of a unit's last-micro-batch
  /// reductions pays it too where chain_head_waits says so. 0 by default; calibrated on the emulated cluster
  /// (docs/planner-check-terms.md, "The wait between compute segments").
  double sync_overhead_s = 0;
  /// True: the first call of a unit's last-micro-batch reductions (CommTerm::heads_chain), issued
  /// as soon as the unit's backward has computed and before the next unit's backward, pays
  /// sync_overhead_s as the every-micro-batch calls do: its ranks come out of the same compute
  /// segment. On the emulated cluster ZeRO-1 (the OS ReduceScatter heading each unit's chain) and
  /// ZeRO-2 (the G ReduceScatter, every-micro-batch) took the same step in every run, with and
  /// without overlap, where only ZeRO-2 paid it (docs/planner-check-chain-wait.md). False: only
  /// the every-micro-batch window pays, the model before 2026-12-07's thirty-ninth session.
  bool chain_head_waits = true;
  /// Seconds the compute of a unit waits, in the overlapped step, after the parameter gather it
  /// needs, when the plan's gathers stay inside a node (step_pipeline.hpp). On the emulated
  /// cluster such a gather, prefetched beside compute, ends only once every rank of the node has
  /// polled it after its own compute: with overlap, the plans that gather inside a node ran their
  /// forward about 0.5 ms and their backward about 1 ms longer than the schedule, at every rate
  /// (docs/planner-check-phases.md). 0 by default (a GPU's gathers progress on their own);
  /// calibrated on the emulated cluster from a plan that gathers inside a node.
  double gather_stall_s = 0;
  /// Seconds after the first rank enters a step that the last one does. No rank's first forward
  /// can start before every rank has entered, so the overlapped step's first forward starts no
  /// earlier than this; a spread or gather at the step's start runs meanwhile and hides it
  /// (step_pipeline.hpp). On the emulated cluster the operating system wakes the ranks' threads
  /// one after another on two CPUs after the step's last collective: 0.3-0.5 ms, traced from two
  /// plans the check does not price (docs/planner-check-entry-skew.md). 0 by default (GPU ranks
  /// leave a collective together to within microseconds).
  double entry_skew_s = 0;

  /// Seconds of `op` on a buffer of `bytes` over a group of shape `group`: the transfer (the
  /// profile when it has that op and shape, the analytic α–β model otherwise) and the waits for
  /// peers (overhead_seconds) run at once, so the longer of the two. A peer still computing delays
  /// its own hand-overs while the bytes already sent keep moving through the links: a call whose
  /// transfer outlasts its waits (a slow inter-node link) hides them, a fast one (inside a node)
  /// is all waits. (Added to the transfer until 2026-12-03: that charged a wire-bound call twice;
  /// docs/planner-check-terms.md, "The waits for peers overlap the transfer".)
  /// `after_compute`: the call sits between two compute segments (priced from
  /// profile_after_compute when there is one).
  [[nodiscard]] double collective_seconds(comm::op_kind op, double bytes, Factor group,
                                          bool after_compute = false) const {
    if (group.size() <= 1 || bytes <= 0) return 0.0;
    return with_waits(transfer_seconds(op, bytes, group, after_compute), op, group);
  }
  /// A call of `op` on `group` whose transfer lasts `transfer` seconds, with its waits for peers
  /// (overhead_seconds): the longer of the two, or their sum without waits_overlap_transfer.
  [[nodiscard]] double with_waits(double transfer, comm::op_kind op, Factor group) const {
    const double waits = overhead_seconds(op, group);
    return waits_overlap_transfer ? std::max(transfer, waits) : transfer + waits;
  }
  /// The transfer alone, every rank already waiting: for a call after compute profile_paced when
  /// paced_allreduce holds and it has the shape, else profile_after_compute when it has the op and
  /// shape; else `profile` when it has them, else the analytic model.
  [[nodiscard]] double transfer_seconds(comm::op_kind op, double bytes, Factor group, bool after_compute = false) const {
    if (group.size() <= 1 || bytes <= 0) return 0.0;
    if (profile_paced && paced_allreduce(op, group, after_compute))
      if (const auto t = profile_paced->seconds(op, group, bytes)) return *t;
    if (after_compute && profile_after_compute)
      if (const auto t = profile_after_compute->seconds(op, group, bytes)) return *t;
    if (profile)
      if (const auto t = profile->seconds(op, group, bytes)) return *t;
    return analytic_seconds(op, bytes, group, mesh.ranks_per_node(), links);
  }
  /// The transfer of a paced AllReduce (paced_allreduce, after compute) that its ranks reach
  /// `spread` seconds apart, from the last one's arrival: the call ends profile_after_compute's
  /// time after its first rank arrives (the early ranks' bytes start through the links at once) or
  /// profile_paced's time after its last (the rest waits for it), whichever is later, so
  /// max(gapped − spread, paced). Traced on the emulated cluster, DDP's 200 KB world AllReduce on
  /// 4x2 at 100 Mbit/s ended 27.4-27.7 ms after its first rank arrived whether they arrived 2.4 or
  /// 6.5 ms apart (gapped: 27.0), its 74 KB one 7.8 ms after the last (paced: 7.8). Nullopt when
  /// the departure spread is unknown (departure_spread_seconds) or a profile lacks the shape.
  [[nodiscard]] std::optional<double> arrival_spread_seconds(comm::op_kind op, double bytes, Factor group,
                                                             double spread) const {
    if (!priced_by_arrival(op, group) || !profile_after_compute->end_spread(op, group, bytes)) return std::nullopt;
    const auto gapped = profile_after_compute->seconds(op, group, bytes);
    const auto paced = profile_paced->seconds(op, group, bytes);
    if (!gapped || !paced) return std::nullopt;
    return std::max(*gapped - spread, *paced);
  }
  /// How far apart the ranks leave a paced AllReduce after compute, so reach the next call of
  /// their chain after equal compute: profile_after_compute's end spread. Nullopt unless
  /// arrival_spread, both profiles and the measured spread are there and paced_allreduce holds.
  [[nodiscard]] std::optional<double> departure_spread_seconds(comm::op_kind op, double bytes, Factor group) const {
    if (!priced_by_arrival(op, group)) return std::nullopt;
    return profile_after_compute->end_spread(op, group, bytes);
  }
  /// True when arrival_spread is on, both profiles are there and paced_allreduce holds for a call
  /// of `op` on `group` after compute that the paced profile has.
  [[nodiscard]] bool priced_by_arrival(comm::op_kind op, Factor group) const {
    return arrival_spread && profile_paced && profile_after_compute && paced_allreduce(op, group, true) &&
           profile_paced->has(op, group);
  }
  /// True for the calls profile_paced prices: an AllReduce after compute over a group of every
  /// rank of two or more nodes.
  [[nodiscard]] bool paced_allreduce(comm::op_kind op, Factor group, bool after_compute) const {
    return after_compute && op == comm::op_kind::all_reduce && group.inter > 1 && group.intra == mesh.ranks_per_node();
  }
  /// call_overhead_s + algorithm_steps · step_overhead_s of one call of `op` on `group`.
  [[nodiscard]] double overhead_seconds(comm::op_kind op, Factor group) const {
    return call_overhead_s + algorithm_steps(op, group.size(), gather_scatter) * step_overhead_s;
  }
  /// The wait of one call on `group` that sits between two compute segments: sync_overhead_s,
  /// 0 for a group of one (no peer to wait for).
  [[nodiscard]] double between_compute_seconds(Factor group) const { return group.size() > 1 ? sync_overhead_s : 0.0; }
  /// True when the time of `op` on `group` comes from a measurement.
  [[nodiscard]] bool measured(comm::op_kind op, Factor group) const { return profile && profile->has(op, group); }
};

/// Fails with rule planner.cluster unless memory, peak, efficiency and links are positive.
inline void validate(const Cluster& c) {
  check(c.gpu_memory_bytes > 0 && c.reserved_bytes >= 0, "planner.cluster", "cluster '", c.name,
        "': GPU memory must be positive and the reserve non-negative, got ", c.gpu_memory_bytes, " and ",
        c.reserved_bytes, " bytes");
  check(c.peak_flops > 0 && c.compute_efficiency > 0 && c.compute_efficiency <= 1 && c.hbm_bytes_per_second > 0,
        "planner.cluster", "cluster '", c.name, "': peak FLOP/s, HBM bandwidth must be positive and efficiency in (0, 1], got ",
        c.peak_flops, ", ", c.hbm_bytes_per_second, ", ", c.compute_efficiency);
  check(c.call_overhead_s >= 0 && c.step_overhead_s >= 0 && c.sync_overhead_s >= 0 && c.gather_stall_s >= 0 &&
            c.entry_skew_s >= 0,
        "planner.cluster", "cluster '", c.name,
        "': the overhead per collective call, per ring step, between compute segments, the gather stall and the "
        "ranks' entry skew must be non-negative, got ",
        c.call_overhead_s, ", ", c.step_overhead_s, ", ", c.sync_overhead_s, ", ", c.gather_stall_s, " and ",
        c.entry_skew_s, " s");
  check(c.overlap_slowdown >= 0 && c.overlap_slowdown <= 1, "planner.cluster", "cluster '", c.name,
        "': overlap slowdown must lie in [0, 1], got ", c.overlap_slowdown);
  check(c.overlap_call_s >= 0, "planner.cluster", "cluster '", c.name,
        "': the overlapped step's seconds per collective call must be non-negative, got ", c.overlap_call_s);
  check(c.links.intra_bytes_per_second > 0 && c.links.node_bytes_per_second > 0 && c.links.intra_latency_s >= 0 &&
            c.links.inter_latency_s >= 0,
        "planner.cluster", "cluster '", c.name, "': link bandwidths must be positive and latencies non-negative");
}

/// The paper's testbed with `nodes` nodes of 8 A800-80GB (128 in the paper). See the file comment.
[[nodiscard]] inline Cluster paper_cluster(int nodes = 128) {
  Cluster c;
  c.name = "paper-a800";
  c.mesh = Mesh(8, nodes);
  c.gpu_memory_bytes = 80e9;
  c.reserved_bytes = 2e9;
  c.peak_flops = 312e12;
  c.compute_efficiency = 0.65;
  c.hbm_bytes_per_second = 2.039e12;
  c.overlap_slowdown = 0.1;
  c.links = Links{0.8 * 200e9, 0.8 * 4 * 25e9, 3e-6, 6e-6};
  return c;
}

}  // namespace amsp::planner
