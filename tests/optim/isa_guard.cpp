// Skips an optimizer test executable on a CPU that cannot run the instruction set it was built
// for. Compiled for the x86-64 baseline (never with the variant's -march flag) and run as a
// constructor of the highest priority, before any static initializer of the variant's own code,
// which may already use the wider instructions. Exit 77: ctest reports the test as skipped.
#include <cstdio>
#include <unistd.h>

#ifndef AMSP_TEST_REQUIRED_ISA
#error "AMSP_TEST_REQUIRED_ISA must name the -march level of the executable (x86-64, x86-64-v3, x86-64-v4)"
#endif

namespace {

[[gnu::constructor(101)]] void skip_unless_cpu_supports_required_isa() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports(AMSP_TEST_REQUIRED_ISA)) {
    std::fprintf(stderr, "skipped: this CPU cannot run %s code (the executable was built for it)\n",
                 AMSP_TEST_REQUIRED_ISA);
    std::fflush(stderr);
    ::_exit(77);  // before main and other static objects exist: run no destructors
  }
#endif
}

}  // namespace
