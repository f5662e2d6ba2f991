// Step semantics: the overflow skip happens on every rank together, a power-of-two loss scale is
// undone exactly, and the reported norm is the global norm with each OS shard counted once.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "amsp/comm/threads.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "engine_runner.hpp"

namespace {
using Threads = amsp::comm::ThreadsCommunicator;
using Engine = amsp::ShardedOptimizer<Threads, amsp::optim::AdamW>;
const std::vector<amsp::BucketSpec> two_buckets{{"a", {{"a.w", {37}, amsp::dtype::fp32}}},
                                                {"b", {{"b.w", {5, 3}, amsp::dtype::fp32}}}};

/// One step where rank r's gradient of element i of bucket b is value(r, b, i); returns the
/// step result and the final parameters (all ones initially).
template <class Value>
std::pair<amsp::StepResult, std::vector<std::vector<float>>> one_step(const amsp::Mesh& mesh, const amsp::Plan& plan,
                                                                      Value value, float loss_scale = 1.0f) {
  amsp::StepResult result;
  std::vector<std::vector<float>> params;
  amsp::comm::run_on_threads(mesh.world_size(), [&](Threads& comm) {
    Engine opt(comm, mesh, plan, amsp::optim::AdamW{.lr = 0.1f}, two_buckets);
    for (int b = 0; b < 2; ++b) {
      const auto& slot = opt.layout(b).slots()[0];
      std::vector<float> ones(slot.numel, 1.0f);
      opt.set_tensor(slot.name, std::span<const float>(ones));
    }
    opt.start_micro_batch(true);
    for (int b = 0; b < 2; ++b) {
      auto g = opt.grad_buffer(b);
      for (std::size_t i = 0; i < opt.layout(b).slots()[0].numel; ++i) g[i] = value(comm.rank(), b, i);
      opt.reduce_gradients(b);
    }
    const amsp::StepResult r = opt.step(loss_scale);
    std::vector<std::vector<float>> mine;
    for (int b = 0; b < 2; ++b) {
      const auto full = opt.gather(b);
      mine.emplace_back(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(opt.layout(b).slots()[0].numel));
      opt.release(b);
    }
    if (comm.rank() == 0) {
      result = r;
      params = mine;
    }
  });
  return {result, params};
}
}  // namespace

TEST_CASE("a NaN or Inf on one rank skips the step on every rank") {
  const amsp::Mesh mesh(2, 2);
  for (const char* name : {"ddp", "zero1", "zero3", "amsp-13b"}) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      CAPTURE(name);
      const auto [result, params] = one_step(mesh, amsp::parse_plan(name, mesh), [&](int r, int b, std::size_t i) {
        return r == 3 && b == 1 && i == 4 ? bad : 0.25f;
      });
      CHECK(result.skipped);
      CHECK(result.step == 0);
      for (const auto& t : params)
        for (float p : t) CHECK(p == 1.0f);
    }
  }
}

TEST_CASE("a power-of-two loss scale is undone exactly, and the norm is global") {
  const amsp::Mesh mesh(4, 2);
  for (const amsp::Plan& plan : amsp::enumerate_plans(mesh)) {
    CAPTURE(amsp::to_string(plan));
    const auto value = [](int r, int b, std::size_t i) { return 0.125f * static_cast<float>((r + 1) * (b + 1)) + 0.01f * float(i); };
    const auto [plain, p_plain] = one_step(mesh, plan, value);
    const auto [scaled, p_scaled] = one_step(mesh, plan, [&](int r, int b, std::size_t i) { return 1024.0f * value(r, b, i); },
                                             1024.0f);
    CHECK(!plain.skipped);
    CHECK(p_plain == p_scaled);
    // The averaged gradient of element i of bucket b is mean_r(value) = 0.125 (b+1) 4.5 + 0.01 i.
    double sum_sq = 0.0;
    for (int b = 0; b < 2; ++b)
      for (std::size_t i = 0; i < (b == 0 ? 37u : 15u); ++i) {
        const double g = 0.125 * (b + 1) * 4.5 + 0.01 * double(i);
        sum_sq += g * g;
      }
    CHECK(plain.grad_norm == doctest::Approx(std::sqrt(sum_sq)).epsilon(1e-6));
    CHECK(scaled.grad_norm == doctest::Approx(std::sqrt(sum_sq)).epsilon(1e-6));
  }
}
