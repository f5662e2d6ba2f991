// The MPI backend's watchdog (MpiOptions::collective_timeout), run by ctest under mpiexec with 4
// ranks. First, blocking and asynchronous collectives, the argument check and a barrier complete
// normally under the watchdog and give the right values. Then rank 3 stops taking part (it
// sleeps far longer than the test's ctest timeout): the others' all_reduce must end the job
// through the watchdog within the limit, with a message naming the call. ctest passes the test
// on that message (PASS_REGULAR_EXPRESSION) and fails it on its timeout if the job hangs.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "amsp/comm/mpi.hpp"

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  amsp::comm::MpiSession session(argc, argv);
  amsp::comm::MpiCommunicator world = amsp::comm::MpiCommunicator::world({.collective_timeout = 2000ms});
  const int n = world.size();
  std::vector<float> x(1000, 1.0f), gathered(1000 * static_cast<std::size_t>(n));
  world.all_reduce(x.data(), x.data(), x.size());
  amsp::comm::Handle h = world.all_gather_async(x.data(), gathered.data(), x.size());
  h.wait();
  world.barrier();
  bool ok = true;
  for (float v : gathered) ok = ok && v == static_cast<float>(n);
  if (!ok) {
    std::fprintf(stderr, "rank %d: wrong values under the watchdog\n", world.rank());
    return 1;
  }
  if (world.rank() == 0) {
    std::fprintf(stderr, "collectives within the limit pass\n");
    std::fflush(stderr);
  }
  world.barrier();
  if (world.rank() == n - 1) {
    std::this_thread::sleep_for(600s);  // stops taking part; the watchdog must end the job first
    return 0;
  }
  world.all_reduce(x.data(), x.data(), x.size());
  std::fprintf(stderr, "rank %d: the all_reduce completed without rank %d\n", world.rank(), n - 1);
  return 1;
}
