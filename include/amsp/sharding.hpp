#pragma once
// The sharding model: meshes, plans, their rules, presets, policy types and rank groups.
#include "amsp/sharding/groups.hpp"
#include "amsp/sharding/layout.hpp"
#include "amsp/sharding/mesh.hpp"
#include "amsp/sharding/plan.hpp"
#include "amsp/sharding/plan_rules.hpp"
#include "amsp/sharding/policy.hpp"
#include "amsp/sharding/presets.hpp"
