// amsp-profile: measures the collectives a sharding planner prices and writes a bandwidth profile
// (JSON, format in docs/collectives.md, amsp/planner/bandwidth_profile.hpp) for amsp-plan.
//
//   amsp-profile --mesh 4x2 --out profile.json                      (threads: 8 ranks in-process)
//   mpirun -np 8 amsp-profile --backend mpi --mesh 4x2 --out p.json (MPI: one process per rank)
//   amsp-profile --mesh 4x2 --plans "hsdp;amsp-7b"   (also the group sets of these plans: strided ones
//                                                       such as 1x2 that no aligned block has)

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/sharding/presets.hpp"
#include "common/cli_args.hpp"
#include "common/mpi_args.hpp"
#include "measure_collectives.hpp"
#if defined(AMSP_HAS_MPI)
#include "amsp/comm/mpi.hpp"
#endif

namespace {
using namespace amsp;

enum class Backend { threads, mpi };

struct Options {
  Backend backend = Backend::threads;
  bool mpi_check_calls = true;
  std::optional<Mesh> mesh;  // default: 4x2 on threads, world x 1 under MPI
  std::string out;           // empty: stdout
  std::vector<comm::op_kind> ops;
  std::vector<Factor> groups;  // empty: every shape of the mesh (or of the plans)
  std::vector<std::string> plans;  // the group sets of these plans, strided shapes included
  std::vector<std::uint64_t> sizes;
  int max_iterations = 200;
  std::chrono::microseconds gap{0};  // idle time before every timed call; 0: back to back
  amsp_profile::CallForms calls = amsp_profile::CallForms::engine;  // blocking or asynchronous calls
  amsp_profile::GapTiming gap_timing = amsp_profile::GapTiming::slowest_call;
  int chain_calls = 2;  // --gap-timing chained: the call of the chain that is timed
};

// Returns nullopt after printing --help.
std::optional<Options> parse(int argc, char** argv) {
  cli::Args args("amsp-profile",
                 "amsp-profile: measures every collective a sharding planner prices (op x group shape x message\n"
                 "size) and writes the bandwidth profile amsp-plan --profile reads.",
                 argc, argv);
  Options o;
  o.backend = args.choice("--backend", "ranks as threads of this process, or one MPI process per rank",
                          Backend::threads, {{"threads", Backend::threads}, {"mpi", Backend::mpi}});
  o.mpi_check_calls = cli::mpi_check_calls(args);
  o.mesh = args.optional_value<Mesh>("--mesh", "RxN", "ranks per node x nodes (default 4x2; MPI: world size x 1)",
                                     [](std::string_view s) { return parse_mesh(s); });
  o.out = args.text("--out", "FILE", "where to write the profile (default: standard output)", "");
  o.ops = args.list<comm::op_kind>("--ops", "OP,...", "collectives to time (default all_gather,reduce_scatter,all_reduce,broadcast)",
                                   {comm::op_kind::all_gather, comm::op_kind::reduce_scatter, comm::op_kind::all_reduce,
                                    comm::op_kind::broadcast},
                                   [](std::string_view s) { return comm::parse_op_kind(s); });
  o.groups = args.list<Factor>("--groups", "AxB,...", "group shapes to time (default: every aligned block of the mesh)",
                               {}, [](std::string_view s) { return parse_factor(s); });
  // ';' between plans: a plan's own text has commas (p=2x1,g=2x1,os=4x2).
  const std::string plans = args.text("--plans", "PLAN;...",
                                      "also measure the group sets these plans use, strided ones included "
                                      "(e.g. 'ddp;mics(2);p=2x1,g=2x1,os=4x2')", "");
  for (std::size_t start = 0; start < plans.size();) {
    const std::size_t end = std::min(plans.find(';', start), plans.size());
    if (end > start) o.plans.push_back(plans.substr(start, end - start));
    start = end + 1;
  }
  o.max_iterations = args.integer<int>("--max-iterations", "N", "collectives per measurement at most (about 256 MiB "
                                       "are moved per measurement, at least 2 calls)", 200, cli::at_least(2));
  o.gap = std::chrono::microseconds{args.integer<int>(
      "--gap-us", "US", "idle microseconds on every rank before every timed call, each call timed alone (as in "
      "training, where calls follow compute); 0 (default): calls back to back", 0, cli::at_least(0))};
  o.gap_timing = args.choice("--gap-timing",
                             "with --gap-us: each call alone after a barrier and the gap, its slowest rank's time "
                             "(slowest), or every rank looping gap then call with no barrier between, the loop's "
                             "time per call less the gap (paced: a training loop of equal compute segments), or "
                             "after the gap a chain of --chain-calls calls back to back, the last one's slowest "
                             "rank's time, median over the repeats (chained: a call queued behind others)",
                             amsp_profile::GapTiming::slowest_call,
                             {{"slowest", amsp_profile::GapTiming::slowest_call},
                              {"paced", amsp_profile::GapTiming::paced},
                              {"chained", amsp_profile::GapTiming::chained}});
  o.chain_calls = args.integer<int>("--chain-calls", "N", "with --gap-timing chained: the calls of each chain, the "
                                    "last one timed", 2, cli::at_least(2));
  using amsp_profile::CallForms;
  o.calls = args.choice("--calls",
                        "which call of each collective to time: as the engine issues it (engine: gathers and broadcasts "
                        "asynchronous, reductions blocking), every one blocking, or every one asynchronous and waited for",
                        CallForms::engine,
                        {{"engine", CallForms::engine}, {"blocking", CallForms::blocking}, {"nonblocking", CallForms::nonblocking}});
  o.sizes = args.list<std::uint64_t>(
      "--sizes", "BYTES,...", "message sizes in bytes (default 65536,1048576,16777216)",
      {std::uint64_t{64} << 10, std::uint64_t{1} << 20, std::uint64_t{16} << 20},
      [](std::string_view s) { return static_cast<std::uint64_t>(detail::parse_positive_int(s, "profile.size", "size")); });
  args.epilog("Examples\n  amsp-profile --mesh 4x2 --out profile.json\n"
              "  mpirun -np 8 amsp-profile --backend mpi --mesh 4x2 --out profile.json");
  if (args.finish()) {
    std::cout << args.help();
    return std::nullopt;
  }
#if !defined(AMSP_HAS_MPI)
  if (o.backend == Backend::mpi)
    throw cli::usage_error("amsp-profile: --backend 'mpi': this amsp-profile was built without MPI");
#endif
  return o;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

void write(const Options& o, const Mesh& mesh, const std::vector<planner::ProfileEntry>& entries) {
  const std::string_view backend = o.backend == Backend::mpi ? "mpi" : "threads";
  const std::string text = to_json_string(planner::bandwidth_profile_json(entries, backend, mesh, host_name()), 1) + "\n";
  if (o.out.empty()) {
    std::cout << text;
    return;
  }
  std::ofstream file(o.out);
  check(static_cast<bool>(file << text), "profile.write", "cannot write ", o.out);
}

// The group sets to time: --groups' aligned blocks and --plans' sets; neither: every aligned block.
std::vector<std::pair<Factor, GroupSet>> group_sets(const Options& o, const Mesh& mesh) {
  if (o.plans.empty()) return amsp_profile::block_group_sets(mesh, o.groups.empty() ? amsp_profile::group_shapes(mesh) : o.groups);
  std::vector<Plan> plans;
  for (const std::string& p : o.plans) {
    try {
      plans.push_back(parse_plan(p, mesh));
    } catch (const amsp::error& e) {  // name the option: the mesh is known only now (MPI: the world)
      throw cli::usage_error("amsp-profile: --plans '" + p + "': " + e.what());
    }
  }
  auto sets = amsp_profile::block_group_sets(mesh, o.groups);
  for (auto& set : amsp_profile::plan_group_sets(mesh, plans)) sets.push_back(std::move(set));
  return sets;
}

int run(int argc, char** argv) {
  const std::optional<Options> parsed = parse(argc, argv);
  if (!parsed) return 0;
  const Options& o = *parsed;
  if (o.backend == Backend::mpi) {
#if defined(AMSP_HAS_MPI)
    comm::MpiSession session(argc, argv);
    comm::MpiCommunicator world = comm::MpiCommunicator::world(comm::MpiOptions{.check_calls = o.mpi_check_calls});
    const Mesh mesh = o.mesh.value_or(Mesh(world.size(), 1));
    const auto entries = amsp_profile::measure(world, mesh, o.ops, group_sets(o, mesh), o.sizes, o.max_iterations, o.gap, o.calls, o.gap_timing, o.chain_calls);
    if (world.rank() == 0) write(o, mesh, entries);
    return 0;
#endif
  }
  const Mesh mesh = o.mesh.value_or(Mesh(4, 2));
  const auto sets = group_sets(o, mesh);
  std::vector<planner::ProfileEntry> entries;
  comm::run_on_threads(mesh.world_size(), [&](comm::ThreadsCommunicator& world) {
    auto mine = amsp_profile::measure(world, mesh, o.ops, sets, o.sizes, o.max_iterations, o.gap, o.calls, o.gap_timing, o.chain_calls);
    if (world.rank() == 0) entries = std::move(mine);
  });
  write(o, mesh, entries);
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  return cli::guarded_main("amsp-profile", std::cerr, [&] { return run(argc, argv); });
}
