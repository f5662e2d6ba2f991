// Crash safety: a process saving checkpoints in a loop is killed with SIGKILL at random moments
// (24 trials); every time, the directory then holds a complete checkpoint: the last one the saver
// reported committed, or the one it was committing (the atomic exchange happened, the report did
// not), with every value intact.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "crash_states.hpp"
#include "io_harness.hpp"

#ifndef AMSP_IO_CHECKPOINT_WRITER
#error "AMSP_IO_CHECKPOINT_WRITER must name the checkpoint_writer program"
#endif

namespace {

using amsp::test::Threads;

/// Runs the saver from checkpoint `first` for `delay`, kills it, returns the last k it reported.
long long run_and_kill(const std::string& dir, long long first, std::chrono::milliseconds delay) {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    const std::string k = std::to_string(first);
    ::execl(AMSP_IO_CHECKPOINT_WRITER, AMSP_IO_CHECKPOINT_WRITER, "loop", dir.c_str(), k.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  std::this_thread::sleep_for(delay);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  long long last = first - 1;
  std::size_t at = 0;
  while ((at = out.find("committed ", at)) != std::string::npos) {
    last = std::atoll(out.c_str() + at + 10);
    at += 10;
  }
  return last;
}

}  // namespace

TEST_CASE("kill -9 at random points of a save loop: the directory always holds an intact checkpoint") {
  const amsp::test::ScratchDir scratch;
  const std::string dir = scratch / "latest";
  const amsp::Mesh mesh(2, 1);
  // Checkpoint 0 exists before the first trial.
  amsp::comm::run_on_threads(2, [&](Threads& comm) {
    amsp::ShardedOptimizer<Threads, amsp::optim::AdamW> opt(comm, mesh, amsp::parse_plan("zero2", mesh),
                                                            amsp::optim::AdamW{}, amsp::test::odd_model());
    amsp::test::crash_states(opt, 0, false);
    amsp::io::save(opt, comm, dir, {.values = {{"k", "0"}}, .blob = {}});
  });
  std::mt19937 gen(12345);
  std::uniform_int_distribution<int> delay_ms(20, 400);
  long long loaded = 0;
  int interrupted = 0;  // trials that left a temporary directory behind: killed inside a save
  const int trials = 24;
  for (int trial = 0; trial < trials; ++trial) {
    CAPTURE(trial);
    const long long reported = run_and_kill(dir, loaded + 1, std::chrono::milliseconds(delay_ms(gen)));
    for (const auto& e : std::filesystem::directory_iterator(scratch.path()))
      if (e.path().filename().string().starts_with("latest.tmp-")) ++interrupted;
    // Load on another plan and world (1 rank): the checkpoint must be complete and intact.
    long long step = -1;
    std::atomic<std::size_t> mismatches{0};
    amsp::comm::run_on_threads(2, [&](Threads& comm) {
      amsp::ShardedOptimizer<Threads, amsp::optim::AdamW> opt(comm, mesh, amsp::parse_plan("zero2", mesh),
                                                              amsp::optim::AdamW{}, amsp::test::odd_model());
      const amsp::io::Restored r = amsp::io::load(opt, comm, dir);
      const std::size_t bad = amsp::test::crash_states(opt, r.step, true);
      if (comm.rank() == 0) step = r.step;
      mismatches += bad;
      CHECK(r.values.front().second == std::to_string(r.step));
    });
    CHECK(mismatches == 0);
    CHECK((step == reported || step == reported + 1));
    CHECK(step >= loaded);
    loaded = step;
  }
  MESSAGE("trials killed inside a save (a temporary directory left behind): ", interrupted, " of ", trials);
  CHECK(interrupted >= 3);
}
