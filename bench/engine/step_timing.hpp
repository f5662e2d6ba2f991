#pragma once
// Timing helpers shared by the engine benchmarks: a median, and a body timed on every rank
// between two barriers (rank 0's wall time is the step's time: the slowest rank ends it).

#include <algorithm>
#include <chrono>
#include <vector>

namespace amsp::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Seconds from a barrier before `body` to a barrier after it.
template <class Comm, class F>
double timed(Comm& comm, F&& body) {
  using Clock = std::chrono::steady_clock;
  comm.barrier();
  const auto start = Clock::now();
  body();
  comm.barrier();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace amsp::bench
