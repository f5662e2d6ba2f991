#pragma once
// The `amsp-plan` command line: its options (tools/common/cli_args.hpp), the human table, the
// JSON report and the detailed evaluation of one plan. A header so that tests drive it exactly as
// the executable does; main.cpp only forwards argv.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/core/json.hpp"
#include "amsp/planner/search.hpp"
#include "amsp/sharding/presets.hpp"
#include "common/cli_args.hpp"

namespace amsp_plan {

using namespace amsp;
using namespace amsp::planner;

struct CliOptions {
  std::optional<std::string> help;  ///< the --help text, when --help was given
  bool list = false;
  bool json = false;
  std::string model = "llama-7b";
  std::optional<Mesh> mesh;
  std::optional<double> gpu_memory_gb;
  std::optional<double> reserve_gb;
  std::optional<double> peak_tflops;
  std::optional<double> efficiency;
  std::optional<double> overlap_slowdown;
  std::optional<BandwidthProfile> profile;
  std::int64_t seq = 4096;
  std::int64_t micro_batch = 1;
  std::optional<std::int64_t> global_batch;
  bool recompute = false;
  bool flash_attention = true;
  std::optional<std::string> evaluate;
  int top = 10;
  CommMode mode = CommMode::engine;
  RankBy rank_by = RankBy::step;
  RuleSet rules = RuleSet::amsp;
  ScheduleOptions schedule{};
};

inline constexpr std::string_view summary =
    "amsp-plan: choose how to shard parameters, gradients and optimizer states (AMSP) for a model on a\n"
    "cluster, from a memory model and a communication cost model. Prints the best plans that fit in GPU memory.";

inline constexpr std::string_view examples = R"(Examples
  amsp-plan --model llama-13b --mesh 8x128 --global-batch 1024
  amsp-plan --model 30b --recompute --evaluate amsp-30b
  amsp-plan --model h=2048,layers=24,heads=16,ffn=5504,vocab=32000 --mesh 4x2 --gpu-memory 24 --profile bw.json --json
  amsp-plan --mesh 8x4 --list
)";

