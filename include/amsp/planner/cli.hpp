#pragma once
// The `amsp-plan` command line: parsing (rule cli.usage on bad input), the human table, the JSON
// report and the detailed evaluation of one plan. Lives in a header so that tests drive it
// exactly as the executable does; examples/amsp_plan/main.cpp only forwards argv.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <initializer_list>
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

namespace amsp::planner {

struct CliOptions {
  bool help = false;
  bool list = false;
  bool json = false;
  std::string model = "llama-7b";
  std::string cluster = "paper";
  std::optional<std::string> mesh;
  std::optional<double> gpu_memory_gb;
  std::optional<double> reserve_gb;
  std::optional<double> peak_tflops;
  std::optional<double> efficiency;
  std::optional<double> overlap_slowdown;
  std::optional<std::string> profile;
  std::int64_t seq = 4096;
  std::int64_t micro_batch = 1;
  std::optional<std::int64_t> global_batch;
  bool recompute = false;
  bool flash_attention = true;
  std::optional<std::string> evaluate;
  int top = 10;
  CommMode mode = CommMode::engine;
  RankBy rank_by = RankBy::step;
  rule_set rules = rule_set::amsp;
  ScheduleOptions schedule{};
};

inline constexpr std::string_view cli_help = R"(amsp-plan: choose how to shard parameters, gradients and optimizer states (AMSP) for a model on a
cluster, from a memory model and a communication cost model. Prints the best plans that fit in GPU memory.

Usage: amsp-plan [options]

Model and batch
  --model NAME|DIMS       llama-7b, llama-13b, llama-30b, llama-65b (or 7b, 13b, ...), or any LLaMA-style
                          model by its dimensions: h=4096,layers=32,heads=32,ffn=11008,vocab=32000
                          (default llama-7b)
  --seq TOKENS            sequence length (default 4096)
  --micro-batch SEQS      sequences per micro-batch per GPU (default 1)
  --global-batch SEQS     sequences per step over all GPUs; sets the micro-batch count
                          M = global / (micro-batch x GPUs) (default: M = 1)
  --recompute             full activation recomputation (default off)
  --no-flash-attention    store the s x s attention scores (default: FlashAttention)

Cluster
  --cluster paper         the paper's testbed: 8 x A800-80GB per node, NVLink, 4 x HDR 200 Gb/s IB per node,
                          128 nodes (the only built-in; docs/planner.md lists its figures and sources)
  --mesh RxN              R GPUs per node x N nodes (default 8x128)
  --gpu-memory GB         memory per GPU in GB (1e9 bytes, as GPU makers count) (default 80)
  --reserve GB            memory per GPU unavailable to amsp (CUDA context, NCCL) (default 2)
  --peak-tflops TF        dense bf16 peak per GPU (default 312)
  --efficiency F          fraction of peak the model's kernels reach, in (0, 1] (default 0.65)
  --overlap-slowdown K    compute slowdown per second of communication beside it, in [0, 1] (default 0.1)
  --profile FILE          measured bandwidth profile (amsp-profile's JSON); the analytic model fills gaps

Model of the engine
  --mode engine|paper     price the schedule amsp runs (default) or the paper's formulas T_p, T_g, T_os0, T_os1
  --os-layout even_split|whole_tensor
                          optimizer-state shards split evenly (ReduceScatter / AllGather, default) or
                          owned whole per tensor (Reduce / Broadcast, the paper's; needs s_g = s_p)
  --units layer|tensor    unit gathered and reduced at once: a transformer layer (default) or a tensor
  --grad-bytes 2|4        bytes per gradient element on the wire: bf16 as the paper (default) or fp32
  --bucket-mb MB          the paper formulas' gradient bucket U (default 25)
  --keep-gathered         keep gathered parameters from forward to backward (one AllGather, more memory)
  --rules amsp|paper      plan rules; paper also requires s_g in {s_p, s_os} (default amsp)

Output
  --rank-by step|step-serial|comm
                          order plans by step time with overlap (default), without overlap, or by
                          communication time (what the paper's planner minimises)
  --top K                 show the K best plans (default 10)
  --evaluate PLAN         price one plan in detail: p=AxB,g=CxD,os=ExF or a preset
                          (ddp, zero1, zero2, zero3, mics(k), hsdp(k), amsp-7b, amsp-13b, amsp-30b)
  --list                  print every valid plan of the mesh, one per line, and exit
  --json                  print a JSON array, best first: plan, memory bytes per rank, communication
                          seconds by term, step seconds and predicted MFU
  --help                  this text

Examples
  amsp-plan --model llama-13b --mesh 8x128 --global-batch 1024
  amsp-plan --model 30b --recompute --evaluate amsp-30b
  amsp-plan --model h=2048,layers=24,heads=16,ffn=5504,vocab=32000 --mesh 4x2 --gpu-memory 24 --profile bw.json --json
  amsp-plan --mesh 8x4 --list
)";

namespace detail {

template <class T>
T parse_cli_number(std::string_view option, std::string_view text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  check(ec == std::errc{} && end == text.data() + text.size() && !text.empty(), "cli.usage", "option ", option,
        ": cannot read '", text, "' as a number");
  return value;
}

inline double parse_cli_positive(std::string_view option, std::string_view text) {
  const double v = parse_cli_number<double>(option, text);
  check(v > 0 && std::isfinite(v), "cli.usage", "option ", option, " must be positive, got ", text);
  return v;
}

inline std::int64_t parse_cli_count(std::string_view option, std::string_view text) {
  const auto v = parse_cli_number<std::int64_t>(option, text);
  check(v >= 1, "cli.usage", "option ", option, " must be at least 1, got ", text);
  return v;
}

template <class Enum>
Enum parse_cli_choice(std::string_view option, std::string_view text,
                      std::initializer_list<std::pair<std::string_view, Enum>> choices) {
  std::string known;
  for (const auto& [name, value] : choices) {
    if (text == name) return value;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  fail("cli.usage", "option ", option, ": unknown value '", text, "' (expected ", known, ")");
}

}  // namespace detail

/// Parses the arguments after the program name. Fails with rule cli.usage naming the option.
[[nodiscard]] inline CliOptions parse_cli(const std::vector<std::string>& args) {
  CliOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    std::optional<std::string_view> inline_value;
    if (const auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    const auto value = [&]() -> std::string_view {
      if (inline_value) return *inline_value;
      check(i + 1 < args.size(), "cli.usage", "option ", arg, " needs a value (see --help)");
      return args[++i];
    };
    const auto flag = [&](bool& target) {
      check(!inline_value, "cli.usage", "option ", arg, " takes no value");
      target = true;
    };
    bool set = false;
    if (arg == "--help" || arg == "-h") flag(o.help);
    else if (arg == "--list") flag(o.list);
    else if (arg == "--json") flag(o.json);
    else if (arg == "--recompute") flag(o.recompute);
    else if (arg == "--no-flash-attention") { flag(set); o.flash_attention = false; }
    else if (arg == "--keep-gathered") { flag(set); o.schedule.reshard_after_forward = false; }
    else if (arg == "--model") o.model = value();
    else if (arg == "--cluster") {
      o.cluster = value();
      check(o.cluster == "paper", "cli.usage", "option --cluster: unknown cluster '", o.cluster,
            "' (the built-in one is 'paper'; describe others with --mesh, --gpu-memory, --profile, ...)");
    } else if (arg == "--mesh") o.mesh = value();
    else if (arg == "--gpu-memory") o.gpu_memory_gb = detail::parse_cli_positive(arg, value());
    else if (arg == "--reserve") {
      o.reserve_gb = detail::parse_cli_number<double>(arg, value());
      check(*o.reserve_gb >= 0, "cli.usage", "option --reserve must not be negative");
    } else if (arg == "--peak-tflops") o.peak_tflops = detail::parse_cli_positive(arg, value());
    else if (arg == "--efficiency") o.efficiency = detail::parse_cli_positive(arg, value());
    else if (arg == "--overlap-slowdown") o.overlap_slowdown = detail::parse_cli_number<double>(arg, value());
    else if (arg == "--profile") o.profile = value();
    else if (arg == "--seq") o.seq = detail::parse_cli_count(arg, value());
    else if (arg == "--micro-batch") o.micro_batch = detail::parse_cli_count(arg, value());
    else if (arg == "--global-batch") o.global_batch = detail::parse_cli_count(arg, value());
    else if (arg == "--evaluate") o.evaluate = value();
    else if (arg == "--top") o.top = static_cast<int>(std::min<std::int64_t>(detail::parse_cli_count(arg, value()), 1 << 20));
    else if (arg == "--bucket-mb") o.schedule.bucket_bytes = detail::parse_cli_positive(arg, value()) * 1e6;
    else if (arg == "--mode")
      o.mode = detail::parse_cli_choice<CommMode>(arg, value(), {{"engine", CommMode::engine}, {"paper", CommMode::paper}});
    else if (arg == "--rank-by")
      o.rank_by = detail::parse_cli_choice<RankBy>(
          arg, value(), {{"step", RankBy::step}, {"step-serial", RankBy::step_serial}, {"comm", RankBy::comm}});
    else if (arg == "--os-layout")
      o.schedule.os_layout = detail::parse_cli_choice<OsLayout>(
          arg, value(), {{"even_split", OsLayout::even_split}, {"whole_tensor", OsLayout::whole_tensor}});
    else if (arg == "--units")
      o.schedule.granularity = detail::parse_cli_choice<Granularity>(
          arg, value(), {{"layer", Granularity::layer}, {"tensor", Granularity::tensor}});
    else if (arg == "--grad-bytes")
      o.schedule.grad_wire_bytes = detail::parse_cli_choice<double>(arg, value(), {{"2", 2.0}, {"4", 4.0}});
    else if (arg == "--rules")
      o.rules = detail::parse_cli_choice<rule_set>(arg, value(), {{"amsp", rule_set::amsp}, {"paper", rule_set::paper}});
    else
      fail("cli.usage", "unknown option '", args[i], "' (see --help)");
  }
  return o;
}

/// The planner inputs the options describe (model, workload with M from the global batch,
/// the cluster with its overrides and profile).
[[nodiscard]] inline PlannerInputs planner_inputs(const CliOptions& o) {
  PlannerInputs in{parse_model(o.model), {}, paper_cluster(), o.schedule, o.mode, o.rules};
  Cluster& c = in.cluster;
  if (o.mesh) c.mesh = parse_mesh(*o.mesh);
  if (o.gpu_memory_gb) c.gpu_memory_bytes = *o.gpu_memory_gb * 1e9;
  if (o.reserve_gb) c.reserved_bytes = *o.reserve_gb * 1e9;
  if (o.peak_tflops) c.peak_flops = *o.peak_tflops * 1e12;
  if (o.efficiency) c.compute_efficiency = *o.efficiency;
  if (o.overlap_slowdown) c.overlap_slowdown = *o.overlap_slowdown;
  if (o.profile) c.profile = BandwidthProfile::load(*o.profile);
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
                                   {"buffers", m.buffers}, {"reserved", m.reserved}})
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
  print_table(out, {{"memory per GPU", "GB"},
                    {"parameters, bf16, / s_p", fixed(m.params / 1e9, 2)},
                    {"gradients, bf16, / s_g", fixed(m.grads / 1e9, 2)},
                    {"optimizer states, fp32 x3, / s_os", fixed(m.optimizer_states / 1e9, 2)},
                    {"activations", fixed(m.activations / 1e9, 2)},
                    {"communication buffers", fixed(m.buffers / 1e9, 2)},
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
    out << cli_help;
    return 0;
  }
  if (o.list) {
    const Mesh mesh = o.mesh ? parse_mesh(*o.mesh) : paper_cluster().mesh;
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

/// The whole program: parses `args`, runs, and turns amsp errors into a message on `err` and exit
/// status 2.
inline int cli_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    return run_cli(parse_cli(args), out);
  } catch (const error& e) {
    err << "amsp-plan: " << e.what() << "\n(run amsp-plan --help for usage)\n";
    return 2;
  }
}

}  // namespace amsp::planner
