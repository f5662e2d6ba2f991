#pragma once
// The stream-ordered device operations of the engine's CUDA space: what a step does to device
// memory besides the collectives (dtype conversion of the gradients handed in, accumulation over
// micro-batches, the sum of squares for the global norm, the step decision, the fused update).
// Every function enqueues on `stream` and returns: none synchronises with the host, none allocates
// (scratch is passed in, sized by a *_workspace function the engine calls at construction).
//
// Same bits as the host engine: conversions are amsp/core/dtype.hpp's to_float/from_float (the
// host's code, host and device), the step decision is amsp/engine/step_decision.hpp's decide_step
// run by one device thread, and the update is R::apply with the coefficients computed on the
// device by R::coefficients from the step counter in device memory (amsp/optim/update_cuda.cuh).
// What can differ: nvcc contracts a * b + c into FMAs in the update (--fmad=false removes that,
// see update_cuda.cuh); CUDA's double pow may differ from glibc's in the last bit of a double,
// which moves a float coefficient only when that bit decides its rounding; and the sum of squares
// adds in a different order than the host loop (both in double, each deterministic).
//
// The per-step sequence a CUDA space enqueues on one stream:
//   reset_sum_of_squares(control)                    sum_sq = 0
//   add_sum_of_squares(grads of bucket b, control)   for each bucket's OS-shard gradients
//   (AllReduce of sum_sq_word(control) over the OS group: the engine's collective)
//   decide_step(control, ...)                        norm, clip, grad_scale, skipped, step
//   update(rule of the run, ..., control)            for each run of each bucket; nothing if skipped
// and the host reads a StepControl (cudaMemcpyAsync + an event) only when it wants the StepResult.

#if !defined(__CUDACC__)
#error "amsp/engine/device_ops.cuh holds CUDA kernels: include it from a .cu file compiled by nvcc"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "amsp/core/cuda_check.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"
#include "amsp/engine/options.hpp"
#include "amsp/engine/step_decision.hpp"
#include "amsp/optim/cuda_lanes.cuh"
#include "amsp/optim/grad_norm_cuda.cuh"
#include "amsp/optim/update_cuda.cuh"
#include "amsp/optim/update_rule.hpp"

