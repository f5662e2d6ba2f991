// The threads backend on CUDA device memory: thread ranks on one GPU, the CUDA data mover
// installed by threads_cuda_mover.cu (label gpu; exits 77, "skipped", without a GPU). The sweep of
// collective_checks.hpp runs on device copies of its buffers (device_staged.hpp) against the same
// float64 serial reference as on the host; reductions must give the host path's bits; then
// sub-communicators, outstanding async operations and the memory-space rule.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "amsp/core/cuda_buffer.hpp"
#include "amsp/sharding/groups.hpp"
#include "collective_checks.hpp"
#include "device_staged.hpp"
#include "report.hpp"
#include "threads_harness.hpp"

namespace {
using namespace amsp;
using amsp::comm::op_kind;
using amsp::comm::reduce_op;
using amsp::comm::ThreadsCommunicator;
using Staged = test::DeviceStaged<ThreadsCommunicator>;

void require_gpu() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device: skipped");
    std::exit(77);
  }
}

void append(std::vector<std::string>& to, std::vector<std::string> from) {
  for (std::string& s : from) to.push_back(std::move(s));
}
}  // namespace

TEST_CASE("threads on device memory: every collective, dtype and placement against the serial reference") {
  require_gpu();
  REQUIRE(comm::threads_device_memory_enabled());
  for (int n : {1, 2, 3, 4, 8}) {
    CAPTURE(n);
    test::require_none(test::failures_on_threads(n, [](ThreadsCommunicator& c) {
      Staged staged(c);
      return test::run_sweep(staged, {0, 1, 7, 4099}, test::all_dtypes);
    }));
  }
}

TEST_CASE("threads on device memory: asynchronous forms give the blocking results") {
  require_gpu();
  for (int n : {1, 3, 4}) {
    CAPTURE(n);
    test::require_none(test::failures_on_threads(n, [](ThreadsCommunicator& c) {
      Staged staged(c);
      return test::run_sweep(staged, {0, 7, 4099}, test::all_dtypes, /*async=*/true);
    }));
  }
}

namespace {
// Rank `rank`'s random inputs in [-1, 1], rounded to T.
template <class T>
std::vector<T> random_elements(int rank, std::size_t count) {
  std::mt19937 gen(static_cast<unsigned>(77 + rank));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(count);
  for (T& x : v) x = test::element<T>(dist(gen));
  return v;
}

// Runs one reducing collective on `c` (the communicator itself on host buffers, or a Staged one on
// device copies of them) and returns this rank's receive buffer afterwards.
template <class T, class C>
std::vector<T> reduced_on(C& c, op_kind kind, reduce_op op, std::size_t count) {
  const auto n = static_cast<std::size_t>(c.size());
  const std::vector<T> send = random_elements<T>(c.rank(), kind == op_kind::reduce_scatter ? n * count : count);
  std::vector<T> recv(count, test::element<T>(0.0));
  if (kind == op_kind::reduce_scatter) c.reduce_scatter(send.data(), recv.data(), count, op);
  else if (kind == op_kind::all_reduce) c.all_reduce(send.data(), recv.data(), count, op);
  else c.reduce(send.data(), recv.data(), count, op, c.size() - 1);
  return recv;
}

std::vector<std::string> compare_with_host(ThreadsCommunicator& c, std::size_t count, const std::vector<dtype>& types) {
  std::vector<std::string> bad;
  Staged staged(c);
  for (op_kind kind : {op_kind::reduce_scatter, op_kind::all_reduce, op_kind::reduce})
    for (reduce_op op : {reduce_op::sum, reduce_op::avg})
      for (dtype type : types)
        visit_dtype(type, [&](auto element) {
          using T = decltype(element);
          const std::vector<T> host = reduced_on<T>(c, kind, op, count);
          const std::vector<T> device = reduced_on<T>(staged, kind, op, count);
          if (std::memcmp(host.data(), device.data(), count * sizeof(T)) != 0)
            bad.push_back(std::string(comm::name_of(kind)) + " " + std::string(comm::name_of(op)) + " " +
                          std::string(name_of(type)) + " count=" + std::to_string(count) + " on rank " +
                          std::to_string(c.rank()) + ": device result differs from the host path's");
        });
  return bad;
}
}  // namespace

TEST_CASE("threads on device memory: reductions give the host path's bits on random inputs") {
  require_gpu();
  for (int n : {3, 8}) {
    CAPTURE(n);
    test::require_none(test::failures_on_threads(n, [](ThreadsCommunicator& c) {
      return compare_with_host(c, 10007, test::all_dtypes);
    }));
  }
  // More elements than one grid of the reduction kernel covers: the grid-stride loop.
  test::require_none(test::failures_on_threads(3, [](ThreadsCommunicator& c) {
    return compare_with_host(c, 3000017, {dtype::fp32, dtype::bf16});
  }));
}

TEST_CASE("threads on device memory: sub-communicators split from a 4x2 mesh's groups") {
  require_gpu();
  const PlanGroups pg(Mesh(4, 2), Plan{{2, 1}, {4, 1}, {4, 2}});
  test::require_none(test::failures_on_threads(8, [&](ThreadsCommunicator& world) {
    std::vector<std::string> bad;
    for (const GroupSet* set : {&pg.g_split(), &pg.os_split(), &pg.spread(), &pg.os_replica()}) {
      ThreadsCommunicator sub = world.split(*set);
      Staged staged(sub);
      append(bad, test::run_sweep(staged, {0, 5, 33}, {dtype::fp32, dtype::bf16}));
      append(bad, test::run_sweep(staged, {33}, {dtype::fp16}, /*async=*/true));
    }
    return bad;
  }));
}

