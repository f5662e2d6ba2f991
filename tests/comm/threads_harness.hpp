#pragma once
// Runs a per-rank check on a threads world and gathers what each rank reports, so that doctest
// assertions happen on the test's own thread after the world joined.

#include <mutex>
#include <string>
#include <vector>

#include "amsp/comm/threads.hpp"

namespace amsp::test {

/// Calls `body(comm)` (returning a vector of failure strings) on every rank of a world of `n`
/// threads; returns all failures.
template <class Body>
[[nodiscard]] std::vector<std::string> failures_on_threads(int n, Body body) {
  std::mutex mutex;
  std::vector<std::string> all;
  comm::run_on_threads(n, [&](comm::ThreadsCommunicator& comm) {
    std::vector<std::string> mine = body(comm);
    std::lock_guard lock(mutex);
    all.insert(all.end(), mine.begin(), mine.end());
  });
  return all;
}

}  // namespace amsp::test
