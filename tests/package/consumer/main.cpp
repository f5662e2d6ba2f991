// Uses the installed headers the way a training codebase would: a mesh, a plan string, its groups.
// (Only the sharding layer: the test checks the package, and the whole umbrella costs compile time.)
#include <amsp/sharding.hpp>

#include <iostream>

int main() {
  const amsp::Mesh mesh(8, 4);
  const amsp::Plan plan = amsp::parse_plan("p=4x1,g=8x1,os=8x4", mesh);
  const amsp::PlanGroups groups(mesh, plan);
  if (groups.p().group_size() != 4 || groups.spread().group_size() != 8) return 1;
  if (amsp::preset("amsp-30b", mesh) != amsp::Plan{{8, 1}, {8, 1}, {8, 4}}) return 1;
  std::cout << "plan " << amsp::to_string(plan) << " on " << amsp::to_string(mesh) << '\n';
  std::cout << "plans on 8x4: " << amsp::enumerate_plans(mesh).size() << '\n';
  return 0;
}
