// The parity suite (parity_cases.hpp) in the asynchronous host space, where reductions, the OS
// stage, the spread and prefetches run on a worker thread per rank; under ThreadSanitizer a
// missing event wait in the schedule is a reported data race. Plus: the asynchronous space gives
// bitwise the serial space's results (the same operations in the same order, on another thread),
// with the collective consistency check on.
#include "parity_cases.hpp"

AMSP_ENGINE_PARITY_CASES(amsp::HostAsync)

TEST_CASE("the asynchronous space gives the serial space's bits on every plan") {
  const auto rule = amsp::optim::AdamW{.lr = 1e-2f};
  for_each_space_case([&](const amsp::Mesh& mesh, const amsp::Plan& plan, JobConfig job) {
    job.max_grad_norm = 0.05f;
    job.check_collectives = true;  // the consistency check's calls run on the worker thread too
    CHECK(bitwise_equal(run_in<amsp::HostAsync>(mesh, plan, rule, job), run_in<amsp::HostSerial>(mesh, plan, rule, job)));
    CHECK(bitwise_equal(run_in<amsp::HostAsync, amsp::optim::AdamW, amsp::bf16>(mesh, plan, rule, job),
                        run_in<amsp::HostSerial, amsp::optim::AdamW, amsp::bf16>(mesh, plan, rule, job)));
  });
}
