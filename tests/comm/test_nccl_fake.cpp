// The NCCL backend's host logic against a scripted fake of libnccl and libcudart
// (fake_nccl_runtime.hpp): runs on every machine with NCCL's headers, no GPU. What it proves:
// nonblocking creation and split are polled through ncclInProgress (and a split's handle, written
// late, is picked up); ownership (an adopted communicator and stream are never released; an owned
// one is finalised, polled, then destroyed, or aborted while an exception unwinds); the watchdog
// (an operation that never completes is comm.timeout after the limit; an asynchronous error is
// comm.nccl_async_error at once, without a limit, also from Handle::test); either aborts every
// communicator of the world exactly once, nothing is called on a released communicator, and every
// later use is comm.aborted; a direct error return leaves the communicator usable (comm.nccl);
// world() over a threads communicator hands every rank the same unique id; order_after_stream
// (also through the traffic counter) is an event on the producer that the communicator's stream
// waits for. What it cannot prove: that the real NCCL behaves as modelled
// (test_comm_nccl_bootstrap does that on a GPU).
#include <doctest/doctest.h>
#include <nccl.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "amsp/comm/counting.hpp"
#include "amsp/comm/nccl.hpp"
#include "amsp/comm/threads.hpp"
#include "amsp/sharding/groups.hpp"
#include "collective_checks.hpp"
#include "fake_nccl_runtime.hpp"
#include "stream_ordering.hpp"

namespace {
using namespace amsp;
using comm::NcclCommunicator;
using std::chrono::milliseconds;
using test::message_thrown;
using test::rule_thrown;
namespace fake = test::fake;

GroupSet one_rank_group() { return factor_groups(Mesh(1, 1), Factor{1, 1}); }

float buffer[16];
}  // namespace

TEST_CASE("fake nccl: a nonblocking creation is polled until ready; an owned communicator is finalised, destroyed") {
  fake::reset();
  fake::control().ready_after_polls = 5;
  {
    NcclCommunicator nccl = NcclCommunicator::from_unique_id(comm::new_unique_id(), 2, 4);
    CHECK(nccl.rank() == 2);
    CHECK(nccl.size() == 4);
    CHECK(nccl.owns_communicator());
    CHECK(nccl.owns_stream());
    const fake::Comm& c = fake::comm_of(nccl.native());
    CHECK_FALSE(c.blocking);  // amsp's own communicators are nonblocking
    CHECK(c.state == ncclSuccess);
    nccl.all_reduce(buffer, buffer, 16);  // enqueue in progress for 5 polls, then the event
    comm::Handle h = nccl.all_gather_async(buffer, buffer, 4);
    h.wait();
    CHECK(fake::control().enqueues == 2);
  }
  CHECK(fake::control().finalizes == 1);
  CHECK(fake::control().destroys == 1);
  CHECK(fake::control().aborts == 0);
  CHECK(fake::control().streams_created == 1);
  CHECK(fake::control().streams_destroyed == 1);
  CHECK(fake::control().events_alive == 0);
  CHECK(fake::control().uses_after_release == 0);
}

TEST_CASE("fake nccl: an adopted communicator and stream are used and never released; its split is owned") {
  fake::reset();
  const ncclComm_t user = fake::user_comm(0, 1);
  const cudaStream_t stream = fake::user_stream();
  {
    NcclCommunicator nccl = NcclCommunicator::adopt(user, stream);
    CHECK_FALSE(nccl.owns_communicator());
    CHECK_FALSE(nccl.owns_stream());
    CHECK(nccl.native() == user);
    CHECK(nccl.stream() == stream);
    nccl.barrier();
    NcclCommunicator sub = nccl.split(one_rank_group());
    CHECK(sub.owns_communicator());
    CHECK_FALSE(sub.owns_stream());
    CHECK(sub.stream() == stream);
    CHECK(fake::comm_of(sub.native()).blocking);  // inherits the user's (blocking) configuration
  }
  CHECK_FALSE(fake::comm_of(user).finalized);
  CHECK_FALSE(fake::comm_of(user).destroyed);
  CHECK_FALSE(fake::comm_of(user).aborted);
  CHECK(fake::control().destroys == 1);  // the split's
  CHECK(fake::control().streams_destroyed == 0);
  CHECK(rule_thrown([] { (void)NcclCommunicator::adopt(nullptr, nullptr); }) == "comm.nccl_adopt");
}