/// Parses the arguments after the program name; bad input throws cli::usage_error naming the
/// option and the rule.
[[nodiscard]] inline CliOptions parse_cli(const std::vector<std::string>& argv) {
  namespace cli = amsp::cli;
  cli::Args args("amsp-plan", std::string(summary), argv);
  CliOptions o;
  args.section("Model and batch");
  o.model = args.value<std::string>(
      "--model", "NAME|DIMS",
      "llama-7b, llama-13b, llama-30b, llama-65b (or 7b, 13b, ...), or any LLaMA-style\n"
      "model by its dimensions: h=4096,layers=32,heads=32,ffn=11008,vocab=32000\n(default llama-7b)",
      o.model, [](std::string_view s) {
        (void)parse_model(s);
        return std::string(s);
      });
  o.seq = args.integer<std::int64_t>("--seq", "TOKENS", "sequence length", o.seq, cli::at_least<std::int64_t>(1));
  o.micro_batch = args.integer<std::int64_t>("--micro-batch", "SEQS", "sequences per micro-batch per GPU",
                                             o.micro_batch, cli::at_least<std::int64_t>(1));
  o.global_batch = args.optional_integer<std::int64_t>(
      "--global-batch", "SEQS",
      "sequences per step over all GPUs; sets the micro-batch count\nM = global / (micro-batch x GPUs) (default: M = 1)",
      cli::at_least<std::int64_t>(1));
  o.recompute = args.flag("--recompute", "full activation recomputation (default off)");
  o.flash_attention = !args.flag("--no-flash-attention", "store the s x s attention scores (default: FlashAttention)");

  args.section("Cluster");
  (void)args.value<std::string>(
      "--cluster", "paper",
      "the paper's testbed: 8 x A800-80GB per node, NVLink, 4 x HDR 200 Gb/s IB per node,\n"
      "128 nodes (the only built-in; docs/planner.md lists its figures and sources)",
      "paper", [](std::string_view s) {
        if (s != "paper")
          throw cli::usage_error(
              "unknown cluster (the built-in one is 'paper'; describe others with --mesh, --gpu-memory, --profile, ...)");
        return std::string(s);
      });
  o.mesh = args.optional_value<Mesh>("--mesh", "RxN", "R GPUs per node x N nodes (default 8x128)",
                                     [](std::string_view s) { return parse_mesh(s); });
  o.gpu_memory_gb = args.optional_real("--gpu-memory", "GB",
                                       "memory per GPU in GB (1e9 bytes, as GPU makers count) (default 80)",
                                       cli::positive());
  o.reserve_gb = args.optional_real("--reserve", "GB",
                                    "memory per GPU unavailable to amsp (CUDA context, NCCL) (default 2)",
                                    cli::at_least(0.0));
  o.peak_tflops = args.optional_real("--peak-tflops", "TF", "dense bf16 peak per GPU (default 312)", cli::positive());
  o.efficiency = args.optional_real("--efficiency", "F",
                                    "fraction of peak the model's kernels reach, in (0, 1] (default 0.65)",
                                    cli::positive_up_to(1.0));
  o.overlap_slowdown = args.optional_real(
      "--overlap-slowdown", "K", "compute slowdown per second of communication beside it, in [0, 1] (default 0.1)",
      cli::between(0.0, 1.0));
  o.profile = args.optional_value<BandwidthProfile>(
      "--profile", "FILE", "measured bandwidth profile (amsp-profile's JSON); the analytic model fills gaps",
      [](std::string_view path) { return BandwidthProfile::load(std::string(path)); });

  args.section("Model of the engine");
  o.mode = args.choice("--mode", "price the schedule amsp runs or the paper's formulas T_p, T_g, T_os0, T_os1",
                       o.mode, {{"engine", CommMode::engine}, {"paper", CommMode::paper}});
  o.schedule.os_layout = args.choice(
      "--os-layout",
      "optimizer-state shards split evenly (ReduceScatter / AllGather) or\n"
      "owned whole per tensor (Reduce / Broadcast, the paper's; needs s_g = s_p)",
      o.schedule.os_layout, {{"even_split", OsLayout::even_split}, {"whole_tensor", OsLayout::whole_tensor}});
  o.schedule.granularity =
      args.choice("--units", "unit gathered and reduced at once: a transformer layer or a tensor",
                  o.schedule.granularity, {{"layer", Granularity::layer}, {"tensor", Granularity::tensor}});
  o.schedule.grad_wire_bytes = args.choice("--grad-bytes", "bytes per gradient element (on the wire, in memory): bf16 as the paper, or fp32",
                                           o.schedule.grad_wire_bytes, {{"2", 2.0}, {"4", 4.0}});
  if (const auto mb = args.optional_real("--bucket-mb", "MB", "the paper formulas' gradient bucket U (default 25)",
                                         cli::positive()))
    o.schedule.bucket_bytes = *mb * 1e6;
  o.schedule.reshard_after_forward =
      !args.flag("--keep-gathered", "keep gathered parameters from forward to backward (one AllGather, more memory)");
  o.schedule.gradient_buffers_in_flight = args.integer<int>(
      "--gradient-buffers", "N",
      "gradient buffers in flight, the engine's EngineOptions::gradient_buffers_in_flight\n"
      "(0: no bound, priced as the whole model's gradients)",
      o.schedule.gradient_buffers_in_flight, cli::at_least(0));
  o.rules = args.choice("--rules", "plan rules; paper also requires s_g in {s_p, s_os}", o.rules,
                        {{"amsp", RuleSet::amsp}, {"paper", RuleSet::paper}});

  args.section("Output");
  o.rank_by = args.choice(
      "--rank-by",
      "order plans by step time with overlap, without overlap, or by\n"
      "communication time (what the paper's planner minimises)",
      o.rank_by, {{"step", RankBy::step}, {"step-serial", RankBy::step_serial}, {"comm", RankBy::comm}});
  o.top = args.integer("--top", "K", "show the K best plans", o.top, cli::between(1, 1 << 20));
  o.evaluate = args.optional_text("--evaluate", "PLAN",
                                  "price one plan in detail: p=AxB,g=CxD,os=ExF or a preset\n"
                                  "(ddp, zero1, zero2, zero3, mics(k), hsdp(k), amsp-7b, amsp-13b, amsp-30b)");
  o.list = args.flag("--list", "print every valid plan of the mesh, one per line, and exit");
  o.json = args.flag("--json",
                     "print a JSON array, best first: plan, memory bytes per rank, communication\n"
                     "seconds by term, step seconds and predicted MFU");
  args.epilog(examples);
  if (args.finish()) {
    o.help = args.help();
    return o;
  }
  if (o.evaluate) {  // a plan is checked against the mesh it runs on
    try {
      (void)parse_plan(*o.evaluate, o.mesh.value_or(paper_cluster().mesh));
    } catch (const amsp::error& e) {
      throw cli::usage_error("amsp-plan: --evaluate '" + *o.evaluate + "': " + std::string(e.what()).substr(6));
    }
  }
  return o;
}

