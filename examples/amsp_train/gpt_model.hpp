#pragma once
// The GPT forward and backward over per-bucket flat parameter buffers (gpt_config.hpp), with hooks
// where a sharded trainer gathers a bucket and hands its gradient over:
//
//   forward(params, tokens, targets, sequences, before_bucket)
//     calls before_bucket(b) for b = 0 (embed), 1..L (blocks), L+1 (head), each just before
//     params[b] is first read; bucket b is not read again in the forward after before_bucket(b+1).
//   backward(params, grads, before_bucket, on_gradient)
//     goes b = L+1 .. 0: before_bucket(b), then reads params[b] and WRITES (not adds) the whole
//     gradient of bucket b into grads[b] (both pointers read after the hook), then on_gradient(b):
//     that gradient is final and params[b] is not read again.
//
// The loss is the mean cross-entropy (nats per token) over the sequences × context predictions;
// backward writes the gradient of that mean. Single-threaded: one rank is one thread.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "amsp_train/attention.hpp"
#include "amsp_train/gpt_config.hpp"
#include "amsp_train/layers.hpp"

namespace amsp_train {

namespace detail {
struct no_bucket_hook {
  void operator()(std::size_t) const {}
};
}  // namespace detail

template <class T>
class Gpt {
public:
  explicit Gpt(const GptConfig& cfg) : cfg_(cfg), buckets_(gpt_buckets(cfg)) {}

  [[nodiscard]] const GptConfig& config() const { return cfg_; }
  [[nodiscard]] const std::vector<ParamBucket>& buckets() const { return buckets_; }
  [[nodiscard]] std::size_t bucket_count() const { return buckets_.size(); }
  /// Probabilities of the next byte after each position of the last forward (rows × 256).
  [[nodiscard]] std::span<const T> probabilities() const { return logits_; }

  /// Runs the model on `sequences` rows of `context` tokens; returns the mean loss against
  /// `targets` (same shape), or 0 when targets is null (inference: probabilities() only).
  template <class BeforeBucket = detail::no_bucket_hook>
  double forward(std::span<const T* const> params, const std::int32_t* tokens, const std::int32_t* targets,
                 std::size_t sequences, BeforeBucket&& before_bucket = {}) {
    check_count(params.size());
    resize(sequences);
    tokens_.assign(tokens, tokens + rows_);
    if (targets) targets_.assign(targets, targets + rows_);
    else targets_.clear();
    const std::size_t n = rows_, c = width(), layers = layer_count();
    before_bucket(0);
    embedding_forward(tokens, sequences, context(), c, params[0] + buckets_[0].offset("wte"),
                      params[0] + buckets_[0].offset("wpe"), resid_[0].data());
    for (std::size_t l = 0; l < layers; ++l) {
      before_bucket(l + 1);
      const Block p = block(params[l + 1], l + 1);
      Acts& a = acts_[l];
      layer_norm_forward(resid_[l].data(), n, c, p.ln1_g, p.ln1_b, a.ln1.data(), a.mean1.data(), a.rstd1.data());
      linear_forward(a.ln1.data(), n, c, p.qkv_w, p.qkv_b, 3 * c, a.qkv.data());
      attention_.forward(shape(), a.qkv.data(), a.probs.data(), a.atty.data());
      linear_forward(a.atty.data(), n, c, p.proj_w, p.proj_b, c, a.mid.data());
      detail::axpy(n * c, T(1), resid_[l].data(), a.mid.data());
      layer_norm_forward(a.mid.data(), n, c, p.ln2_g, p.ln2_b, a.ln2.data(), a.mean2.data(), a.rstd2.data());
      linear_forward(a.ln2.data(), n, c, p.fc_w, p.fc_b, 4 * c, a.fc.data());
      gelu_forward(a.fc.data(), n * 4 * c, a.gelu.data());
      linear_forward(a.gelu.data(), n, 4 * c, p.mlp_proj_w, p.mlp_proj_b, c, resid_[l + 1].data());
      detail::axpy(n * c, T(1), a.mid.data(), resid_[l + 1].data());
    }
    before_bucket(layers + 1);
    const ParamBucket& h = buckets_.back();
    const T* head = params[layers + 1];
    layer_norm_forward(resid_[layers].data(), n, c, head + h.offset("lnf.g"), head + h.offset("lnf.b"), lnf_.data(),
                       meanf_.data(), rstdf_.data());
    linear_forward(lnf_.data(), n, c, head + h.offset("lm_head.w"), static_cast<const T*>(nullptr), vocab(),
                   logits_.data());
    // Without targets the loss is computed against token 0 and dropped: the probabilities are the point.
    const double loss = softmax_cross_entropy(logits_.data(), n, vocab(), targets ? targets : tokens_.data());
    return targets ? loss : 0.0;
  }

