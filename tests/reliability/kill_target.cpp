// The job the dead-rank test (kill_rank.sh) kills: 8 MPI ranks (mesh 4 x 2, plan amsp-13b) train a
// small model with the ShardedOptimizer in an endless loop. Each rank writes its PID to
// <dir>/rank<r>.pid once training has started, so that the script can kill one of them in the
// middle of a step. Ends by itself after <seconds> (default 120) so that a broken test leaves
// nothing running.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "amsp/comm/mpi.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"

int main(int argc, char** argv) {
  amsp::comm::MpiSession session(argc, argv);
  amsp::comm::MpiCommunicator world = amsp::comm::MpiCommunicator::world();
  if (argc < 2 || world.size() != 8) {
    std::fprintf(stderr, "usage: mpirun -np 8 kill_target <pid dir> [seconds]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const double seconds = argc > 2 ? std::atof(argv[2]) : 120.0;
  const amsp::Mesh mesh(4, 2);
  std::vector<amsp::BucketSpec> buckets;
  for (int b = 0; b < 4; ++b)
    buckets.push_back({"layer" + std::to_string(b), {{"layer" + std::to_string(b) + ".w", {65536}, amsp::dtype::fp32}}});
  amsp::ShardedOptimizer<amsp::comm::MpiCommunicator, amsp::optim::AdamW> opt(
      world, mesh, amsp::preset("amsp-13b", mesh), amsp::optim::AdamW{.lr = 1e-3f}, buckets);
  const auto start = std::chrono::steady_clock::now();
  for (long step = 0;; ++step) {
    opt.start_micro_batch(true);
    for (int b = 0; b < opt.bucket_count(); ++b) {
      (void)opt.gather(b);
      std::span<float> g = opt.grad_buffer(b);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = 1e-3f * static_cast<float>((i + step) % 7);
      opt.release(b);
      opt.reduce_gradients(b);
    }
    opt.step();
    if (step == 0) {
      const std::string path = dir + "/rank" + std::to_string(world.rank()) + ".pid";
      if (FILE* f = std::fopen(path.c_str(), "w")) {
        std::fprintf(f, "%d\n", static_cast<int>(getpid()));
        std::fclose(f);
      }
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) break;
  }
  opt.synchronize();
  if (world.rank() == 0) std::printf("kill_target: nobody was killed\n");
  return 0;
}
