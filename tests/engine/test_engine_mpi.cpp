// The engine under MPI: run by ctest under mpiexec with 4 ranks (mesh 2x2) and 8 ranks (4x2).
// For every valid plan: AdamW and SGD-momentum, M = 1 and 3, with and without clipping, both OS
// layouts where valid, end within 1e-6 of the DDP plan run under MPI; a second run of the same
// plan is bitwise identical; and the traffic-counting wrapper around the MPI backend measures
// exactly the engine's expected traffic. With the argument `async`: every plan and layout run in
// the HostAsync space (the engine's two worker threads make its MPI calls; MPI initialised with
// MPI_THREAD_MULTIPLE) ends bitwise where the HostSerial run ends, and the traffic check runs in
// HostAsync. Without it (MPI_THREAD_FUNNELED), a HostAsync engine whose plan shards P is rule
// engine.concurrent_calls. In both, handles wait by polling exactly under MPI_THREAD_MULTIPLE. Prints "N passed, N failed" on rank 0.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "amsp/comm/counting.hpp"
#include "amsp/comm/mpi.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/optim/sgd_momentum.hpp"
#include "amsp/sharding.hpp"
#include "engine_runner.hpp"
#include "parity_metrics.hpp"
#include "../mpi_checks.hpp"
#include "../plan_sweep.hpp"

