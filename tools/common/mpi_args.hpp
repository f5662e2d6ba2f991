#pragma once
// The MPI backend's options that every program with --backend mpi offers, defined once.

#include "common/cli_args.hpp"

namespace amsp::cli {

/// --mpi-check-calls on|off: MpiOptions::check_calls. On (MPI's default in amsp) every collective
/// is preceded by a small MPI_Allreduce comparing its arguments across ranks; off saves that
/// round trip per collective, which costs milliseconds when ranks outnumber cores (the emulated
/// cluster, docs/cluster.md): the setting for timing runs once a schedule is known to be right.
[[nodiscard]] inline bool mpi_check_calls(Args& args) {
  return args.choice("--mpi-check-calls",
                     "compare each collective's arguments across MPI ranks first (a small MPI_Allreduce per "
                     "collective; off for timing runs)",
                     true, {{"on", true}, {"off", false}});
}

}  // namespace amsp::cli