  /// The gradient of the last forward's mean loss (which must have had targets).
  template <class BeforeBucket = detail::no_bucket_hook, class OnGradient = detail::no_bucket_hook>
  void backward(std::span<const T* const> params, std::span<T* const> grads, BeforeBucket&& before_bucket = {},
                OnGradient&& on_gradient = {}) {
    check_count(params.size());
    check_count(grads.size());
    amsp::check(targets_.size() == rows_, "model.no_targets", "backward needs a forward with targets");
    const std::size_t n = rows_, c = width(), layers = layer_count();
    softmax_cross_entropy_backward(logits_.data(), n, vocab(), targets_.data());
    // Head: logits = LN_f(x_L)·W_head.
    before_bucket(layers + 1);
    {
      const ParamBucket& h = buckets_.back();
      const T* head = params[layers + 1];
      T* g = zeroed(grads[layers + 1], h.numel);
      fill_zero(d_ln_);
      linear_backward(lnf_.data(), n, c, head + h.offset("lm_head.w"), vocab(), logits_.data(), d_ln_.data(),
                      g + h.offset("lm_head.w"), static_cast<T*>(nullptr), w_t_);
      fill_zero(d_resid_);
      layer_norm_backward(resid_[layers].data(), n, c, head + h.offset("lnf.g"), meanf_.data(), rstdf_.data(),
                          d_ln_.data(), d_resid_.data(), g + h.offset("lnf.g"), g + h.offset("lnf.b"));
    }
    on_gradient(layers + 1);
    for (std::size_t l = layers; l-- > 0;) {
      before_bucket(l + 1);
      const Block p = block(params[l + 1], l + 1);
      const BlockGrad g = block_grad(zeroed(grads[l + 1], buckets_[l + 1].numel), l + 1);
      Acts& a = acts_[l];
      // x_{l+1} = mid + MLP(LN2(mid)); d_resid_ holds d x_{l+1}.
      fill_zero(d_wide_);
      linear_backward(a.gelu.data(), n, 4 * c, p.mlp_proj_w, c, d_resid_.data(), d_wide_.data(), g.mlp_proj_w,
                      g.mlp_proj_b, w_t_);
      gelu_backward(a.fc.data(), n * 4 * c, d_wide_.data(), d_wide_.data());
      fill_zero(d_ln_);
      linear_backward(a.ln2.data(), n, c, p.fc_w, 4 * c, d_wide_.data(), d_ln_.data(), g.fc_w, g.fc_b, w_t_);
      layer_norm_backward(a.mid.data(), n, c, p.ln2_g, a.mean2.data(), a.rstd2.data(), d_ln_.data(),
                          d_resid_.data(), g.ln2_g, g.ln2_b);  // d_resid_ now holds d mid
      // mid = x_l + Proj(Attn(LN1(x_l))).
      fill_zero(d_atty_);
      linear_backward(a.atty.data(), n, c, p.proj_w, c, d_resid_.data(), d_atty_.data(), g.proj_w, g.proj_b, w_t_);
      attention_.backward(shape(), a.qkv.data(), a.probs.data(), d_atty_.data(), d_qkv_.data());
      fill_zero(d_ln_);
      linear_backward(a.ln1.data(), n, c, p.qkv_w, 3 * c, d_qkv_.data(), d_ln_.data(), g.qkv_w, g.qkv_b, w_t_);
      layer_norm_backward(resid_[l].data(), n, c, p.ln1_g, a.mean1.data(), a.rstd1.data(), d_ln_.data(),
                          d_resid_.data(), g.ln1_g, g.ln1_b);  // d_resid_ now holds d x_l
      on_gradient(l + 1);
    }
    before_bucket(0);
    {
      T* g = zeroed(grads[0], buckets_[0].numel);
      embedding_backward(tokens_.data(), rows_ / context(), context(), c, d_resid_.data(), g + buckets_[0].offset("wte"),
                         g + buckets_[0].offset("wpe"));
    }
    on_gradient(0);
  }

private:
  struct Block {
    const T *ln1_g, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_g, *ln2_b, *fc_w, *fc_b, *mlp_proj_w, *mlp_proj_b;
  };
  struct BlockGrad {
    T *ln1_g, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_g, *ln2_b, *fc_w, *fc_b, *mlp_proj_w, *mlp_proj_b;
  };
  /// Activations of one block, kept from the forward for the backward.
  struct Acts {
    std::vector<T> ln1, mean1, rstd1, qkv, probs, atty, mid, ln2, mean2, rstd2, fc, gelu;
  };

