#pragma once
// Plain host functions, defined in cuda_driver.cu (nvcc), that run amsp's CUDA optimizer code on
// device copies of host data. The doctest cases live in g++-compiled files and call these:
// doctest's macros misbehave under nvcc.

#include <cstddef>
#include <span>

#include "amsp/core/dtype.hpp"
#include "amsp/optim/update_rule.hpp"

namespace amsp_test {

/// True when a CUDA device is present.
bool cuda_device_present();

/// Copies the shard, gradients and parameters to the device (each view one element into its
/// allocation; with `misalign_grads`, the gradients two elements in, so that no index has every
/// buffer 16-byte aligned), runs update_cuda, and copies everything back.
template <class R, class G, class P>
amsp::optim::StepResult update_on_device(const R& rule, const amsp::optim::ShardState<R>& shard,
                                         std::span<const G> grads, std::span<P> params,
                                         const amsp::optim::StepOptions& opt, bool misalign_grads);

/// sum_of_squares_cuda and find_nonfinite_cuda on a device copy of `grads` (one element in).
template <class G>
double sum_of_squares_on_device(std::span<const G> grads);
template <class G>
bool nonfinite_on_device(std::span<const G> grads);

}  // namespace amsp_test
