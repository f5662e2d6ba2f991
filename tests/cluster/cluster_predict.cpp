// amsp-cluster-predict: the planner's prediction for the example (amsp-train's GPT) on
// the emulated cluster (docs/cluster.md), one JSON line per plan: step seconds with and without
// overlap from a measured compute model and a measured bandwidth profile, the engine's expected
// inter-node bytes per rank, and the bytes the node links should carry under the collective
// algorithms scripts/cluster.sh pins. Used by scripts/cluster-check.sh.
//
//   amsp-cluster-predict --mesh 4x2 --plans 'ddp;zero3;mics(2)' --profile bw.json [--profile-after-compute gap.json]
//       [--profile-paced paced.json] --node-gbit 1
//       --calibration 8:0.05,16:0.09 (or --seconds-per-sample 2e-4 --update-seconds-per-param 3e-9)
//       [--update-turns 1]
//       [--global-batch 256]
//       [--micro-batches 1] [--context 64] [--width 64] [--heads 4] [--layers 2] [--bf16 0|1]
//       [--keep-gathered 0|1] [--intra-gbytes 2] [--overlap-slowdown 0] [--call-overhead 0] [--step-overhead 0]
//       [--sync-overhead 0] [--gather-stall 0] [--entry-skew 0] [--overlap-call 0] [--gather-scatter recursive|ring] [--waits overlap|add] [--stagger on|off]
//       [--arrival-spread on|off] [--chain-wait on|off]
//       [--contention 8:2e-3,4:1e-3,1:4e-4 [--contention-ranks 8]]
// --profile prices the calls chained after other calls, --profile-after-compute (a profile of calls
// after an idle gap) those between two compute segments (Cluster::profile_after_compute; without
// it --profile prices both). --profile-paced (amsp-profile --gap-timing paced) prices the AllReduce
// after compute of the groups that hold every rank of two or more nodes (Cluster::profile_paced);
// with --arrival-spread on (the default) each such call as far apart as its ranks reach it, from
// the end spread --profile-after-compute measured (Cluster::arrival_spread; off: the paced price
// alone, the model before 2026-12-07's thirty-seventh session).
// --intra-gbytes (GB/s per rank inside a node) and --node-gbit (Gbit/s of a node link, the tc rate)
// price the group shapes the profile lacks (the strided ones: one rank per node across nodes), with
// --intra-latency and --inter-latency seconds per algorithm step (default 0); --call-overhead
// seconds is waited in every collective call (Cluster::call_overhead_s), --step-overhead seconds
// in every step of its ring (Cluster::step_overhead_s), --sync-overhead seconds is added to every call that
// sits between two compute segments (Cluster::sync_overhead_s; --chain-wait on, the default, counts
// among them the first of each unit's last-micro-batch reductions when no every-micro-batch
// reduction precedes it, off only the every-micro-batch calls: Cluster::chain_head_waits),
// --gather-stall seconds is what a
// unit's compute waits after its gather in the overlapped step when the gathers stay inside a node
// (Cluster::gather_stall_s), --entry-skew seconds how far after the first rank the last one enters
// a step, before which the overlapped step's first forward cannot start (Cluster::entry_skew_s),
// --overlap-call seconds what the step with overlap adds per collective call of the step, the
// loss AllReduce included (Cluster::overlap_call_s).
// A step is a hand-over of the
// algorithm: --gather-scatter ring (the default) counts n − 1 for all_gather and reduce_scatter,
// recursive ⌈log2 n⌉ (Cluster::gather_scatter). The waits and the transfer of a call overlap
// (Cluster::collective_seconds: the longer of the two; --waits add: their sum, the model before).
// --stagger on (the default) lets the step without overlap hide backward compute behind the
// backward gathers' first pair's head start, measured by --profile-after-compute (gather_stagger.hpp;
// the emulated cluster pins the recursive doubling and halving it needs, whatever --gather-scatter
// counts for the overheads); off prices the model before 2026-12-04's trace.
// Each line also lists every call
// ("calls": term, op, p0, p1, bytes, count, seconds without the overheads, 1 when the paced profile
// prices it: Cluster::paced_allreduce) for the analysis of
// the model's terms. --contention "k:seconds per sample,..." (measured with k of the ranks computing
// at once, the others blocked; --contention-ranks ranks share the cores, default the world) prices
// each schedule's compute at the contention its own step implies (contended_step_time); the line
// then also has each schedule's compute and expected computing ranks. "phases" are the overlapped
// schedule's (StepPhases, seconds): first forward start, forward end, backward end, end (without
// the loss's AllReduce), for check.py --phase-traces. --update-turns k (default 1) prices each
// rank's update k times over: k ranks share a core and update one after another
// (ComputeModel::update_turns).

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/planner/step_model.hpp"
#include "amsp/sharding/presets.hpp"
#include "amsp_train/gpt_config.hpp"