namespace {

using amsp::comm::MpiCommunicator;
using amsp::test::JobConfig;
using amsp::test::Params;
using amsp::test::bitwise_equal;
using amsp::test::max_relative_error;

using amsp::test::mpi_checks::expect;
using amsp::test::mpi_checks::failed;
using amsp::test::mpi_checks::passed;

template <class Rule>
void parity(MpiCommunicator& comm, const amsp::Mesh& mesh, const Rule& rule) {
  for (int micro : {1, 3})
    for (float clip : {0.0f, 0.05f}) {
      JobConfig job;
      job.micro_batches = micro;
      job.max_grad_norm = clip;
      const Params ddp = amsp::test::run_job(comm, mesh, amsp::preset("ddp", mesh), rule, job);
      amsp::test::for_each_plan_and_layout(mesh, [&](const amsp::Plan& plan, amsp::OsLayout layout) {
        job.os_layout = layout;
        const std::string what = std::string(Rule::name) + " " + amsp::to_string(plan) + " " +
                                 std::string(amsp::name_of(layout)) + " M=" + std::to_string(micro) +
                                 " clip=" + std::to_string(clip);
        const Params got = amsp::test::run_job(comm, mesh, plan, rule, job);
        expect(comm, max_relative_error(got, ddp) <= 1e-6, "parity with DDP: " + what);
        if (micro == 3 && clip > 0)
          expect(comm, bitwise_equal(got, amsp::test::run_job(comm, mesh, plan, rule, job)), "bitwise rerun: " + what);
      });
    }
}

/// HostAsync against HostSerial, bitwise, on every plan and layout (AdamW, M = 3, clipping).
void async_matches_serial(MpiCommunicator& comm, const amsp::Mesh& mesh) {
  const auto rule = amsp::optim::AdamW{.lr = 1e-2f};
  JobConfig job;
  job.micro_batches = 3;
  job.max_grad_norm = 0.05f;
  amsp::test::for_each_plan_and_layout(mesh, [&](const amsp::Plan& plan, amsp::OsLayout layout) {
    job.os_layout = layout;
    const Params serial = amsp::test::run_job<MpiCommunicator, amsp::optim::AdamW, float, amsp::HostSerial>(
        comm, mesh, plan, rule, job);
    const Params async = amsp::test::run_job<MpiCommunicator, amsp::optim::AdamW, float, amsp::HostAsync>(
        comm, mesh, plan, rule, job);
    expect(comm, bitwise_equal(async, serial),
           "HostAsync equals HostSerial: " + amsp::to_string(plan) + " " + std::string(amsp::name_of(layout)));
  });
}

template <class Space>
void traffic(MpiCommunicator& world, const amsp::Mesh& mesh) {
  using Counting = amsp::comm::CountingCommunicator<MpiCommunicator>;
  for (const amsp::Plan& plan : amsp::enumerate_plans(mesh)) {
    auto counter = std::make_shared<amsp::comm::TrafficCounter>(mesh);
    Counting comm(MpiCommunicator::borrow(MPI_COMM_WORLD), counter);
    amsp::ShardedOptimizer<Counting, amsp::optim::AdamW, float, float, Space> opt(comm, mesh, plan, amsp::optim::AdamW{},
                                                                                 amsp::test::odd_model());
    const int micro = 3;
    for (int m = 0; m < micro; ++m) {
      opt.start_micro_batch(m == micro - 1);
      for (int b = 0; b < opt.bucket_count(); ++b) {
        (void)opt.gather(b);
        auto g = opt.grad_buffer(b);
        for (std::size_t i = 0; i < g.size(); ++i) g[i] = 0.001f * float(i % 97);
        opt.release(b);
        opt.reduce_gradients(b);
      }
    }
    opt.step();
    opt.synchronize();
    const auto want = opt.expected_traffic(micro);
    const int r = world.rank();
    expect(world,
           counter->sent({.world_rank = r, .locality = amsp::comm::Locality::intra_node}) == want.intra_total() &&
               counter->sent({.world_rank = r, .locality = amsp::comm::Locality::inter_node}) == want.inter_total(),
           "counted traffic equals expected: " + amsp::to_string(plan));
  }
}

/// Below MPI_THREAD_MULTIPLE the HostAsync engine's gather stream may not call MPI beside its
/// communication stream: an error for a plan that shards P, fine for one that does not.
void concurrent_calls_need_thread_multiple(MpiCommunicator& world, const amsp::Mesh& mesh) {
  using AsyncEngine = amsp::ShardedOptimizer<MpiCommunicator, amsp::optim::AdamW, float, float, amsp::HostAsync>;
  std::string rule;
  try {
    AsyncEngine opt(world, mesh, amsp::preset("zero3", mesh), amsp::optim::AdamW{}, amsp::test::odd_model());
  } catch (const amsp::error& e) {
    rule = e.rule();
  }
  expect(world, rule == "engine.concurrent_calls", "HostAsync + zero3 below MPI_THREAD_MULTIPLE: engine.concurrent_calls");
  AsyncEngine ddp(world, mesh, amsp::preset("ddp", mesh), amsp::optim::AdamW{}, amsp::test::odd_model());
  expect(world, ddp.bucket_count() > 0, "HostAsync + ddp below MPI_THREAD_MULTIPLE: constructed");
}

int run_checks(MpiCommunicator& world, bool async) {
  const int size = world.size();
  const amsp::Mesh mesh = size == 8 ? amsp::Mesh(4, 2) : size == 4 ? amsp::Mesh(2, 2) : amsp::Mesh(size, 1);
  try {
    // Handles wait by polling MPI_Test exactly when two threads may wait at once (mpi.hpp).
    expect(world, world.handle_waits_poll() == async, async ? "MPI_THREAD_MULTIPLE: handle waits poll"
                                                            : "MPI_THREAD_FUNNELED: handle waits call MPI_Wait");
    if (async) {
      async_matches_serial(world, mesh);
      traffic<amsp::HostAsync>(world, mesh);
    } else {
      parity(world, mesh, amsp::optim::AdamW{.lr = 1e-2f});
      parity(world, mesh, amsp::optim::SgdMomentum{.lr = 1e-2f});
      traffic<amsp::HostSerial>(world, mesh);
      concurrent_calls_need_thread_multiple(world, mesh);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", world.rank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (world.rank() == 0) std::printf("engine under MPI on mesh %s: %d passed, %d failed\n", amsp::to_string(mesh).c_str(), passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const bool async = argc > 1 && std::string(argv[1]) == "async";
  int provided = 0;
  // The HostAsync engine's two streams make MPI calls from two threads: MPI_THREAD_MULTIPLE.
  MPI_Init_thread(&argc, &argv, async ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED, &provided);
  if (async && provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "this MPI provides thread level %d < MPI_THREAD_MULTIPLE: skipped\n", provided);
    MPI_Finalize();
    return 77;
  }
  int code = 0;
  {
    MpiCommunicator world = MpiCommunicator::world();
    code = run_checks(world, async);
  }
  MPI_Finalize();
  return code;
}
