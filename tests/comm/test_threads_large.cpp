// The 1<<20-element part of the threads sweep: every collective × dtype × placement × world size
// (label slow; the unit suite runs one slice of it).
#include <doctest/doctest.h>

#include "collective_checks.hpp"
#include "report.hpp"
#include "threads_harness.hpp"

TEST_CASE("threads: 1<<20 elements, every collective, dtype, placement and world size") {
  for (int n : {1, 2, 3, 4, 8}) {
    CAPTURE(n);
    const auto failures = amsp::test::failures_on_threads(n, [](amsp::comm::ThreadsCommunicator& c) {
      return amsp::test::run_sweep(c, {std::size_t{1} << 20}, amsp::test::all_dtypes);
    });
    amsp::test::require_none(failures);
  }
}
