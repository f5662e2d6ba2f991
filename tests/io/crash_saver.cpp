// Helper of test_io_crash: saves checkpoints k = first, first + 1, ... into one directory, forever,
// under zero3 on 2x2 (threads), printing "committed k" after each save returns. The test kills it
// with SIGKILL at a random moment and then loads what is there.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "amsp/comm/threads.hpp"
#include "amsp/io/checkpoint.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "crash_states.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DIR FIRST_K\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const long long first = std::atoll(argv[2]);
  const amsp::Mesh mesh(2, 2);
  using Threads = amsp::comm::ThreadsCommunicator;
  amsp::comm::run_on_threads(4, [&](Threads& comm) {
    amsp::ShardedOptimizer<Threads, amsp::optim::AdamW> opt(comm, mesh, amsp::parse_plan("zero3", mesh),
                                                            amsp::optim::AdamW{}, amsp::test::odd_model());
    for (long long k = first;; ++k) {
      amsp::test::crash_states(opt, k, false);
      opt.set_steps(k);
      amsp::io::save(opt, comm, dir, {.values = {{"k", std::to_string(k)}}, .blob = {}},
                     {.overwrite = true, .fsync = true, .max_piece_elements = 16});
      if (comm.rank() == 0) {
        std::printf("committed %lld\n", k);
        std::fflush(stdout);
      }
    }
  });
}
