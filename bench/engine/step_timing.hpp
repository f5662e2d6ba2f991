#pragma once
// Timing helpers shared by the engine benchmarks: a median, and a body timed on every rank
// between two barriers (rank 0's wall time is the step's time: the slowest rank ends it).

#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

namespace amsp::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// CPU seconds of every thread of this process (user + system) so far. Between the barriers of
/// a threads-backend body it is the work of all ranks and their workers together, which, unlike
/// the wall time, other processes on a shared machine barely change (they still compete for
/// caches and memory bandwidth).
inline double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

struct WallAndCpu {
  double wall = 0;  ///< seconds
  double cpu = 0;   ///< process CPU seconds between the same two barriers
};

/// Wall seconds from a barrier before `body` to a barrier after it, and the process CPU seconds
/// between the same barriers (every rank calls it; the rank that keeps the figures reads them).
template <class Comm, class F>
WallAndCpu timed_with_cpu(Comm& comm, F&& body) {
  using Clock = std::chrono::steady_clock;
  comm.barrier();
  const double cpu_start = process_cpu_seconds();
  const auto start = Clock::now();
  body();
  comm.barrier();
  return {std::chrono::duration<double>(Clock::now() - start).count(), process_cpu_seconds() - cpu_start};
}

/// Seconds from a barrier before `body` to a barrier after it.
template <class Comm, class F>
double timed(Comm& comm, F&& body) {
  return timed_with_cpu(comm, body).wall;
}

}  // namespace amsp::bench
