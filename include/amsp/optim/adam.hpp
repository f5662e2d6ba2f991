#pragma once
// Adam and AdamW. Both follow PyTorch (torch.optim.Adam / AdamW, non-amsgrad, non-maximize):
//
//   g      = grad * grad_scale (+ weight_decay * p        Adam only: L2, added to the gradient)
//   p      = p * (1 - lr * weight_decay)                  AdamW only: decoupled, before the step
//   m      = beta1 * m + (1 - beta1) * g
//   v      = beta2 * v + (1 - beta2) * g^2
//   m_hat  = m / (1 - beta1^t),  v_hat = v / (1 - beta2^t)          (t = 1-based step)
//   p      = p - lr * m_hat / (sqrt(v_hat) + eps)                   (eps outside the sqrt)
//
// Implemented as p -= step_size * m / (sqrt(v) / sqrt(1 - beta2^t) + eps) with
// step_size = lr / (1 - beta1^t), which is PyTorch's own factorisation. The two rules share one
// element-wise function, with the weight-decay term chosen at compile time.

#include <cmath>
#include <cstdint>
#include <string_view>

#include "amsp/core/config.hpp"
#include "amsp/optim/simd.hpp"
#include "amsp/optim/update_rule.hpp"

namespace amsp::optim {

namespace detail {
/// Per-step constants of the Adam family (floats, so a CUDA kernel takes them by value).
struct AdamCoefficients {
  float decay;            // multiplies p before the step: 1 - lr * wd (AdamW), 1 (Adam)
  float l2;               // added to g as l2 * p: wd (Adam), 0 (AdamW)
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float eps;
  float step_size;        // lr / (1 - beta1^t)
  float inv_sqrt_bc2;     // 1 / sqrt(1 - beta2^t)
};

template <class Rule>
void validate_adam(const Rule& r) {
  check_range(r.lr >= 0.0f && finite(r.lr), Rule::name, "lr", r.lr, "[0, inf)");
  check_range(r.beta1 >= 0.0f && r.beta1 < 1.0f, Rule::name, "beta1", r.beta1, "[0, 1)");
  check_range(r.beta2 >= 0.0f && r.beta2 < 1.0f, Rule::name, "beta2", r.beta2, "[0, 1)");
  check_range(r.eps > 0.0f && finite(r.eps), Rule::name, "eps", r.eps, "(0, inf)");
  check_range(r.weight_decay >= 0.0f && finite(r.weight_decay), Rule::name, "weight_decay", r.weight_decay,
              "[0, inf)");
}

AMSP_HOST_DEVICE inline AdamCoefficients adam_coefficients(float lr, float beta1, float beta2, float eps, double decay, float l2,
                                          std::int64_t step) {
  check_step(step);
  const double t = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), t);
  return {static_cast<float>(decay),
          l2,
          beta1,
          static_cast<float>(1.0 - static_cast<double>(beta1)),
          beta2,
          static_cast<float>(1.0 - static_cast<double>(beta2)),
          eps,
          static_cast<float>(static_cast<double>(lr) / bc1),
          static_cast<float>(1.0 / std::sqrt(bc2))};
}

/// The Adam-family element-wise rule; s[0] = m (first moment), s[1] = v (second moment).
/// Decoupled selects which of the two weight-decay terms exists at all (the other would be an
/// exact no-op, but still an instruction per element).
template <bool Decoupled, class V>
AMSP_HOST_DEVICE AMSP_FORCE_INLINE void adam_apply(const AdamCoefficients& c, V& p, V g, V (&s)[2]) {
  if constexpr (Decoupled) p = p * c.decay;
  else g = g + c.l2 * p;
  s[0] = c.beta1 * s[0] + c.one_minus_beta1 * g;
  s[1] = c.beta2 * s[1] + c.one_minus_beta2 * (g * g);
  const V denom = sqrt_of(s[1]) * c.inv_sqrt_bc2 + c.eps;
  p = p - c.step_size * (s[0] / denom);
}
}  // namespace detail

/// The Adam family, one template for both members: Decoupled = true is AdamW (decoupled weight
/// decay, Loshchilov & Hutter; PyTorch's AdamW), false is Adam with L2 regularisation (PyTorch's
/// Adam). Use the aliases AdamW and Adam; both are aggregates: AdamW{.lr = 3e-4f}.
template <bool Decoupled>
struct AdamRule {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = Decoupled ? 0.01f : 0.0f;  // PyTorch's defaults
  static constexpr int state_count = 2;           // m, v
  static constexpr std::string_view name = Decoupled ? "adamw" : "adam";
  using Coefficients = detail::AdamCoefficients;

  void validate() const { detail::validate_adam(*this); }
  [[nodiscard]] AMSP_HOST_DEVICE Coefficients coefficients(std::int64_t step) const {
    const double decay = Decoupled ? 1.0 - static_cast<double>(lr) * static_cast<double>(weight_decay) : 1.0;
    return detail::adam_coefficients(lr, beta1, beta2, eps, decay, Decoupled ? 0.0f : weight_decay, step);
  }
  template <class V>
  AMSP_HOST_DEVICE AMSP_FORCE_INLINE static void apply(const Coefficients& c, V& p, V g, V (&s)[2]) {
    detail::adam_apply<Decoupled>(c, p, g, s);
  }
};

/// AdamW: decoupled weight decay, p *= 1 - lr * weight_decay before the Adam step.
using AdamW = AdamRule<true>;
/// Adam with L2 regularisation: weight_decay * p is added to the scaled gradient.
using Adam = AdamRule<false>;

}  // namespace amsp::optim
