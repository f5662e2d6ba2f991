// Helper program of two io tests, one executable because both save the same engine (the odd model,
// AdamW, zero3 on 2x2 threads, states crash_states(k)): the library's save path is compiled once
// (about 22 CPU-seconds per build; docs/testing.md).
//   io_checkpoint_writer loop DIR FIRST_K   test_io_crash: saves checkpoints k = FIRST_K, FIRST_K + 1,
//       ... into DIR, forever, printing "committed k" after each save returns; the test kills it
//       with SIGKILL at a random moment and then loads what is there.
//   io_checkpoint_writer sample DIR         test_io_python: writes checkpoint k = 5 to DIR/ckpt
//       (pieces of at most 40 elements, so that tensors span files) and next to it the expected
//       values, computed here without amsp::io: DIR/expected/<tensor>.f32, rows x numel float32
//       little-endian (row 0 the master weights, then AdamW's exp_avg and exp_avg_sq).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/io/checkpoint.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "crash_states.hpp"

namespace {

using Threads = amsp::comm::ThreadsCommunicator;
using Engine = amsp::ShardedOptimizer<Threads, amsp::optim::AdamW>;

/// Runs `save(opt, comm)` on each of the 4 ranks of zero3 on 2x2.
template <class Save>
void on_zero3_2x2(Save&& save) {
  const amsp::Mesh mesh(2, 2);
  amsp::comm::run_on_threads(4, [&](Threads& comm) {
    Engine opt(comm, mesh, amsp::parse_plan("zero3", mesh), amsp::optim::AdamW{}, amsp::test::odd_model());
    save(opt, comm);
  });
}

void save_forever(const std::string& dir, long long first) {
  on_zero3_2x2([&](Engine& opt, Threads& comm) {
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

void write_sample(const std::string& dir) {
  constexpr std::int64_t k = 5;
  on_zero3_2x2([&](Engine& opt, Threads& comm) {
    amsp::test::crash_states(opt, k, false);
    opt.set_steps(k);
    amsp::io::save(opt, comm, dir + "/ckpt", {}, {.overwrite = true, .fsync = false, .max_piece_elements = 40});
  });
  std::filesystem::create_directories(dir + "/expected");
  std::size_t t = 0;
  for (const amsp::BucketSpec& b : amsp::test::odd_model())
    for (const amsp::TensorSpec& spec : b.tensors) {
      std::vector<float> rows;
      for (int r = 0; r < 3; ++r)
        for (std::size_t i = 0; i < spec.numel(); ++i) rows.push_back(amsp::test::crash_value(k, r, t, i));
      std::ofstream(dir + "/expected/" + spec.name + ".f32", std::ios::binary)
          .write(reinterpret_cast<const char*>(rows.data()), static_cast<std::streamsize>(rows.size() * sizeof(float)));
      ++t;
    }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "loop" && argc == 4) {
    save_forever(argv[2], std::atoll(argv[3]));
    return 0;
  }
  if (mode == "sample" && argc == 3) {
    write_sample(argv[2]);
    return 0;
  }
  std::fprintf(stderr, "usage: %s loop DIR FIRST_K | sample DIR\n", argv[0]);
  return 2;
}
