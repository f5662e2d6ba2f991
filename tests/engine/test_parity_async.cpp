// The parity suite (parity_cases.hpp) in the asynchronous host space, where reductions, the OS
// stage, the spread and prefetches run on a worker thread per rank; under ThreadSanitizer a
// missing event wait in the schedule is a reported data race. Plus: the asynchronous space gives
// bitwise the serial space's results (the same operations in the same order, on another thread),
// with the collective consistency check on.
#include "parity_cases.hpp"

AMSP_ENGINE_PARITY_CASES(amsp::HostAsync)

TEST_CASE("the asynchronous space gives the serial space's bits on every plan") {
  const auto rule = amsp::optim::AdamW{.lr = 1e-2f};
  for (const amsp::Mesh& mesh : {amsp::Mesh(2, 2), amsp::Mesh(4, 2)})
    for (const amsp::Plan& plan : amsp::enumerate_plans(mesh))
      for (amsp::OsLayout layout : {amsp::OsLayout::even_split, amsp::OsLayout::whole_tensor}) {
        if (layout == amsp::OsLayout::whole_tensor && plan.g != plan.p) continue;
        CAPTURE(amsp::to_string(mesh));
        CAPTURE(amsp::to_string(plan));
        CAPTURE(amsp::name_of(layout));
        JobConfig job;
        job.steps = 4;
        job.micro_batches = 3;
        job.max_grad_norm = 0.05f;
        job.os_layout = layout;
        job.check_collectives = true;  // the consistency check's calls run on the worker thread too
        CHECK(bitwise_equal(run_in<amsp::HostAsync>(mesh, plan, rule, job), run_in<amsp::HostSerial>(mesh, plan, rule, job)));
        CHECK(bitwise_equal(run_in<amsp::HostAsync, amsp::optim::AdamW, amsp::bf16>(mesh, plan, rule, job),
                            run_in<amsp::HostSerial, amsp::optim::AdamW, amsp::bf16>(mesh, plan, rule, job)));
      }
}