TEST_CASE("threads on device memory: several asynchronous collectives outstanding, waited in reverse order") {
  require_gpu();
  constexpr std::size_t count = std::size_t{1} << 16;
  test::require_none(test::failures_on_threads(4, [](ThreadsCommunicator& c) {
    const auto n = static_cast<std::size_t>(c.size());
    cuda_buffer<float> ar(count), ag_send(count), ag_recv(n * count);
    ar.copy_from_host(std::vector<float>(count, static_cast<float>(c.rank() + 1)).data(), count);
    ag_send.copy_from_host(std::vector<float>(count, static_cast<float>(c.rank())).data(), count);
    comm::Handle h1 = c.all_reduce_async(ar.data(), ar.data(), count, reduce_op::avg);
    comm::Handle h2 = c.all_gather_async(ag_send.data(), ag_recv.data(), count);
    h2.wait();
    h1.wait();
    std::vector<float> reduced(count), gathered(n * count);
    ar.copy_to_host(reduced.data(), count);
    ag_recv.copy_to_host(gathered.data(), n * count);
    std::vector<std::string> bad;
    for (std::size_t i = 0; i < count; ++i)
      if (reduced[i] != 2.5f) bad.push_back("all_reduce avg element " + std::to_string(i));  // (1+2+3+4)/4
    for (std::size_t i = 0; i < n * count; ++i)
      if (gathered[i] != static_cast<float>(i / count)) bad.push_back("all_gather element " + std::to_string(i));
    if (bad.size() > 10) bad.resize(10);
    return bad;
  }));
}

namespace {
// "" when `f()` throws an amsp::error of rule `rule`, else what happened.
template <class F>
std::string expect_rule(const std::string& rule, const std::string& what, F&& f) {
  const std::string got = test::rule_thrown(f);
  return got == rule ? std::string() : what + ": threw '" + got + "', expected " + rule;
}
}  // namespace

TEST_CASE("threads on device memory: host and device buffers in one collective fail on every rank") {
  require_gpu();
  constexpr std::size_t count = 1000;
  test::require_none(test::failures_on_threads(3, [](ThreadsCommunicator& c) {
    const int r = c.rank();
    const auto n = static_cast<std::size_t>(c.size());
    std::vector<std::string> bad;
    cuda_buffer<float> device(count), gathered(n * count);
    std::vector<float> host(n * count, 1.0f);
    const auto check = [&](const std::string& what, auto&& f) {
      std::string s = expect_rule("comm.memory_space_mismatch", what + " on rank " + std::to_string(r), f);
      if (!s.empty()) bad.push_back(std::move(s));
    };
    float* mine = r == 1 ? host.data() : device.data();
    check("rank 1 on the host", [&] { c.all_reduce(mine, mine, count, reduce_op::sum); });
    check("rank 2's send on the host", [&] { c.all_gather(r == 2 ? host.data() : device.data(), gathered.data(), count); });
    check("async, rank 0's receive buffer on the host",
          [&] { c.reduce_scatter_async(gathered.data(), r == 0 ? host.data() : device.data(), count).wait(); });

    // The communicator is still usable, and buffers a rank does not touch may be null.
    device.copy_from_host(std::vector<float>(count, 1.0f).data(), count);
    c.all_reduce(device.data(), device.data(), count, reduce_op::sum);
    if (r == 0) device.copy_from_host(std::vector<float>(count, 7.0f).data(), count);
    c.broadcast(r == 0 ? device.data() : nullptr, device.data(), count, 0);  // non-roots' send is not read
    c.reduce(device.data(), r == 2 ? device.data() : nullptr, count, reduce_op::sum, 2);  // non-roots' recv unused
    std::vector<float> result(count);
    device.copy_to_host(result.data(), count);
    const float expected = r == 2 ? 21.0f : 7.0f;
    for (std::size_t i = 0; i < count; ++i)
      if (result[i] != expected) {
        bad.push_back("after the errors: element " + std::to_string(i) + " on rank " + std::to_string(r) + " is " +
                      std::to_string(result[i]));
        break;
      }
    return bad;
  }));
}

TEST_CASE("threads on device memory: pinned host memory is host memory") {
  require_gpu();
  constexpr std::size_t count = 4099;
  test::require_none(test::failures_on_threads(3, [](ThreadsCommunicator& c) {
    void* raw = nullptr;
    amsp::detail::check_cuda(cudaMallocHost(&raw, count * sizeof(double)), "cuda.malloc", "cudaMallocHost");
    auto* pinned = static_cast<double*>(raw);
    for (std::size_t i = 0; i < count; ++i) pinned[i] = c.rank() + 1;
    std::vector<double> pageable(count);
    c.all_reduce(pinned, pageable.data(), count, reduce_op::sum);  // pinned and pageable: both host
    cudaFreeHost(raw);
    std::vector<std::string> bad;
    for (std::size_t i = 0; i < count; ++i)
      if (pageable[i] != 6.0) bad.push_back("pinned all_reduce element " + std::to_string(i));
    if (bad.size() > 10) bad.resize(10);
    return bad;
  }));
}
