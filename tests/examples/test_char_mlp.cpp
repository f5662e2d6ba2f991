// The example's model: parameter layout, initialisation, and forward/backward against an
// independent float64 reference (finite differences of a separately written forward pass).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "amsp_train/batch_sampler.hpp"
#include "amsp_train/char_mlp.hpp"

using namespace amsp_train;

namespace {

using DoubleParams = std::vector<std::vector<double>>;

/// Mean cross-entropy of the documented architecture, written from the header's formulas alone,
/// in float64 with std::tanh and std::exp: the oracle for CharMlp's forward and backward.
double reference_loss(const CharMlpConfig& cfg, const DoubleParams& p, const ExampleSet& batch) {
  const auto c = static_cast<std::size_t>(cfg.context);
  const auto d = static_cast<std::size_t>(cfg.embed_dim);
  const auto h = static_cast<std::size_t>(cfg.hidden);
  const auto v = static_cast<std::size_t>(cfg.vocab);
  const auto layers = static_cast<std::size_t>(cfg.hidden_layers);
  double total = 0.0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    std::vector<double> x;
    for (std::size_t k = 0; k < c; ++k)
      for (std::size_t j = 0; j < d; ++j) x.push_back(p[0][batch.contexts[i * c + k] * d + j]);
    for (std::size_t l = 1; l <= layers; ++l) {
      const std::size_t in = x.size();
      std::vector<double> a(h);
      for (std::size_t o = 0; o < h; ++o) {
        double z = p[l][in * h + o];  // bias after the in × h weight
        for (std::size_t k = 0; k < in; ++k) z += x[k] * p[l][k * h + o];
        a[o] = std::tanh(z);
      }
      x = a;
    }
    const std::vector<double>& w = p[layers + 1];
    std::vector<double> logits(v);
    for (std::size_t t = 0; t < v; ++t) {
      logits[t] = w[h * v + t];
      for (std::size_t k = 0; k < h; ++k) logits[t] += x[k] * w[k * v + t];
    }
    const double m = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (const double z : logits) sum += std::exp(z - m);
    total += m + std::log(sum) - logits[batch.targets[i]];
  }
  return total / static_cast<double>(batch.size());
}

ExampleSet random_batch(const CharMlpConfig& cfg, std::size_t size, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> token(0, cfg.vocab - 1);
  ExampleSet batch;
  batch.context = cfg.context;
  for (std::size_t i = 0; i < size * static_cast<std::size_t>(cfg.context); ++i)
    batch.contexts.push_back(static_cast<std::uint8_t>(token(gen)));
  for (std::size_t i = 0; i < size; ++i) batch.targets.push_back(static_cast<std::uint8_t>(token(gen)));
  return batch;
}

/// Every parameter uniform in [-0.6, 0.6] (biases included, unlike the real initialisation, so
/// that a forgotten bias cannot hide).
void randomise(LayerBuffers& params, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-0.6f, 0.6f);
  for (std::size_t l = 0; l < params.layer_count(); ++l)
    for (float& x : params.layer(l)) x = u(gen);
}

DoubleParams to_double(const LayerBuffers& params) {
  DoubleParams p;
  for (std::size_t l = 0; l < params.layer_count(); ++l) p.emplace_back(params.layer(l).begin(), params.layer(l).end());
  return p;
}

}  // namespace

TEST_CASE("layers: names, shapes and parameter count of the default model") {
  const CharMlp model;
  const std::vector<LayerSpec>& layers = model.layers();
  REQUIRE(layers.size() == 4);
  CHECK(layers[0].name == "embed");
  CHECK(layers[1].name == "fc1");
  CHECK(layers[2].name == "fc2");
  CHECK(layers[3].name == "out");
  CHECK(layers[0].tensors[0].name == "embed.weight");
  CHECK(layers[0].tensors[0].shape == std::vector<std::size_t>{27, 24});
  CHECK(layers[1].tensors[0].name == "fc1.weight");
  CHECK(layers[1].tensors[0].shape == std::vector<std::size_t>{8 * 24, 256});
  CHECK(layers[1].tensors[1].name == "fc1.bias");
  CHECK(layers[1].tensors[1].shape == std::vector<std::size_t>{256});
  CHECK(layers[2].tensors[0].shape == std::vector<std::size_t>{256, 256});
  CHECK(layers[3].tensors[0].name == "out.weight");
  CHECK(layers[3].tensors[0].shape == std::vector<std::size_t>{256, 27});
  CHECK(layers[3].tensors[1].shape == std::vector<std::size_t>{27});
  CHECK(model.parameter_count() == 27 * 24 + (192 * 256 + 256) + (256 * 256 + 256) + (256 * 27 + 27));
  CHECK(model.parameter_count() == 122787);
  CHECK(CharMlp({.hidden_layers = 4}).layers().size() == 6);
}

