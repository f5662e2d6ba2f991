// Every layer of the example's transformer: its backward against float64 central finite
// differences of its forward, on small shapes that hit the kernels' remainder paths.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "amsp_train/attention.hpp"
#include "amsp_train/layers.hpp"
#include "finite_difference.hpp"

using namespace amsp_train;
using amsp_train::test::check_gradient;
using amsp_train::test::numeric_gradient;
using amsp_train::test::random_values;
using amsp_train::test::weighted_sum;
using Vec = std::vector<double>;

TEST_CASE("linear: dx, dW, db against finite differences") {
  const std::size_t rows = 5, in = 7, out = 6;
  Vec x = random_values(rows * in, 1), w = random_values(in * out, 2), b = random_values(out, 3);
  const Vec dy = random_values(rows * out, 4);
  Vec y(rows * out);
  const auto loss = [&] {
    linear_forward(x.data(), rows, in, w.data(), b.data(), out, y.data());
    return weighted_sum(y, dy);
  };
  Vec dx(rows * in, 0.0), dw(in * out, 0.0), db(out, 0.0), scratch;
  linear_backward(x.data(), rows, in, w.data(), out, dy.data(), dx.data(), dw.data(), db.data(), scratch);
  check_gradient(dx, numeric_gradient(std::span(x), loss));
  check_gradient(dw, numeric_gradient(std::span(w), loss));
  check_gradient(db, numeric_gradient(std::span(b), loss));
}

TEST_CASE("layer norm: dx, dg, db against finite differences") {
  const std::size_t rows = 5, n = 9;
  Vec x = random_values(rows * n, 1, 2.0), g = random_values(n, 2), b = random_values(n, 3);
  const Vec dy = random_values(rows * n, 4);
  Vec y(rows * n), mean(rows), rstd(rows);
  const auto loss = [&] {
    layer_norm_forward(x.data(), rows, n, g.data(), b.data(), y.data(), mean.data(), rstd.data());
    return weighted_sum(y, dy);
  };
  loss();
  Vec dx(rows * n, 0.0), dg(n, 0.0), db(n, 0.0);
  layer_norm_backward(x.data(), rows, n, g.data(), mean.data(), rstd.data(), dy.data(), dx.data(), dg.data(), db.data());
  check_gradient(dx, numeric_gradient(std::span(x), loss));
  check_gradient(dg, numeric_gradient(std::span(g), loss));
  check_gradient(db, numeric_gradient(std::span(b), loss));
}

TEST_CASE("GELU: dx against finite differences, and the float form against the double one") {
  Vec x = random_values(37, 1, 4.0);
  const Vec dy = random_values(37, 2);
  Vec y(37);
  const auto loss = [&] {
    gelu_forward(x.data(), x.size(), y.data());
    return weighted_sum(y, dy);
  };
  Vec dx(37);
  gelu_backward(x.data(), x.size(), dy.data(), dx.data());
  check_gradient(dx, numeric_gradient(std::span(x), loss));
  // The float path uses the vectorisable tanh; it must agree with libm's to float precision.
  std::vector<float> xf(x.begin(), x.end()), yf(x.size());
  gelu_forward(xf.data(), xf.size(), yf.data());
  gelu_forward(x.data(), x.size(), y.data());
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(yf[i] == doctest::Approx(y[i]).epsilon(1e-6).scale(1.0));
}

TEST_CASE("embeddings: dwte and dwpe against finite differences") {
  const std::size_t sequences = 2, context = 3, width = 4, vocab = 256;
  const std::vector<std::int32_t> tokens{7, 255, 7, 0, 3, 7};  // repeated tokens accumulate
  Vec wte = random_values(vocab * width, 1), wpe = random_values(context * width, 2);
  const Vec dy = random_values(sequences * context * width, 3);
  Vec x(dy.size());
  const auto loss = [&] {
    embedding_forward(tokens.data(), sequences, context, width, wte.data(), wpe.data(), x.data());
    return weighted_sum(x, dy);
  };
  Vec dwte(wte.size(), 0.0), dwpe(wpe.size(), 0.0);
  embedding_backward(tokens.data(), sequences, context, width, dy.data(), dwte.data(), dwpe.data());
  check_gradient(dwte, numeric_gradient(std::span(wte), loss));
  check_gradient(dwpe, numeric_gradient(std::span(wpe), loss));
}

TEST_CASE("softmax cross-entropy: the mean loss is exact and dlogits matches finite differences") {
  const std::size_t rows = 3, vocab = 256;
  Vec logits = random_values(rows * vocab, 1, 3.0);
  const std::vector<std::int32_t> targets{0, 200, 255};
  const auto loss = [&] {
    Vec p = logits;
    return softmax_cross_entropy(p.data(), rows, vocab, targets.data());
  };
  // Independent statement of the loss: log-sum-exp minus the target logit, averaged.
  double expected = 0.0;
  for (std::size_t i = 0; i < rows; ++i) {
    double sum = 0.0;
    for (std::size_t v = 0; v < vocab; ++v) sum += std::exp(logits[i * vocab + v]);
    expected += (std::log(sum) - logits[i * vocab + static_cast<std::size_t>(targets[i])]) / rows;
  }
  CHECK(loss() == doctest::Approx(expected).epsilon(1e-12));
  Vec d = logits;
  softmax_cross_entropy(d.data(), rows, vocab, targets.data());
  softmax_cross_entropy_backward(d.data(), rows, vocab, targets.data());
  check_gradient(d, numeric_gradient(std::span(logits), loss));
}

TEST_CASE("causal attention: dqkv against finite differences; no token sees a later one") {
  const AttentionShape shape{.sequences = 2, .context = 5, .width = 6, .heads = 2};
  Vec qkv = random_values(shape.rows() * 3 * shape.width, 1);
  const Vec dy = random_values(shape.rows() * shape.width, 2);
  Vec probs(shape.probs_size()), y(shape.rows() * shape.width);
  Attention<double> attention;
  const auto loss = [&] {
    attention.forward(shape, qkv.data(), probs.data(), y.data());
    return weighted_sum(y, dy);
  };
  loss();
  Vec dqkv(qkv.size());
  attention.backward(shape, qkv.data(), probs.data(), dy.data(), dqkv.data());
  check_gradient(dqkv, numeric_gradient(std::span(qkv), loss));
  // Causality: changing the last token's q, k, v leaves every earlier output unchanged.
  const Vec before = y;
  for (std::size_t k = 0; k < 3 * shape.width; ++k) qkv[(shape.context - 1) * 3 * shape.width + k] += 1.0;
  loss();
  for (std::size_t t = 0; t + 1 < shape.context; ++t)
    for (std::size_t k = 0; k < shape.width; ++k) CHECK(y[t * shape.width + k] == before[t * shape.width + k]);
}
