#pragma once
// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"), decoupled decay:
//
//   g = grad * grad_scale
//   p = p * (1 - lr * weight_decay)
//   p = p - lr * sign(beta1 * m + (1 - beta1) * g)      sign(0) = 0 (and sign(NaN) = 0)
//   m = beta2 * m + (1 - beta2) * g
//
// No bias correction, so the step count only matters for validation.

#include <cstdint>
#include <string_view>

#include "amsp/core/config.hpp"
#include "amsp/optim/simd.hpp"
#include "amsp/optim/update_rule.hpp"

namespace amsp::optim {

struct Lion {
  float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.99f, weight_decay = 0.0f;
  static constexpr int state_count = 1;  // m
  static constexpr std::string_view name = "lion";

  struct Coefficients {
    float decay, lr, beta1, one_minus_beta1, beta2, one_minus_beta2;
  };

  void validate() const {
    detail::check_range(lr >= 0.0f && detail::finite(lr), name, "lr", lr, "[0, inf)");
    detail::check_range(beta1 >= 0.0f && beta1 <= 1.0f, name, "beta1", beta1, "[0, 1]");
    detail::check_range(beta2 >= 0.0f && beta2 <= 1.0f, name, "beta2", beta2, "[0, 1]");
    detail::check_range(weight_decay >= 0.0f && detail::finite(weight_decay), name, "weight_decay", weight_decay,
                        "[0, inf)");
  }
  [[nodiscard]] AMSP_HOST_DEVICE Coefficients coefficients(std::int64_t step) const {
    detail::check_step(step);
    return {static_cast<float>(1.0 - static_cast<double>(lr) * static_cast<double>(weight_decay)),
            lr,
            beta1,
            static_cast<float>(1.0 - static_cast<double>(beta1)),
            beta2,
            static_cast<float>(1.0 - static_cast<double>(beta2))};
  }
  template <class V>
  AMSP_HOST_DEVICE AMSP_FORCE_INLINE static void apply(const Coefficients& c, V& p, V g, V (&s)[1]) {
    p = p * c.decay - detail::signed_magnitude(c.beta1 * s[0] + c.one_minus_beta1 * g, c.lr);
    s[0] = c.beta2 * s[0] + c.one_minus_beta2 * g;
  }
};

}  // namespace amsp::optim
