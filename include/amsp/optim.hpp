#pragma once
// The host side of amsp's optimizer layer: update rules (AdamW, Adam, SGD with momentum, Lion),
// the fused SIMD/threaded host update, gradient-norm support, run-time rule selection and dynamic
// loss scaling.
// The CUDA kernels are opt-in: include amsp/optim/update_cuda.cuh from a .cu file.

#include "amsp/optim/adam.hpp"
#include "amsp/optim/grad_norm.hpp"
#include "amsp/optim/lion.hpp"
#include "amsp/optim/loss_scaler.hpp"
#include "amsp/optim/optimizer.hpp"
#include "amsp/optim/sgd_momentum.hpp"
#include "amsp/optim/update_host.hpp"
#include "amsp/optim/update_rule.hpp"
