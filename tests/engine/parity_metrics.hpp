#pragma once
// How the engine tests compare two runs' final parameters (docs/engine.md states the
// tolerances). Per tensor, the largest absolute difference is measured against the tensor's
// scale (its largest magnitude): an element-wise ratio would be meaningless for values that
// cancel to near zero, whose rounding error is set by the size of the terms that cancelled.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace amsp::test {

/// max over tensors of max_i |got - want| / unit(max_i |want|).
template <class Got, class Want, class Unit>
double worst_tensor_error(const Got& got, const Want& want, Unit&& unit) {
  double worst = 0.0;
  for (std::size_t t = 0; t < want.size(); ++t) {
    double err = 0.0, scale = 0.0;
    for (std::size_t i = 0; i < want[t].size(); ++i) {
      err = std::max(err, std::abs(double(got[t][i]) - double(want[t][i])));
      scale = std::max(scale, std::abs(double(want[t][i])));
    }
    worst = std::max(worst, err / unit(scale));
  }
  return worst;
}

/// The infinity-norm relative error, worst over tensors.
template <class Got, class Want>
double max_relative_error(const Got& got, const Want& want) {
  return worst_tensor_error(got, want, [](double scale) { return scale; });
}

/// The error in units of one bf16 ulp at the tensor's largest magnitude
/// (ulp(x) = 2^(floor(log2 x) - 7): bf16 keeps 7 fraction bits).
template <class Got, class Want>
double max_error_in_bf16_ulps(const Got& got, const Want& want) {
  return worst_tensor_error(got, want, [](double scale) { return std::ldexp(1.0, std::ilogb(scale) - 7); });
}

/// Same tensors, same bits.
inline bool bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t t = 0; t < a.size(); ++t)
    if (a[t].size() != b[t].size() ||
        (!a[t].empty() && std::memcmp(a[t].data(), b[t].data(), a[t].size() * sizeof(float)) != 0))  // a rank may own no OS
      return false;
  return true;
}

}  // namespace amsp::test