namespace amsp::device_ops {

/// The step's state on the device, one per engine, in device memory (a zeroed cuda_buffer of one
/// element is a fresh engine: no steps, sum 0). Written by the functions below, read by the update.
struct StepControl {
  double sum_sq;           ///< sum of squares of this rank's OS-shard gradients, then (after the
                           ///< engine's AllReduce over the OS group) of all of them
  double grad_norm;        ///< sqrt(sum_sq) * average / loss_scale (0 when no norm is needed)
  float clip_coefficient;  ///< 1 unless clipped
  float grad_scale;        ///< what the update multiplies every gradient by
  unsigned skipped;        ///< 1: the update does nothing and step did not advance
  std::int64_t step;       ///< applied steps so far
};
static_assert(std::is_trivially_copyable_v<StepControl>);

/// The StepResult of a StepControl copied to the host (e.g. by cudaMemcpyAsync after the step).
[[nodiscard]] inline StepResult step_result(const StepControl& host_copy) {
  return StepResult{host_copy.skipped != 0u, host_copy.grad_norm, host_copy.clip_coefficient, host_copy.step};
}

namespace detail {

using optim::detail::cuda_block;
using optim::detail::grid_for;

using optim::detail::cuda_lanes;

/// Types the kernels move eight at a time with 16-byte loads and stores (load8/store8 widen and
/// round exactly as to_float/from_float); other dtypes take the one-element path throughout.
template <class T>
inline constexpr bool lane_type = std::is_same_v<T, float> || std::is_same_v<T, bf16>;

template <class From, class To>
__global__ void __launch_bounds__(cuda_block)
    convert_kernel(const From* in, To* out, std::size_t n, std::size_t head, std::size_t vectors) {
  optim::detail::walk_lane_groups(
      n, head, vectors,
      [&](std::size_t i) {
        if constexpr (lane_type<From> && lane_type<To>) {
          float x[cuda_lanes];
          optim::detail::load8(in + i, x);
          optim::detail::store8(out + i, x);
        }
      },
      [&](std::size_t i) { out[i] = from_float<To>(to_float(in[i])); });
}

template <class G>
__global__ void __launch_bounds__(cuda_block)
    accumulate_kernel(G* g, const float* z, std::size_t n, bool first, std::size_t head, std::size_t vectors) {
  optim::detail::walk_lane_groups(
      n, head, vectors,
      [&](std::size_t i) {
        float sum[cuda_lanes];
        optim::detail::load8(z + i, sum);
        if (!first) {
          float old[cuda_lanes];
          optim::detail::load8(g + i, old);
          for (int l = 0; l < cuda_lanes; ++l) sum[l] = old[l] + sum[l];
        }
        optim::detail::store8(g + i, sum);
      },
      [&](std::size_t i) { g[i] = first ? from_float<G>(z[i]) : from_float<G>(to_float(g[i]) + z[i]); });
}

// The one-thread kernels are templates (on the control type, always StepControl) only so that
// every translation unit including this header may define them: a non-template __global__
// function defined in a header is a duplicate symbol when two .cu files of a program include it.
template <class Control>
__global__ void add_partial_kernel(Control* control, const double* partial) {
  control->sum_sq += *partial;
}

template <class Control>
__global__ void decide_step_kernel(Control* control, double average, float loss_scale, float max_grad_norm,
                                   bool skip_nonfinite) {
  const StepDecision d =
      amsp::decide_step(control->sum_sq, average, loss_scale, max_grad_norm, skip_nonfinite, control->step);
  control->grad_norm = d.grad_norm;
  control->clip_coefficient = d.clip_coefficient;
  control->grad_scale = d.grad_scale;
  control->skipped = d.skipped ? 1u : 0u;
  control->step = d.step;
}

template <class Control>
__global__ void set_step_kernel(Control* control, std::int64_t step) {
  control->step = step;
}

/// Where add_sum_of_squares keeps the bucket's partial sum inside its workspace; CUB's scratch
/// follows at this offset (CUB's own alignment).
inline constexpr std::size_t partial_bytes = 256;

template <class T>
T* field(StepControl* control, std::size_t offset) {
  return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(control) + offset);
}
template <class T>
const T* field(const StepControl* control, std::size_t offset) {
  return reinterpret_cast<const T*>(reinterpret_cast<const unsigned char*>(control) + offset);
}

inline void check_control(const void* control, const char* operation) {
  check(control != nullptr, "engine.device_control", operation, " needs the engine's device StepControl");
}

inline void check_launch(const char* kernel) {
  amsp::detail::check_cuda(cudaGetLastError(), "cuda.launch", kernel);
}

/// Loads `kernel` into the current context now (amsp::detail::load_cuda_kernel).
template <class Kernel>
void load_kernel(Kernel* kernel, const char* name) {
  amsp::detail::load_cuda_kernel(reinterpret_cast<const void*>(kernel), "cuda.runtime", name);
}

template <class From, class... To>
void load_converts_from() {
  (load_kernel(&convert_kernel<From, To>, "device_ops::convert"), ...);
}

}  // namespace detail

// ---- gradient handling ----------------------------------------------------------------------

/// Zeroes n elements of device memory (cudaMemsetAsync: all-zero bits are +0 in every dtype).
template <class T>
void fill_zero(T* data, std::size_t n, cudaStream_t stream) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (n == 0) return;
  amsp::detail::check_cuda(cudaMemsetAsync(data, 0, n * sizeof(T), stream), "cuda.runtime", "cudaMemsetAsync of ",
                           n * sizeof(T), " bytes");
}

/// out[i] = from_float<To>(to_float(in[i])): the host engine's conversion of a gradient handed in
/// as From into the engine's dtype To (either may be float, double, bf16 or fp16; float and bf16
/// pairs move eight elements per 16-byte access).
template <element_type From, element_type To>
void convert(const From* in, To* out, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  constexpr bool by_eight = detail::lane_type<From> && detail::lane_type<To>;
  const std::size_t head = by_eight ? optim::detail::vector_head(n, in, out) : n;
  const std::size_t vectors = optim::detail::lane_groups(n, head);
  const unsigned grid = detail::grid_for(optim::detail::lane_items(n, vectors));
  detail::convert_kernel<From, To><<<grid, detail::cuda_block, 0, stream>>>(in, out, n, head, vectors);
  detail::check_launch("device_ops::convert kernel");
}

