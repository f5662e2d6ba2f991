#pragma once
// The runtime plan: one sharding factor per model state (parameters P, gradients G, optimizer
// states OS), each a mesh factor s0 × s1. This is what the planner returns and configs hold;
// amsp/sharding/plan_rules.hpp says which plans are valid on a mesh.

#include <array>
#include <string>
#include <string_view>

#include "amsp/sharding/mesh.hpp"

namespace amsp {

/// The three model states, in the order their factors nest (P inside G inside OS).
enum class Component : int { params = 0, grads = 1, optimizer_states = 2 };
inline constexpr std::array<Component, 3> all_components{Component::params, Component::grads,
                                                         Component::optimizer_states};

[[nodiscard]] constexpr std::string_view name_of(Component c) {
  switch (c) {
    case Component::params: return "p";
    case Component::grads: return "g";
    case Component::optimizer_states: return "os";
  }
  return "?";
}

struct Plan {
  Factor p{};
  Factor g{};
  Factor os{};

  [[nodiscard]] constexpr const Factor& factor(Component c) const {
    return c == Component::params ? p : c == Component::grads ? g : os;
  }
  friend constexpr bool operator==(const Plan&, const Plan&) = default;
};

/// "p=1x1,g=1x1,os=8x1": the canonical spelling, accepted back by parse_plan.
[[nodiscard]] inline std::string to_string(const Plan& plan) {
  return "p=" + to_string(plan.p) + ",g=" + to_string(plan.g) + ",os=" + to_string(plan.os);
}

}  // namespace amsp