TEST_CASE("bad configurations are rejected") {
  CHECK_THROWS_WITH_AS(CharMlp({.hidden_layers = 0}), doctest::Contains("model.config"), amsp::error);
  CHECK_THROWS_WITH_AS(CharMlp({.context = 0}), doctest::Contains("model.config"), amsp::error);
  CHECK_THROWS_WITH_AS(CharMlp({.vocab = 300}), doctest::Contains("model.config"), amsp::error);
}

TEST_CASE("initialisation: deterministic per seed, per layer, with the documented scales") {
  const CharMlp model;
  LayerBuffers a(model.layers());
  LayerBuffers b(model.layers());
  LayerBuffers c(model.layers());
  model.init(5, a.pointers());
  model.init(5, b.pointers());
  model.init(6, c.pointers());
  for (std::size_t l = 0; l < model.layer_count(); ++l) {
    CHECK(std::ranges::equal(a.layer(l), b.layer(l)));
    CHECK_FALSE(std::ranges::equal(a.layer(l), c.layer(l)));
  }
  // A layer's values do not depend on how deep the model is: any rank can initialise any layer.
  const CharMlp deeper({.hidden_layers = 3});
  LayerBuffers d(deeper.layers());
  deeper.init(5, d.pointers());
  CHECK(std::ranges::equal(a.layer(1), d.layer(1)));

  const auto stddev = [](std::span<const float> x) {
    double sum = 0.0, sq = 0.0;
    for (const float v : x) {
      sum += v;
      sq += static_cast<double>(v) * v;
    }
    const double n = static_cast<double>(x.size());
    return std::sqrt(sq / n - (sum / n) * (sum / n));
  };
  const auto weights = [&](std::size_t l) { return std::as_const(a).layer(l).first(model.layers()[l].tensors[0].numel()); };
  CHECK(stddev(weights(0)) == doctest::Approx(1.0).epsilon(0.1));
  CHECK(stddev(weights(1)) == doctest::Approx(5.0 / 3.0 / std::sqrt(192.0)).epsilon(0.03));
  CHECK(stddev(weights(2)) == doctest::Approx(5.0 / 3.0 / std::sqrt(256.0)).epsilon(0.03));
  CHECK(stddev(weights(3)) == doctest::Approx(0.1 / std::sqrt(256.0)).epsilon(0.05));
  for (std::size_t l = 1; l < model.layer_count(); ++l) {
    const auto bias = std::as_const(a).layer(l).last(model.layers()[l].tensors[1].numel());
    CHECK(std::all_of(bias.begin(), bias.end(), [](float x) { return x == 0.0f; }));
  }
  CHECK_THROWS_WITH_AS(model.init_layer(5, 4, a.layer(0)), doctest::Contains("model.layer_index"), amsp::error);
  CHECK_THROWS_WITH_AS(model.init_layer(5, 1, a.layer(0)), doctest::Contains("model.layer_size"), amsp::error);
}

TEST_CASE("the initial loss is close to ln(vocab)") {
  CharMlp model;
  LayerBuffers params(model.layers());
  model.init(1, params.pointers());
  const ExampleSet batch = random_batch(model.config(), 256, 3);
  const double loss = model.forward(params.const_pointers(), batch.view());
  CHECK(loss == doctest::Approx(std::log(27.0)).epsilon(0.02));
  CHECK(loss == doctest::Approx(reference_loss(model.config(), to_double(params), batch)).epsilon(1e-5));
}

