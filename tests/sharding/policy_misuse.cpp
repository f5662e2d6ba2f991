// Uses of the policy types that must not compile, one per AMSP_MISUSE value; ctest compiles each
// and expects the compiler's error to match (tests/sharding/CMakeLists.txt). AMSP_MISUSE=0 is
// the correct use of the same names and is compiled in the normal build, so a failure of the
// others cannot come from a broken file.
#include "amsp/sharding/policy.hpp"

#ifndef AMSP_MISUSE
#define AMSP_MISUSE 0
#endif

namespace policy_misuse {

[[maybe_unused]] inline amsp::Plan use(const amsp::Mesh& mesh) {
#if AMSP_MISUSE == 0
  constexpr amsp::ShardPolicy<amsp::Partial> partial{amsp::Factor{4, 1}};
  return amsp::plan_of(amsp::ShardPolicy<amsp::Replica>{}, partial, amsp::ShardPolicy<amsp::Full>{}, mesh);
#elif AMSP_MISUSE == 1
  // A Partial without its group: no default.
  return amsp::plan_of(amsp::ShardPolicy<amsp::Replica>{}, amsp::ShardPolicy<amsp::Partial>{},
                       amsp::ShardPolicy<amsp::Full>{}, mesh);
#elif AMSP_MISUSE == 2
  // Full takes no factor: it is the whole mesh.
  return amsp::plan_of(amsp::ShardPolicy<amsp::Replica>{}, amsp::ShardPolicy<amsp::Replica>{},
                       amsp::ShardPolicy<amsp::Full>{amsp::Factor{8, 4}}, mesh);
#elif AMSP_MISUSE == 3
  // A 1x1 Partial group is Replica: rejected in a constant expression.
  constexpr amsp::ShardPolicy<amsp::Partial> partial{amsp::Factor{1, 1}};
  return amsp::plan_of(amsp::ShardPolicy<amsp::Replica>{}, partial, amsp::ShardPolicy<amsp::Full>{}, mesh);
#elif AMSP_MISUSE == 4
  // Without the mesh, Full has no size.
  (void)mesh;
  return amsp::plan_of(amsp::ShardPolicy<amsp::Replica>{}, amsp::ShardPolicy<amsp::Replica>{},
                       amsp::ShardPolicy<amsp::Full>{});
#elif AMSP_MISUSE == 5
  // A kind that is not a policy.
  (void)mesh;
  return amsp::plan_of(amsp::ShardPolicy<int>{}, amsp::ShardPolicy<amsp::Replica>{}, amsp::ShardPolicy<amsp::Full>{},
                       mesh);
#endif
}

}  // namespace policy_misuse