/// Accumulates the reduced fp32 gradients z into the G shard g: the first micro-batch writes
/// g = from_float<G>(z), later ones g = from_float<G>(to_float(g) + z) (the host engine's rounding).
template <optim::grad_element G>
void accumulate(G* g, const float* z, std::size_t n, bool first, cudaStream_t stream) {
  if (n == 0) return;
  const std::size_t head = optim::detail::vector_head(n, g, z);
  const std::size_t vectors = optim::detail::lane_groups(n, head);
  const unsigned grid = detail::grid_for(optim::detail::lane_items(n, vectors));
  detail::accumulate_kernel<G><<<grid, detail::cuda_block, 0, stream>>>(g, z, n, first, head, vectors);
  detail::check_launch("device_ops::accumulate kernel");
}

// ---- the step decision on the device --------------------------------------------------------

/// Bytes of device workspace add_sum_of_squares needs for up to n gradients of type G (call at
/// construction with the largest OS shard of a bucket; the workspace is reused bucket after bucket).
template <optim::grad_element G = float>
[[nodiscard]] std::size_t sum_of_squares_workspace(std::size_t n) {
  return detail::partial_bytes + optim::sum_of_squares_cuda_workspace<G>(n);
}

/// The device address of control->sum_sq: the buffer of the engine's AllReduce over the OS group
/// between the last add_sum_of_squares and decide_step (one double, sum).
[[nodiscard]] inline double* sum_sq_word(StepControl* control) {
  detail::check_control(control, "sum_sq_word");
  return detail::field<double>(control, offsetof(StepControl, sum_sq));
}

/// Sets control->sum_sq to 0 (before the first add_sum_of_squares of a step).
inline void reset_sum_of_squares(StepControl* control, cudaStream_t stream) {
  detail::check_control(control, "reset_sum_of_squares");
  amsp::detail::check_cuda(cudaMemsetAsync(sum_sq_word(control), 0, sizeof(double), stream), "cuda.runtime",
                           "cudaMemsetAsync of StepControl::sum_sq");
}

/// Adds the sum of squares of n device gradients (squared and summed in double by CUB, the same
/// order every run) to control->sum_sq. `workspace` holds sum_of_squares_workspace<G>(n) bytes.
template <optim::grad_element G>
void add_sum_of_squares(const G* grads, std::size_t n, StepControl* control, void* workspace,
                        std::size_t workspace_bytes, cudaStream_t stream) {
  detail::check_control(control, "add_sum_of_squares");
  const std::size_t needed = sum_of_squares_workspace<G>(n);
  check(workspace != nullptr && workspace_bytes >= needed, "optim.cuda_workspace", "add_sum_of_squares of ", n,
        " gradients needs ", needed, " bytes of workspace but got ", workspace_bytes);
  if (n == 0) return;
  auto* partial = static_cast<double*>(workspace);
  optim::sum_of_squares_cuda(std::span<const G>(grads, n), partial,
                             static_cast<unsigned char*>(workspace) + detail::partial_bytes,
                             workspace_bytes - detail::partial_bytes, stream);
  detail::add_partial_kernel<StepControl><<<1, 1, 0, stream>>>(control, partial);
  detail::check_launch("device_ops::add_sum_of_squares kernel");
}

/// One device thread decides the step from control->sum_sq with amsp::decide_step (the host
/// engine's definition): writes grad_norm, clip_coefficient, grad_scale, skipped, and advances
/// step unless skipped. `average` is 1 / (world size x micro-batches) or 1. Throws amsp::error for
/// a loss scale that is not positive and finite (engine.loss_scale), before enqueuing anything.
inline void decide_step(StepControl* control, double average, float loss_scale, float max_grad_norm,
                        bool skip_nonfinite, cudaStream_t stream) {
  detail::check_control(control, "decide_step");
  check_loss_scale(loss_scale);
  detail::decide_step_kernel<StepControl>
      <<<1, 1, 0, stream>>>(control, average, loss_scale, max_grad_norm, skip_nonfinite);
  detail::check_launch("device_ops::decide_step kernel");
}

/// Sets the applied-step counter (an engine restored from a checkpoint), stream-ordered.
inline void set_step(StepControl* control, std::int64_t step, cudaStream_t stream) {
  detail::check_control(control, "set_step");
  check(step >= 0, "engine.step_count", "step count ", step, " must be >= 0");
  detail::set_step_kernel<StepControl><<<1, 1, 0, stream>>>(control, step);
  detail::check_launch("device_ops::set_step kernel");
}