TEST_CASE("fake nccl: a nonblocking split writes its handle late; the sub-communicator shares stream and world") {
  fake::reset();
  fake::control().ready_after_polls = 3;
  NcclCommunicator nccl = NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 1);
  NcclCommunicator sub = nccl.split(one_rank_group());
  CHECK(sub.native() != nccl.native());
  CHECK(sub.owns_communicator());
  CHECK(sub.owns_stream());  // shares the stream amsp created for the world
  CHECK(sub.stream() == nccl.stream());
  CHECK(rule_thrown([&] { (void)nccl.split(factor_groups(Mesh(2, 1), Factor{2, 1})); }) == "comm.split_size");
}

TEST_CASE("fake nccl: split_on_own_stream gives the sub-communicator a stream of its own, released with it") {
  fake::reset();
  {
    NcclCommunicator nccl = NcclCommunicator::adopt(fake::user_comm(0, 1), fake::user_stream());
    // What an engine's gather stream gets (comm::split_for_concurrent_calls), also under the counter.
    NcclCommunicator sub = comm::split_for_concurrent_calls(nccl, one_rank_group());
    CHECK(sub.owns_communicator());
    CHECK(sub.owns_stream());
    CHECK(sub.stream() != nccl.stream());
    CHECK(fake::control().streams_created == 1);
    comm::CountingCommunicator<NcclCommunicator> counted(std::move(sub),
                                                         std::make_shared<comm::TrafficCounter>(Mesh(1, 1)));
    auto counted_sub = comm::split_for_concurrent_calls(counted, one_rank_group());
    CHECK(fake::control().streams_created == 2);
    CHECK(comm::split_for_concurrent_calls(nccl, one_rank_group()).stream() != counted_sub.inner().stream());
    CHECK(rule_thrown([&] { (void)nccl.split_on_own_stream(factor_groups(Mesh(2, 1), Factor{2, 1})); }) ==
          "comm.split_size");
  }
  CHECK(fake::control().streams_destroyed == fake::control().streams_created);
}

TEST_CASE("fake nccl watchdog: an operation that never completes times out and aborts the whole world once") {
  fake::reset();
  NcclCommunicator nccl =
      NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 1, {.collective_timeout = milliseconds(50)});
  NcclCommunicator sub = nccl.split(one_rank_group());
  fake::control().event_polls_until_done = -1;  // a dead peer: the kernels never finish
  const auto start = std::chrono::steady_clock::now();
  const std::string message = message_thrown([&] { sub.reduce_scatter(buffer, buffer, 8); });
  CHECK(std::chrono::steady_clock::now() - start >= milliseconds(50));
  CHECK(message.find("reduce_scatter (count 8) did not complete within 50 ms on rank 0 of a 1-rank NCCL") !=
        std::string::npos);
  CHECK(message.find("[rule comm.timeout]") != std::string::npos);
  CHECK(fake::control().aborts == 2);  // the sub-communicator and its parent
  CHECK(nccl.aborted());
  CHECK(sub.aborted());
  CHECK(rule_thrown([&] { nccl.all_reduce(buffer, buffer, 4); }) == "comm.aborted");
  CHECK(rule_thrown([&] { (void)sub.all_gather_async(buffer, buffer, 4); }) == "comm.aborted");
  CHECK(rule_thrown([&] { (void)nccl.split(one_rank_group()); }) == "comm.aborted");
  CHECK(message_thrown([&] { nccl.barrier(); }).find("reduce_scatter (count 8) did not complete") !=
        std::string::npos);  // comm.aborted carries the first error
  CHECK(fake::control().uses_after_release == 0);
}

