#pragma once
// The engine tests' synthetic job (tests/engine/engine_harness.hpp), cut at a step boundary so
// that a run can stop, save, and continue in a new engine; plus scratch directories and helpers to
// compare master weights and states across plans.

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/io/checkpoint.hpp"
#include "engine_harness.hpp"
#include "engine_runner.hpp"

namespace amsp::test {

using Threads = comm::ThreadsCommunicator;

/// A directory removed at the end of the test.
class ScratchDir {
public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("amsp-io-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                .string();
    std::filesystem::create_directories(path_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string operator/(const std::string& name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

/// Steps [first, last) of a job whose micro-batch m of step `step` on this rank uses the gradients
/// gradient(seed, step, sample_of(m), ...).
template <class Engine, class SampleOf>
void train_samples(Engine& opt, std::uint64_t seed, int micro_batches, int first, int last, SampleOf&& sample_of,
                   const std::function<float(int)>& lr_at = {}) {
  using ParamT = typename Engine::param_type;
  for (int step = first; step < last; ++step) {
    if (lr_at) opt.set_lr(lr_at(step));
    for (int m = 0; m < micro_batches; ++m) {
      opt.start_micro_batch(m == micro_batches - 1);
      const auto [micro, rank] = sample_of(m);
      std::size_t tensor = 0;
      for (int b = 0; b < opt.bucket_count(); ++b) {
        const std::span<const ParamT> full = opt.gather(b);
        const std::span<ParamT> grads = opt.grad_buffer(b);
        for (const TensorSlot& slot : opt.layout(b).slots()) {
          for (std::size_t i = 0; i < slot.numel; ++i)
            grads[slot.offset + i] = from_float<ParamT>(
                static_cast<float>(gradient(seed, step, micro, rank, tensor, i, to_float(full[slot.offset + i]))));
          ++tensor;
        }
        opt.release(b);
        opt.reduce_gradients(b);
      }
    }
    opt.step();
  }
}

/// Steps [first, last) of the job of run_job (same gradients for the same step index).
template <class Engine>
void train(Engine& opt, int rank, const JobConfig& job, int first, int last) {
  train_samples(opt, job.seed, job.micro_batches, first, last, [&](int m) { return std::pair{m, rank}; }, job.lr_at);
}

/// Steps [first, last) of a job with a global batch of `global_batch` samples per step, split
/// evenly over the world (rank r takes samples r*M .. r*M + M - 1 as its M micro-batches). The
/// averaged gradient is the same whatever the world size, so runs on different worlds differ by
/// rounding only: what resharding tests compare.
template <class Engine>
void train_global_batch(Engine& opt, int rank, int world, int global_batch, int first, int last) {
  const int micro_batches = global_batch / world;
  train_samples(opt, 42, micro_batches, first, last, [&](int m) { return std::pair{0, rank * micro_batches + m}; });
}

/// The full parameters every rank sees, widened to float, one vector per tensor.
template <class Engine>
Params full_params(Engine& opt) {
  return final_params<typename Engine::space_type>(opt);
}

/// Master weights and states by tensor name, assembled from the shards of the ranks of one OS
/// group: row 0 master, then each state. Call from every rank; `sink` collects under a lock.
struct StateTable {
  std::mutex mutex;
  std::map<std::string, std::vector<std::vector<float>>> rows;  // tensor -> row -> elements

  template <class Engine>
  void collect(Engine& opt) {
    if (opt.groups().os().index_of_group(opt.rank()) != 0) return;
    const int state_count = std::remove_cvref_t<decltype(opt.rule())>::state_count;
    for (int b = 0; b < opt.bucket_count(); ++b)
      for (const io::ShardPiece& p : io::owned_pieces(opt, b)) {
        std::lock_guard lock(mutex);
        auto& table = rows[p.slot->name];
        table.resize(static_cast<std::size_t>(1 + state_count), std::vector<float>(p.slot->numel, -999.0f));
        for (int r = 0; r <= state_count; ++r) {
          const std::span<float> src = r == 0 ? opt.master_shard(b) : opt.state_shard(b, r - 1);
          for (std::size_t i = 0; i < p.count; ++i)
            table[static_cast<std::size_t>(r)][p.tensor_begin + i] = src[p.shard_offset + i];
        }
      }
  }
};

}  // namespace amsp::test
