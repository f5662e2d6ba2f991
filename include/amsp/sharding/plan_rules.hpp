#pragma once
// The one definition of plan validity (the AMSP paper's rules, arXiv 2311.00257, plus the nesting
// rule our groups need), and the enumeration of every valid plan on a mesh.
//
// Rules, checked in this order; each violation is its own amsp::error rule id:
//   plan.positive      every factor dimension is at least 1
//   plan.divides_mesh  s0_x divides R and s1_x divides N                    (paper rule 2)
//   plan.ordering      s0_p <= s0_g <= s0_os and s1_p <= s1_g <= s1_os        (paper rule 1)
//   plan.nesting       s0_p | s0_g | s0_os and s1_p | s1_g | s1_os
//   plan.node_filling  a factor spans nodes (s1_x > 1) only if s0_x = R      (paper rule 3)
//   plan.paper_gradient_factor  s_g is s_p or s_os (only in RuleSet::paper) (paper rule 4)
//
// plan.nesting is ours: the P groups must nest inside the G groups and those inside the OS groups
// (a rank never owns gradients or states of parameters it does not hold). On meshes whose sizes
// are powers of two it follows from the paper's rules 1 and 2; on e.g. 12 nodes it rejects
// s1_p = 2, s1_g = 3, which the paper's rules admit but no aligned grouping can serve.
// We lift the paper's rule 4 by default (docs/sharding.md says why).

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/sharding/plan.hpp"

namespace amsp {

enum class RuleSet {
  amsp,   ///< any s_p | s_g | s_os (the default)
  paper,  ///< additionally s_g ∈ {s_p, s_os}, as the paper restricts it "for simplicity"
};

/// The first rule `plan` breaks on `mesh`, as an error (rule id + message); nullopt when valid.
[[nodiscard]] inline std::optional<error> find_violation(const Plan& plan, const Mesh& mesh,
                                                         RuleSet rules = RuleSet::amsp) {
  const int R = mesh.ranks_per_node();
  const int N = mesh.nodes();
  const auto violation = [&](const char* rule, const auto&... parts) {
    return std::optional<error>(error(rule, detail::concat("plan ", to_string(plan), " on mesh ", to_string(mesh),
                                                           ": ", parts...)));
  };
  for (Component c : all_components) {
    const Factor& f = plan.factor(c);
    if (f.intra < 1 || f.inter < 1)
      return violation("plan.positive", "factor s_", name_of(c), " = ", f.intra, "x", f.inter,
                       " must have both dimensions at least 1");
  }
  for (Component c : all_components) {
    const Factor& f = plan.factor(c);
    if (R % f.intra != 0)
      return violation("plan.divides_mesh", "s0_", name_of(c), " = ", f.intra, " does not divide the ", R,
                       " ranks per node");
    if (N % f.inter != 0)
      return violation("plan.divides_mesh", "s1_", name_of(c), " = ", f.inter, " does not divide the ", N,
                       " nodes");
  }
  const auto ordered = [](int a, int b, int c) { return a <= b && b <= c; };
  if (!ordered(plan.p.intra, plan.g.intra, plan.os.intra))
    return violation("plan.ordering", "intra-node factors must satisfy s0_p <= s0_g <= s0_os, got ", plan.p.intra,
                     ", ", plan.g.intra, ", ", plan.os.intra);
  if (!ordered(plan.p.inter, plan.g.inter, plan.os.inter))
    return violation("plan.ordering", "inter-node factors must satisfy s1_p <= s1_g <= s1_os, got ", plan.p.inter,
                     ", ", plan.g.inter, ", ", plan.os.inter);
  const auto nested = [](int a, int b, int c) { return b % a == 0 && c % b == 0; };
  if (!nested(plan.p.intra, plan.g.intra, plan.os.intra))
    return violation("plan.nesting", "intra-node factors must divide each other (s0_p | s0_g | s0_os), got ",
                     plan.p.intra, ", ", plan.g.intra, ", ", plan.os.intra);
  if (!nested(plan.p.inter, plan.g.inter, plan.os.inter))
    return violation("plan.nesting", "inter-node factors must divide each other (s1_p | s1_g | s1_os), got ",
                     plan.p.inter, ", ", plan.g.inter, ", ", plan.os.inter);
  for (Component c : all_components) {
    const Factor& f = plan.factor(c);
    if (f.inter > 1 && f.intra != R)
      return violation("plan.node_filling", "s_", name_of(c), " = ", to_string(f), " spans ", f.inter,
                       " nodes but uses only ", f.intra, " of the ", R, " ranks per node (s0 must equal R when s1 > 1)");
  }
  if (rules == RuleSet::paper && !(plan.g == plan.p || plan.g == plan.os))
    return violation("plan.paper_gradient_factor", "the paper's rule set needs s_g = s_p or s_g = s_os, got s_g = ",
                     to_string(plan.g));
  return std::nullopt;
}

[[nodiscard]] inline bool is_valid(const Plan& plan, const Mesh& mesh, RuleSet rules = RuleSet::amsp) {
  return !find_violation(plan, mesh, rules).has_value();
}

/// Throws the amsp::error of the first rule `plan` breaks on `mesh`.
inline void validate(const Plan& plan, const Mesh& mesh, RuleSet rules = RuleSet::amsp) {
  if (auto violation = find_violation(plan, mesh, rules)) throw *violation;
}

/// Every factor a × b of the mesh that can appear in a valid plan (a | R, b | N, b > 1 only if a = R),
/// in increasing size, then increasing a.
[[nodiscard]] inline std::vector<Factor> mesh_factors(const Mesh& mesh) {
  std::vector<Factor> factors;
  for (int b = 1; b <= mesh.nodes(); ++b)
    for (int a = 1; a <= mesh.ranks_per_node(); ++a)
      if (mesh.ranks_per_node() % a == 0 && mesh.nodes() % b == 0 && (b == 1 || a == mesh.ranks_per_node()))
        factors.push_back({a, b});
  std::stable_sort(factors.begin(), factors.end(),
                   [](const Factor& x, const Factor& y) { return x.size() < y.size(); });
  return factors;
}

/// Every valid plan on the mesh, ordered by (s_p, s_g, s_os) factor order of mesh_factors.
[[nodiscard]] inline std::vector<Plan> enumerate_plans(const Mesh& mesh, RuleSet rules = RuleSet::amsp) {
  const std::vector<Factor> factors = mesh_factors(mesh);
  std::vector<Plan> plans;
  for (const Factor& p : factors)
    for (const Factor& g : factors)
      for (const Factor& os : factors)
        if (is_valid(Plan{p, g, os}, mesh, rules)) plans.push_back(Plan{p, g, os});
  return plans;
}

}  // namespace amsp
