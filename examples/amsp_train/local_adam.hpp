#pragma once
// A plain single-process Adam(W) over per-layer buffers: the optimizer of the local trainer, the
// baseline the sharded engine's loss curves are compared with. The sharded trainer (amsp-train)
// uses amsp's own optimizer instead.

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "amsp/core/error.hpp"
#include "layer_spec.hpp"

namespace amsp_train {

struct AdamOptions {
  float lr = 3e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  ///< decoupled (AdamW), applied as p -= lr · wd · p
};

class LocalAdam {
public:
  LocalAdam(std::span<const LayerSpec> layers, AdamOptions options)
      : options_(options), m_(layers), v_(layers) {}

  /// One update of every layer's parameters from its gradient.
  void step(std::span<float* const> layer_params, std::span<const float* const> layer_grads) {
    amsp::check(layer_params.size() == m_.layer_count() && layer_grads.size() == m_.layer_count(), "optim.layer_count",
                "Adam got ", layer_params.size(), " parameter and ", layer_grads.size(), " gradient pointers for ",
                m_.layer_count(), " layers");
    ++steps_;
    const double correction1 = 1.0 - std::pow(static_cast<double>(options_.beta1), static_cast<double>(steps_));
    const double correction2 = 1.0 - std::pow(static_cast<double>(options_.beta2), static_cast<double>(steps_));
    const auto step_size = static_cast<float>(static_cast<double>(options_.lr) / correction1);
    const auto inv_sqrt_c2 = static_cast<float>(1.0 / std::sqrt(correction2));
    for (std::size_t l = 0; l < m_.layer_count(); ++l) {
      float* p = layer_params[l];
      const float* g = layer_grads[l];
      std::span<float> m = m_.layer(l);
      std::span<float> v = v_.layer(l);
      for (std::size_t e = 0; e < m.size(); ++e) {
        m[e] = options_.beta1 * m[e] + (1.0f - options_.beta1) * g[e];
        v[e] = options_.beta2 * v[e] + (1.0f - options_.beta2) * g[e] * g[e];
        p[e] -= options_.lr * options_.weight_decay * p[e];
        p[e] -= step_size * m[e] / (std::sqrt(v[e]) * inv_sqrt_c2 + options_.eps);
      }
    }
  }

private:
  AdamOptions options_;
  LayerBuffers m_;
  LayerBuffers v_;
  long long steps_ = 0;
};

}  // namespace amsp_train