/// The planner inputs the options describe (model, workload with M from the global batch,
/// the cluster with its overrides and profile).
[[nodiscard]] inline PlannerInputs planner_inputs(const CliOptions& o) {
  PlannerInputs in{parse_model(o.model), {}, paper_cluster(), o.schedule, o.mode, o.rules};
  Cluster& c = in.cluster;
  if (o.mesh) c.mesh = *o.mesh;
  if (o.gpu_memory_gb) c.gpu_memory_bytes = *o.gpu_memory_gb * 1e9;
  if (o.reserve_gb) c.reserved_bytes = *o.reserve_gb * 1e9;
  if (o.peak_tflops) c.peak_flops = *o.peak_tflops * 1e12;
  if (o.efficiency) c.compute_efficiency = *o.efficiency;
  if (o.overlap_slowdown) c.overlap_slowdown = *o.overlap_slowdown;
  if (o.profile) c.profile = *o.profile;
  in.workload.seq = o.seq;
  in.workload.micro_batch = o.micro_batch;
  in.workload.recompute = o.recompute;
  in.workload.flash_attention = o.flash_attention;
  const int world = c.mesh.world_size();
  in.workload.micro_batches =
      micro_batches_for(o.global_batch.value_or(o.micro_batch * world), o.micro_batch, world);
  validate(in);
  return in;
}

/// One evaluation as the JSON object `--json` prints.
[[nodiscard]] inline Json to_json(const Evaluation& e) {
  Json j;
  j["plan"] = to_string(e.plan);
  j["fits"] = e.fits;
  j["memory_bytes"] = static_cast<std::int64_t>(std::ceil(e.memory.total()));
  const MemoryBreakdown& m = e.memory;
  for (const auto& [key, bytes] : {std::pair{"params", m.params}, {"grads", m.grads},
                                   {"optimizer_states", m.optimizer_states}, {"activations", m.activations},
                                   {"fp32_os_gradients", m.fp32_os_gradients}, {"gathered_params", m.gathered_params},
                                   {"gradient_staging", m.gradient_staging}, {"reduction_buffers", m.reduction_buffers},
                                   {"buffers", m.buffers()}, {"reserved", m.reserved}})
    j["memory"][key] = bytes;
  const auto by_term = [&](double TermCost::*field) {
    Json object = Json::object();
    for (const TermCost& t : e.terms) object[t.name] = t.*field;
    return object;
  };
  j["comm_seconds"] = by_term(&TermCost::seconds);
  j["comm_bytes_per_rank"] = by_term(&TermCost::bytes_per_rank);
  Json& measured = j["comm_measured"];
  measured = Json::object();
  for (const TermCost& t : e.terms) measured[t.name] = t.measured;
  for (const auto& [key, value] :
       {std::pair{"comm_total_seconds", e.comm_seconds}, {"compute_seconds", e.step.compute},
        {"update_seconds", e.step.update}, {"step_seconds", e.step.overlapped},
        {"step_seconds_no_overlap", e.step.serial}, {"mfu", e.step.mfu}, {"mfu_no_overlap", e.step.mfu_serial}})
    j[key] = value;
  return j;
}

namespace detail {

inline std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

// Prints rows as columns padded to their widest cell.
inline void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line.append(width[c] - row[c].size() + 2, ' ');
    }
    out << line << '\n';
  }
}

inline void print_header(std::ostream& out, const PlannerInputs& in) {
  const Cluster& c = in.cluster;
  out << "model " << in.model.name << " (" << fixed(static_cast<double>(in.model.params()) / 1e9, 2)
      << " B parameters), seq " << in.workload.seq << ", micro-batch " << in.workload.micro_batch << ", M = "
      << in.workload.micro_batches << ", recompute " << (in.workload.recompute ? "on" : "off") << '\n'
      << "cluster " << c.name << ", mesh " << to_string(c.mesh) << " (" << c.mesh.world_size() << " GPUs), "
      << fixed(c.gpu_memory_bytes / 1e9, 1) << " GB per GPU, bandwidth "
      << (c.profile ? "profiled (analytic where the profile has no entry)" : "analytic") << ", "
      << (in.mode == CommMode::engine ? "engine schedule" : "paper formulas") << '\n';
}

inline void print_ranking(std::ostream& out, const std::vector<Evaluation>& ranked, int top) {
  std::vector<std::vector<std::string>> rows{
      {"#", "plan", "memory GB", "comm s", "step s", "step s (no overlap)", "MFU", "MFU (no overlap)"}};
  for (std::size_t i = 0; i < ranked.size() && static_cast<int>(i) < top; ++i) {
    const Evaluation& e = ranked[i];
    rows.push_back({std::to_string(i + 1), to_string(e.plan), fixed(e.memory.total() / 1e9, 1), fixed(e.comm_seconds, 3),
                    fixed(e.step.overlapped, 3), fixed(e.step.serial, 3), fixed(100 * e.step.mfu, 1) + "%",
                    fixed(100 * e.step.mfu_serial, 1) + "%"});
  }
  print_table(out, rows);
}

