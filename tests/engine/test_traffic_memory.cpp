// The traffic-counting communicator measures exactly the engine's expected traffic for every
// plan, and the reported model-state memory equals 2Φ/s_p + 2Φ/s_g + 12Φ/s_os (bf16 + AdamW)
// over the padded bucket sizes.
#include <doctest/doctest.h>

#include <memory>

#include "amsp/comm/counting.hpp"
#include "amsp/comm/threads.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "engine_runner.hpp"

namespace {

using Counting = amsp::comm::CountingCommunicator<amsp::comm::ThreadsCommunicator>;

void check_traffic(const amsp::Mesh& mesh, const amsp::Plan& plan, amsp::OsLayout layout, int micro) {
  auto counter = std::make_shared<amsp::comm::TrafficCounter>(mesh);
  amsp::test::JobConfig job;
  job.steps = 2;
  job.micro_batches = micro;
  job.os_layout = layout;
  std::vector<amsp::TrafficExpectation> expected(static_cast<std::size_t>(mesh.world_size()));
  amsp::comm::run_on_threads(mesh.world_size(), [&](amsp::comm::ThreadsCommunicator& threads) {
    Counting comm(std::move(threads), counter);
    amsp::EngineOptions options;
    options.os_layout = layout;
    amsp::ShardedOptimizer<Counting, amsp::optim::AdamW> opt(comm, mesh, plan, amsp::optim::AdamW{}, amsp::test::odd_model(),
                                                            options);
    expected[static_cast<std::size_t>(comm.rank())] = opt.expected_traffic(micro);
    for (int step = 0; step < job.steps; ++step) {
      for (int m = 0; m < micro; ++m) {
        opt.start_micro_batch(m == micro - 1);
        for (int b = 0; b < opt.bucket_count(); ++b) {
          const auto full = opt.gather(b);
          auto grads = opt.grad_buffer(b);
          for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = full[i] * 0.5f + 1.0f;
          opt.release(b);
          opt.reduce_gradients(b);
        }
      }
      opt.step();
    }
    opt.synchronize();
  });
  for (int r = 0; r < mesh.world_size(); ++r) {
    CAPTURE(r);
    const auto& want = expected[static_cast<std::size_t>(r)];
    const auto intra = counter->sent({.world_rank = r, .locality = amsp::comm::Locality::intra_node});
    const auto inter = counter->sent({.world_rank = r, .locality = amsp::comm::Locality::inter_node});
    CHECK(intra == want.intra_total() * static_cast<std::uint64_t>(job.steps));
    CHECK(inter == want.inter_total() * static_cast<std::uint64_t>(job.steps));
  }
}

}  // namespace

TEST_CASE("counted traffic equals the expected traffic for every plan") {
  for (const amsp::Mesh& mesh : {amsp::Mesh(4, 1), amsp::Mesh(2, 2), amsp::Mesh(4, 2), amsp::Mesh(2, 4)})
    for (const amsp::Plan& plan : amsp::enumerate_plans(mesh))
      for (int micro : {1, 3})
        for (amsp::OsLayout layout : {amsp::OsLayout::even_split, amsp::OsLayout::whole_tensor}) {
          if (!amsp::layout_supports(layout, plan)) continue;
          CAPTURE(amsp::to_string(mesh));
          CAPTURE(amsp::to_string(plan));
          CAPTURE(micro);
          CAPTURE(amsp::name_of(layout));
          check_traffic(mesh, plan, layout, micro);
        }
}

TEST_CASE("expected traffic of hand-computed cases") {
  // ZeRO-1 on 4 x 1, one bucket of 64 fp32 elements (no padding beyond 16-element alignment x 4):
  // the only collectives are the ReduceScatter of the 256-byte gradient (3/4 x 256 = 192 bytes),
  // the spread AllGather of 256 bytes (192) and the 8-byte norm AllReduce (2 x 3/4 x 8 = 12).
  const amsp::Mesh mesh(4, 1);
  const amsp::PlanGroups groups(mesh, amsp::preset("zero1", mesh));
  const std::vector<amsp::FlatLayout> layouts{amsp::FlatLayout({{"w", {64}, amsp::dtype::fp32}}, 64, 4)};
  const auto t = amsp::expected_traffic(groups, layouts, amsp::TrafficScenario{}, 0);
  CHECK(t.intra[static_cast<int>(amsp::TrafficTerm::grad_reduce_os)] == amsp::comm::ByteVolume(192));
  CHECK(t.intra[static_cast<int>(amsp::TrafficTerm::param_spread)] == amsp::comm::ByteVolume(192));
  CHECK(t.intra[static_cast<int>(amsp::TrafficTerm::grad_norm)] == amsp::comm::ByteVolume(12));
  CHECK(t.intra_total() == amsp::comm::ByteVolume(396));
  CHECK(t.inter_total() == amsp::comm::ByteVolume(0));
  // DDP on 2 x 2 with 3 micro-batches: one AllReduce of the gradient per step, across nodes.
  const amsp::Mesh mesh2(2, 2);
  const amsp::PlanGroups ddp(mesh2, amsp::preset("ddp", mesh2));
  amsp::TrafficScenario three;
  three.micro_batches = 3;
  three.grad_norm = false;
  const auto d = amsp::expected_traffic(ddp, layouts, three, 3);
  CHECK(d.inter_total() == amsp::comm::ByteVolume(2 * 3 * 256 / 4));
  CHECK(d.intra_total() == amsp::comm::ByteVolume(0));
}

TEST_CASE("model-state memory equals 2/s_p + 2/s_g + 12/s_os bytes per parameter (bf16 + AdamW)") {
  for (const amsp::Mesh& mesh : {amsp::Mesh(4, 2), amsp::Mesh(8, 1)})
    for (const amsp::Plan& plan : amsp::enumerate_plans(mesh)) {
      CAPTURE(amsp::to_string(plan));
      std::vector<amsp::MemoryReport> reports(static_cast<std::size_t>(mesh.world_size()));
      std::size_t phi = 0;  // padded parameters of the model
      amsp::comm::run_on_threads(mesh.world_size(), [&](amsp::comm::ThreadsCommunicator& comm) {
        amsp::ShardedOptimizer<amsp::comm::ThreadsCommunicator, amsp::optim::AdamW, amsp::bf16> opt(
            comm, mesh, plan, amsp::optim::AdamW{}, amsp::test::odd_model());
        reports[static_cast<std::size_t>(comm.rank())] = opt.memory();
        if (comm.rank() == 0)
          for (int b = 0; b < opt.bucket_count(); ++b) phi += opt.layout(b).buffer_size(amsp::dtype::bf16);
      });
      for (const amsp::MemoryReport& m : reports) {
        CHECK(m.params == 2 * phi / static_cast<std::size_t>(plan.p.size()));
        CHECK(m.grads == 2 * phi / static_cast<std::size_t>(plan.g.size()));
        CHECK(m.optimizer_states == 12 * phi / static_cast<std::size_t>(plan.os.size()));
        // Nothing was gathered or reduced yet: the only scratch is the fp32 copy of the OS-shard
        // gradients that bf16 gradients need (reductions run in fp32).
        CHECK(m.scratch == 4 * phi / static_cast<std::size_t>(plan.os.size()));
      }
    }
}
