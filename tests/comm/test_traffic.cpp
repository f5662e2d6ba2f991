// The byte convention and the traffic-counting wrapper, against hand-computed volumes.
#include <doctest/doctest.h>

#include "amsp/comm/counting.hpp"
#include "amsp/comm/traffic.hpp"
#include "amsp/sharding/groups.hpp"
#include "collective_checks.hpp"
#include "report.hpp"
#include "stream_ordering.hpp"
#include "threads_harness.hpp"

#include <mutex>
#include <string>
#include <vector>

using namespace amsp;
using comm::ByteVolume;
using comm::Locality;
using comm::op_kind;
using test::ordered_by_event;
using Counting = comm::CountingCommunicator<comm::ThreadsCommunicator>;
static_assert(comm::communicator<Counting>);

namespace {
// A stand-in for cudaStream_t: the wrapper forwards whatever stream type the backend takes.
struct FakeStream {
  int id = 0;
};

// The threads backend plus the optional member NCCL has; it records the streams it is ordered after.
class StreamOrderedThreads : public comm::ThreadsCommunicator {
public:
  explicit StreamOrderedThreads(comm::ThreadsCommunicator inner) : ThreadsCommunicator(std::move(inner)) {}
  [[nodiscard]] StreamOrderedThreads split(const GroupSet& groups) {
    return StreamOrderedThreads(ThreadsCommunicator::split(groups));
  }
  void order_after_stream(FakeStream producer) { ordered_after.push_back(producer.id); }
  std::vector<int> ordered_after;
};
using CountingOrdered = comm::CountingCommunicator<StreamOrderedThreads>;
static_assert(comm::communicator<CountingOrdered>);
}  // namespace

TEST_CASE("bytes_sent_per_rank: nccl-tests ring volumes, exact") {
  CHECK(comm::bytes_sent_per_rank(op_kind::all_gather, 1024, 4) == ByteVolume(768));
  CHECK(comm::bytes_sent_per_rank(op_kind::reduce_scatter, 1024, 4) == ByteVolume(768));
  CHECK(comm::bytes_sent_per_rank(op_kind::all_reduce, 1024, 4) == ByteVolume(1536));
  CHECK(comm::bytes_sent_per_rank(op_kind::broadcast, 1000, 8) == ByteVolume(875));
  CHECK(comm::bytes_sent_per_rank(op_kind::reduce, 1000, 8) == ByteVolume(875));
  CHECK(comm::bytes_sent_per_rank(op_kind::all_reduce, 1 << 20, 1) == ByteVolume(0));
  // 12 bytes over 8 ranks: 10.5 bytes, kept exact.
  const ByteVolume odd = comm::bytes_sent_per_rank(op_kind::all_gather, 12, 8);
  CHECK(odd.numerator() == 21);
  CHECK(odd.denominator() == 2);
  CHECK(comm::to_string(odd) == "21/2");
  CHECK(odd + odd == ByteVolume(21));
  CHECK(ByteVolume::fraction(1, 3) + ByteVolume::fraction(2, 3) == ByteVolume(1));
  CHECK(ByteVolume::fraction(1, 3) < ByteVolume::fraction(1, 2));
  CHECK(ByteVolume::fraction(7, 3) * 3 == ByteVolume(7));
  CHECK(comm::bus_bandwidth_factor(op_kind::all_reduce, 4) == doctest::Approx(1.5));
  CHECK(comm::bus_bandwidth_factor(op_kind::all_gather, 8) == doctest::Approx(0.875));
  CHECK(comm::bus_bandwidth_factor(op_kind::broadcast, 8) == doctest::Approx(1.0));
  CHECK(test::rule_thrown([] { (void)comm::bytes_sent_per_rank(op_kind::all_gather, 8, 0); }) == "comm.group_size");
  CHECK(test::rule_thrown([] { (void)ByteVolume::fraction(1, 0); }) == "comm.byte_volume");
}