TEST_CASE("fake nccl watchdog: the abort leaves nothing to release twice, and no call reaches a released comm") {
  fake::reset();
  {
    NcclCommunicator nccl =
        NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 1, {.collective_timeout = milliseconds(20)});
    fake::control().event_polls_until_done = -1;
    comm::Handle h = nccl.broadcast_async(buffer, buffer, 4, 0);
    CHECK_FALSE(h.test());  // pending: test() applies no timeout
    CHECK(rule_thrown([&] { h.wait(); }) == "comm.timeout");
  }
  CHECK(fake::control().aborts == 1);
  CHECK(fake::control().finalizes == 0);
  CHECK(fake::control().destroys == 0);
  CHECK(fake::control().uses_after_release == 0);
  CHECK(fake::control().streams_destroyed == 1);
}

TEST_CASE("fake nccl watchdog: an asynchronous error during a wait is comm.nccl_async_error, without a timeout") {
  fake::reset();
  NcclCommunicator nccl = NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 2);  // no timeout
  fake::control().event_polls_until_done = -1;  // the peer died: the collective never completes
  comm::Handle pending = nccl.all_reduce_async(buffer, buffer, 16);
  CHECK_FALSE(pending.test());
  fake::control().fails_while_waited = &fake::comm_of(nccl.native());  // NCCL notices after a while
  const std::string message = message_thrown([&] { pending.wait(); });
  CHECK(message.find("all_reduce (count 16) on rank 0 of a 2-rank NCCL communicator") != std::string::npos);
  CHECK(message.find("remote process exited") != std::string::npos);
  CHECK(message.find("[rule comm.nccl_async_error]") != std::string::npos);
  CHECK(fake::control().aborts == 1);
  CHECK(rule_thrown([&] { nccl.all_gather(buffer, buffer, 8); }) == "comm.aborted");
  CHECK(fake::control().uses_after_release == 0);
}

TEST_CASE("fake nccl watchdog: an enqueue on a communicator NCCL reports broken is comm.nccl_async_error") {
  fake::reset();
  NcclCommunicator nccl = NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 2);
  fake::comm_of(nccl.native()).state = ncclRemoteError;
  CHECK(rule_thrown([&] { nccl.all_gather(buffer, buffer, 8); }) == "comm.nccl_async_error");
  CHECK(nccl.aborted());
  CHECK(fake::control().aborts == 1);
}

TEST_CASE("fake nccl watchdog: Handle::test reports an asynchronous error") {
  fake::reset();
  NcclCommunicator nccl = NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 1);
  fake::control().event_polls_until_done = -1;
  comm::Handle pending = nccl.reduce_async(buffer, buffer, 16, comm::reduce_op::avg, 0);
  CHECK_FALSE(pending.test());
  fake::comm_of(nccl.native()).state = ncclSystemError;
  CHECK(rule_thrown([&] { (void)pending.test(); }) == "comm.nccl_async_error");
  CHECK(nccl.aborted());
}

TEST_CASE("fake nccl watchdog: a peer that never joins is comm.timeout at creation; the half-made comm is aborted") {
  fake::reset();
  fake::control().creation_never_ready = true;
  const std::string message = message_thrown([] {
    (void)NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 2, {.collective_timeout = milliseconds(30)});
  });
  CHECK(message.find("creation (ncclCommInitRankConfig) did not complete within 30 ms on rank 0 of a 2-rank") !=
        std::string::npos);
  CHECK(message.find("[rule comm.timeout]") != std::string::npos);
  CHECK(fake::control().aborts == 1);
  CHECK(fake::control().destroys == 0);
  CHECK(fake::control().streams_destroyed == 1);
  CHECK(rule_thrown([] {
          (void)NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 1, {.collective_timeout = milliseconds(-1)});
        }) == "comm.timeout_range");
}