namespace {
using namespace amsp;
using namespace amsp::planner;

// Bytes all node links together carry for one call of `op` on every group of shape p0 × p1 (the
// groups' ranks node by node, as PlanGroups orders them), under the algorithms scripts/cluster.sh
// pins (measured on 4x2 within 1 %):
//   AllGather, recursive doubling (the engine's gathers are nonblocking, which Open MPI's libnbc
//     runs by recursive doubling or linearly; both send each rank's block once to every rank of
//     the other nodes): (n − p0)·S;
//   AllReduce, ring: a ring crosses the node boundary on p1 of its n hops: p1·2(n − 1)/n·S;
//   ReduceScatter-block, recursive halving: every rank sends S/2, S/4, ... to partners n/2,
//     n/4, ... ranks away, across nodes while the distance is at least p0: n·S·(1 − 1/p1).
double link_bytes_per_group(comm::op_kind op, double bytes, Factor g) {
  if (g.inter == 1) return 0.0;
  const double n = g.size();
  switch (op) {
    case comm::op_kind::all_gather: return (n - g.intra) * bytes;
    case comm::op_kind::all_reduce: return g.inter * 2 * (n - 1) / n * bytes;
    case comm::op_kind::reduce_scatter: return n * bytes * (1.0 - 1.0 / g.inter);
    default: return (n - g.intra) * bytes;  // broadcast/reduce: only whole-tensor plans, not run here
  }
}

struct Args {
  std::map<std::string, std::string, std::less<>> values;
  [[nodiscard]] std::string text(std::string_view key, std::string fallback = "") const {
    const auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
  }
  [[nodiscard]] double number(std::string_view key, double fallback) const {
    const auto it = values.find(key);
    if (it == values.end()) return fallback;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    check(end != it->second.c_str() && *end == '\0', "cli.number", "--", key, " needs a number, got '", it->second, "'");
    return v;
  }
  /// The flag `key` (on or off; `fallback` when absent) as a bool; anything else is a cli.value error.
  [[nodiscard]] bool on_off(std::string_view key, std::string_view fallback) const {
    const std::string v = text(key, std::string(fallback));
    check(v == "on" || v == "off", "cli.value", "--", key, " must be on or off, got '", v, "'");
    return v == "on";
  }
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string_view flag = argv[i];
    check(flag.starts_with("--") && i + 1 < argc, "cli.value", "expected --option value, got '", flag, "'");
    a.values[std::string(flag.substr(2))] = argv[i + 1];
  }
  return a;
}