TEST_CASE("forward and backward match float64 finite differences for every parameter") {
  // Odd sizes everywhere, so that every remainder path of the blocked loops runs.
  for (const int hidden_layers : {1, 2, 3}) {
    CAPTURE(hidden_layers);
    const CharMlpConfig cfg{.context = 3, .embed_dim = 5, .hidden = 7, .hidden_layers = hidden_layers};
    CharMlp model(cfg);
    LayerBuffers params(model.layers());
    LayerBuffers grads(model.layers());
    randomise(params, 17u + static_cast<unsigned>(hidden_layers));
    const ExampleSet batch = random_batch(cfg, 7, 23);
    DoubleParams p = to_double(params);

    const float loss = model.forward(params.const_pointers(), batch.view());
    CHECK(loss == doctest::Approx(reference_loss(cfg, p, batch)).epsilon(1e-5));
    model.backward(params.const_pointers(), grads.pointers());

    constexpr double step = 1e-5;
    for (std::size_t l = 0; l < model.layer_count(); ++l)
      for (std::size_t e = 0; e < p[l].size(); ++e) {
        const double saved = p[l][e];
        p[l][e] = saved + step;
        const double up = reference_loss(cfg, p, batch);
        p[l][e] = saved - step;
        const double down = reference_loss(cfg, p, batch);
        p[l][e] = saved;
        const double expected = (up - down) / (2.0 * step);
        const double got = std::as_const(grads).layer(l)[e];
        CAPTURE(model.layers()[l].name);
        CAPTURE(e);
        CHECK(std::abs(got - expected) <= 2e-6 + 1e-4 * std::abs(expected));
      }
  }
}

TEST_CASE("backward reports each layer once, in reverse order, when its gradient is final") {
  const CharMlpConfig cfg{.context = 4, .embed_dim = 6, .hidden = 9, .hidden_layers = 3};
  CharMlp model(cfg);
  LayerBuffers params(model.layers());
  LayerBuffers grads(model.layers());
  model.init(3, params.pointers());
  const ExampleSet batch = random_batch(cfg, 10, 5);
  constexpr float sentinel = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t l = 0; l < grads.layer_count(); ++l) std::ranges::fill(grads.layer(l), sentinel);

  std::vector<std::size_t> order;
  std::vector<std::vector<float>> snapshots(model.layer_count());
  (void)model.forward(params.const_pointers(), batch.view());
  model.backward(params.const_pointers(), grads.pointers(), [&](std::size_t layer) {
    order.push_back(layer);
    snapshots[layer].assign(grads.layer(layer).begin(), grads.layer(layer).end());
    // The layers before it have not been written yet: backward really streams layer by layer.
    for (std::size_t earlier = 0; earlier < layer; ++earlier)
      CHECK(std::isnan(std::as_const(grads).layer(earlier)[0]));
  });
  CHECK(order == std::vector<std::size_t>{4, 3, 2, 1, 0});
  for (std::size_t l = 0; l < model.layer_count(); ++l) CHECK(std::ranges::equal(snapshots[l], grads.layer(l)));
}

TEST_CASE("parameters are read only between before_layer(l) and the documented release point") {
  // An engine that shards parameters gathers layer l in before_layer(l) and frees it afterwards.
  // Simulate that: each layer holds NaN except while the model may read it. Any read outside
  // that window poisons the loss or the gradients.
  const CharMlpConfig cfg{.context = 3, .embed_dim = 4, .hidden = 6, .hidden_layers = 2};
  CharMlp model(cfg);
  LayerBuffers params(model.layers());
  LayerBuffers grads(model.layers());
  LayerBuffers reference_grads(model.layers());
  model.init(8, params.pointers());
  const ExampleSet batch = random_batch(cfg, 6, 9);
  const float expected_loss = model.forward(params.const_pointers(), batch.view());
  model.backward(params.const_pointers(), reference_grads.pointers());

  LayerBuffers gathered(model.layers());
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t l = 0; l < gathered.layer_count(); ++l) std::ranges::fill(gathered.layer(l), nan);
  const auto gather = [&](std::size_t l) { std::ranges::copy(std::as_const(params).layer(l), gathered.layer(l).begin()); };
  const auto release = [&](std::size_t l) { std::ranges::fill(gathered.layer(l), nan); };

  std::vector<std::string> events;
  const float loss = model.forward(gathered.const_pointers(), batch.view(), [&](std::size_t l) {
    events.push_back("need " + std::to_string(l));
    if (l > 0) release(l - 1);
    gather(l);
  });
  release(model.layer_count() - 1);
  CHECK(loss == expected_loss);
  CHECK(events == std::vector<std::string>{"need 0", "need 1", "need 2", "need 3"});

  events.clear();
  model.backward(
      gathered.const_pointers(), grads.pointers(),
      [&](std::size_t l) {
        events.push_back("grad " + std::to_string(l));
        release(l);
      },
      [&](std::size_t l) {
        events.push_back("need " + std::to_string(l));
        gather(l);
      });
  CHECK(events == std::vector<std::string>{"need 3", "grad 3", "need 2", "grad 2", "need 1", "grad 1", "grad 0"});
  for (std::size_t l = 0; l < model.layer_count(); ++l)
    CHECK(std::ranges::equal(grads.layer(l), reference_grads.layer(l)));
}

