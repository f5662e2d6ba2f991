// Asynchronous save: the checkpoint holds the states of the moment save_async() was called, even
// though training went on while it was written; a run resumed from it is bitwise the run that
// never stopped; an AsyncSave dropped without commit() publishes nothing.
#include <doctest/doctest.h>

#include <filesystem>

#include "amsp/io/async_save.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "io_harness.hpp"
#include "parity_metrics.hpp"

namespace {
using amsp::test::Threads;
using AsyncEngine = amsp::ShardedOptimizer<Threads, amsp::optim::AdamW>;
}  // namespace

TEST_CASE("async save: snapshot semantics while training goes on, bitwise resume, nothing published without commit") {
  const amsp::test::ScratchDir dir;
  const amsp::Mesh mesh(2, 2);
  const amsp::Plan plan = amsp::parse_plan("amsp-13b", mesh);
  const auto rule = amsp::optim::AdamW{.lr = 1e-2f};
  amsp::test::JobConfig job;
  job.steps = 10;
  amsp::test::StateTable snapshot, loaded;
  amsp::test::Params straight, resumed;
  amsp::comm::run_on_threads(4, [&](Threads& comm) {
    const amsp::test::Params p = amsp::test::run_job<Threads, amsp::optim::AdamW>(comm, mesh, plan, rule, job);
    if (comm.rank() == 0) straight = p;
    {
      AsyncEngine opt(comm, mesh, plan, rule, amsp::test::odd_model());
      amsp::test::set_initial_values(opt);
      amsp::test::train(opt, comm.rank(), job, 0, 4);
      snapshot.collect(opt);
      auto pending = amsp::io::save_async(opt, comm, dir / "ckpt", {.values = {{"step", "4"}}, .blob = {}});
      amsp::test::train(opt, comm.rank(), job, 4, 7);  // changes every shard while the writer runs
      pending.commit();
      CHECK_THROWS_AS(pending.commit(), amsp::error);
      // Dropped without commit: nothing appears.
      { auto dropped = amsp::io::save_async(opt, comm, dir / "never"); }
      comm.barrier();
      CHECK(!std::filesystem::exists(dir / "never"));
    }
    AsyncEngine opt(comm, mesh, amsp::parse_plan("zero3", mesh), rule, amsp::test::odd_model());
    const amsp::io::Restored r = amsp::io::load(opt, comm, dir / "ckpt");
    CHECK(r.step == 4);
    loaded.collect(opt);
    amsp::test::train(opt, comm.rank(), job, 4, job.steps);
    const amsp::test::Params q = amsp::test::full_params(opt);
    if (comm.rank() == 0) resumed = q;
  });
  for (const auto& [name, rows] : snapshot.rows) CHECK(amsp::test::bitwise_equal(rows, loaded.rows.at(name)));
  // zero3 vs amsp-13b differ by rounding only; the same plan resumes bitwise (test_io_resume).
  CHECK(amsp::test::max_relative_error(resumed, straight) <= 1e-6);
}
