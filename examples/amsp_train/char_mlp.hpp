#pragma once
// The model of the main example: an MLP character-level language model (Bengio et al. 2003, as in
// makemore), fp32, with a hand-written forward and backward so that it needs no autograd or BLAS.
//
//   x0 = concat(E[ctx_0], ..., E[ctx_{C-1}])          E: vocab × d          (layer "embed")
//   a_l = tanh(a_{l-1} · W_l + b_l), a_0 = x0          W_1: C·d × H, W_l: H × H (layers "fc1".."fcL")
//   logits = a_L · W_out + b_out                        W_out: H × vocab      (layer "out")
//   loss = mean over the batch of −log softmax(logits)[target]
//
// Weights are stored input-major (in × out, y = x·W + b), unlike PyTorch's (out × in): it makes
// every inner loop a contiguous axpy. Layer l's tensors lie back to back in one flat buffer in the
// order of layers()[l].tensors (weight, then bias), which is the unit the engine hands over.
//
// Loss scaling contract: forward() returns the MEAN cross-entropy over the b examples it is given,
// and backward() writes the gradient of that mean. With equal micro-batch sizes (BatchSampler
// guarantees it), summing the gradients of all M micro-batches on all W ranks and dividing by
// W·M gives exactly the gradient of the mean loss over the global batch.
//
// A CharMlp object holds the activations of its last forward(): use one object per thread
// (per rank), call backward() after the forward() of the same batch.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "amsp/core/error.hpp"
#include "char_data.hpp"
#include "counter_hash.hpp"
#include "dense_kernels.hpp"
#include "example_set.hpp"
#include "layer_spec.hpp"

namespace amsp_train {

namespace detail {
/// The default of the optional per-layer callbacks of CharMlp: does nothing.
struct no_hook {
  void operator()(std::size_t) const noexcept {}
};
}  // namespace detail

struct CharMlpConfig {
  int context = 8;         ///< C: characters of context
  int embed_dim = 24;      ///< d: embedding width per character
  int hidden = 256;        ///< H: width of every hidden layer
  int hidden_layers = 2;   ///< L: number of tanh layers (fc1 .. fcL), at least 1
  int vocab = vocab_size;  ///< tokens (27 for the word-list data)
};

class CharMlp {
public:
  explicit CharMlp(CharMlpConfig config = {}) : config_(config) {
    amsp::check(config.context >= 1 && config.embed_dim >= 1 && config.hidden >= 1 && config.hidden_layers >= 1 &&
                    config.vocab >= 2 && config.vocab <= 256,
                "model.config", "CharMlp sizes context=", config.context, " embed_dim=", config.embed_dim,
                " hidden=", config.hidden, " hidden_layers=", config.hidden_layers, " vocab=", config.vocab,
                " must all be at least 1 (vocab in [2, 256])");
    const auto v = static_cast<std::size_t>(config.vocab);
    const auto h = static_cast<std::size_t>(config.hidden);
    layers_.push_back({"embed", {{"embed.weight", {v, static_cast<std::size_t>(config.embed_dim)}}}});
    for (int l = 1; l <= config.hidden_layers; ++l) {
      const std::string name = "fc" + std::to_string(l);
      layers_.push_back({name, {{name + ".weight", {fan_in(l), h}}, {name + ".bias", {h}}}});
    }
    layers_.push_back({"out", {{"out.weight", {h, v}}, {"out.bias", {v}}}});
  }

  [[nodiscard]] const CharMlpConfig& config() const noexcept { return config_; }
  /// The buckets: "embed", "fc1" .. "fcL", "out", in forward order.
  [[nodiscard]] const std::vector<LayerSpec>& layers() const noexcept { return layers_; }
  [[nodiscard]] std::size_t layer_count() const noexcept { return layers_.size(); }
  [[nodiscard]] std::size_t parameter_count() const { return amsp_train::parameter_count(layers_); }

  /// Writes the initial values of layer `layer` into `out` (that layer's flat layout). Element e
  /// of layer l is a pure function of (seed, l, e), so any rank can initialise any part alone:
  /// embeddings uniform with unit variance; hidden weights uniform with std (5/3)/sqrt(fan_in)
  /// (Kaiming's gain for tanh); output weights 0.1/sqrt(H) std so that the first loss is close to
  /// ln(vocab); all biases zero.
  void init_layer(std::uint64_t seed, std::size_t layer, std::span<float> out) const {
    check_layer(layer);
    amsp::check_equal(out.size(), layers_[layer].numel(), "model.layer_size", "size of the buffer of layer " + layers_[layer].name);
    const std::size_t weights = layers_[layer].tensors[0].numel();
    double stddev = 1.0;
    if (layer == layer_count() - 1)
      stddev = 0.1 / std::sqrt(static_cast<double>(config_.hidden));
    else if (layer > 0)
      stddev = (5.0 / 3.0) / std::sqrt(static_cast<double>(fan_in(static_cast<int>(layer))));
    const double half_width = std::sqrt(3.0) * stddev;  // uniform(-a, a) has std a/sqrt(3)
    for (std::size_t e = 0; e < out.size(); ++e) {
      const double u = detail::unit_interval(detail::counter_hash(seed, layer, e));
      out[e] = e < weights ? static_cast<float>((2.0 * u - 1.0) * half_width) : 0.0f;
    }
  }

