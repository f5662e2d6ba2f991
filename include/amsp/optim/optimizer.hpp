#pragma once
// Choosing the rule at run time (a config file or a command line says "adamw"): a variant over
// the four rules, with parsing, the state count and a fused host update taking the states as a
// list of spans.

#include <algorithm>
#include <cstddef>
#include <span>
#include <string_view>
#include <variant>

#include "amsp/core/error.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/optim/lion.hpp"
#include "amsp/optim/sgd_momentum.hpp"
#include "amsp/optim/update_host.hpp"
#include "amsp/optim/update_rule.hpp"

namespace amsp::optim {

/// Any of the rules amsp ships, with its hyperparameters.
using AnyRule = std::variant<AdamW, Adam, SgdMomentum, Lion>;

/// Parses "adamw", "adam", "sgd" (also "sgd_momentum", "momentum") or "lion" into a rule with
/// default hyperparameters; anything else fails with "optim.parse".
[[nodiscard]] inline AnyRule parse_rule(std::string_view name) {
  if (name == "adamw") return AdamW{};
  if (name == "adam") return Adam{};
  if (name == "sgd" || name == "sgd_momentum" || name == "momentum") return SgdMomentum{};
  if (name == "lion") return Lion{};
  fail("optim.parse", "unknown optimizer '", name, "' (expected adamw, adam, sgd or lion)");
}

/// fp32 states per parameter of the rule held by `rule` (2 for Adam/AdamW, 1 for SGD and Lion).
[[nodiscard]] inline int state_count(const AnyRule& rule) {
  return std::visit([](const auto& r) { return std::remove_cvref_t<decltype(r)>::state_count; }, rule);
}

/// The canonical name of the rule ("adamw", "adam", "sgd", "lion").
[[nodiscard]] inline std::string_view rule_name(const AnyRule& rule) {
  return std::visit([](const auto& r) { return std::remove_cvref_t<decltype(r)>::name; }, rule);
}

/// The learning rate of whichever rule is held, for schedules that set it every step.
[[nodiscard]] inline float& learning_rate(AnyRule& rule) {
  return std::visit([](auto& r) -> float& { return r.lr; }, rule);
}

inline namespace AMSP_OPTIM_ISA {

/// update_host for a rule chosen at run time; `states` must hold state_count(rule) spans
/// ("optim.state_count").
template <element_type G, element_type P>
  requires grad_element<G> && param_element<P>
StepResult update_host(const AnyRule& rule, std::span<float> master, std::span<const std::span<float>> states,
                       std::span<const G> grads, std::span<P> params_out, const StepOptions& opt) {
  return std::visit(
      [&](const auto& r) {
        using R = std::remove_cvref_t<decltype(r)>;
        check(states.size() == static_cast<std::size_t>(R::state_count), "optim.state_count", R::name, " needs ",
              R::state_count, " state buffers but ", states.size(), " were given");
        ShardState<R> shard{master, {}};
        // As many as `states` holds (equal after the check): a copy of the fixed count reads past a
        // short input on the path that check() cuts off, which GCC 12 cannot always see (with
        // AVX-512 it merges two spans into one 256-bit load and reports -Warray-bounds).
        std::copy_n(states.begin(), std::min(states.size(), shard.states.size()), shard.states.begin());
        return update_host(r, shard, grads, params_out, opt);
      },
      rule);
}

}  // namespace AMSP_OPTIM_ISA

}  // namespace amsp::optim
