// The engine's step decision on the host (amsp/engine/step_decision.hpp) against hand-computed
// cases; test_device_ops.cpp runs the same cases through the device kernel.
#include <doctest/doctest.h>

#include <limits>
#include <string>

#include "amsp/core/error.hpp"
#include "amsp/engine/step_decision.hpp"
#include "step_decision_cases.hpp"

TEST_CASE("step decision: hand-computed cases") {
  for (const amsp_test::DecisionCase& c : amsp_test::decision_cases()) {
    CAPTURE(c.name);
    const amsp::StepDecision d =
        amsp::decide_step(c.sum_sq, c.average, c.loss_scale, c.max_grad_norm, c.skip_nonfinite, c.steps_before);
    CHECK(amsp_test::same_value(d.grad_norm, c.expected.grad_norm));
    CHECK(amsp_test::same_value(d.clip_coefficient, c.expected.clip_coefficient));
    CHECK(amsp_test::same_value(d.grad_scale, c.expected.grad_scale));
    CHECK(d.skipped == c.expected.skipped);
    CHECK(d.step == c.expected.step);
  }
}

TEST_CASE("step decision: the clipping coefficient is about threshold / norm") {
  // An independent view of the "clipped" case: 0.25 / 0.5 = 0.5, less the 1e-6 guard.
  const amsp::StepDecision d = amsp::decide_step(16.0, 0.25, 2.0f, 0.25f, true, 0);
  CHECK(d.clip_coefficient < 0.5f);
  CHECK(d.clip_coefficient > 0.49999f);
}

TEST_CASE("step decision: the norm is needed for clipping or the overflow check only") {
  CHECK_FALSE(amsp::needs_grad_norm(0.0f, false));
  CHECK(amsp::needs_grad_norm(0.0f, true));
  CHECK(amsp::needs_grad_norm(1.0f, false));
}

TEST_CASE("step decision: a loss scale must be positive and finite") {
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    CAPTURE(bad);
    std::string rule;
    try {
      amsp::check_loss_scale(bad);
    } catch (const amsp::error& e) {
      rule = e.rule();
    }
    CHECK(rule == "engine.loss_scale");
  }
  CHECK_NOTHROW(amsp::check_loss_scale(65536.0f));
}