  /// Initialises every layer: layer_params[l] points at layer l's flat buffer.
  void init(std::uint64_t seed, std::span<float* const> layer_params) const {
    check_pointer_count(layer_params.size(), "parameter");
    for (std::size_t l = 0; l < layer_count(); ++l) init_layer(seed, l, {layer_params[l], layers_[l].numel()});
  }

  /// Runs the model on `batch` and returns the mean cross-entropy over its examples (nats).
  /// layer_params[l] points at layer l's parameters (flat layout); they are only read, and only
  /// between the calls before_layer(l) and before_layer(l + 1) (or the return, for the last
  /// layer), layers in order 0, 1, ..., L + 1. An engine that shards the parameters gathers layer
  /// l in before_layer(l) and may release layer l - 1 there.
  template <class BeforeLayer = detail::no_hook>
  float forward(std::span<const float* const> layer_params, ExampleView batch, BeforeLayer&& before_layer = {}) {
    check_pointer_count(layer_params.size(), "parameter");
    check_batch(batch);
    const std::size_t b = batch.size();
    const auto c = static_cast<std::size_t>(config_.context);
    const auto d = static_cast<std::size_t>(config_.embed_dim);
    const auto h = static_cast<std::size_t>(config_.hidden);
    const auto v = static_cast<std::size_t>(config_.vocab);
    const auto hidden_layers = static_cast<std::size_t>(config_.hidden_layers);
    resize(b);
    batch_rows_ = b;
    context_.assign(batch.contexts.begin(), batch.contexts.end());
    targets_.assign(batch.targets.begin(), batch.targets.end());

    before_layer(std::size_t{0});
    const float* embed = layer_params[0];
    for (std::size_t i = 0; i < b; ++i)
      for (std::size_t k = 0; k < c; ++k) {
        const float* row = embed + static_cast<std::size_t>(context_[i * c + k]) * d;
        std::copy(row, row + d, activations_[0].data() + (i * c + k) * d);
      }
    for (std::size_t l = 1; l <= hidden_layers; ++l) {
      const std::size_t in = fan_in(static_cast<int>(l));
      before_layer(l);
      const float* w = layer_params[l];
      float* a = activations_[l].data();
      detail::broadcast_rows(w + in * h, b, h, a);
      detail::gemm_accumulate(activations_[l - 1].data(), b, in, w, h, a);
      detail::tanh_inplace(a, b * h);
    }
    before_layer(hidden_layers + 1);
    const float* w_out = layer_params[hidden_layers + 1];
    detail::broadcast_rows(w_out + h * v, b, v, probs_.data());
    detail::gemm_accumulate(activations_[hidden_layers].data(), b, h, w_out, v, probs_.data());

    double loss = 0.0;
    for (std::size_t i = 0; i < b; ++i) {
      float* p = probs_.data() + i * v;
      const float max_logit = *std::max_element(p, p + v);
      const float target_logit = p[targets_[i]];
      float sum = 0.0f;
      for (std::size_t t = 0; t < v; ++t) {
        p[t] = std::exp(p[t] - max_logit);
        sum += p[t];
      }
      const float inv = 1.0f / sum;
      for (std::size_t t = 0; t < v; ++t) p[t] *= inv;
      loss += static_cast<double>(std::log(sum)) - static_cast<double>(target_logit - max_logit);
    }
    return static_cast<float>(loss / static_cast<double>(b));
  }