  template <class Ptr, class Out>
  Out tensors_of(Ptr base, std::size_t b) const {
    const ParamBucket& k = buckets_[b];
    return Out{base + k.offset("ln1.g"),      base + k.offset("ln1.b"),    base + k.offset("attn.qkv.w"),
               base + k.offset("attn.qkv.b"), base + k.offset("attn.proj.w"), base + k.offset("attn.proj.b"),
               base + k.offset("ln2.g"),      base + k.offset("ln2.b"),    base + k.offset("mlp.fc.w"),
               base + k.offset("mlp.fc.b"),   base + k.offset("mlp.proj.w"), base + k.offset("mlp.proj.b")};
  }
  Block block(const T* base, std::size_t b) const { return tensors_of<const T*, Block>(base, b); }
  BlockGrad block_grad(T* base, std::size_t b) const { return tensors_of<T*, BlockGrad>(base, b); }

  [[nodiscard]] std::size_t width() const { return static_cast<std::size_t>(cfg_.width); }
  [[nodiscard]] std::size_t context() const { return static_cast<std::size_t>(cfg_.context); }
  [[nodiscard]] std::size_t layer_count() const { return static_cast<std::size_t>(cfg_.layers); }
  [[nodiscard]] static constexpr std::size_t vocab() { return GptConfig::vocab; }
  [[nodiscard]] AttentionShape shape() const {
    return {rows_ / context(), context(), width(), static_cast<std::size_t>(cfg_.heads)};
  }

  void check_count(std::size_t pointers) const {
    amsp::check(pointers == buckets_.size(), "model.bucket_count", "the model has ", buckets_.size(),
                " buckets but ", pointers, " buffers were passed");
  }
  static T* zeroed(T* p, std::size_t n) {
    std::fill(p, p + n, T(0));
    return p;
  }
  static void fill_zero(std::vector<T>& v) { std::fill(v.begin(), v.end(), T(0)); }

  void resize(std::size_t sequences) {
    amsp::check(sequences >= 1, "model.batch", "a batch needs at least one sequence");
    rows_ = sequences * context();
    const std::size_t n = rows_, c = width();
    resid_.resize(layer_count() + 1);
    for (std::vector<T>& r : resid_) r.resize(n * c);
    acts_.resize(layer_count());
    for (Acts& a : acts_) {
      for (std::vector<T>* v : {&a.ln1, &a.atty, &a.mid, &a.ln2}) v->resize(n * c);
      for (std::vector<T>* v : {&a.mean1, &a.rstd1, &a.mean2, &a.rstd2}) v->resize(n);
      a.qkv.resize(n * 3 * c);
      a.fc.resize(n * 4 * c);
      a.gelu.resize(n * 4 * c);
      a.probs.resize(shape().probs_size());
    }
    lnf_.resize(n * c);
    meanf_.resize(n);
    rstdf_.resize(n);
    logits_.resize(n * vocab());
    d_resid_.resize(n * c);
    d_ln_.resize(n * c);
    d_atty_.resize(n * c);
    d_qkv_.resize(n * 3 * c);
    d_wide_.resize(n * 4 * c);
  }

  GptConfig cfg_;
  std::vector<ParamBucket> buckets_;
  std::size_t rows_ = 0;
  std::vector<std::int32_t> tokens_, targets_;
  std::vector<std::vector<T>> resid_;  // x_0 .. x_L: the residual stream entering each block, and its end
  std::vector<Acts> acts_;
  std::vector<T> lnf_, meanf_, rstdf_, logits_;
  std::vector<T> d_resid_, d_ln_, d_atty_, d_qkv_, d_wide_, w_t_;
  Attention<T> attention_;
};

}  // namespace amsp_train
