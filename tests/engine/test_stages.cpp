// The stages of the schedule are types per policy (amsp/engine/detail/engine_stages.hpp): a stage
// over a group of one rank holds no communicator and no scratch. By type (static_asserts) and by
// what the engine allocates: DDP (every component Replica) has no gather and no reduction
// scratch, ZeRO-3 (every component sharded) has both, sized by the buckets in flight, and ZeRO-2
// only what its sharded stages need.
#include <doctest/doctest.h>

#include <algorithm>
#include <type_traits>
#include <variant>

#include "amsp/comm/threads.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "engine_runner.hpp"

namespace {

using Threads = amsp::comm::ThreadsCommunicator;

// A group of one: no communicator, no scratch, nothing at all.
static_assert(std::is_empty_v<amsp::detail::SoloStage>);
// Every stage's replica alternative is that type; the sharded one holds the communicator.
static_assert(std::is_same_v<std::variant_alternative_t<0, amsp::detail::Stage<Threads>>, amsp::detail::SoloStage>);
static_assert(std::is_same_v<decltype(amsp::detail::GroupStage<Threads>::comm), Threads>);
static_assert(std::is_same_v<std::variant_alternative_t<0, amsp::detail::ParamsStage<Threads, float, amsp::host_buffer, false>>,
                             amsp::detail::SoloStage>);

struct Usage {
  amsp::MemoryReport memory;
  std::size_t largest_bucket_bytes = 0;  // fp32
  std::size_t all_buckets_bytes = 0;
};

// The harness's job (3 micro-batches: the later ones cannot reduce into the G store directly),
// every rank's memory report after it.
std::vector<Usage> usage_after_job(const amsp::Mesh& mesh, const char* preset) {
  const amsp::Plan plan = amsp::parse_plan(preset, mesh);
  amsp::test::JobConfig job;
  job.steps = 2;
  job.micro_batches = 3;
  std::vector<Usage> usage(static_cast<std::size_t>(mesh.world_size()));
  amsp::comm::run_on_threads(mesh.world_size(), [&](Threads& comm) {
    Usage& u = usage[static_cast<std::size_t>(comm.rank())];
    (void)amsp::test::run_job<Threads, amsp::optim::AdamW>(comm, mesh, plan, amsp::optim::AdamW{}, job, &u.memory);
    for (const amsp::BucketSpec& spec : amsp::test::odd_model()) {
      const std::size_t bytes =
          amsp::bucket_layout(spec, amsp::dtype::fp32, plan, amsp::EngineOptions{}.alignment_bytes)
              .buffer_size(amsp::dtype::fp32) * sizeof(float);
      u.largest_bucket_bytes = std::max(u.largest_bucket_bytes, bytes);
      u.all_buckets_bytes += bytes;
    }
  });
  return usage;
}

}  // namespace

TEST_CASE("a plan of replicas allocates no stage scratch; a sharded plan does") {
  const amsp::Mesh mesh(2, 2);
  for (const Usage& ddp : usage_after_job(mesh, "ddp")) {
    CHECK(ddp.memory.gather_scratch == 0);     // gather(b) is the P store
    CHECK(ddp.memory.reduction_scratch == 0);  // fp32 gradients, no ReduceScatter: none between stages
    CHECK(ddp.memory.scratch >= ddp.memory.gather_scratch + ddp.memory.reduction_scratch);
  }
  // Per stage, not per plan: ZeRO-2 shards G, so its G split reduces into scratch, but its P is
  // replicated and gathers nothing.
  for (const Usage& zero2 : usage_after_job(mesh, "zero2")) {
    CHECK(zero2.memory.gather_scratch == 0);
    CHECK(zero2.memory.reduction_scratch >= zero2.largest_bucket_bytes / 4);
  }
  for (const Usage& zero3 : usage_after_job(mesh, "zero3")) {
    // At least one bucket gathered, at most all of them at once.
    CHECK(zero3.memory.gather_scratch >= zero3.largest_bucket_bytes);
    CHECK(zero3.memory.gather_scratch <= zero3.all_buckets_bytes);
    // Micro-batches after the first reduce into a buffer of a G shard (a quarter of a bucket here).
    CHECK(zero3.memory.reduction_scratch >= zero3.largest_bucket_bytes / 4);
    CHECK(zero3.memory.scratch >= zero3.memory.gather_scratch + zero3.memory.reduction_scratch);
  }
}