TEST_CASE("parse_op_kind: reads what name_of prints, and names an unknown collective") {
  for (op_kind kind : comm::all_op_kinds) CHECK(comm::parse_op_kind(comm::name_of(kind)) == kind);
  CHECK(test::rule_thrown([] { (void)comm::parse_op_kind("allgather"); }) == "comm.op_parse");
  CHECK(test::message_thrown([] { (void)comm::parse_op_kind("allgather"); }).find("'allgather'") != std::string::npos);
  CHECK(test::rule_thrown([] { (void)comm::parse_op_kind(""); }) == "comm.op_parse");
}

TEST_CASE("CountingCommunicator: bytes per kind, group and locality on a 4x2 mesh") {
  const Mesh mesh(4, 2);
  auto counter = std::make_shared<comm::TrafficCounter>(mesh);
  const GroupSet nodes = factor_groups(mesh, Factor{4, 1});
  const GroupSet pairs = factor_groups(mesh, Factor{2, 1});
  const GroupSet singles = factor_groups(mesh, Factor{1, 1});
  std::vector<std::string> failures;
  comm::run_on_threads(8, [&](comm::ThreadsCommunicator& inner) {
    Counting world(std::move(inner), counter);
    std::vector<float> f(64);
    const auto rank = static_cast<std::size_t>(world.rank());
    world.all_gather(f.data() + rank * 3, f.data(), 3);  // S = 8*3*4 = 96, sends 7/8*96 = 84, inter-node
    Counting node = world.split(nodes);
    node.all_reduce(f.data(), f.data(), 10);  // S = 40, sends 2*3/4*40 = 60, intra-node
    std::vector<double> d(5);
    node.broadcast(d.data(), d.data(), 5, 0);  // S = 40, sends 30
    std::vector<bf16> b(7);
    comm::Handle h = node.reduce_async(b.data(), b.data(), 7, comm::reduce_op::sum, 1);  // S = 14, sends 21/2
    h.wait();
    Counting pair = node.split(factor_groups(Mesh(4, 1), Factor{2, 1}));
    std::vector<fp16> hs(4);
    pair.reduce_scatter(hs.data(), hs.data() + 2 * static_cast<std::size_t>(pair.rank()), 2);  // S = 8, sends 4
    Counting single = world.split(singles);
    single.all_gather(f.data(), f.data(), 16);  // one rank: 0 bytes
    // Members of the nested split are world ranks, in group order.
    const std::vector<int> expected_pair = pairs.group_of(world.rank()).ranks;
    if (pair.members() != expected_pair) failures.push_back("pair members are not world ranks");
    if (pair.world_rank() != world.rank()) failures.push_back("world_rank of a sub-communicator");
  });
  for (const auto& f : failures) FAIL_CHECK(f);

  for (int r = 0; r < 8; ++r) {
    CAPTURE(r);
    CHECK(counter->sent({.world_rank = r, .kind = op_kind::all_gather}) == ByteVolume(84));
    CHECK(counter->sent({.world_rank = r, .kind = op_kind::all_reduce}) == ByteVolume(60));
    CHECK(counter->sent({.world_rank = r, .kind = op_kind::broadcast}) == ByteVolume(30));
    CHECK(counter->sent({.world_rank = r, .kind = op_kind::reduce}) == ByteVolume::fraction(21, 2));
    CHECK(counter->sent({.world_rank = r, .kind = op_kind::reduce_scatter}) == ByteVolume(4));
    CHECK(counter->sent({.world_rank = r, .locality = Locality::inter_node}) == ByteVolume(84));
    CHECK(counter->sent({.world_rank = r, .locality = Locality::intra_node}) == ByteVolume::fraction(209, 2));
    CHECK(counter->calls({.world_rank = r}) == 6);
  }
  CHECK(counter->sent({.locality = Locality::inter_node}) == ByteVolume(8 * 84));
  CHECK(counter->sent({.group = std::vector<int>{4, 5, 6, 7}}) == ByteVolume::fraction(4 * 201, 2));
  CHECK(counter->calls({.kind = op_kind::all_gather, .group = std::vector<int>{3}}) == 1);
  const auto entries = counter->entries();
  CHECK(entries.size() == 8 * 6);
  CHECK(entries.front().first.world_rank == 0);
  CHECK(entries.front().first.kind == op_kind::all_gather);
  CHECK(entries.front().first.group == std::vector<int>{0});  // {0} sorts before {0, ..., 7}
  CHECK(entries.front().second.full_bytes == 64);
  CHECK(entries[1].second.full_bytes == 96);
  CHECK(entries[1].second.locality == Locality::inter_node);
  counter->reset();
  CHECK(counter->calls() == 0);
}