TEST_CASE("fake nccl: every call runs on the communicator's device and the caller's device is restored") {
  fake::reset();
  fake::control().comm_device = 1;
  fake::control().current_device = 1;  // the rank's thread selected device 1 before creating it
  NcclCommunicator nccl = NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 1);
  fake::control().current_device = 0;  // another thread (an engine's worker) with device 0 current
  nccl.all_reduce(buffer, buffer, 4);
  comm::Handle h = nccl.reduce_scatter_async(buffer, buffer, 4);
  h.wait();
  nccl.barrier();
  NcclCommunicator sub = nccl.split(one_rank_group());
  sub.broadcast(buffer, buffer, 4, 0);
  CHECK(fake::control().enqueues == 4);
  CHECK(fake::control().calls_on_wrong_device == 0);
  CHECK(fake::control().current_device == 0);
}

TEST_CASE("fake nccl: order_after_stream records an event on the producer that the communicator's stream waits "
          "for, bare or counted") {
  fake::reset();
  static int producer_storage;  // a fake stream handle, as fake::user_stream's
  const auto producer = reinterpret_cast<cudaStream_t>(&producer_storage);
  const cudaStream_t stream = fake::user_stream();
  // One event on the producer, then the communicator's stream waits for that same event.
  const auto ordered_once = [&] {
    const auto& calls = fake::control().stream_event_calls;
    return calls.size() == 2 && !calls[0].waits && calls[0].stream == producer && calls[1].waits &&
           calls[1].stream == stream && calls[1].event == calls[0].event && calls[0].event != nullptr;
  };
  NcclCommunicator bare = NcclCommunicator::adopt(fake::user_comm(0, 1), stream);
  const int events_before = fake::control().events_alive;
  CHECK(test::ordered_by_event(bare, producer));
  CHECK(ordered_once());
  CHECK(fake::control().events_alive == events_before + 1);  // the ordering event, made on first use
  fake::control().stream_event_calls.clear();
  // The traffic counter forwards it, so the CUDA space orders a counted NCCL collective by an
  // event too instead of synchronising its stream.
  comm::CountingCommunicator counted(NcclCommunicator::adopt(fake::user_comm(0, 1), stream),
                                     std::make_shared<comm::TrafficCounter>(Mesh(1, 1)));
  const int events_of_counted = fake::control().events_alive;
  CHECK(test::ordered_by_event(counted, producer));
  CHECK(ordered_once());
  CHECK(counted.counter()->calls() == 0);
  CHECK(fake::control().events_alive == events_of_counted + 1);
}

TEST_CASE("fake nccl: a direct error return is comm.nccl and leaves the communicator usable") {
  fake::reset();
  NcclCommunicator nccl = NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 1);
  fake::control().enqueue_result = ncclInvalidArgument;
  const std::string message = message_thrown([&] { nccl.all_reduce(buffer, buffer, 3); });
  CHECK(message.find("all_reduce (count 3) failed: invalid argument") != std::string::npos);
  CHECK(message.find("[rule comm.nccl]") != std::string::npos);
  CHECK_FALSE(nccl.aborted());
  fake::control().enqueue_result = ncclSuccess;
  nccl.all_reduce(buffer, buffer, 3);
  CHECK(fake::control().aborts == 0);
  CHECK(rule_thrown([&] { nccl.broadcast(buffer, buffer, 3, 1); }) == "comm.root_range");
}

TEST_CASE("fake nccl: a communicator destroyed while an exception unwinds is aborted, not finalised") {
  fake::reset();
  try {
    NcclCommunicator nccl = NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 1);
    throw std::runtime_error("the caller's own error");
  } catch (const std::runtime_error&) {
  }
  CHECK(fake::control().aborts == 1);
  CHECK(fake::control().finalizes == 0);
}

