// amsp-profile: measures the collectives a sharding planner prices and writes a bandwidth profile
// (JSON, format in docs/collectives.md) for amsp-plan.
//
//   amsp-profile --mesh 4x2 --out profile.json                      (threads: 8 ranks in-process)
//   mpirun -np 8 amsp-profile --backend mpi --mesh 4x2 --out p.json (MPI: one process per rank)
// Options: --ops all_gather,reduce_scatter,all_reduce,broadcast   --groups 4x1,4x2
//          --sizes 65536,1048576,16777216 (bytes)

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "bandwidth_profile.hpp"
#if defined(AMSP_HAS_MPI)
#include "amsp/comm/mpi.hpp"
#endif

namespace {
using namespace amsp;

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) items.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

struct Options {
  std::string backend = "threads";
  std::string mesh;
  std::string out;
  std::vector<comm::op_kind> ops{comm::op_kind::all_gather, comm::op_kind::reduce_scatter, comm::op_kind::all_reduce,
                                 comm::op_kind::broadcast};
  std::vector<Factor> groups;  // empty: every shape of the mesh
  std::vector<std::uint64_t> sizes{std::uint64_t{64} << 10, std::uint64_t{1} << 20, std::uint64_t{16} << 20};
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::puts("usage: amsp-profile [--backend threads|mpi] [--mesh RxN] [--out FILE] [--ops a,b] "
                "[--groups AxB,...] [--sizes BYTES,...]");
      std::exit(0);
    }
    check(i + 1 < argc, "profile.args", "option ", flag, " needs a value");
    const std::string_view value = argv[++i];
    if (flag == "--backend") o.backend = value;
    else if (flag == "--mesh") o.mesh = value;
    else if (flag == "--out") o.out = value;
    else if (flag == "--ops") {
      o.ops.clear();
      for (const std::string& s : split_list(value)) o.ops.push_back(comm::parse_op_kind(s));
    } else if (flag == "--groups") {
      for (const std::string& s : split_list(value)) o.groups.push_back(parse_factor(s));
    } else if (flag == "--sizes") {
      o.sizes.clear();
      for (const std::string& s : split_list(value))
        o.sizes.push_back(static_cast<std::uint64_t>(detail::parse_positive_int(s, "profile.args", "size")));
    } else {
      fail("profile.args", "unknown option ", flag, " (see --help)");
    }
  }
  check(o.backend == "threads" || o.backend == "mpi", "profile.args", "backend '", o.backend,
        "' must be threads or mpi");
  return o;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

void write(const Options& o, const Mesh& mesh, const std::vector<profile::Entry>& entries) {
  const std::string text = to_json_string(profile::to_json(entries, o.backend, mesh, host_name()), 1) + "\n";
  if (o.out.empty()) {
    std::cout << text;
    return;
  }
  std::ofstream file(o.out);
  check(static_cast<bool>(file << text), "profile.write", "cannot write ", o.out);
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.backend == "mpi") {
#if defined(AMSP_HAS_MPI)
    comm::MpiSession session(argc, argv);
    comm::MpiCommunicator world = comm::MpiCommunicator::world();
    const Mesh mesh = o.mesh.empty() ? Mesh(world.size(), 1) : parse_mesh(o.mesh);
    const auto shapes = o.groups.empty() ? profile::group_shapes(mesh) : o.groups;
    const auto entries = profile::measure(world, mesh, o.ops, shapes, o.sizes);
    if (world.rank() == 0) write(o, mesh, entries);
    return 0;
#else
    fail("profile.args", "this amsp-profile was built without MPI");
#endif
  }
  const Mesh mesh = parse_mesh(o.mesh.empty() ? "4x2" : o.mesh);
  const auto shapes = o.groups.empty() ? profile::group_shapes(mesh) : o.groups;
  std::vector<profile::Entry> entries;
  comm::run_on_threads(mesh.world_size(), [&](comm::ThreadsCommunicator& world) {
    auto mine = profile::measure(world, mesh, o.ops, shapes, o.sizes);
    if (world.rank() == 0) entries = std::move(mine);
  });
  write(o, mesh, entries);
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "amsp-profile: %s\n", e.what());
    return 1;
  }
}
