// Device-side half of the device-operation tests (see device_ops_driver.hpp). Compiled by nvcc
// with --fmad=false (tests/engine/CMakeLists.txt), so that the update's float arithmetic is the
// host loop's operation for operation and the tests can demand the same bits.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "amsp/core/cuda_buffer.hpp"
#include "amsp/engine/device_ops.cuh"
#include "amsp/optim/adam.hpp"
#include "amsp/optim/lion.hpp"
#include "amsp/optim/sgd_momentum.hpp"
#include "device_ops_driver.hpp"

namespace amsp_test {

namespace ops = amsp::device_ops;

namespace {
void check(cudaError_t status, const char* what) { amsp::detail::check_cuda(status, "cuda.runtime", what); }

template <class T>
amsp::cuda_buffer<T> to_device(std::span<const T> host, std::size_t offset) {
  amsp::cuda_buffer<T> buf(host.size() + offset);
  if (!host.empty())
    check(cudaMemcpy(buf.data() + offset, host.data(), host.size_bytes(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  return buf;
}
template <class T>
void to_host(const amsp::cuda_buffer<T>& buf, std::span<T> host, std::size_t offset) {
  if (!host.empty())
    check(cudaMemcpy(host.data(), buf.data() + offset, host.size_bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

amsp::cuda_buffer<ops::StepControl> control_on_device(const ControlValues& v) {
  const ops::StepControl c{v.sum_sq, v.grad_norm, v.clip_coefficient, v.grad_scale, v.skipped, v.step};
  return to_device<ops::StepControl>(std::span<const ops::StepControl>(&c, 1), 0);
}
ControlValues control_values(const amsp::cuda_buffer<ops::StepControl>& buf) {
  ops::StepControl c{};
  buf.copy_to_host(&c, 1);
  return {c.sum_sq, c.grad_norm, c.clip_coefficient, c.grad_scale, c.skipped, c.step};
}

/// A non-blocking stream: the operations must be ordered by the stream they are given, not by
/// the legacy default stream's implicit synchronisation. Created after the inputs are on the
/// device: the constructor waits for the setup copies and memsets (legacy stream, which a
/// non-blocking stream is not ordered after; a pageable cudaMemcpy may return before its DMA ends).
struct Stream {
  cudaStream_t s{};
  Stream() {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~Stream() { (void)cudaStreamDestroy(s); }
  void sync() const { check(cudaStreamSynchronize(s), "cudaStreamSynchronize"); }
};

/// Device copies of a shard (master, states), gradients and parameters, `offset` elements in.
template <class R, class P>
struct DeviceShard {
  std::size_t n, offset;
  amsp::cuda_buffer<float> master, grads;
  std::vector<amsp::cuda_buffer<float>> states;
  amsp::cuda_buffer<P> params;
  amsp::optim::ShardState<R> view;
  DeviceShard(const amsp::optim::ShardState<R>& shard, std::span<const float> g, std::span<const P> p, std::size_t off)
      : n(shard.master.size()),
        offset(off),
        master(to_device<float>(shard.master, off)),
        grads(to_device<float>(g, off)),
        params(to_device<P>(p, off)) {
    view.master = {master.data() + off, n};
    for (std::size_t k = 0; k < shard.states.size(); ++k) {
      states.push_back(to_device<float>(shard.states[k], off));
      view.states[k] = {states.back().data() + off, n};
    }
  }
  P* param_pointer(std::size_t count) { return count == 0 ? nullptr : params.data() + offset; }
  void copy_back(const amsp::optim::ShardState<R>& shard, std::span<P> p) {
    to_host(master, shard.master, offset);
    for (std::size_t k = 0; k < shard.states.size(); ++k) to_host(states[k], shard.states[k], offset);
    to_host(params, p, offset);
  }
};
}  // namespace

bool device_ops_gpu_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

template <class From, class To>
std::vector<To> convert_on_device(std::span<const From> in, std::size_t offset) {
  auto d_in = to_device<From>(in, offset);
  amsp::cuda_buffer<To> d_out(in.size() + offset);
  Stream stream;
  ops::convert(d_in.data() + offset, d_out.data() + offset, in.size(), stream.s);
  stream.sync();
  std::vector<To> out(in.size());
  to_host(d_out, std::span<To>(out), offset);
  return out;
}

template <class G>
std::vector<G> accumulate_on_device(std::span<const G> g, std::span<const float> z, bool first, std::size_t offset) {
  auto d_g = to_device<G>(g, offset);
  auto d_z = to_device<float>(z, offset);
  Stream stream;
  ops::accumulate(d_g.data() + offset, d_z.data() + offset, g.size(), first, stream.s);
  stream.sync();
  std::vector<G> out(g.size());
  to_host(d_g, std::span<G>(out), offset);
  return out;
}

template <class G>
ControlValues add_sum_of_squares_on_device(const ControlValues& before, const std::vector<std::vector<G>>& parts,
                                           bool reset_first) {
  auto control = control_on_device(before);
  std::size_t largest = 0;
  for (const auto& p : parts) largest = std::max(largest, p.size());
  const std::size_t bytes = ops::sum_of_squares_workspace<G>(largest);
  amsp::cuda_buffer<unsigned char> workspace(bytes);
  std::vector<amsp::cuda_buffer<G>> device_parts;
  for (const auto& p : parts) device_parts.push_back(to_device<G>(std::span<const G>(p), 0));
  Stream stream;
  if (reset_first) ops::reset_sum_of_squares(control.data(), stream.s);
  for (std::size_t i = 0; i < parts.size(); ++i)
    ops::add_sum_of_squares(device_parts[i].data(), parts[i].size(), control.data(), workspace.data(), bytes,
                            stream.s);
  stream.sync();
  return control_values(control);
}

ControlValues decide_on_device(const ControlValues& before, double average, float loss_scale, float max_grad_norm,
                               bool skip_nonfinite) {
  auto control = control_on_device(before);
  Stream stream;
  ops::decide_step(control.data(), average, loss_scale, max_grad_norm, skip_nonfinite, stream.s);
  stream.sync();
  return control_values(control);
}

ControlValues set_step_and_sum_on_device(const ControlValues& before, std::int64_t steps, double sum_sq) {
  auto control = control_on_device(before);
  Stream stream;
  ops::set_step(control.data(), steps, stream.s);
  check(cudaMemcpyAsync(ops::sum_sq_word(control.data()), &sum_sq, sizeof sum_sq, cudaMemcpyHostToDevice, stream.s),
        "cudaMemcpyAsync");
  stream.sync();
  return control_values(control);
}

amsp::StepResult step_result_of(const ControlValues& v) {
  return ops::step_result(ops::StepControl{v.sum_sq, v.grad_norm, v.clip_coefficient, v.grad_scale, v.skipped, v.step});
}

template <class R, class P>
void update_on_device(const R& rule, const amsp::optim::ShardState<R>& shard, std::span<const float> grads,
                      std::span<P> params, const ControlValues& control, std::size_t offset) {
  DeviceShard<R, P> d(shard, grads, std::span<const P>(params), offset);
  auto c = control_on_device(control);
  Stream stream;
  ops::update(rule, d.view, d.grads.data() + offset, d.param_pointer(params.size()), d.n, c.data(), stream.s);
  stream.sync();
  d.copy_back(shard, params);
}

template <class R, class P>
ControlValues step_on_device(const R& rule, const amsp::optim::ShardState<R>& shard, std::span<const float> grads,
                             std::span<P> params, const ControlValues& before, double average, float loss_scale,
                             float max_grad_norm, bool skip_nonfinite) {
  DeviceShard<R, P> d(shard, grads, std::span<const P>(params), 0);
  auto c = control_on_device(before);
  const std::size_t bytes = ops::sum_of_squares_workspace<float>(d.n);
  amsp::cuda_buffer<unsigned char> workspace(bytes);
  Stream stream;
  ops::reset_sum_of_squares(c.data(), stream.s);
  ops::add_sum_of_squares(d.grads.data(), d.n, c.data(), workspace.data(), bytes, stream.s);
  ops::decide_step(c.data(), average, loss_scale, max_grad_norm, skip_nonfinite, stream.s);
  ops::update(rule, d.view, d.grads.data(), d.param_pointer(params.size()), d.n, c.data(), stream.s);
  stream.sync();
  d.copy_back(shard, params);
  return control_values(c);
}

#define AMSP_TEST_CONVERT(From, To) \
  template std::vector<To> convert_on_device<From, To>(std::span<const From>, std::size_t);
AMSP_TEST_CONVERT(float, float)
AMSP_TEST_CONVERT(float, amsp::bf16)
AMSP_TEST_CONVERT(float, amsp::fp16)
AMSP_TEST_CONVERT(amsp::bf16, float)
AMSP_TEST_CONVERT(amsp::fp16, float)
AMSP_TEST_CONVERT(amsp::fp16, amsp::bf16)
AMSP_TEST_CONVERT(double, float)
AMSP_TEST_CONVERT(double, amsp::bf16)

template std::vector<float> accumulate_on_device<float>(std::span<const float>, std::span<const float>, bool,
                                                        std::size_t);
template std::vector<amsp::bf16> accumulate_on_device<amsp::bf16>(std::span<const amsp::bf16>, std::span<const float>,
                                                                  bool, std::size_t);
template ControlValues add_sum_of_squares_on_device<float>(const ControlValues&, const std::vector<std::vector<float>>&,
                                                           bool);
template ControlValues add_sum_of_squares_on_device<amsp::bf16>(const ControlValues&,
                                                                const std::vector<std::vector<amsp::bf16>>&, bool);

#define AMSP_TEST_UPDATE(R, P)                                                                                      \
  template void update_on_device<R, P>(const R&, const amsp::optim::ShardState<R>&, std::span<const float>,        \
                                       std::span<P>, const ControlValues&, std::size_t);                           \
  template ControlValues step_on_device<R, P>(const R&, const amsp::optim::ShardState<R>&, std::span<const float>, \
                                              std::span<P>, const ControlValues&, double, float, float, bool);
AMSP_TEST_UPDATE(amsp::optim::AdamW, float)
AMSP_TEST_UPDATE(amsp::optim::AdamW, amsp::bf16)
AMSP_TEST_UPDATE(amsp::optim::Adam, float)
AMSP_TEST_UPDATE(amsp::optim::SgdMomentum, amsp::bf16)
AMSP_TEST_UPDATE(amsp::optim::Lion, float)

}  // namespace amsp_test