  /// Backward of the last forward(). layer_params must hold the same values as in that forward
  /// (they may live elsewhere now). Overwrites layer_grads[l] (flat layout of layer l) with the
  /// gradient of the mean loss, layer by layer in reverse order L + 1, L, ..., 0:
  /// - before_layer(l) is called before layer l's parameters are read (l = L + 1 .. 1: the
  ///   embedding table is never read by backward, so there is no before_layer(0));
  /// - on_layer_grad(l) is called as soon as layer l's gradient is complete; from then on this
  ///   call neither writes layer_grads[l] nor reads layer_params[l], so the caller may start
  ///   reducing that gradient and release those parameters while the earlier layers are computed.
  template <class OnLayerGrad, class BeforeLayer = detail::no_hook>
  void backward(std::span<const float* const> layer_params, std::span<float* const> layer_grads,
                OnLayerGrad&& on_layer_grad, BeforeLayer&& before_layer = {}) {
    check_pointer_count(layer_params.size(), "parameter");
    check_pointer_count(layer_grads.size(), "gradient");
    amsp::check(batch_rows_ > 0, "model.backward_without_forward", "backward() called before forward()");
    const std::size_t b = batch_rows_;
    const auto c = static_cast<std::size_t>(config_.context);
    const auto d = static_cast<std::size_t>(config_.embed_dim);
    const auto h = static_cast<std::size_t>(config_.hidden);
    const auto v = static_cast<std::size_t>(config_.vocab);
    const std::size_t last = layer_count() - 1;

    // d(mean loss)/d(logits) = (softmax − onehot) / b: the 1/b is what makes the loss a mean.
    const float inv_b = 1.0f / static_cast<float>(b);
    for (std::size_t i = 0; i < b; ++i) {
      float* g = delta_.data() + i * v;
      const float* p = probs_.data() + i * v;
      for (std::size_t t = 0; t < v; ++t) g[t] = p[t] * inv_b;
      g[targets_[i]] -= inv_b;
    }
    std::size_t width = v;  // columns of the delta currently in delta_
    for (std::size_t l = last; l >= 1; --l) {
      const std::size_t in = l == last ? h : fan_in(static_cast<int>(l));
      float* g = layer_grads[l];
      std::fill(g, g + in * width + width, 0.0f);
      detail::gemm_at_b_accumulate(activations_[l - 1].data(), b, in, delta_.data(), width, g);
      detail::sum_rows_accumulate(delta_.data(), b, width, g + in * width);
      // The gradient w.r.t. this layer's input, delta_prev = delta · Wᵀ, via an explicit
      // transpose so that the product stays in axpy form. This is the last read of W_l.
      before_layer(l);
      detail::transpose(layer_params[l], in, width, transposed_.data());
      std::fill(delta_prev_.begin(), delta_prev_.begin() + static_cast<std::ptrdiff_t>(b * in), 0.0f);
      detail::gemm_accumulate(delta_.data(), b, width, transposed_.data(), in, delta_prev_.data());
      on_layer_grad(l);
      if (l > 1) {
        const float* a = activations_[l - 1].data();  // tanh output: tanh' = 1 − a²
        for (std::size_t e = 0; e < b * in; ++e) delta_prev_[e] *= 1.0f - a[e] * a[e];
      }
      std::swap(delta_, delta_prev_);
      width = in;
    }
    float* g_embed = layer_grads[0];
    std::fill(g_embed, g_embed + v * d, 0.0f);
    for (std::size_t i = 0; i < b; ++i)
      for (std::size_t k = 0; k < c; ++k)
        detail::axpy(d, 1.0f, delta_.data() + (i * c + k) * d,
                     g_embed + static_cast<std::size_t>(context_[i * c + k]) * d);
    on_layer_grad(std::size_t{0});
  }

  /// backward() without a per-layer callback.
  void backward(std::span<const float* const> layer_params, std::span<float* const> layer_grads) {
    backward(layer_params, layer_grads, detail::no_hook{});
  }

private:
  [[nodiscard]] std::size_t fan_in(int layer) const {
    return layer == 1 ? static_cast<std::size_t>(config_.context) * static_cast<std::size_t>(config_.embed_dim)
                      : static_cast<std::size_t>(config_.hidden);
  }

  void check_layer(std::size_t layer) const {
    amsp::check(layer < layer_count(), "model.layer_index", "layer ", layer, " is outside the ", layer_count(),
                " layers of the model");
  }

  void check_pointer_count(std::size_t count, const char* what) const {
    amsp::check(count == layer_count(), "model.layer_count", "got ", count, " ", what, " pointers but the model has ",
                layer_count(), " layers");
  }

  void check_batch(ExampleView batch) const {
    amsp::check(batch.size() > 0, "model.empty_batch", "forward() needs at least one example");
    amsp::check_equal(batch.context, config_.context, "model.context", "context length of the batch");
    amsp::check_equal(batch.contexts.size(), batch.size() * static_cast<std::size_t>(config_.context),
                      "model.context", "number of context tokens of the batch");
    const auto in_vocab = [&](std::uint8_t t) { return t < config_.vocab; };
    amsp::check(std::all_of(batch.contexts.begin(), batch.contexts.end(), in_vocab) &&
                    std::all_of(batch.targets.begin(), batch.targets.end(), in_vocab),
                "model.token_range", "a token of the batch is outside the vocabulary of ", config_.vocab);
  }

  void resize(std::size_t b) {
    const auto h = static_cast<std::size_t>(config_.hidden);
    const auto v = static_cast<std::size_t>(config_.vocab);
    const std::size_t x0 = fan_in(1);
    activations_.resize(static_cast<std::size_t>(config_.hidden_layers) + 1);
    activations_[0].resize(b * x0);
    for (std::size_t l = 1; l < activations_.size(); ++l) activations_[l].resize(b * h);
    probs_.resize(b * v);
    const std::size_t widest = std::max({x0, h, v});
    delta_.resize(b * widest);
    delta_prev_.resize(b * widest);
    transposed_.resize(widest * h);  // the largest weight is (x0 or H) × (H or vocab)
  }

  CharMlpConfig config_;
  std::vector<LayerSpec> layers_;
  // State of the last forward(), read by backward().
  std::size_t batch_rows_ = 0;
  std::vector<std::uint8_t> context_;
  std::vector<std::uint8_t> targets_;
  std::vector<std::vector<float>> activations_;  // [0] = x0, [l] = a_l
  std::vector<float> probs_;
  // Scratch of backward().
  std::vector<float> delta_;
  std::vector<float> delta_prev_;
  std::vector<float> transposed_;
};

}  // namespace amsp_train
