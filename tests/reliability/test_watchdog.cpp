// The threads backend's watchdog (ThreadsOptions::collective_timeout): a rank that stops taking
// part turns the others' wait into an error within the limit, naming the rank that did not come;
// a slow rank inside the limit is no error.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/sharding.hpp"
#include "mismatch_job.hpp"

namespace {

using amsp::comm::ThreadsCommunicator;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kLimit = 300ms;
// How late after the limit an error may arrive: generous, for ThreadSanitizer on a loaded
// 2-core machine; what matters is that it arrives, not a timing.
constexpr auto kSlack = 20s;

struct Seen {
  std::string rule, message;
  Clock::duration waited{};
};

/// Runs `work` on ranks 0..n-2 while rank n-1 (the silent rank) does nothing until every other
/// rank has finished; returns what each working rank saw and the exception run_on_threads threw.
template <class Work>
std::vector<Seen> with_silent_rank(int n, Work work, std::string* thrown_rule = nullptr) {
  std::vector<Seen> seen(static_cast<std::size_t>(n));
  std::atomic<int> finished{0};
  std::mutex mutex;
  try {
    amsp::comm::run_on_threads(
        n,
        [&](ThreadsCommunicator& comm) {
          if (comm.rank() == n - 1) {
            while (finished.load() < n - 1) std::this_thread::sleep_for(1ms);
            return;
          }
          const auto start = Clock::now();
          try {
            work(comm);
          } catch (const amsp::error& e) {
            {
              std::lock_guard lock(mutex);
              seen[static_cast<std::size_t>(comm.rank())] = {e.rule(), e.what(), Clock::now() - start};
            }
            ++finished;
            throw;
          }
          ++finished;
        },
        {.collective_timeout = kLimit});
  } catch (const amsp::error& e) {
    if (thrown_rule) *thrown_rule = e.rule();
  }
  return seen;
}

void check_named(const std::vector<Seen>& seen, int n, std::string_view missing) {
  bool some_timeout = false;
  for (int r = 0; r < n - 1; ++r) {
    const Seen& s = seen[static_cast<std::size_t>(r)];
    CAPTURE(r);
    CAPTURE(s.message);
    CHECK((s.rule == "comm.timeout" || s.rule == "comm.aborted"));
    some_timeout = some_timeout || s.rule == "comm.timeout";
    CHECK(s.message.find(missing) != std::string::npos);
    CHECK(s.waited < kLimit + kSlack);
  }
  CHECK(some_timeout);
}

}  // namespace

TEST_CASE("watchdog: ranks waiting for a rank that stopped throw within the limit, naming it") {
  const std::vector<Seen> seen = with_silent_rank(4, [](ThreadsCommunicator& comm) {
    std::vector<float> x(64, 1.0f);
    for (int i = 0; i < 3; ++i) comm.all_reduce(x.data(), x.data(), x.size());
  });
  check_named(seen, 4, "for rank 3 to enter it");
  for (int r = 0; r < 3; ++r) CHECK(seen[static_cast<std::size_t>(r)].message.find("all_reduce") != std::string::npos);
  // The first rank to give up waited the whole limit: the watchdog does not fire early.
  Clock::duration longest{};
  for (const Seen& s : seen) longest = std::max(longest, s.waited);
  CHECK(longest >= kLimit);
}

TEST_CASE("watchdog: an asynchronous collective and a split communicator time out too") {
  const std::vector<Seen> seen = with_silent_rank(3, [](ThreadsCommunicator& comm) {
    std::vector<float> send(8, 1.0f), recv(8 * 3);
    amsp::comm::Handle h = comm.all_gather_async(send.data(), recv.data(), send.size());
    h.wait();
  });
  check_named(seen, 3, "for rank 2 to enter it");

  std::string thrown;
  const std::vector<Seen> split = with_silent_rank(
      4,
      [](ThreadsCommunicator& comm) {
        ThreadsCommunicator pair = comm.split(amsp::GroupSet(amsp::Mesh(4, 1), {amsp::RankGroup{{0, 1}}, amsp::RankGroup{{2, 3}}}));
        std::vector<float> x(4, 1.0f);
        pair.all_reduce(x.data(), x.data(), x.size());
      },
      &thrown);
  // The silent rank never entered split(): every working rank waits for it there.
  check_named(split, 4, "for rank 3 to enter it");
  CHECK(thrown == "comm.timeout");
}

TEST_CASE("watchdog: a slow rank inside the limit is no error") {
  std::vector<float> sums(4);
  amsp::comm::run_on_threads(
      4,
      [&](ThreadsCommunicator& comm) {
        float x = 1.0f;
        for (int i = 0; i < 3; ++i) {
          if (comm.rank() == 3) std::this_thread::sleep_for(kLimit / 6);
          comm.all_reduce(&x, &x, 1);
        }
        sums[static_cast<std::size_t>(comm.rank())] = x;
      },
      {.collective_timeout = 5s});
  for (float s : sums) CHECK(s == 64.0f);
}

TEST_CASE("watchdog: an engine rank that stops training stops the others") {
  const amsp::Mesh mesh(2, 2);
  const std::vector<Seen> seen = with_silent_rank(4, [&](ThreadsCommunicator& comm) {
    (void)amsp::test::mismatch_job(comm, mesh, amsp::preset("zero3", mesh), amsp::test::Fault::none, -1, false);
  });
  check_named(seen, 4, "rank 3");
}

TEST_CASE("watchdog: a negative limit is named") {
  CHECK_THROWS_WITH_AS(amsp::comm::run_on_threads(2, [](ThreadsCommunicator&) {}, {.collective_timeout = -1ms}),
                       doctest::Contains("collective timeout is -1 ms"), amsp::error);
}
