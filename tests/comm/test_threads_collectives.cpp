// The threads backend against the serial reference: every collective × dtype × in-place ×
// count × world size, asynchronous forms, and bitwise reproducibility of float reductions.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "collective_checks.hpp"
#include "report.hpp"
#include "threads_harness.hpp"

namespace {
using namespace amsp;
using amsp::comm::ThreadsCommunicator;

using test::require_none;
}  // namespace

TEST_CASE("threads: every collective, dtype and placement against the serial reference") {
  for (int n : {1, 2, 3, 4, 8}) {
    CAPTURE(n);
    require_none(test::failures_on_threads(n, [](ThreadsCommunicator& c) {
      return test::run_sweep(c, {0, 1, 7, 4099}, test::all_dtypes);
    }));
  }
}

TEST_CASE("threads: 1<<20 elements, bf16, 3 ranks (every dtype and world size: test_comm_threads_large)") {
  require_none(test::failures_on_threads(3, [](ThreadsCommunicator& c) {
    return test::run_sweep(c, {std::size_t{1} << 20}, {dtype::bf16});
  }));
}

TEST_CASE("threads: asynchronous forms give the blocking results") {
  for (int n : {1, 3, 4}) {
    CAPTURE(n);
    require_none(test::failures_on_threads(n, [](ThreadsCommunicator& c) {
      return test::run_sweep(c, {0, 7, 4099}, test::all_dtypes, /*async=*/true);
    }));
  }
}

TEST_CASE("threads: several asynchronous collectives outstanding, waited in reverse order") {
  constexpr std::size_t count = 1000;
  require_none(test::failures_on_threads(4, [](ThreadsCommunicator& c) {
    const int n = c.size();
    const std::size_t nc = static_cast<std::size_t>(n) * count;
    std::vector<float> ag_send = {}, ag_recv(nc), rs_send(nc), rs_recv(count), ar(count), bc(count);
    for (std::size_t i = 0; i < count; ++i) ag_send.push_back(static_cast<float>(c.rank() * 1000 + static_cast<int>(i)));
    for (std::size_t i = 0; i < nc; ++i) rs_send[i] = static_cast<float>(i % 5);
    for (std::size_t i = 0; i < count; ++i) ar[i] = static_cast<float>(c.rank());
    for (std::size_t i = 0; i < count; ++i) bc[i] = c.rank() == 2 ? 7.0f : -1.0f;
    std::vector<comm::Handle> handles;
    handles.push_back(c.all_gather_async(ag_send.data(), ag_recv.data(), count));
    handles.push_back(c.reduce_scatter_async(rs_send.data(), rs_recv.data(), count, comm::reduce_op::sum));
    handles.push_back(c.all_reduce_async(ar.data(), ar.data(), count, comm::reduce_op::sum));
    handles.push_back(c.broadcast_async(bc.data(), bc.data(), count, 2));
    for (auto it = handles.rbegin(); it != handles.rend(); ++it) it->wait();
    std::vector<std::string> bad;
    for (std::size_t i = 0; i < nc; ++i)
      if (ag_recv[i] != static_cast<float>(static_cast<int>(i / count) * 1000 + static_cast<int>(i % count)))
        bad.push_back("all_gather element " + std::to_string(i));
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t global = static_cast<std::size_t>(c.rank()) * count + i;
      if (rs_recv[i] != static_cast<float>(n * static_cast<int>(global % 5))) bad.push_back("reduce_scatter element");
      if (ar[i] != static_cast<float>(n * (n - 1) / 2)) bad.push_back("all_reduce element");
      if (bc[i] != 7.0f) bad.push_back("broadcast element");
    }
    for (comm::Handle& h : handles) {
      if (h.pending() || !h.test()) bad.push_back("a waited handle is still pending");
    }
    return bad;
  }));
}