TEST_CASE("CountingCommunicator: results are the wrapped backend's, and the mesh must fit") {
  auto counter = std::make_shared<comm::TrafficCounter>(Mesh(2, 2));
  std::vector<std::string> failures;
  std::mutex mutex;
  comm::run_on_threads(4, [&](comm::ThreadsCommunicator& inner) {
    Counting world(std::move(inner), counter);
    auto bad = test::run_sweep(world, {0, 7, 300}, test::all_dtypes);
    std::lock_guard lock(mutex);
    failures.insert(failures.end(), bad.begin(), bad.end());
  });
  test::require_none(failures);
  std::string rule;
  comm::run_on_threads(2, [&](comm::ThreadsCommunicator& inner) {
    const std::string r = test::rule_thrown([&] { Counting w(std::move(inner), counter); });
    if (inner.rank() == 0 || r.empty()) rule = r;  // both ranks fail the same way
  });
  CHECK(rule == "mesh.world_size");
}

TEST_CASE("CountingCommunicator: a null counter is refused") {
  std::string rule;
  comm::run_on_threads(1, [&](comm::ThreadsCommunicator& inner) {
    rule = test::rule_thrown([&] { Counting w(std::move(inner), std::shared_ptr<comm::TrafficCounter>()); });
  });
  CHECK(rule == "comm.counter");
}

TEST_CASE("CountingCommunicator: order_after_stream reaches the wrapped communicator where it has one") {
  const Mesh mesh(2, 1);
  auto counter = std::make_shared<comm::TrafficCounter>(mesh);
  std::vector<std::string> failures;
  std::mutex mutex;
  comm::run_on_threads(2, [&](comm::ThreadsCommunicator& inner) {
    std::vector<std::string> mine;
    CountingOrdered world(StreamOrderedThreads(std::move(inner)), counter);
    if (!ordered_by_event(world, FakeStream{10 + world.rank()})) mine.emplace_back("world: not ordered by event");
    if (world.inner().ordered_after != std::vector<int>{10 + world.rank()}) mine.emplace_back("world: stream not forwarded");
    CountingOrdered single = world.split(factor_groups(mesh, Factor{1, 1}));
    if (!ordered_by_event(single, FakeStream{20}) || !ordered_by_event(single, FakeStream{21}))
      mine.emplace_back("split: not ordered by event");
    if (single.inner().ordered_after != std::vector<int>{20, 21}) mine.emplace_back("split: streams not forwarded");
    const std::lock_guard lock(mutex);
    failures.insert(failures.end(), mine.begin(), mine.end());
  });
  test::require_none(failures);
  CHECK(counter->calls() == 0);  // ordering moves no data

  // Wrapping a communicator without the member adds none: the CUDA space synchronises instead.
  comm::run_on_threads(1, [&](comm::ThreadsCommunicator& inner) {
    Counting plain(std::move(inner), std::make_shared<comm::TrafficCounter>(Mesh(1, 1)));
    CHECK_FALSE(ordered_by_event(plain, FakeStream{30}));
  });
}
