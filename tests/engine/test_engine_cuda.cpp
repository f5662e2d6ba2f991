// The engine in the CUDA space (label gpu; exits 77, "skipped", without a device): the parity
// suite of the host spaces (parity_cases.hpp) on amsp::CudaAsync with the threads backend over
// device memory; the device engine against the host engine plan by plan; update_in_backward
// (update_in_backward_cases.hpp) against the normal schedule and the host engine, and its step
// counts; and a step that never makes the caller wait for the user's stream, with its gradient
// buffers held to the bound by the staging ring. The device half is
// engine_cuda_driver.cu.
#include "engine_cuda_driver.hpp"
#include "parity_cases.hpp"
#include "update_in_backward_cases.hpp"

TYPE_TO_STRING(amsp::test::CudaThreads);

using amsp::test::require_gpu;

TEST_CASE("a CUDA device is present (else the whole program is skipped)") { require_gpu(); }

AMSP_ENGINE_PARITY_CASES(amsp::test::CudaThreads)

// update_in_backward on the device: every plan of 2x2, both layouts, M = 1 and 3, the learning
// rate changed before every step; bitwise the normal schedule on the device (fp32 and bf16:
// the same device operations in the same order) and the host engine's updates in the backward
// (fp32: the update is built with --fmad=false), parameters and every rank's OS shards.
AMSP_UPDATE_IN_BACKWARD_CASES(amsp::test::CudaThreads)
AMSP_UPDATE_IN_BACKWARD_HOST_CASES(amsp::test::CudaThreads)

TEST_CASE("update_in_backward on the CUDA space: the host engine's step counts, across set_steps") {
  require_gpu();
  update_in_backward_test::check_counts_match_host(amsp::test::cuda_in_backward_counts());
}

TEST_CASE("the CUDA space gives the host engine's results on every plan of 2x2 and 4x2") {
  require_gpu();
  using amsp::test::CudaThreads;
  const auto rule = amsp::optim::AdamW{.lr = 1e-2f};
  for_each_space_case([&](const amsp::Mesh& mesh, const amsp::Plan& plan, JobConfig job) {
    // No clipping: the sums, conversions and the update (built with --fmad=false) run in the
    // host's order, so fp32 gives the same bits.
    CHECK(bitwise_equal(run_in<CudaThreads>(mesh, plan, rule, job), run_in<amsp::HostSerial>(mesh, plan, rule, job)));
    // Clipping: the device sums the squares in another order, which may move the clip
    // coefficient by an ulp; bf16 parameters: within one bf16 ulp.
    job.max_grad_norm = 0.05f;
    CHECK(max_relative_error(run_in<CudaThreads>(mesh, plan, rule, job), run_in<amsp::HostSerial>(mesh, plan, rule, job)) <=
          1e-6);
    job.micro_batches = 1;
    CHECK(max_error_in_bf16_ulps(run_in<CudaThreads, amsp::optim::AdamW, amsp::bf16>(mesh, plan, rule, job),
                                 run_in<amsp::HostSerial, amsp::optim::AdamW, amsp::bf16>(mesh, plan, rule, job)) <=
          1.0);
  });
}

#if defined(AMSP_HAS_NCCL)
TEST_CASE("the NCCL communicator with one rank gives the host engine's bits") {
  require_gpu();
  JobConfig job;
  job.micro_batches = 3;
  CHECK(bitwise_equal(amsp::test::run_nccl_one_rank_cuda(job),
                      run_in<amsp::HostSerial>(amsp::Mesh(1, 1), amsp::parse_plan("ddp", amsp::Mesh(1, 1)),
                                               amsp::optim::AdamW{.lr = 1e-2f}, job)));
}
#endif

#if defined(AMSP_HAS_NCCL)
TEST_CASE("the CUDA space orders an NCCL collective after its stream by an event, without waiting for it") {
  require_gpu();
  const amsp::test::NcclOrderReport r = amsp::test::nccl_after_held_comm_stream(10.0);
  CHECK(r.before_collective_seconds < r.hold_seconds / 4);  // no synchronisation of the held stream
  CHECK(r.comm_stream_still_held);                          // ...the collective was issued while it held
  CHECK(r.received == 42.0f);                               // ...and still ran after the kernel's write
}
#endif

TEST_CASE("a CUDA engine takes device tensors and rejects host tensors where it reads them on the device") {
  require_gpu();
  const amsp::test::MemorySpaceReport r = amsp::test::cuda_engine_memory_spaces();
  CHECK(r.reduce_host_rule == "engine.memory_space");
  CHECK(r.gather_into_host_rule == "engine.memory_space");
  CHECK(r.device_tensors_round_trip);
}

TEST_CASE("a CUDA engine refuses the legacy default stream as the user's stream") {
  require_gpu();
  CHECK(amsp::test::rule_for_legacy_user_stream() == "engine.cuda_stream");
}

TEST_CASE("a step never waits for the user's stream") {
  require_gpu();
  for (const char* plan : {"ddp", "zero3", "amsp-13b"}) {
    CAPTURE(plan);
    const amsp::test::NoHostSyncReport r = amsp::test::step_while_user_stream_held(amsp::Mesh(2, 2), plan, 20.0);
    CHECK(r.slowest_issue_seconds < r.hold_seconds / 4);  // the calls returned while the kernel held
    CHECK(r.user_stream_still_held);                      // ...and it was still holding afterwards
    CHECK(r.applied_steps == 2);                           // then both steps ran
    CHECK(r.gradient_staging_bytes <= r.staging_bound_bytes);  // the staging ring held, however far ahead
  }
}
