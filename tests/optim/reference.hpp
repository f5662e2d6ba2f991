#pragma once
// Float64 references of the four rules, written from the published update equations
// (PyTorch's documented algorithms, the Lion paper) and independently of amsp's element-wise
// rules: they keep m_hat / v_hat explicit, apply SGD's first step as a buffer copy, and never
// call into amsp::optim.

#include <cmath>
#include <cstdint>
#include <vector>

namespace amsp_test {

/// One parameter vector and up to two state vectors, all in double. `slack[i]` is extra absolute
/// tolerance a reference grants element i when float rounding may legitimately change the result
/// by more than rounding: a discrete choice (Lion's sign of a value within rounding distance of
/// zero), or an ill-conditioned step (Adam's m / (sqrt(v) + eps) when the gradient nearly cancels
/// its L2 term and lands within a few eps of zero, where the quotient turns into a sign).
struct RefShard {
  std::vector<double> p, s0, s1, slack;
};

struct RefAdam {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;  // AdamW (true) or Adam with L2 (false)

  void step(RefShard& x, const std::vector<double>& g_in, std::int64_t t) const {
    const double bc1 = 1 - std::pow(beta1, static_cast<double>(t));
    const double bc2 = 1 - std::pow(beta2, static_cast<double>(t));
    for (std::size_t i = 0; i < x.p.size(); ++i) {
      double g = g_in[i];
      // A float implementation rounds the scaled gradient and the L2 term before adding them:
      // its g may sit this far from the exact one (about 8 float ulps of the larger term).
      double rounding = 1e-6 * std::abs(g);
      if (decoupled) x.p[i] -= lr * weight_decay * x.p[i];
      else {
        rounding = 1e-6 * (std::abs(g) + std::abs(weight_decay * x.p[i]));
        g += weight_decay * x.p[i];
      }
      const auto update = [&](double gg) {
        const double m = beta1 * x.s0[i] + (1 - beta1) * gg;
        const double v = beta2 * x.s1[i] + (1 - beta2) * gg * gg;
        return lr * (m / bc1) / (std::sqrt(v / bc2) + eps);
      };
      const double exact = update(g);
      // That rounding's effect on this step. Granted only beyond a twentieth of the harness's
      // relative tolerance (its per-step share): there the step is ill-conditioned (g nearly
      // cancels, |g| within a few eps of zero while the states are still near zero); elsewhere
      // the effect is ordinary rounding, which the tolerance covers, and slack stays 0.
      const double effect = std::max(std::abs(update(g + rounding) - exact), std::abs(update(g - rounding) - exact));
      if (effect > 1e-7 * std::abs(x.p[i])) x.slack[i] += effect;
      x.s0[i] = beta1 * x.s0[i] + (1 - beta1) * g;
      x.s1[i] = beta2 * x.s1[i] + (1 - beta2) * g * g;
      x.p[i] -= exact;
    }
  }
};

struct RefSgd {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;

  void step(RefShard& x, const std::vector<double>& g_in, std::int64_t t) const {
    for (std::size_t i = 0; i < x.p.size(); ++i) {
      double d = g_in[i] + weight_decay * x.p[i];
      if (momentum != 0) {
        if (t == 1) x.s0[i] = d;
        else x.s0[i] = momentum * x.s0[i] + (1 - dampening) * d;
        d = nesterov ? d + momentum * x.s0[i] : x.s0[i];
      }
      x.p[i] -= lr * d;
    }
  }
};

struct RefLion {
  double lr, beta1, beta2, weight_decay;

  void step(RefShard& x, const std::vector<double>& g, std::int64_t) const {
    for (std::size_t i = 0; i < x.p.size(); ++i) {
      const double c = beta1 * x.s0[i] + (1 - beta1) * g[i];
      const double sign = c > 0 ? 1.0 : (c < 0 ? -1.0 : 0.0);
      const double rounding = 1e-6 * (std::abs(beta1 * x.s0[i]) + std::abs((1 - beta1) * g[i]));
      if (std::abs(c) <= rounding) x.slack[i] += 2 * lr;
      x.p[i] = x.p[i] * (1 - lr * weight_decay) - lr * sign;
      x.s0[i] = beta2 * x.s0[i] + (1 - beta2) * g[i];
    }
  }
};

}  // namespace amsp_test