inline void print_evaluation(std::ostream& out, const Evaluation& e, const PlannerInputs& in) {
  out << "plan " << to_string(e.plan) << ": " << (e.fits ? "fits" : "does NOT fit") << " in "
      << fixed(in.cluster.gpu_memory_bytes / 1e9, 1) << " GB\n\n";
  const MemoryBreakdown& m = e.memory;
  const auto dtype = [](double bytes) { return bytes < 4 ? std::string("bf16") : std::string("fp32"); };
  print_table(out, {{"memory per GPU", "GB"},
                    {"parameters, " + dtype(in.schedule.param_wire_bytes) + ", / s_p", fixed(m.params / 1e9, 2)},
                    {"gradients, " + dtype(in.schedule.grad_wire_bytes) + ", / s_g", fixed(m.grads / 1e9, 2)},
                    {"optimizer states, fp32 x3, / s_os", fixed(m.optimizer_states / 1e9, 2)},
                    {"fp32 gradients of the OS shard, / s_os", fixed(m.fp32_os_gradients / 1e9, 2)},
                    {"activations", fixed(m.activations / 1e9, 2)},
                    {"gather, staging and reduction buffers", fixed(m.buffers() / 1e9, 2)},
                    {"reserved", fixed(m.reserved / 1e9, 2)},
                    {"total", fixed(m.total() / 1e9, 2)}});
  out << '\n';
  std::vector<std::vector<std::string>> rows{
      {"communication term", "overlaps", "groups", "GB sent per GPU", "seconds", "timed by"}};
  for (const TermCost& t : e.terms)
    rows.push_back({t.name, std::string(name_of(t.window)), t.intra_node ? "intra-node" : "inter-node",
                    fixed(t.bytes_per_rank / 1e9, 3), fixed(t.seconds, 4), t.measured ? "profile" : "analytic model"});
  rows.push_back({"total", "", "", "", fixed(e.comm_seconds, 4), ""});
  print_table(out, rows);
  out << '\n';
  print_table(out, {{"step", "seconds"},
                    {"compute", fixed(e.step.compute, 4)},
                    {"optimizer update", fixed(e.step.update, 4)},
                    {"step with overlap", fixed(e.step.overlapped, 4)},
                    {"step without overlap", fixed(e.step.serial, 4)}});
  out << "\npredicted MFU " << fixed(100 * e.step.mfu, 1) << "% with overlap, " << fixed(100 * e.step.mfu_serial, 1)
      << "% without\n";
}

}  // namespace detail

/// Runs amsp-plan on parsed options, writing to `out`. Returns the exit status (0, or 1 when no
/// plan fits). Errors in the inputs throw amsp::error.
inline int run_cli(const CliOptions& o, std::ostream& out) {
  if (o.help) {
    out << *o.help;
    return 0;
  }
  if (o.list) {
    const Mesh mesh = o.mesh.value_or(paper_cluster().mesh);
    for (const Plan& p : enumerate_plans(mesh, o.rules)) out << to_string(p) << '\n';
    return 0;
  }
  const PlannerInputs in = planner_inputs(o);
  std::vector<Evaluation> shown;
  if (o.evaluate) shown.push_back(evaluate(parse_plan(*o.evaluate, in.cluster.mesh), in));
  else shown = search(in, o.rank_by);
  if (!o.evaluate && static_cast<int>(shown.size()) > o.top) shown.resize(static_cast<std::size_t>(o.top));
  if (o.json) {
    Json array = Json::array();
    for (const Evaluation& e : shown) array.push_back(to_json(e));
    out << to_json_string(array, 2) << '\n';
  } else {
    detail::print_header(out, in);
    out << '\n';
    if (o.evaluate) detail::print_evaluation(out, shown.front(), in);
    else if (shown.empty()) out << "no valid plan fits in GPU memory\n";
    else detail::print_ranking(out, shown, o.top);
  }
  return (o.evaluate || !shown.empty()) ? 0 : 1;
}

/// The whole program: parses `args` and runs, with the tools' error convention (exit status 2
/// and a message on `err` for bad input; cli::guarded_main).
inline int cli_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return amsp::cli::guarded_main("amsp-plan", err, [&] { return run_cli(parse_cli(args), out); });
}

}  // namespace amsp_plan