TEST_CASE("fake nccl: a pending handle destroyed while an exception unwinds aborts the world; a completed one not") {
  fake::reset();
  NcclCommunicator nccl = NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 2);
  try {
    comm::Handle done = nccl.all_reduce_async(buffer, buffer, 4);  // completes at once
    throw std::runtime_error("the caller's own error");
  } catch (const std::runtime_error&) {
  }
  CHECK_FALSE(nccl.aborted());
  fake::control().event_polls_until_done = -1;
  try {
    comm::Handle pending = nccl.all_gather_async(buffer, buffer, 4);
    throw std::runtime_error("the caller's own error");
  } catch (const std::runtime_error&) {
  }
  CHECK(nccl.aborted());
  CHECK(fake::control().aborts == 1);
  CHECK(message_thrown([&] { nccl.barrier(); }).find("all_gather (count 4) was still pending") != std::string::npos);
}

TEST_CASE("fake nccl: avg is ncclAvg on a world of several ranks and ncclSum on one rank (NVIDIA/nccl#1950)") {
  fake::reset();
  const auto ops_of = [](int rank, int size) {
    fake::control().reduce_ops.clear();
    NcclCommunicator nccl = NcclCommunicator::from_unique_id(comm::new_unique_id(), rank, size);
    nccl.reduce_scatter(buffer, buffer, 2, comm::reduce_op::avg);
    nccl.all_reduce(buffer, buffer, 2, comm::reduce_op::avg);
    nccl.reduce(buffer, buffer, 2, comm::reduce_op::avg, 0);
    nccl.all_reduce(buffer, buffer, 2, comm::reduce_op::sum);
    return fake::control().reduce_ops;
  };
  CHECK(ops_of(1, 4) == std::vector<ncclRedOp_t>{ncclAvg, ncclAvg, ncclAvg, ncclSum});
  // One rank: the same values by ncclSum, which NCCL before 2.29.7 computes over every element.
  CHECK(ops_of(0, 1) == std::vector<ncclRedOp_t>{ncclSum, ncclSum, ncclSum, ncclSum});
}

TEST_CASE("fake nccl: world() over a threads communicator hands every rank rank 0's unique id") {
  fake::reset();
  comm::run_on_threads(3, [](comm::ThreadsCommunicator& host) {
    NcclCommunicator nccl = NcclCommunicator::world(host);
    CHECK(nccl.rank() == host.rank());
    CHECK(nccl.size() == 3);
    host.barrier();
  });
  REQUIRE(fake::control().comms.size() == 3);
  const unsigned char* first = fake::control().comms.front()->id;
  CHECK((first[0] != 0 && first[100] == 42));  // a fake id, not zeros
  for (const auto& c : fake::control().comms) CHECK(std::memcmp(c->id, first, NCCL_UNIQUE_ID_BYTES) == 0);
}

TEST_CASE("fake nccl: the documented file bootstrap (rank 0 writes the id, every rank reads it) gives one world") {
  fake::reset();
  const std::string path =
      (std::filesystem::temp_directory_path() / ("amsp_fake_nccl_" + std::to_string(::getpid()) + ".id")).string();
  std::filesystem::remove(path);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 3; ++rank)
    ranks.emplace_back([rank, &path] {
      if (rank == 2) comm::write_unique_id_file(path, comm::new_unique_id());  // the writer need not be first
      const ncclUniqueId id = comm::read_unique_id_file(path, milliseconds(30000));
      NcclCommunicator nccl = NcclCommunicator::from_unique_id(id, rank, 3);
    });
  for (std::thread& t : ranks) t.join();
  std::filesystem::remove(path);
  REQUIRE(fake::control().comms.size() == 3);
  const unsigned char* first = fake::control().comms.front()->id;
  CHECK(first[100] == 42);
  for (const auto& c : fake::control().comms) CHECK(std::memcmp(c->id, first, NCCL_UNIQUE_ID_BYTES) == 0);
}
