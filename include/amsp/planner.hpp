#pragma once
// The planner: model and cluster descriptions, bandwidth profiles, the memory and communication
// cost models (the engine's schedule and the paper's formulas), step time / MFU, the plan search
// (the amsp-plan command line lives with its program: tools/amsp_plan).
#include "amsp/planner/bandwidth_profile.hpp"
#include "amsp/planner/cluster.hpp"
#include "amsp/planner/collective_cost.hpp"
#include "amsp/planner/comm_model.hpp"
#include "amsp/planner/compute_model.hpp"
#include "amsp/planner/schedule_options.hpp"
#include "amsp/planner/memory_model.hpp"
#include "amsp/planner/model.hpp"
#include "amsp/planner/search.hpp"
#include "amsp/planner/step_model.hpp"
#include "amsp/planner/workload.hpp"
