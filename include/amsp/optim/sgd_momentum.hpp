#pragma once
// SGD with momentum (and Nesterov), PyTorch's torch.optim.SGD (non-maximize):
//
//   d   = grad * grad_scale + weight_decay * p                (L2, added to the gradient)
//   buf = d                                     at t = 1      (PyTorch clones d into a new buffer)
//   buf = momentum * buf + (1 - dampening) * d  at t > 1
//   u   = d + momentum * buf  (nesterov)   or   u = buf
//   p   = p - lr * u
//
// With momentum = 0 the buffer just holds d and u = d: plain SGD. The one state is the momentum
// buffer, written every step. The t = 1 case is folded into the coefficients (momentum 0,
// dampening factor 1), so it relies on the buffer starting at zero like every other state.

#include <cstdint>
#include <string_view>

#include "amsp/core/config.hpp"
#include "amsp/optim/simd.hpp"
#include "amsp/optim/update_rule.hpp"

namespace amsp::optim {

struct SgdMomentum {
  float lr = 1e-2f, momentum = 0.9f, dampening = 0.0f, weight_decay = 0.0f;
  bool nesterov = false;
  static constexpr int state_count = 1;  // momentum buffer
  static constexpr std::string_view name = "sgd";

  struct Coefficients {
    float lr, weight_decay;
    float buf_momentum;   // multiplies the old buffer: 0 at t = 1 and without momentum
    float buf_dampening;  // multiplies d: 1 at t = 1 and without momentum, else 1 - dampening
    float d_weight;       // u = d_weight * d + buf_weight * buf: (1, momentum) nesterov, (0, 1) not
    float buf_weight;
  };

  void validate() const {
    detail::check_range(lr >= 0.0f && detail::finite(lr), name, "lr", lr, "[0, inf)");
    detail::check_range(momentum >= 0.0f && detail::finite(momentum), name, "momentum", momentum, "[0, inf)");
    detail::check_range(dampening >= 0.0f && dampening <= 1.0f, name, "dampening", dampening, "[0, 1]");
    detail::check_range(weight_decay >= 0.0f && detail::finite(weight_decay), name, "weight_decay", weight_decay,
                        "[0, inf)");
    check(!nesterov || (momentum > 0.0f && dampening == 0.0f), "optim.hyperparameter",
          "sgd.nesterov needs momentum > 0 and dampening = 0 (momentum = ", momentum, ", dampening = ", dampening,
          ")");
  }
  [[nodiscard]] AMSP_HOST_DEVICE Coefficients coefficients(std::int64_t step) const {
    detail::check_step(step);
    const bool plain = step == 1 || momentum == 0.0f;
    return {lr,
            weight_decay,
            plain ? 0.0f : momentum,
            plain ? 1.0f : 1.0f - dampening,
            nesterov ? 1.0f : 0.0f,
            nesterov ? momentum : 1.0f};
  }
  template <class V>
  AMSP_HOST_DEVICE AMSP_FORCE_INLINE static void apply(const Coefficients& c, V& p, V g, V (&s)[1]) {
    const V d = g + c.weight_decay * p;
    s[0] = c.buf_momentum * s[0] + c.buf_dampening * d;
    p = p - c.lr * (c.d_weight * d + c.buf_weight * s[0]);
  }
};

}  // namespace amsp::optim
