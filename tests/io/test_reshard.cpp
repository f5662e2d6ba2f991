// Resharding on load: a checkpoint saved under one plan, mesh and world size loads under another.
// After load, every tensor's master weights and states equal the saved ones bitwise (assembled
// from the OS shards of one OS group on each side), and training continues within the parity
// tolerance of the run that never stopped (a global-batch job: the averaged gradient does not
// depend on the world size, so the runs differ by rounding only). Threads backend; the MPI pairs
// are in test_reshard_mpi.cpp.
#include <doctest/doctest.h>

#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "io_harness.hpp"
#include "parity_metrics.hpp"

namespace {

using amsp::test::Params;
using amsp::test::Threads;

struct Side {
  amsp::Mesh mesh;
  const char* plan;
  amsp::OsLayout layout = amsp::OsLayout::even_split;
};

constexpr int global_batch = 8;
constexpr int cut = 6, steps = 12;
const auto rule = amsp::optim::AdamW{.lr = 1e-2f};

template <class ParamT>
using ReshardEngine = amsp::ShardedOptimizer<Threads, amsp::optim::AdamW, ParamT>;

amsp::EngineOptions options_of(const Side& side) {
  amsp::EngineOptions options;
  options.os_layout = side.layout;
  options.max_grad_norm = 0.05f;
  return options;
}

/// Trains `from` for `cut` steps and saves (collecting its states), or, with `dir` empty, trains
/// all `steps` without stopping; returns the final parameters.
template <class ParamT>
Params run_from(const Side& from, const std::string& dir, amsp::test::StateTable* saved) {
  Params out;
  const int world = from.mesh.world_size();
  amsp::comm::run_on_threads(world, [&](Threads& comm) {
    ReshardEngine<ParamT> opt(comm, from.mesh, amsp::parse_plan(from.plan, from.mesh), rule, amsp::test::odd_model(),
                       options_of(from));
    amsp::test::set_initial_values(opt);
    amsp::test::train_global_batch(opt, comm.rank(), world, global_batch, 0, dir.empty() ? steps : cut);
    if (!dir.empty()) {
      saved->collect(opt);
      amsp::io::save(opt, comm, dir);
    }
    Params p = amsp::test::full_params(opt);
    if (comm.rank() == 0) out = std::move(p);
  });
  return out;
}

template <class ParamT>
Params load_and_continue(const Side& to, const std::string& dir, amsp::test::StateTable* loaded) {
  Params out;
  const int world = to.mesh.world_size();
  amsp::comm::run_on_threads(world, [&](Threads& comm) {
    ReshardEngine<ParamT> opt(comm, to.mesh, amsp::parse_plan(to.plan, to.mesh), rule, amsp::test::odd_model(),
                       options_of(to));
    const amsp::io::Restored r = amsp::io::load(opt, comm, dir);
    REQUIRE(r.step == cut);
    loaded->collect(opt);
    amsp::test::train_global_batch(opt, comm.rank(), world, global_batch, cut, steps);
    Params p = amsp::test::full_params(opt);
    if (comm.rank() == 0) out = std::move(p);
  });
  return out;
}

template <class ParamT>
void check_pair(const Side& from, const Side& to) {
  CAPTURE(amsp::to_string(from.mesh));
  CAPTURE(from.plan);
  CAPTURE(amsp::name_of(from.layout));
  CAPTURE(amsp::to_string(to.mesh));
  CAPTURE(to.plan);
  CAPTURE(amsp::name_of(to.layout));
  const amsp::test::ScratchDir dir;
  amsp::test::StateTable saved, loaded;
  (void)run_from<ParamT>(from, dir / "ckpt", &saved);
  const Params resharded = load_and_continue<ParamT>(to, dir / "ckpt", &loaded);
  REQUIRE(saved.rows.size() == loaded.rows.size());
  for (const auto& [name, rows] : saved.rows) {
    CAPTURE(name);
    REQUIRE(loaded.rows.count(name) == 1);
    CHECK(amsp::test::bitwise_equal(rows, loaded.rows.at(name)));  // master and every state
  }
  const Params unresharded = run_from<ParamT>(from, "", nullptr);
  if constexpr (std::is_same_v<ParamT, float>) CHECK(amsp::test::max_relative_error(resharded, unresharded) <= 1e-6);
  else CHECK(amsp::test::max_error_in_bf16_ulps(resharded, unresharded) <= 1.0);
}

}  // namespace

TEST_CASE("resharding: world shrinks (4x2 -> 2x2 -> 1x1) and grows (1x1 -> 4x2, 2x1 -> 4x1 -> 8x1)") {
  check_pair<float>({{4, 2}, "amsp-13b"}, {{2, 2}, "zero3"});
  check_pair<float>({{2, 2}, "zero3"}, {{1, 1}, "ddp"});
  check_pair<float>({{1, 1}, "ddp"}, {{4, 2}, "amsp-30b"});
  check_pair<float>({{2, 1}, "zero1"}, {{4, 1}, "zero2"});
  check_pair<float>({{4, 1}, "zero3"}, {{8, 1}, "amsp-7b"});
}

TEST_CASE("resharding: same world, other plan, mesh or OS layout") {
  check_pair<float>({{4, 2}, "zero3"}, {{4, 2}, "ddp"});
  check_pair<float>({{2, 4}, "mics(4)"}, {{4, 2}, "amsp-30b", amsp::OsLayout::whole_tensor});
  check_pair<float>({{4, 2}, "amsp-13b", amsp::OsLayout::whole_tensor}, {{2, 2}, "hsdp"});
  check_pair<float>({{8, 1}, "zero2"}, {{2, 2}, "amsp-13b", amsp::OsLayout::whole_tensor});
}

TEST_CASE("resharding with bf16 parameters: states bitwise, training within one bf16 ulp") {
  check_pair<amsp::bf16>({{4, 2}, "amsp-13b"}, {{2, 1}, "zero2"});
  check_pair<amsp::bf16>({{1, 1}, "ddp"}, {{2, 2}, "zero3", amsp::OsLayout::whole_tensor});
}

TEST_CASE("small pieces: a resharding load reads pieces that cross its shard boundaries") {
  const amsp::test::ScratchDir dir;
  amsp::test::StateTable saved, loaded;
  const amsp::Mesh from(4, 2), to(2, 2);
  amsp::comm::run_on_threads(8, [&](Threads& comm) {
    ReshardEngine<float> opt(comm, from, amsp::parse_plan("zero3", from), rule, amsp::test::odd_model());
    amsp::test::set_initial_values(opt);
    amsp::test::train_global_batch(opt, comm.rank(), 8, global_batch, 0, 3);
    saved.collect(opt);
    amsp::io::SaveOptions options;
    options.max_piece_elements = 5;
    amsp::io::save(opt, comm, dir / "ckpt", {}, options);
  });
  amsp::comm::run_on_threads(4, [&](Threads& comm) {
    ReshardEngine<float> opt(comm, to, amsp::parse_plan("amsp-13b", to), rule, amsp::test::odd_model());
    (void)amsp::io::load(opt, comm, dir / "ckpt");
    loaded.collect(opt);
  });
  for (const auto& [name, rows] : saved.rows) CHECK(amsp::test::bitwise_equal(rows, loaded.rows.at(name)));
  const amsp::io::CheckpointReader reader(dir / "ckpt");
  for (const amsp::io::IndexTensor& t : reader.index().tensors)
    for (const amsp::io::IndexPiece& p : t.pieces) CHECK(p.count <= 5);
}
