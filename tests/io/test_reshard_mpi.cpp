// Resharding under MPI (ctest runs it with 4 and with 8 ranks; heavier worlds are left out: CI
// has 2 cores). With W ranks on mesh M (8: 4x2, 4: 2x2) and the halves H of the world (W/2 ranks,
// mesh 2x2 or 2x1):
//   1. the world saves under amsp-30b; each half loads it (world shrinks), one under zero3, the
//      other under amsp-13b with the whole-tensor layout;
//   2. half 0 saves under zero3; the whole world loads it under amsp-13b (world grows).
// After each load the full parameters equal the saved ones bitwise (fp32: they are the master
// weights), a re-save holds bitwise the states of the original checkpoint, and training goes on
// within 1e-6 of the run that never stopped (a global-batch job, the same whatever the world).
#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "amsp/comm/mpi.hpp"
#include "amsp/io/checkpoint.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "io_harness.hpp"
#include "parity_metrics.hpp"
#include "../mpi_checks.hpp"

namespace {

using amsp::comm::MpiCommunicator;
using amsp::test::Params;
using Engine = amsp::ShardedOptimizer<MpiCommunicator, amsp::optim::AdamW>;

constexpr int global_batch = 8, cut = 4, steps = 8;
const auto rule = amsp::optim::AdamW{.lr = 1e-2f};
using amsp::test::mpi_checks::expect;
using amsp::test::mpi_checks::failed;
using amsp::test::mpi_checks::passed;

amsp::EngineOptions options_of(amsp::OsLayout layout) {
  amsp::EngineOptions o;
  o.os_layout = layout;
  o.max_grad_norm = 0.05f;
  return o;
}

/// Every row of every tensor of two checkpoints equal bitwise (read whole on the calling rank).
bool same_states(const std::string& a, const std::string& b) {
  amsp::io::CheckpointReader ra(a), rb(b);
  for (const amsp::io::IndexTensor& ta : ra.index().tensors) {
    const amsp::io::IndexTensor* tb = rb.index().find(ta.name);
    if (tb == nullptr) return false;
    for (std::size_t row = 0; row < ra.index().rows.size(); ++row)
      if (ra.read_tensor(ta, row) != rb.read_tensor(*tb, row)) return false;
  }
  return true;
}

/// Runs `plan` on `comm` from scratch for `last` steps (saving after `cut` into `save_dir` if
/// given), or loads `load_dir` and runs steps cut..last. Returns the final params, and the
/// params right after the save or load in `at_cut`.
Params run(MpiCommunicator& comm, const amsp::Mesh& mesh, const char* plan, amsp::OsLayout layout,
           const std::string& save_dir, const std::string& load_dir, Params* at_cut) {
  Engine opt(comm, mesh, amsp::parse_plan(plan, mesh), rule, amsp::test::odd_model(), options_of(layout));
  int first = 0;
  if (load_dir.empty()) {
    amsp::test::set_initial_values(opt);
    amsp::test::train_global_batch(opt, comm.rank(), comm.size(), global_batch, 0, cut);
    first = cut;
    if (!save_dir.empty()) amsp::io::save(opt, comm, save_dir);
  } else {
    (void)amsp::io::load(opt, comm, load_dir);
    first = static_cast<int>(opt.steps());
    if (!save_dir.empty()) amsp::io::save(opt, comm, save_dir);  // the re-save
  }
  if (at_cut != nullptr) *at_cut = amsp::test::full_params(opt);
  amsp::test::train_global_batch(opt, comm.rank(), comm.size(), global_batch, first, steps);
  return amsp::test::full_params(opt);
}

}  // namespace

int main(int argc, char** argv) {
  amsp::comm::MpiSession session(argc, argv);
  MpiCommunicator world = MpiCommunicator::world();
  const int size = world.size();
  if (size != 4 && size != 8) {
    if (world.rank() == 0) std::printf("run with 4 or 8 ranks\n");
    return 2;
  }
  const amsp::Mesh mesh = size == 8 ? amsp::Mesh(4, 2) : amsp::Mesh(2, 2);
  const amsp::Mesh half_mesh = size == 8 ? amsp::Mesh(2, 2) : amsp::Mesh(2, 1);
  double job = world.rank() == 0 ? static_cast<double>(::getpid()) : 0.0;
  world.broadcast(&job, &job, 1, 0);
  const std::string root = (std::filesystem::temp_directory_path() /
                            ("amsp-io-mpi-" + std::to_string(static_cast<long long>(job)))).string();
  try {
    // The halves: the ranks of each node block of the mesh, as 2 groups of W/2.
    MpiCommunicator half = world.split(amsp::factor_groups(mesh, amsp::Factor{mesh.ranks_per_node(), mesh.nodes() / 2}));
    const int which = world.rank() < size / 2 ? 0 : 1;
    const auto even = amsp::OsLayout::even_split, whole = amsp::OsLayout::whole_tensor;

    // 1. the world saves, each half loads (shrink).
    Params saved;
    const Params straight = run(world, mesh, "amsp-30b", even, root + "/big", "", &saved);
    const char* half_plan = which == 0 ? "zero3" : "amsp-13b";
    Params loaded;
    const std::string resave = root + "/resave-" + std::to_string(which);
    const Params continued = run(half, half_mesh, half_plan, which == 0 ? even : whole, resave, root + "/big", &loaded);
    expect(world, amsp::test::bitwise_equal(loaded, saved), "shrink: params after load equal the saved ones");
    expect(world, world.rank() != 0 || same_states(root + "/big", resave),
           "shrink: a re-save holds the saved states bitwise");
    expect(world, amsp::test::max_relative_error(continued, straight) <= 1e-6, "shrink: training within 1e-6");

    // 2. half 0 saves, the world loads (grow).
    Params small_saved, straight_small;
    if (which == 0) straight_small = run(half, half_mesh, "zero3", even, root + "/small", "", &small_saved);
    world.barrier();
    Params grown_loaded;
    const Params grown = run(world, mesh, "amsp-13b", even, "", root + "/small", &grown_loaded);
    // Half 0's ranks hold the reference; the comparison is theirs (half 1 only has to agree).
    expect(world, which != 0 || amsp::test::bitwise_equal(grown_loaded, small_saved),
           "grow: params after load equal the saved ones");
    expect(world, which != 0 || amsp::test::max_relative_error(grown, straight_small) <= 1e-6,
           "grow: training within 1e-6");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", world.rank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  world.barrier();
  if (world.rank() == 0) {
    std::filesystem::remove_all(root);
    std::printf("checkpoint resharding under MPI with %d ranks: %d passed, %d failed\n", size, passed, failed);
  }
  return failed == 0 ? 0 : 1;
}
