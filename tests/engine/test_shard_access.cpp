// The shard-access API that checkpoints use (os_shard_runs, master_shard, state_shard, set_steps,
// set_rule, refresh_params_from_master): the runs of one OS group cover each bucket exactly once,
// the master values sit where the runs say (checked against the harness's own initial values), and
// parameters rebuilt from edited master weights reach every rank's gather.
#include <doctest/doctest.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/core/error.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "engine_harness.hpp"

namespace {
using Threads = amsp::comm::ThreadsCommunicator;

/// The initial value of element `k` of bucket b's flat layout, or 0 for padding.
double flat_initial(const amsp::FlatLayout& layout, std::size_t first_tensor, std::size_t k) {
  std::size_t t = first_tensor;
  for (const amsp::TensorSlot& s : layout.slots()) {
    if (k >= s.offset && k < s.offset + s.numel) return static_cast<float>(amsp::test::initial_value(t, k - s.offset));
    ++t;
  }
  return 0.0;
}

template <class ParamT>
void check_plan(const amsp::Mesh& mesh, const amsp::Plan& plan, amsp::OsLayout layout) {
  amsp::EngineOptions options;
  options.os_layout = layout;
  const int world = mesh.world_size();
  // covered[b][k]: how many ranks of OS replica 0's group hold element k of bucket b.
  std::vector<std::vector<int>> covered(amsp::test::odd_model().size());
  std::mutex covered_mutex;
  amsp::comm::run_on_threads(world, [&](Threads& comm) {
    amsp::ShardedOptimizer<Threads, amsp::optim::AdamW, ParamT> opt(comm, mesh, plan, amsp::optim::AdamW{},
                                                                     amsp::test::odd_model(), options);
    std::size_t t = 0;
    std::vector<std::size_t> first_tensor;
    for (int b = 0; b < opt.bucket_count(); ++b) {
      first_tensor.push_back(t);
      for (const amsp::TensorSlot& slot : opt.layout(b).slots()) {
        std::vector<float> init(slot.numel);
        for (std::size_t i = 0; i < init.size(); ++i) init[i] = static_cast<float>(amsp::test::initial_value(t, i));
        opt.set_tensor(slot.name, std::span<const float>(init));
        ++t;
      }
    }
    const bool replica0 = opt.groups().os().index_of_group(comm.rank()) == 0;  // one OS group
    for (int b = 0; b < opt.bucket_count(); ++b) {
      const std::span<float> master = opt.master_shard(b);
      for (const auto& run : opt.os_shard_runs(b)) {
        REQUIRE(run.shard_offset + run.count <= master.size());
        for (std::size_t i = 0; i < run.count; ++i)
          CHECK(master[run.shard_offset + i] ==
                flat_initial(opt.layout(b), first_tensor[static_cast<std::size_t>(b)], run.bucket_offset + i));
        if (replica0) {
          std::lock_guard lock(covered_mutex);
          auto& c = covered[static_cast<std::size_t>(b)];
          if (c.size() < opt.geometry(b).n) c.resize(opt.geometry(b).n, 0);
          for (std::size_t i = 0; i < run.count; ++i) ++c[run.bucket_offset + i];
        }
      }
      for (int s = 0; s < amsp::optim::AdamW::state_count; ++s) CHECK(opt.state_shard(b, s).size() == master.size());
      // Edit the master weights: 3 x the initial value, then rebuild the parameters from them.
      for (float& x : master) x *= 3.0f;
    }
    CHECK_THROWS_AS((void)opt.state_shard(0, 2), amsp::error);
    opt.set_steps(17);
    CHECK(opt.steps() == 17);
    CHECK_THROWS_AS(opt.set_steps(-1), amsp::error);
    opt.refresh_params_from_master();
    for (int b = 0; b < opt.bucket_count(); ++b) {
      const auto full = opt.gather(b);
      for (const amsp::TensorSlot& s : opt.layout(b).slots())
        for (std::size_t i = 0; i < s.numel; ++i) {
          const double want = 3.0f * static_cast<float>(flat_initial(opt.layout(b), first_tensor[static_cast<std::size_t>(b)], s.offset + i));
          CHECK(amsp::to_float(full[s.offset + i]) == amsp::to_float(amsp::from_float<ParamT>(static_cast<float>(want))));
        }
      opt.release(b);
    }
  });
  // Every tensor element of every bucket belongs to exactly one rank of the OS group (padding to at
  // most one: the whole-tensor layout owns segments, not the padding between them).
  const auto model = amsp::test::odd_model();
  for (std::size_t b = 0; b < covered.size(); ++b) {
    const amsp::FlatLayout flat = amsp::bucket_layout(model[b], amsp::dtype_of_v<ParamT>, plan, options.alignment_bytes);
    std::vector<int> c = covered[b];
    c.resize(std::max(c.size(), flat.buffer_size(amsp::dtype_of_v<ParamT>)), 0);
    for (std::size_t k = 0; k < c.size(); ++k) REQUIRE(c[k] <= 1);
    for (const amsp::TensorSlot& s : flat.slots())
      for (std::size_t i = 0; i < s.numel; ++i) REQUIRE(c[s.offset + i] == 1);
  }
}
}  // namespace

TEST_CASE("shard access: runs cover each bucket once per OS group, master values where the runs say") {
  const amsp::Mesh mesh(2, 2);
  for (const amsp::Plan& plan : amsp::enumerate_plans(mesh)) {
    CAPTURE(amsp::to_string(plan));
    check_plan<float>(mesh, plan, amsp::OsLayout::even_split);
    check_plan<amsp::bf16>(mesh, plan, amsp::OsLayout::even_split);
    if (amsp::layout_supports(amsp::OsLayout::whole_tensor, plan)) check_plan<float>(mesh, plan, amsp::OsLayout::whole_tensor);
  }
}

TEST_CASE("set_rule validates and replaces the hyperparameters") {
  amsp::comm::run_on_threads(1, [&](Threads& comm) {
    const amsp::Mesh mesh(1, 1);
    amsp::ShardedOptimizer<Threads, amsp::optim::AdamW> opt(comm, mesh, amsp::parse_plan("ddp", mesh),
                                                            amsp::optim::AdamW{}, amsp::test::odd_model());
    opt.set_rule(amsp::optim::AdamW{.lr = 0.5f});
    CHECK(opt.rule().lr == 0.5f);
    CHECK_THROWS_AS(opt.set_rule(amsp::optim::AdamW{.lr = -1.0f}), amsp::error);
    CHECK(opt.rule().lr == 0.5f);
  });
}

TEST_CASE("an engine built from policy types holds the plan they name") {
  amsp::comm::run_on_threads(4, [&](Threads& comm) {
    const amsp::Mesh mesh(2, 2);
    amsp::ShardedOptimizer<Threads, amsp::optim::AdamW> opt(
        comm, mesh, amsp::ShardPolicy<amsp::Replica>{}, amsp::ShardPolicy<amsp::Partial>{amsp::Factor{2, 1}},
        amsp::ShardPolicy<amsp::Full>{}, amsp::optim::AdamW{}, amsp::test::odd_model());
    CHECK(amsp::to_string(opt.plan()) == "p=1x1,g=2x1,os=2x2");
  });
}
