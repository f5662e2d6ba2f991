#pragma once
// Hand-computed cases of the engine's step decision (amsp/engine/step_decision.hpp), checked on
// the host (test_step_decision.cpp, every CI run) and on the device (test_device_ops.cpp, label
// gpu). Inputs are chosen so that every expected value follows exactly from the documented
// formulas with numbers a reader can check: sqrt(16) * 0.25 / 2 = 0.5, and so on.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "amsp/engine/step_decision.hpp"

namespace amsp_test {

struct DecisionCase {
  const char* name;
  double sum_sq, average;
  float loss_scale, max_grad_norm;
  bool skip_nonfinite;
  std::int64_t steps_before;
  amsp::StepDecision expected;
};

inline std::vector<DecisionCase> decision_cases() {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // 0.25 / (0.5 + 1e-6), the clipping coefficient of a norm of 0.5 against a threshold of 0.25.
  const float clip_half = static_cast<float>(0.25 / 0.500001);
  return {
      {"no norm needed: the sum is not looked at", 16.0, 0.25, 2.0f, 0.0f, false, 3, {0.0, 1.0f, 0.125f, false, 4}},
      {"norm for the overflow check only", 16.0, 0.25, 2.0f, 0.0f, true, 3, {0.5, 1.0f, 0.125f, false, 4}},
      {"norm under the threshold", 16.0, 0.25, 2.0f, 1.0f, false, 3, {0.5, 1.0f, 0.125f, false, 4}},
      {"norm at the threshold is not clipped", 16.0, 0.25, 2.0f, 0.5f, true, 3, {0.5, 1.0f, 0.125f, false, 4}},
      {"clipped", 16.0, 0.25, 2.0f, 0.25f, true, 3, {0.5, clip_half, 0.125f * clip_half, false, 4}},
      {"loss scale divided out before clipping", 1099511627776.0 /* 2^40 */, 1.0, 1048576.0f /* 2^20 */, 2.0f, true,
       0, {1.0, 1.0f, 1.0f / 1048576.0f, false, 1}},
      {"Inf skipped: the step does not advance", inf, 0.25, 2.0f, 1.0f, true, 3, {inf, 1.0f, 1.0f, true, 3}},
      {"NaN skipped", nan, 0.25, 2.0f, 0.0f, true, 3, {nan, 1.0f, 1.0f, true, 3}},
      {"NaN not checked without clipping or skip", nan, 0.25, 2.0f, 0.0f, false, 3, {0.0, 1.0f, 0.125f, false, 4}},
      {"NaN with clipping and no skip: not clipped, applied", nan, 0.25, 2.0f, 1.0f, false, 3,
       {nan, 1.0f, 0.125f, false, 4}},
      {"Inf with clipping and no skip: clipped to zero", inf, 0.25, 2.0f, 1.0f, false, 3, {inf, 0.0f, 0.0f, false, 4}},
  };
}

/// Same bits, except that any two NaNs match (a NaN's payload is not part of the contract).
inline bool same_value(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}
inline bool same_value(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace amsp_test
