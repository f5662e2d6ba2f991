// A program with the threads backend's CUDA data mover installed (threads_cuda_mover.cu) still
// runs collectives on host buffers through the host path: every call asks CUDA where its buffers
// live, and host memory, or no CUDA device at all, means host. Runs with and without a GPU.
#include <doctest/doctest.h>

#include "collective_checks.hpp"
#include "report.hpp"
#include "threads_harness.hpp"

namespace {
using namespace amsp;
using amsp::comm::ThreadsCommunicator;
}  // namespace

TEST_CASE("threads with the CUDA mover: the mover is installed by linking a file that includes it") {
  CHECK(comm::threads_device_memory_enabled());
}

TEST_CASE("threads with the CUDA mover: host buffers against the serial reference, blocking and async") {
  for (int n : {1, 3}) {
    CAPTURE(n);
    test::require_none(test::failures_on_threads(n, [](ThreadsCommunicator& c) {
      return test::run_sweep(c, {0, 1, 7, 4099}, test::all_dtypes);
    }));
  }
  test::require_none(test::failures_on_threads(3, [](ThreadsCommunicator& c) {
    return test::run_sweep(c, {7}, test::all_dtypes, /*async=*/true);
  }));
}