// Splits at `separator` outside parentheses (plans such as mics(2) contain none, but p=..,g=.. do
// contain commas, hence ';' between plans).
std::vector<std::string> split(const std::string& list, char separator) {
  std::vector<std::string> out;
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '(') ++depth;
    if (i < list.size() && list[i] == ')') --depth;
    if (i == list.size() || (list[i] == separator && depth == 0)) {
      if (i > start) out.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const Mesh mesh = parse_mesh(a.text("mesh", "4x2"));
  // The example's buckets are the engine's units: embeddings, one per block, the head.
  const amsp_train::GptConfig model{.context = static_cast<int>(a.number("context", 64)),
                                    .width = static_cast<int>(a.number("width", 64)),
                                    .heads = static_cast<int>(a.number("heads", 4)),
                                    .layers = static_cast<int>(a.number("layers", 2))};
  std::vector<Module> units;
  double params = 0;
  for (const amsp_train::ParamBucket& bucket : amsp_train::gpt_buckets(model)) {
    units.push_back({bucket.name, -1, static_cast<std::int64_t>(bucket.numel)});
    params += static_cast<double>(bucket.numel);
  }
  Cluster cluster;
  cluster.mesh = mesh;
  cluster.links = Links{a.number("intra-gbytes", 2.0) * 1e9, a.number("node-gbit", 1.0) * 1e9 / 8,
                        a.number("intra-latency", 0.0), a.number("inter-latency", 0.0)};
  if (const std::string p = a.text("profile"); !p.empty()) cluster.profile = BandwidthProfile::load(p);
  if (const std::string p = a.text("profile-after-compute"); !p.empty())
    cluster.profile_after_compute = BandwidthProfile::load(p);
  if (const std::string p = a.text("profile-paced"); !p.empty()) cluster.profile_paced = BandwidthProfile::load(p);
  cluster.arrival_spread = a.on_off("arrival-spread", "on");
  cluster.chain_head_waits = a.on_off("chain-wait", "on");
  cluster.call_overhead_s = a.number("call-overhead", 0.0);
  cluster.step_overhead_s = a.number("step-overhead", 0.0);
  cluster.sync_overhead_s = a.number("sync-overhead", 0.0);
  cluster.gather_stall_s = a.number("gather-stall", 0.0);
  cluster.entry_skew_s = a.number("entry-skew", 0.0);
  cluster.overlap_call_s = a.number("overlap-call", 0.0);
  // The hand-overs --step-overhead is paid for: rings (n − 1, the default: it predicts the cluster's
  // steps better, docs/planner-check-terms.md), or the recursive doubling / halving scripts/cluster.sh pins.
  const bool stagger = a.on_off("stagger", "on");
  const std::string gather_scatter = a.text("gather-scatter", "ring");
  check(gather_scatter == "recursive" || gather_scatter == "ring", "cli.value",
        "--gather-scatter must be recursive or ring, got '", gather_scatter, "'");
  cluster.gather_scatter = gather_scatter == "ring" ? GatherScatterAlgorithm::ring : GatherScatterAlgorithm::recursive;
  // A call's waits for peers and its transfer: overlapped (the longer counts), or added (the model
  // before 2026-12-03's reanalysis).
  const std::string waits = a.text("waits", "overlap");
  check(waits == "overlap" || waits == "add", "cli.value", "--waits must be overlap or add, got '", waits, "'");
  cluster.waits_overlap_transfer = waits == "overlap";
  check(cluster.call_overhead_s >= 0 && cluster.step_overhead_s >= 0 && cluster.sync_overhead_s >= 0 &&
            cluster.gather_stall_s >= 0 && cluster.entry_skew_s >= 0 && cluster.overlap_call_s >= 0,
        "cli.value",
        "--call-overhead, --step-overhead, --sync-overhead, --gather-stall, --entry-skew and --overlap-call must be "
        ">= 0 seconds, got ",
        cluster.call_overhead_s, ", ", cluster.step_overhead_s, ", ", cluster.sync_overhead_s, ", ",
        cluster.gather_stall_s, ", ", cluster.entry_skew_s, ", ", cluster.overlap_call_s);
  const double kappa = a.number("overlap-slowdown", 0.0);
  // The compute model: fitted from calibration steps "samples:seconds,..." (one rank, no
  // communication, all of the model's parameters updated), or given directly.
  ComputeModel compute{a.number("seconds-per-sample", 0), a.number("forward-fraction", 1.0 / 3.0),
                       a.number("update-seconds-per-param", 0), a.number("update-turns", 1)};
  if (const std::string c = a.text("calibration"); !c.empty()) {
    std::vector<CalibrationStep> steps;
    for (const std::string& point : split(c, ',')) {
      const std::size_t colon = point.find(':');
      check(colon != std::string::npos, "cli.value", "--calibration needs samples:seconds pairs, got '", point, "'");
      steps.push_back({std::stod(point.substr(0, colon)), std::stod(point.substr(colon + 1))});
    }
    const double turns = compute.update_turns;
    compute = fit_compute_model(steps, params, compute.forward_fraction);
    compute.update_turns = turns;
  }
  CpuContention contention{static_cast<int>(a.number("contention-ranks", mesh.world_size())), {}};
  for (const std::string& point : split(a.text("contention"), ',')) {
    const std::size_t colon = point.find(':');
    check(colon != std::string::npos, "cli.value", "--contention needs ranks:seconds pairs, got '", point, "'");
    contention.points.push_back({std::stod(point.substr(0, colon)), std::stod(point.substr(colon + 1))});
  }
  validate(contention);
  const int M = static_cast<int>(a.number("micro-batches", 1));
  const double samples = a.number("global-batch", 256) / (mesh.world_size() * M);
  ScheduleOptions schedule;  // the example's: fp32 (or bf16) on the wire, gathered again for backward
  schedule.param_wire_bytes = schedule.grad_wire_bytes = a.number("bf16", 0) != 0 ? 2 : 4;
  schedule.reshard_after_forward = a.number("keep-gathered", 0) == 0;
  for (const std::string& name : split(a.text("plans", "ddp"), ';')) {
    const Plan plan = parse_plan(name, mesh);
    const PlanGroups groups(mesh, plan);
    const std::vector<CommTerm> terms = comm_terms(groups, units, M, schedule);
    const TermPrices prices = term_prices(terms, cluster);
    std::string call_list;  // every call, for the analysis of the model's terms (scripts/cluster/check.py)
    Cluster bare = cluster;
    bare.call_overhead_s = bare.step_overhead_s = bare.sync_overhead_s = 0;
    const double calls = calls_per_step(terms) + 1;  // 1: the loss AllReduce
    double inter_per_rank = 0, link_bytes = 0;
    for (const CommTerm& t : terms) {
      if (!t.intra_node()) inter_per_rank += t.bytes_per_rank();
      for (const CollectiveCall& c : t.calls) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "%s[\"%s\",\"%s\",%d,%d,%.0f,%g,%.6g,%d]", call_list.empty() ? "" : ",",
                      t.name.c_str(), std::string(comm::name_of(c.op)).c_str(), c.group.intra, c.group.inter, c.bytes,
                      c.count, bare.collective_seconds(c.op, c.bytes, c.group, t.after_compute),
                      cluster.paced_allreduce(c.op, c.group, t.after_compute) ? 1 : 0);
        call_list += buf;
      }
      for (const CollectiveCall& c : t.calls)
        link_bytes += c.count * mesh.world_size() / c.group.size() * link_bytes_per_group(c.op, c.bytes, c.group);
    }
    // The example's own traffic, outside the engine: the training loss AllReduced over the world
    // (one double) after every step; nothing hides it (it waits for the step): a wait at the end
    // of the step, next to the update.
    StepCompute step = measured_step_compute(plan, compute, samples, M, params);
    step.unit_shares = parameter_shares(units);  // the engine's schedule, bucket by bucket
    step.gather_in_backward = schedule.reshard_after_forward;
    step.gather_stall = cluster.gather_stall_s;
    step.entry_skew = cluster.entry_skew_s;
    step.overlap_calls = cluster.overlap_call_s * calls;  // the engine's calls and the loss AllReduce
    if (stagger) step.stagger = backward_stagger(terms, cluster, M, step.gather_in_backward);
    const Factor world{mesh.ranks_per_node(), mesh.nodes()};
    step.wait = cluster.collective_seconds(comm::op_kind::all_reduce, sizeof(double), world);
    const ContendedStepTime c = contended_step_time(step, samples, contention, kappa, terms, prices.seconds,
                                                    &prices.chained, &prices.gapped);
    const StepTime& s = c.overlapped;
    std::printf("{\"plan\":\"%s\",\"name\":\"%s\",\"serial\":%.6f,\"overlapped\":%.6f,\"compute\":%.6f,"
                "\"compute_serial\":%.6f,\"computing_serial\":%.3f,\"computing_overlapped\":%.3f,"
                "\"communication\":%.6f,\"update\":%.6f,\"expected_inter_per_rank\":%.0f,"
                "\"link_bytes_per_node\":%.0f,\"seconds_per_sample\":%.4g,\"update_seconds_per_param\":%.4g,"
                "\"collective_calls\":%.0f,\"calls\":[%s],\"phases\":[%.6f,%.6f,%.6f,%.6f]}\n",
                to_string(plan).c_str(), name.c_str(), c.serial.serial, s.overlapped, s.compute, c.serial.compute,
                c.computing_serial, c.computing_overlapped, s.communication, s.update, inter_per_rank,
                link_bytes / mesh.nodes(), compute.seconds_per_sample, compute.update_seconds_per_param, calls,
                call_list.c_str(), s.phases.first_forward_start, s.phases.forward_end, s.phases.backward_end,
                s.phases.end);
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const amsp::error& e) {
    std::fprintf(stderr, "amsp-cluster-predict: %s\n", e.what());
    return 2;
  }
}
