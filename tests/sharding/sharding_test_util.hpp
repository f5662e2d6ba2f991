#pragma once
// Shared by the sharding tests: the meshes every test sweeps and a helper that runs a callable
// and returns the amsp::error it throws.

#include <array>
#include <optional>
#include <utility>

#include "amsp/core/error.hpp"
#include "amsp/sharding/mesh.hpp"

namespace amsp_test {

/// R × N for R in {1, 2, 4, 8} and N in {1, 2, 3, 4, 8, 16}.
inline constexpr std::array<int, 4> ranks_per_node_sweep{1, 2, 4, 8};
inline constexpr std::array<int, 6> nodes_sweep{1, 2, 3, 4, 8, 16};

/// Beyond the sweep: meshes whose divisors do not form chains (2 and 3 both divide 6 and 12), the
/// only ones where plan.nesting rejects plans the paper's rules admit and where a G shard splits
/// a P shard in three.
inline constexpr std::array<std::array<int, 2>, 4> non_chain_meshes{{{6, 1}, {6, 2}, {4, 12}, {1, 6}}};

/// Calls f(mesh) for every mesh of the sweep, then for the non-chain meshes.
template <class F>
void for_each_mesh(F&& f) {
  for (int r : ranks_per_node_sweep)
    for (int n : nodes_sweep) f(amsp::Mesh(r, n));
  for (const auto& [r, n] : non_chain_meshes) f(amsp::Mesh(r, n));
}

/// The amsp::error `f` throws, or nullopt when it returns.
template <class F>
std::optional<amsp::error> error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const amsp::error& e) {
    return e;
  }
  return std::nullopt;
}

}  // namespace amsp_test
