// Helper of test_io_python: writes a checkpoint of the odd model (zero3 on 2x2, pieces of at most
// 40 elements so that tensors span files) whose states are crash_states(k = 5), and next to it
// the expected values, computed here without amsp::io: expected/<tensor>.f32, rows x numel
// float32 little-endian (row 0 the master weights, then AdamW's exp_avg and exp_avg_sq).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/io/checkpoint.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "crash_states.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  constexpr std::int64_t k = 5;
  const amsp::Mesh mesh(2, 2);
  using Threads = amsp::comm::ThreadsCommunicator;
  amsp::comm::run_on_threads(4, [&](Threads& comm) {
    amsp::ShardedOptimizer<Threads, amsp::optim::AdamW> opt(comm, mesh, amsp::parse_plan("zero3", mesh),
                                                            amsp::optim::AdamW{}, amsp::test::odd_model());
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
  return 0;
}