TEST_CASE("mean of equal micro-batch gradients is the global-batch gradient, for any split") {
  const CharMlpConfig cfg{.context = 5, .embed_dim = 4, .hidden = 11, .hidden_layers = 2};
  CharMlp model(cfg);
  LayerBuffers params(model.layers());
  randomise(params, 99);
  const ExampleSet pool = random_batch(cfg, 500, 31);
  const BatchSampler sampler(pool.size(), 24, 4);

  LayerBuffers whole(model.layers());
  const ExampleSet global = gather(pool.view(), sampler.global_indices(2));
  const float global_loss = model.forward(params.const_pointers(), global.view());
  model.backward(params.const_pointers(), whole.pointers());

  for (const BatchSplit split : {BatchSplit{2, 3}, BatchSplit{4, 1}, BatchSplit{1, 8}}) {
    CAPTURE(split.world_size);
    CAPTURE(split.micro_batches);
    LayerBuffers sum(model.layers());
    LayerBuffers part(model.layers());
    double loss = 0.0;
    const int parts = split.world_size * split.micro_batches;
    for (int r = 0; r < split.world_size; ++r)
      for (int m = 0; m < split.micro_batches; ++m) {
        const ExampleSet batch = sampler.micro_batch(pool.view(), 2, split, r, m);
        loss += model.forward(params.const_pointers(), batch.view());
        model.backward(params.const_pointers(), part.pointers());
        for (std::size_t l = 0; l < model.layer_count(); ++l)
          for (std::size_t e = 0; e < sum.layer(l).size(); ++e) sum.layer(l)[e] += std::as_const(part).layer(l)[e];
      }
    CHECK(loss / parts == doctest::Approx(global_loss).epsilon(1e-6));
    for (std::size_t l = 0; l < model.layer_count(); ++l)
      for (std::size_t e = 0; e < sum.layer(l).size(); ++e)
        CHECK(sum.layer(l)[e] / static_cast<float>(parts) ==
              doctest::Approx(std::as_const(whole).layer(l)[e]).epsilon(1e-5).scale(1e-3));
  }
}

TEST_CASE("bad inputs fail with the rule they break") {
  const CharMlpConfig cfg{.context = 3, .embed_dim = 4, .hidden = 5, .hidden_layers = 1};
  CharMlp model(cfg);
  LayerBuffers params(model.layers());
  LayerBuffers grads(model.layers());
  CHECK_THROWS_WITH_AS(model.backward(params.const_pointers(), grads.pointers()),
                       doctest::Contains("model.backward_without_forward"), amsp::error);
  ExampleSet batch = random_batch(cfg, 4, 1);
  CHECK_THROWS_WITH_AS((void)model.forward(params.const_pointers().first(2), batch.view()),
                       doctest::Contains("model.layer_count"), amsp::error);
  CHECK_THROWS_WITH_AS((void)model.forward(params.const_pointers(), batch.view().slice(0, 0)),
                       doctest::Contains("model.empty_batch"), amsp::error);
  ExampleSet wrong_context = random_batch({.context = 4}, 4, 1);
  CHECK_THROWS_WITH_AS((void)model.forward(params.const_pointers(), wrong_context.view()),
                       doctest::Contains("model.context"), amsp::error);
  batch.targets[2] = 27;
  CHECK_THROWS_WITH_AS((void)model.forward(params.const_pointers(), batch.view()),
                       doctest::Contains("model.token_range"), amsp::error);
}
