// Checkpoint throughput next to the disk's: save and load of a >= 1 GB state with 8 ranks (threads
// backend, zero3 on 4x2: each rank writes and reads 1/8), against a plain sequential write and read
// of the same number of bytes to one file on the same disk, in the same run. Then the asynchronous
// save: the training stall (save_async() + commit() after the writes finished) as a fraction of
// the synchronous save. Every file is fsynced (save and plain write alike) and evicted from the
// page cache (posix_fadvise DONTNEED) before it is read, so reads come from the disk.
//
//   bench_checkpoint [DIR] [ELEMENTS_PER_RANK] [ROUNDS]   (defaults: /tmp, 12 Mi => 1.2 GB of states, 3)
// Prints a table (bench/README.md quotes it). Not a ctest test.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/io/async_save.hpp"
#include "amsp/io/checkpoint.hpp"
#include "amsp/io/file.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"

namespace {

using Threads = amsp::comm::ThreadsCommunicator;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}
void evict_tree(const std::string& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) evict(e.path().string());
}

std::uint64_t tree_bytes(const std::string& dir) {
  std::uint64_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

/// One thread writes `bytes` to one file in 8 MiB writes and fsyncs; returns seconds.
double plain_write(const std::string& path, std::uint64_t bytes) {
  std::vector<char> block(std::size_t{8} << 20, 'x');
  const auto t = Clock::now();
  amsp::io::File f = amsp::io::File::create(path);
  for (std::uint64_t done = 0; done < bytes; done += block.size())
    f.write_all(block.data(), static_cast<std::size_t>(std::min<std::uint64_t>(block.size(), bytes - done)));
  f.sync();
  f.close();
  return seconds_since(t);
}
double plain_read(const std::string& path) {
  std::vector<char> block(std::size_t{8} << 20);
  const auto t = Clock::now();
  const amsp::io::File f = amsp::io::File::open_read(path);
  const std::uint64_t size = f.size();
  for (std::uint64_t done = 0; done < size; done += block.size())
    f.read_at(block.data(), static_cast<std::size_t>(std::min<std::uint64_t>(block.size(), size - done)), done);
  return seconds_since(t);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string root = (argc > 1 ? std::string(argv[1]) : std::string("/tmp")) + "/amsp-bench-ckpt-" +
                           std::to_string(::getpid());
  const std::size_t per_rank = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (std::size_t{12} << 20);
  std::filesystem::create_directories(root);
  const amsp::Mesh mesh(4, 2);
  const int world = mesh.world_size();
  // 8 buckets of 3 tensors; total elements = per_rank x 8 (zero3: each rank holds 1/8).
  const std::size_t total = per_rank * static_cast<std::size_t>(world);
  std::vector<amsp::BucketSpec> model;
  for (int b = 0; b < 8; ++b) {
    const auto third = static_cast<std::int64_t>(total / 8 / 3);
    const std::string prefix = std::string("l") + std::to_string(b);  // (g++ 12 -Wrestrict on "l" + string&&)
    model.push_back({std::string("layer") + std::to_string(b),
                     {{prefix + ".a", {third}, amsp::dtype::fp32},
                      {prefix + ".b", {third}, amsp::dtype::fp32},
                      {prefix + ".c", {third}, amsp::dtype::fp32}}});
  }
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  // Each round alternates the plain file and the checkpoint, so that both see the same disk
  // weather (the VM's disk and the other helpers' load vary by several x within minutes).
  std::vector<double> write_v, save_v, read_v, load_v, warm_v, call_v, commit_v, total_v;
  std::uint64_t bytes = 0;
  amsp::comm::run_on_threads(world, [&](Threads& comm) {
    amsp::ShardedOptimizer<Threads, amsp::optim::AdamW> opt(comm, mesh, amsp::parse_plan("zero3", mesh),
                                                            amsp::optim::AdamW{}, model);
    for (int b = 0; b < opt.bucket_count(); ++b) {
      auto m = opt.master_shard(b);
      for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i % 1000) * 1e-3f;
      for (int s = 0; s < 2; ++s) {
        auto st = opt.state_shard(b, s);
        for (std::size_t i = 0; i < st.size(); ++i) st[i] = static_cast<float>((i + s) % 777);
      }
    }
    const auto timed = [&](auto&& body) {
      comm.barrier();
      const auto t = Clock::now();
      body();
      comm.barrier();
      return seconds_since(t);
    };
    for (int round = 0; round < rounds; ++round) {
      // Plain write and read run on rank 0 while the others wait at the barrier.
      const double w = timed([&] {
        if (comm.rank() == 0 && bytes > 0) (void)plain_write(root + "/plain.bin", bytes);
      });
      const double s = timed([&] { amsp::io::save(opt, comm, root + "/sync"); });
      if (comm.rank() == 0) {
        bytes = tree_bytes(root + "/sync");
        if (round == 0) write_v.push_back(plain_write(root + "/plain.bin", bytes));  // the first round learns the size
        evict_tree(root + "/sync");
        evict(root + "/plain.bin");
      }
      const double r = timed([&] {
        if (comm.rank() == 0) (void)plain_read(root + "/plain.bin");
      });
      const double l = timed([&] { (void)amsp::io::load(opt, comm, root + "/sync"); });
      const double warm = timed([&] { (void)amsp::io::load(opt, comm, root + "/sync"); });
      // Asynchronous: the stall is what the training loop waits for.
      comm.barrier();
      const auto t = Clock::now();
      auto pending = amsp::io::save_async(opt, comm, root + "/async");
      comm.barrier();
      const double call = seconds_since(t);
      while (!pending.written()) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // "training"
      const double commit = timed([&] { pending.commit(); });
      const double total = seconds_since(t);
      if (comm.rank() == 0) {
        if (round > 0) write_v.push_back(w);
        save_v.push_back(s);
        read_v.push_back(r);
        load_v.push_back(l);
        warm_v.push_back(warm);
        call_v.push_back(call);
        commit_v.push_back(commit);
        total_v.push_back(total);
      }
    }
  });
  if (write_v.empty()) write_v.push_back(plain_write(root + "/plain.bin", bytes));
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double write_s = median(write_v), save_s = median(save_v), read_s = median(read_v), load_s = median(load_v),
               warm_load_s = median(warm_v), async_call_s = median(call_v), async_commit_s = median(commit_v),
               async_total_s = median(total_v);
  const auto gbps = [&](double s) { return static_cast<double>(bytes) / s / 1e9; };
  std::printf("checkpoint of %.2f GB (master + AdamW m, v; 8 ranks, zero3 on 4x2, threads) in %s; medians of %d rounds\n",
              static_cast<double>(bytes) / 1e9, root.c_str(), rounds);
  std::printf("| operation | seconds | GB/s | ratio |\n|---|---|---|---|\n");
  std::printf("| plain sequential write + fsync (1 thread, 8 MiB writes) | %.3f | %.3f | 1 |\n", write_s, gbps(write_s));
  std::printf("| amsp::io::save (8 ranks, fsync, commit) | %.3f | %.3f | %.2f of plain write |\n", save_s, gbps(save_s),
              write_s / save_s);
  std::printf("| plain sequential read (cold, 1 thread) | %.3f | %.3f | 1 |\n", read_s, gbps(read_s));
  std::printf("| amsp::io::load (8 ranks, cold, CRC checked) | %.3f | %.3f | %.2f of plain read |\n", load_s, gbps(load_s),
              read_s / load_s);
  std::printf("| amsp::io::load again, files in the page cache | %.3f | %.3f | |\n", warm_load_s, gbps(warm_load_s));
  std::printf("| save_async: snapshot call | %.3f | | %.3f of the sync save |\n", async_call_s, async_call_s / save_s);
  std::printf("| save_async: commit after the writes | %.3f | | %.3f of the sync save |\n", async_commit_s,
              async_commit_s / save_s);
  std::printf("| training stall (call + commit) | %.3f | | %.3f of the sync save |\n", async_call_s + async_commit_s,
              (async_call_s + async_commit_s) / save_s);
  std::printf("| async save end to end | %.3f | %.3f | |\n", async_total_s, gbps(async_total_s));
  std::filesystem::remove_all(root);
}
