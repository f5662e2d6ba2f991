#pragma once
// Checks for the MPI test programs, which have mains of their own (MPI is initialised first) and
// no doctest: every rank records each check, the verdict is agreed over the ranks (so all ranks
// count the same), rank 0 prints each failure, and the program closes with "N passed, N failed".

#include <cstdio>
#include <string>

#include "amsp/comm/mpi.hpp"

namespace amsp::test::mpi_checks {

inline int passed = 0, failed = 0;

/// Records a check on every rank of `comm`; it fails when it fails on any rank.
inline void expect(comm::MpiCommunicator& comm, bool ok, const std::string& what) {
  double bad = ok ? 0.0 : 1.0;
  comm.all_reduce(&bad, &bad, 1, comm::reduce_op::sum);
  if (bad == 0.0) {
    ++passed;
  } else {
    ++failed;
    if (comm.rank() == 0) std::printf("FAILED: %s\n", what.c_str());
  }
}

}  // namespace amsp::test::mpi_checks