// ---- the fused update -----------------------------------------------------------------------

/// The fused update of one run of an OS shard (n elements): reads grad_scale, skipped and step from
/// `control` on the device (after decide_step on the same stream), computes the rule's
/// coefficients there with R::coefficients, and writes master, states and, unless params is null,
/// the P-store parameters (P = float or bf16). A skipped step touches nothing.
template <optim::update_rule R, optim::grad_element G, optim::param_element P>
void update(const R& rule, const optim::ShardState<R>& shard, const G* grads, P* params, std::size_t n,
            const StepControl* control, cudaStream_t stream) {
  detail::check_control(control, "update");
  const optim::DeviceStepControl words{detail::field<unsigned>(control, offsetof(StepControl, skipped)),
                                       detail::field<float>(control, offsetof(StepControl, grad_scale)),
                                       detail::field<std::int64_t>(control, offsetof(StepControl, step))};
  optim::update_cuda(rule, shard, std::span<const G>(grads, n), std::span<P>(params, params != nullptr ? n : 0),
                     words, stream);
}

// ---- loading every kernel up front -----------------------------------------------------------

/// Loads, on the current device, every kernel the engine's streams launch for rule R with P-store
/// parameters P, and runs CUB's sum of squares once on a few and on many elements (its kernels
/// have no name to load them by). Why: CUDA's lazy loading (the default since CUDA 12.2) loads a
/// kernel at its first launch, and loading may synchronise the whole context. A CudaAsync engine
/// makes the user's stream wait, on the device, for tasks its workers have not run yet; if such
/// a task launched a kernel for the first time, the load would wait for that spinning wait, which
/// waits for the task: a deadlock. Called by the engine at construction, before any such wait.
/// `stream`: where the sums of squares run (synchronised before returning).
template <optim::update_rule R, optim::param_element P>
void preload_kernels(cudaStream_t stream) {
  detail::load_converts_from<float, float, double, bf16, fp16>();
  detail::load_converts_from<double, float, double, bf16, fp16>();
  detail::load_converts_from<bf16, float, double, bf16, fp16>();
  detail::load_converts_from<fp16, float, double, bf16, fp16>();
  detail::load_kernel(&detail::accumulate_kernel<float>, "device_ops::accumulate");
  detail::load_kernel(&detail::accumulate_kernel<bf16>, "device_ops::accumulate");
  detail::load_kernel(&detail::add_partial_kernel<StepControl>, "device_ops::add_sum_of_squares");
  detail::load_kernel(&detail::decide_step_kernel<StepControl>, "device_ops::decide_step");
  detail::load_kernel(&detail::set_step_kernel<StepControl>, "device_ops::set_step");
  detail::load_kernel(&optim::detail::update_kernel<R, float, P, optim::detail::ControlInDeviceMemory<R>>,
                      "the fused update");
  // CUB picks a one-block kernel for few elements and two passes for many.
  for (const std::size_t n : {std::size_t{1}, std::size_t{1} << 22}) {
    const std::size_t workspace_bytes = optim::sum_of_squares_cuda_workspace<float>(n);
    void* memory = nullptr;
    const std::size_t bytes = n * sizeof(float) + sizeof(double) + workspace_bytes;
    amsp::detail::check_cuda(cudaMallocAsync(&memory, bytes, stream), "cuda.malloc", "cudaMallocAsync of ", bytes,
                             " bytes (preloading CUB's kernels)");
    auto* bytes_at = static_cast<unsigned char*>(memory);
    cudaError_t status = cudaMemsetAsync(memory, 0, bytes, stream);
    if (status == cudaSuccess) {
      try {
        optim::sum_of_squares_cuda(std::span<const float>(reinterpret_cast<const float*>(bytes_at + sizeof(double)), n),
                                   reinterpret_cast<double*>(bytes_at), bytes_at + sizeof(double) + n * sizeof(float),
                                   workspace_bytes, stream);
      } catch (...) {
        (void)cudaFreeAsync(memory, stream);
        throw;
      }
    }
    const cudaError_t freed = cudaFreeAsync(memory, stream);
    const cudaError_t synced = cudaStreamSynchronize(stream);
    amsp::detail::check_cuda(status != cudaSuccess ? status : (freed != cudaSuccess ? freed : synced), "cuda.runtime",
                             "preloading CUB's sum-of-squares kernels");
  }
}

}  // namespace amsp::device_ops