TEST_CASE("threads: a blocking call after async ones completes them first; test() polls") {
  require_none(test::failures_on_threads(3, [](ThreadsCommunicator& c) {
    std::vector<double> a(5000, 1.0), b(5000, 2.0);
    comm::Handle h = c.all_reduce_async(a.data(), a.data(), a.size(), comm::reduce_op::sum);
    c.all_reduce(b.data(), b.data(), b.size(), comm::reduce_op::sum);
    std::vector<std::string> bad;
    if (!h.test()) bad.push_back("async all_reduce not complete after a later blocking call");
    if (a[4999] != 3.0 || b[0] != 6.0) bad.push_back("wrong sums");
    comm::Handle empty;
    if (!empty.test()) bad.push_back("a default handle is not complete");
    empty.wait();
    return bad;
  }));
}

namespace {
// Random float inputs: rank r's element i.
std::vector<float> random_inputs(int rank, std::size_t count) {
  std::mt19937 gen(static_cast<unsigned>(1234 + rank));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}
}  // namespace

TEST_CASE("threads: float reductions sum in rank order, bitwise reproducible") {
  constexpr int n = 8;
  constexpr std::size_t count = 10007;
  // Serial reference: the documented order, rank 0 first, accumulated in float.
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(random_inputs(r, count));
  std::vector<float> ordered(count, 0.0f);
  std::vector<double> exact(count, 0.0);
  for (std::size_t i = 0; i < count; ++i) {
    float acc = inputs[0][i];
    for (int r = 1; r < n; ++r) acc += inputs[static_cast<std::size_t>(r)][i];
    ordered[i] = acc;
    for (int r = 0; r < n; ++r) exact[i] += inputs[static_cast<std::size_t>(r)][i];
  }
  for (int repeat = 0; repeat < 3; ++repeat) {
    require_none(test::failures_on_threads(n, [&](ThreadsCommunicator& c) {
      std::vector<float> x = random_inputs(c.rank(), count);
      c.all_reduce(x.data(), x.data(), count, comm::reduce_op::sum);
      std::vector<std::string> bad;
      if (std::memcmp(x.data(), ordered.data(), count * sizeof(float)) != 0) bad.push_back("not the rank-order sum");
      for (std::size_t i = 0; i < count; ++i)
        if (std::abs(x[i] - exact[i]) > 1e-5) bad.push_back("far from the float64 sum at " + std::to_string(i));
      return bad;
    }));
  }
}

TEST_CASE("threads: bf16 and fp16 sums accumulate in fp32 and round once") {
  constexpr int n = 4;
  constexpr std::size_t count = 3001;
  require_none(test::failures_on_threads(n, [&](ThreadsCommunicator& c) {
    std::vector<std::string> bad;
    std::vector<bf16> b(count);
    std::vector<fp16> h(count);
    const std::vector<float> mine = random_inputs(c.rank(), count);
    for (std::size_t i = 0; i < count; ++i) {
      b[i] = bf16::from_float(mine[i]);
      h[i] = fp16::from_float(mine[i]);
    }
    c.all_reduce(b.data(), b.data(), count, comm::reduce_op::avg);
    c.all_reduce(h.data(), h.data(), count, comm::reduce_op::sum);
    std::vector<std::vector<float>> all;
    for (int r = 0; r < n; ++r) all.push_back(random_inputs(r, count));
    for (std::size_t i = 0; i < count; ++i) {
      double sb = 0, sh = 0;  // exact sums of the rounded inputs: float64 holds them exactly
      for (int r = 0; r < n; ++r) {
        sb += bf16::from_float(all[static_cast<std::size_t>(r)][i]).to_float();
        sh += fp16::from_float(all[static_cast<std::size_t>(r)][i]).to_float();
      }
      if (b[i] != bf16::from_float(static_cast<float>(sb / n))) bad.push_back("bf16 avg at " + std::to_string(i));
      if (h[i] != fp16::from_float(static_cast<float>(sh))) bad.push_back("fp16 sum at " + std::to_string(i));
    }
    return bad;
  }));
}
