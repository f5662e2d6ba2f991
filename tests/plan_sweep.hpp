#pragma once
// The sweep most parity tests run: every valid plan of a mesh in each optimizer-state layout that
// the plan supports (whole-tensor needs s_g = s_p: amsp::layout_supports). One definition, so that
// a new layout or a change of the rule reaches every sweep.

#include "amsp/engine/options.hpp"
#include "amsp/sharding.hpp"

namespace amsp::test {

/// Calls visit(plan, layout) for every plan of enumerate_plans(mesh) and every layout it supports.
template <class Visit>
void for_each_plan_and_layout(const amsp::Mesh& mesh, Visit&& visit) {
  for (const amsp::Plan& plan : amsp::enumerate_plans(mesh))
    for (amsp::OsLayout layout : {amsp::OsLayout::even_split, amsp::OsLayout::whole_tensor})
      if (amsp::layout_supports(layout, plan)) visit(plan, layout);
}

}  // namespace amsp::test
