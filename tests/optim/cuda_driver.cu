// Device-side half of the CUDA optimizer tests (see cuda_driver.hpp). Compiled by nvcc.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <vector>

#include "amsp/core/cuda_buffer.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/optim/grad_norm_cuda.cuh"
#include "amsp/optim/lion.hpp"
#include "amsp/optim/sgd_momentum.hpp"
#include "amsp/optim/update_cuda.cuh"
#include "cuda_driver.hpp"

namespace amsp_test {

namespace {
template <class T>
amsp::cuda_buffer<T> to_device(std::span<const T> host, std::size_t offset) {
  amsp::cuda_buffer<T> buf(host.size() + offset);
  if (!host.empty())
    amsp::detail::check_cuda(cudaMemcpy(buf.data() + offset, host.data(), host.size_bytes(), cudaMemcpyHostToDevice),
                             "cuda.runtime", "cudaMemcpy to the device");
  return buf;
}
template <class T>
void to_host(const amsp::cuda_buffer<T>& buf, std::span<T> host, std::size_t offset) {
  if (!host.empty())
    amsp::detail::check_cuda(cudaMemcpy(host.data(), buf.data() + offset, host.size_bytes(), cudaMemcpyDeviceToHost),
                             "cuda.runtime", "cudaMemcpy to the host");
}
void sync() { amsp::detail::check_cuda(cudaDeviceSynchronize(), "cuda.runtime", "cudaDeviceSynchronize"); }
}  // namespace

bool cuda_device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

template <class R, class G, class P>
amsp::optim::StepResult update_on_device(const R& rule, const amsp::optim::ShardState<R>& shard,
                                         std::span<const G> grads, std::span<P> params,
                                         const amsp::optim::StepOptions& opt, bool misalign_grads) {
  const std::size_t n = shard.master.size();
  const std::size_t grad_offset = misalign_grads ? 2 : 1;
  auto master = to_device<float>(std::span<const float>(shard.master), 1);
  std::vector<amsp::cuda_buffer<float>> states;
  amsp::optim::ShardState<R> device{{master.data() + 1, n}, {}};
  for (std::size_t k = 0; k < shard.states.size(); ++k) {
    states.push_back(to_device<float>(std::span<const float>(shard.states[k]), 1));
    device.states[k] = {states.back().data() + 1, n};
  }
  auto g = to_device<G>(grads, grad_offset);
  auto p = to_device<P>(std::span<const P>(params), 1);
  amsp::cuda_buffer<unsigned> flag(1);
  amsp::optim::update_cuda(rule, device, std::span<const G>(g.data() + grad_offset, n),
                           std::span<P>(params.empty() ? nullptr : p.data() + 1, params.size()), opt, flag.data(),
                           cudaStream_t{});
  sync();
  to_host(master, shard.master, 1);
  for (std::size_t k = 0; k < shard.states.size(); ++k) to_host(states[k], shard.states[k], 1);
  to_host(p, params, 1);
  unsigned skipped = 0;
  if (opt.skip_nonfinite) flag.copy_to_host(&skipped, 1);
  return amsp::optim::StepResult{skipped != 0};
}

template <class G>
double sum_of_squares_on_device(std::span<const G> grads) {
  auto g = to_device<G>(grads, 1);
  const std::size_t bytes = amsp::optim::sum_of_squares_cuda_workspace<G>(grads.size());
  amsp::cuda_buffer<unsigned char> workspace(bytes > 0 ? bytes : 1);
  amsp::cuda_buffer<double> result(1);
  amsp::optim::sum_of_squares_cuda(std::span<const G>(g.data() + 1, grads.size()), result.data(), workspace.data(),
                                   workspace.size(), cudaStream_t{});
  sync();
  double sum = 0;
  result.copy_to_host(&sum, 1);
  return sum;
}

template <class G>
bool nonfinite_on_device(std::span<const G> grads) {
  auto g = to_device<G>(grads, 1);
  amsp::cuda_buffer<unsigned> flag(1);
  amsp::optim::find_nonfinite_cuda(std::span<const G>(g.data() + 1, grads.size()), flag.data(), cudaStream_t{});
  sync();
  unsigned value = 0;
  flag.copy_to_host(&value, 1);
  return value != 0;
}

#define AMSP_TEST_INSTANTIATE(R, G, P)                                                                        \
  template amsp::optim::StepResult update_on_device<R, G, P>(const R&, const amsp::optim::ShardState<R>&,     \
                                                              std::span<const G>, std::span<P>,                \
                                                              const amsp::optim::StepOptions&, bool);
#define AMSP_TEST_INSTANTIATE_RULE(R)           \
  AMSP_TEST_INSTANTIATE(R, float, float)        \
  AMSP_TEST_INSTANTIATE(R, float, amsp::bf16)   \
  AMSP_TEST_INSTANTIATE(R, amsp::bf16, float)   \
  AMSP_TEST_INSTANTIATE(R, amsp::bf16, amsp::bf16)
AMSP_TEST_INSTANTIATE_RULE(amsp::optim::AdamW)
AMSP_TEST_INSTANTIATE_RULE(amsp::optim::Adam)
AMSP_TEST_INSTANTIATE_RULE(amsp::optim::SgdMomentum)
AMSP_TEST_INSTANTIATE_RULE(amsp::optim::Lion)
template double sum_of_squares_on_device<float>(std::span<const float>);
template double sum_of_squares_on_device<amsp::bf16>(std::span<const amsp::bf16>);
template bool nonfinite_on_device<float>(std::span<const float>);
template bool nonfinite_on_device<amsp::bf16>(std::span<const amsp::bf16>);

}  // namespace amsp_test
