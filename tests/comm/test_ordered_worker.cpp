// The worker behind the threads backend's asynchronous collectives and HostAsync's streams
// (comm::detail::OrderedWorker): it runs tasks in submission order, wakes for a task submitted
// while it sleeps (it is woken only then, after the submitter unlocks), and hands each task's
// error to that task's handle. A lost wake-up shows as a handle that does not complete within
// kPatience instead of a hung test: the case then fails and returns, without unwinding through
// a pending handle (which would wait for it), and the worker's destructor runs what is left. So
// what the tasks write is declared before the worker.
#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "amsp/comm/detail/ordered_worker.hpp"

namespace {
using amsp::comm::Handle;
using amsp::comm::detail::OrderedWorker;
using namespace std::chrono_literals;

constexpr auto kPatience = 10s;

/// Polls `h` until it completes or kPatience passes; false on a lost wake-up.
bool completes(Handle& h) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!h.test()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(50us);
  }
  return true;
}
}  // namespace

TEST_CASE("ordered worker: tasks submitted while it sleeps are woken for and run in order") {
  std::vector<int> ran;  // written by the worker only; read after each completion
  OrderedWorker worker;
  for (int i = 0; i < 200; ++i) {
    Handle h = worker.submit([&ran, i] { ran.push_back(i); });
    if (i % 3 == 0) std::this_thread::sleep_for(200us);  // let the worker fall asleep first
    const bool ran_in_time = completes(h);
    CHECK_MESSAGE(ran_in_time, "task ", i, " never ran: the worker missed its wake-up");
    if (!ran_in_time) return;
  }
  REQUIRE(ran.size() == 200);
  for (int i = 0; i < 200; ++i) CHECK(ran[static_cast<std::size_t>(i)] == i);
}

TEST_CASE("ordered worker: two submitting threads, each thread's tasks in its order") {
  std::vector<std::pair<int, int>> ran;  // (thread, index), written by the worker only
  OrderedWorker worker;
  constexpr int kTasks = 2000;
  bool all_completed[2] = {true, true};  // each written by its own submitter only
  const auto submitter = [&](int thread) {
    std::vector<Handle> handles;
    for (int i = 0; i < kTasks; ++i) {
      handles.push_back(worker.submit([&ran, thread, i] { ran.emplace_back(thread, i); }));
      if (i % 97 == 0) std::this_thread::sleep_for(100us);
    }
    for (Handle& h : handles) all_completed[thread] = all_completed[thread] && completes(h);
  };
  std::thread other(submitter, 1);
  submitter(0);
  other.join();
  CHECK_MESSAGE(all_completed[0], "a task of thread 0 never ran: the worker missed its wake-up");
  CHECK_MESSAGE(all_completed[1], "a task of thread 1 never ran: the worker missed its wake-up");
  if (!all_completed[0] || !all_completed[1]) return;
  worker.drain();
  REQUIRE(ran.size() == 2 * kTasks);
  int next[2] = {0, 0};
  for (const auto& [thread, i] : ran) {
    CHECK(i == next[thread]);
    next[thread] = i + 1;
  }
  CHECK(next[0] == kTasks);
  CHECK(next[1] == kTasks);
}

TEST_CASE("ordered worker: a task's error reaches its own handle; later tasks still run") {
  bool later_ran = false;
  OrderedWorker worker;
  Handle failing = worker.submit([] { throw std::runtime_error("task 1 failed"); });
  Handle later = worker.submit([&later_ran] { later_ran = true; });
  CHECK_THROWS_WITH_AS(failing.wait(), "task 1 failed", std::runtime_error);
  const bool later_in_time = completes(later);
  CHECK(later_in_time);
  if (later_in_time) CHECK(later_ran);
}

TEST_CASE("ordered worker: drain returns once every task has finished, and a worker can be destroyed busy") {
  std::vector<int> ran;
  {
    OrderedWorker worker;
    Handle last;
    for (int i = 0; i < 50; ++i)
      last = worker.submit([&ran, i] {
        std::this_thread::sleep_for(20us);
        ran.push_back(i);
      });
    const bool last_in_time = completes(last);  // so that a lost wake-up fails here, not hangs drain()
    CHECK(last_in_time);
    if (!last_in_time) return;
    worker.drain();
    CHECK(ran.size() == 50);
    for (int i = 50; i < 60; ++i) (void)worker.submit([&ran, i] { ran.push_back(i); });
  }  // the destructor runs the queued tasks before it stops the thread
  REQUIRE(ran.size() == 60);
  for (int i = 0; i < 60; ++i) CHECK(ran[static_cast<std::size_t>(i)] == i);
}
