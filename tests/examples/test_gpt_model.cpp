// The whole GPT: its gradient against float64 central finite differences of its loss on a tiny
// model, the order of the bucket hooks a sharded trainer relies on, and the float model against
// the double one.
#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "amsp_train/gpt_model.hpp"
#include "finite_difference.hpp"

using namespace amsp_train;
using amsp_train::test::check_gradient;
using amsp_train::test::numeric_gradient;
using amsp_train::test::random_values;

namespace {

const GptConfig tiny{.context = 5, .width = 8, .heads = 2, .layers = 2};
const std::vector<std::int32_t> tokens{72, 101, 108, 108, 111, 32, 119, 111, 114, 108};  // "Hello worl"
const std::vector<std::int32_t> targets{101, 108, 108, 111, 32, 119, 111, 114, 108, 100};  // "ello world"

/// Random parameters of O(0.3): large enough that every path of the model carries gradient.
std::vector<std::vector<double>> random_params(const Gpt<double>& model) {
  std::vector<std::vector<double>> p;
  for (std::size_t b = 0; b < model.bucket_count(); ++b)
    p.push_back(random_values(model.buckets()[b].numel, 100 + static_cast<unsigned>(b), 0.3));
  return p;
}

template <class T>
std::vector<const T*> pointers(const std::vector<std::vector<T>>& v) {
  std::vector<const T*> p;
  for (const auto& x : v) p.push_back(x.data());
  return p;
}

/// Gradient buffers shaped like `params`, filled with `fill`, and the pointers backward() takes.
struct GradientBuffers {
  std::vector<std::vector<double>> values;
  std::vector<double*> pointers;
};

GradientBuffers gradient_buffers(const std::vector<std::vector<double>>& params, double fill) {
  GradientBuffers g;
  for (const auto& p : params) g.values.emplace_back(p.size(), fill);
  for (auto& v : g.values) g.pointers.push_back(v.data());
  return g;
}

}  // namespace

TEST_CASE("GPT: every parameter's gradient matches float64 finite differences") {
  Gpt<double> model(tiny);
  std::vector<std::vector<double>> params = random_params(model);
  const auto loss = [&] { return model.forward(pointers(params), tokens.data(), targets.data(), 2); };
  GradientBuffers g = gradient_buffers(params, 7.0);  // backward must overwrite, not add
  std::vector<std::vector<double>>& grads = g.values;
  const std::vector<double*>& grad_ptrs = g.pointers;
  loss();
  model.backward(pointers(params), grad_ptrs);
  for (std::size_t b = 0; b < params.size(); ++b) {
    CAPTURE(model.buckets()[b].name);
    check_gradient(grads[b], numeric_gradient(std::span(params[b]), loss), 1e-6);
  }
}

TEST_CASE("GPT: bucket hooks come in the order the sharded trainer relies on") {
  Gpt<double> model(tiny);
  const std::vector<std::vector<double>> params = random_params(model);
  GradientBuffers g = gradient_buffers(params, 0.0);
  const std::vector<double*>& grad_ptrs = g.pointers;
  std::vector<int> events;  // +b: before_bucket(b), -(b+1)·100: on_gradient(b)
  model.forward(pointers(params), tokens.data(), targets.data(), 2, [&](std::size_t b) { events.push_back(int(b)); });
  CHECK(events == std::vector<int>{0, 1, 2, 3});
  events.clear();
  model.backward(pointers(params), grad_ptrs, [&](std::size_t b) { events.push_back(int(b)); },
                 [&](std::size_t b) { events.push_back(-100 * (int(b) + 1)); });
  CHECK(events == std::vector<int>{3, -400, 2, -300, 1, -200, 0, -100});
}

TEST_CASE("GPT: the float model's loss and gradient agree with the double model's") {
  Gpt<double> dmodel(tiny);
  Gpt<float> fmodel(tiny);
  const std::vector<std::vector<double>> dparams = random_params(dmodel);
  std::vector<std::vector<float>> fparams;
  for (const auto& p : dparams) fparams.emplace_back(p.begin(), p.end());
  const double dloss = dmodel.forward(pointers(dparams), tokens.data(), targets.data(), 2);
  const double floss = fmodel.forward(pointers(fparams), tokens.data(), targets.data(), 2);
  CHECK(floss == doctest::Approx(dloss).epsilon(1e-5));
  CHECK(dloss > 1.0);  // nowhere near a trained model: every term contributes
  std::vector<std::vector<double>> dgrads;
  std::vector<std::vector<float>> fgrads;
  std::vector<double*> dptr;
  std::vector<float*> fptr;
  for (const auto& p : dparams) {
    dgrads.emplace_back(p.size());
    fgrads.emplace_back(p.size());
  }
  for (std::size_t b = 0; b < dgrads.size(); ++b) {
    dptr.push_back(dgrads[b].data());
    fptr.push_back(fgrads[b].data());
  }
  dmodel.backward(pointers(dparams), dptr);
  fmodel.backward(pointers(fparams), fptr);
  for (std::size_t b = 0; b < dgrads.size(); ++b) {
    CAPTURE(b);
    check_gradient(std::vector<double>(fgrads[b].begin(), fgrads[b].end()), dgrads[b], 1e-4);
  }
}

TEST_CASE("GPT: initial weights are a pure function of the seed; bad configurations are errors") {
  const std::vector<ParamBucket> buckets = gpt_buckets(tiny);
  REQUIRE(buckets.size() == 4);
  std::vector<float> a(buckets[1].numel), b(buckets[1].numel), c(buckets[1].numel);
  init_bucket(buckets[1], 5, 1, std::span(a));
  init_bucket(buckets[1], 5, 1, std::span(b));
  init_bucket(buckets[1], 6, 1, std::span(c));
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a[buckets[1].offset("ln1.g")] == 1.0f);
  CHECK(a[buckets[1].offset("ln1.b")] == 0.0f);
  CHECK_THROWS_WITH_AS(gpt_buckets(GptConfig{.context = 4, .width = 10, .heads = 4, .layers = 1}),
                       doctest::Contains("rule model.heads"), amsp::error);
}

TEST_CASE("GPT: a batch of no sequences, a backward without targets, a missing tensor and a short buffer are errors") {
  Gpt<double> model(tiny);
  const std::vector<std::vector<double>> params = random_params(model);
  GradientBuffers g = gradient_buffers(params, 0.0);
  const std::vector<double*>& grad_ptrs = g.pointers;
  CHECK_THROWS_WITH_AS(model.forward(pointers(params), tokens.data(), targets.data(), 0),
                       doctest::Contains("rule model.batch"), amsp::error);
  model.forward(pointers(params), tokens.data(), nullptr, 2);  // inference: probabilities only
  CHECK_THROWS_WITH_AS(model.backward(pointers(params), grad_ptrs), doctest::Contains("rule model.no_targets"),
                       amsp::error);
  const ParamBucket& block = model.buckets()[1];
  CHECK(block.offset("ln1.b") == 8);
  CHECK_THROWS_WITH_AS((void)block.offset("attn.nope"), doctest::Contains("rule model.tensor"), amsp::error);
  std::vector<float> short_buffer(block.numel - 1);
  CHECK_THROWS_WITH_AS(init_bucket(block, 5, 1, std::span(short_buffer)), doctest::Contains("rule model.bucket_size"),
                       amsp::error);
}
