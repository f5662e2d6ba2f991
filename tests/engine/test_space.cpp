// The execution spaces' launch_after (amsp/engine/space.hpp): the gather stream's task runs
// after its event, whatever the gather stream has queued, and not after later communication-stream
// work; a failed event fails the task (rule engine.stream_failed) without running it, and the
// event's own error still reaches the host. Under ThreadSanitizer a missing order is a reported race.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/engine/space.hpp"

namespace {

using Handles = std::vector<amsp::comm::Handle>;

template <class F>
std::string rule_of(F&& body) {
  try {
    body();
  } catch (const amsp::error& e) {
    return e.rule();
  }
  return "(none)";
}

template <class Space>
void orders_after_its_event() {
  Space space;
  int written = 0;  // plain: written by the event's task, read by the later task
  amsp::comm::Handle event = space.submit([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    written = 42;
  });
  int seen = 0;
  amsp::comm::Handle later = space.launch_after(event, [&] {
    seen = written;
    return Handles{};
  });
  later.wait();
  CHECK(seen == 42);
  event.wait();  // the event is still the host's to wait, as before
}

}  // namespace

TEST_CASE("launch_after runs after its event in both host spaces") {
  orders_after_its_event<amsp::HostSerial>();
  orders_after_its_event<amsp::HostAsync>();
}

TEST_CASE("HostAsync: a gather waits for its own event only, not for later communication-stream work") {
  amsp::HostAsync space;
  std::atomic<bool> release_blocker{false};
  amsp::comm::Handle first = space.submit([] {});
  amsp::comm::Handle blocker = space.submit([&] {
    while (!release_blocker.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  bool ran = false;
  amsp::comm::Handle gather = space.launch_after(first, [&] {
    ran = true;
    return Handles{};
  });
  gather.wait();  // would hang if the gather queued behind the blocker
  CHECK(ran);
  release_blocker = true;
  blocker.wait();
  first.wait();
}

TEST_CASE("HostAsync: a failed event fails the gather without running it; the host gets the event's error") {
  amsp::HostAsync space;
  amsp::comm::Handle event = space.submit([] { amsp::fail("test.update_failed", "the update failed"); });
  std::atomic<bool> ran{false};
  amsp::comm::Handle gather = space.launch_after(event, [&] {
    ran = true;
    return Handles{};
  });
  CHECK(rule_of([&] { gather.wait(); }) == "engine.stream_failed");
  CHECK_FALSE(ran.load());
  CHECK(rule_of([&] { event.wait(); }) == "test.update_failed");
  CHECK(rule_of([&] { event.wait(); }) == "(none)");  // delivered once
}
