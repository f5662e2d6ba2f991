#pragma once
// The GPT model's hyperparameters and its parameters as engine buckets: one bucket for the token
// and position embeddings, one per transformer block, one for the final LayerNorm and the output
// projection. Inside a bucket the tensors lie back to back in the order listed here (the model's
// flat layout; the trainer makes the engine use the same one), and every initial value is a pure
// function of (seed, bucket, element), so every rank and every plan starts from the same weights.
//
// The output projection is NOT tied to the token embedding (GPT-2 ties them): with 256 byte
// tokens tying would save only 256·C parameters, and untied weights keep every bucket read in one
// place of the forward, so each bucket is gathered once per forward and once per backward, its
// gradient is complete as soon as its own backward is done, and the engine's traffic model
// (gathers per micro-batch × buckets) describes the run exactly.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp_train/counter_hash.hpp"

namespace amsp_train {

struct GptConfig {
  static constexpr int vocab = 256;  ///< byte-level tokens
  int context = 64;                  ///< tokens per sequence (T)
  int width = 64;                    ///< embedding width (C)
  int heads = 4;                     ///< attention heads; C must be a multiple
  int layers = 2;                    ///< transformer blocks

  void validate() const {
    amsp::check(context >= 1 && width >= 1 && heads >= 1 && layers >= 1, "model.size",
                "context, width, heads and layers must be at least 1 (got ", context, ", ", width, ", ", heads, ", ",
                layers, ")");
    amsp::check(width % heads == 0, "model.heads", "width ", width, " is not a multiple of heads ", heads);
  }
};

/// One parameter tensor: its name inside the bucket (e.g. "attn.qkv.w"), the engine-wide name
/// (e.g. "h0.attn.qkv.w"), its shape and its offset in the bucket's flat buffer.
struct ParamTensor {
  std::string local_name, name;
  std::vector<std::size_t> shape;
  std::size_t offset = 0;
  double init_std = 0.0;  ///< normal(0, init_std); 0 for biases; LayerNorm gains start at 1
  bool gain = false;
  [[nodiscard]] std::size_t numel() const {
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d;
    return n;
  }
  /// Weight decay applies to matrices only (not to biases or LayerNorm parameters).
  [[nodiscard]] bool decays() const { return shape.size() == 2; }
};

struct ParamBucket {
  std::string name;
  std::vector<ParamTensor> tensors;
  std::size_t numel = 0;

  void add(std::string_view prefix, std::string_view local, std::vector<std::size_t> shape, double init_std,
           bool gain = false) {
    std::string full(prefix);
    full += local;
    ParamTensor t{std::string(local), std::move(full), std::move(shape), numel, init_std, gain};
    numel += t.numel();
    tensors.push_back(std::move(t));
  }
  /// Offset of the tensor named `local` (fails with model.tensor when absent).
  [[nodiscard]] std::size_t offset(std::string_view local) const {
    for (const ParamTensor& t : tensors)
      if (t.local_name == local) return t.offset;
    amsp::fail("model.tensor", "bucket '", name, "' has no tensor '", local, "'");
  }
};

/// The buckets of a GPT: "embed", "h0" .. "h{L-1}", "head".
[[nodiscard]] inline std::vector<ParamBucket> gpt_buckets(const GptConfig& cfg) {
  cfg.validate();
  const auto c = static_cast<std::size_t>(cfg.width), v = static_cast<std::size_t>(GptConfig::vocab);
  const auto t = static_cast<std::size_t>(cfg.context);
  constexpr double std_dev = 0.02;  // GPT-2's
  // GPT-2 scales the projections that write into the residual stream by 1/sqrt(2L), so that the
  // stream's variance does not grow with depth.
  const double residual_std = std_dev / std::sqrt(2.0 * cfg.layers);
  std::vector<ParamBucket> buckets;
  ParamBucket embed{"embed", {}, 0};
  embed.add("", "wte", {v, c}, std_dev);
  embed.add("", "wpe", {t, c}, std_dev);
  buckets.push_back(std::move(embed));
  for (int l = 0; l < cfg.layers; ++l) {
    std::string name = "h";  // built by appends: g++ 12 warns falsely (-Wrestrict) on "h" + string
    name += std::to_string(l);
    const std::string prefix = name + ".";
    ParamBucket block{name, {}, 0};
    block.add(prefix, "ln1.g", {c}, 0.0, true);
    block.add(prefix, "ln1.b", {c}, 0.0);
    block.add(prefix, "attn.qkv.w", {c, 3 * c}, std_dev);
    block.add(prefix, "attn.qkv.b", {3 * c}, 0.0);
    block.add(prefix, "attn.proj.w", {c, c}, residual_std);
    block.add(prefix, "attn.proj.b", {c}, 0.0);
    block.add(prefix, "ln2.g", {c}, 0.0, true);
    block.add(prefix, "ln2.b", {c}, 0.0);
    block.add(prefix, "mlp.fc.w", {c, 4 * c}, std_dev);
    block.add(prefix, "mlp.fc.b", {4 * c}, 0.0);
    block.add(prefix, "mlp.proj.w", {4 * c, c}, residual_std);
    block.add(prefix, "mlp.proj.b", {c}, 0.0);
    buckets.push_back(std::move(block));
  }
  ParamBucket head{"head", {}, 0};
  head.add("", "lnf.g", {c}, 0.0, true);
  head.add("", "lnf.b", {c}, 0.0);
  head.add("", "lm_head.w", {c, v}, std_dev);
  buckets.push_back(std::move(head));
  return buckets;
}

/// Parameters of all buckets together.
[[nodiscard]] inline std::size_t parameter_count(std::span<const ParamBucket> buckets) {
  std::size_t n = 0;
  for (const ParamBucket& b : buckets) n += b.numel;
  return n;
}

/// The initial value of bucket `b` (pure function of seed, bucket and element: Box-Muller on two
/// counter hashes per element).
template <class T>
void init_bucket(const ParamBucket& bucket, std::uint64_t seed, std::size_t b, std::span<T> out) {
  amsp::check_equal(out.size(), bucket.numel, "model.bucket_size", "size of the buffer of bucket " + bucket.name);
  for (const ParamTensor& t : bucket.tensors)
    for (std::size_t e = 0; e < t.numel(); ++e) {
      const std::size_t i = t.offset + e;
      double value = t.gain ? 1.0 : 0.0;
      if (t.init_std > 0.0) {
        const double u1 = 1.0 - detail::unit_interval(detail::counter_hash(seed, b, i, 0));  // (0, 1]
        const double u2 = detail::unit_interval(detail::counter_hash(seed, b, i, 1));
        value = t.init_std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      }
      out[i] = static_cast<T>(value);
    }
}

}  // namespace amsp_train
