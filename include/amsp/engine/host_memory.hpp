#pragma once
// The memory operations of the host execution spaces (HostSerial, HostAsync): what the engine's
// step schedule does to its stores and scratch, stated once per memory space. The schedule
// (sharded_optimizer.hpp) never touches a store element itself; it calls these, and a device
// space (amsp::CudaAsync, amsp/engine/cuda_space.cuh) provides the same operations as
// stream-ordered kernels over device memory. amsp/engine/space_memory.hpp says which operations
// a space provides and picks these for the host spaces.
//
// Every operation takes the lane it is ordered on: `lane::user` (the caller's compute: buffers
// handed to or read from the user) or `lane::comm` (the space's communication stream). On the host
// both are "now, on the calling thread"; the lane matters for a device space only.

#include <algorithm>
#include <optional>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "amsp/core/buffer.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/memory_space.hpp"
#include "amsp/engine/options.hpp"
#include "amsp/engine/step_decision.hpp"
#include "amsp/optim/grad_norm.hpp"
#include "amsp/optim/update_host.hpp"
#include "amsp/optim/update_rule.hpp"

namespace amsp {

/// Which stream of a space an operation is ordered on.
enum class lane : std::uint8_t { user, comm };

/// The per-step arguments of the fused update that a host space passes by value (a device space
/// reads them from its device-resident step control instead).
struct UpdateArgs {
  std::int64_t step = 1;
  float grad_scale = 1;
};

/// Host memory: host_buffer stores, loops on the calling thread.
class HostMemory {
public:
  static constexpr memory_kind kind = memory_kind::host;
  template <class T>
  using buffer = host_buffer<T>;

  template <class T>
  void fill_zero(lane, T* data, std::size_t n) {
    std::fill(data, data + n, T{});
  }
  /// out[i] = In converted to Out through fp32 (the dtype.hpp conversions).
  template <class In, class Out>
  void convert(lane, const In* in, Out* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = from_float<Out>(to_float(in[i]));
  }
  template <class T>
  void copy(lane, T* dst, const T* src, std::size_t n) {
    if (n > 0 && dst != src) std::memcpy(dst, src, n * sizeof(T));
  }
  /// The G store gets one micro-batch's fp32 gradient shard: written by the first, added after.
  template <class G>
  void accumulate(lane, G* g, const float* z, std::size_t n, bool first) {
    if (first) {
      for (std::size_t i = 0; i < n; ++i) g[i] = from_float<G>(z[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i) g[i] = from_float<G>(to_float(g[i]) + z[i]);
    }
  }
  /// Values of set_tensor (in memory `where`: always the host here) into a store, converted.
  template <class In, class Out>
  void upload(const In* in, memory_kind /*where*/, Out* out, std::size_t n) {
    convert(lane::comm, in, out, n);
  }

  // ---- the step decision (on the communication lane) -------------------------------------------
  /// Room for each bucket's part of the norm (the engine calls it once, at construction).
  void reserve_norm(std::size_t buckets, std::size_t /*largest OS shard*/) { parts_.assign(buckets, 0.0); }
  /// Bucket b's part of the norm: the sum of squares of its OS-shard gradients, taken at the end
  /// of its reduction chain (on the stream, overlapping the rest of the backward).
  void norm_part(std::size_t bucket, const float* grads, std::size_t n) {
    parts_.at(bucket) = optim::sum_of_squares_host(std::span<const float>(grads, n));
  }
  /// This rank's sum of squares (the parts added in bucket order, as one pass over the model
  /// would), where the engine's AllReduce over the OS group makes it the global one.
  [[nodiscard]] double* norm_sum() {
    sum_sq_ = 0.0;
    for (const double part : parts_) sum_sq_ += part;
    return &sum_sq_;
  }
  /// After the decision: the next step's parts start afresh (each is overwritten anyway).
  void reset_norm() {}
  /// The step's decision from the global sum of squares (amsp/engine/step_decision.hpp), known on
  /// the host at once; a device space decides on the device and returns nothing.
  [[nodiscard]] std::optional<StepDecision> decide(double average, float loss_scale, const EngineOptions& options,
                                                   std::int64_t steps_so_far) {
    return decide_step(sum_sq_, average, loss_scale, options.max_grad_norm, options.skip_nonfinite, steps_so_far);
  }
  /// The fused update of one run of an OS shard, writing the parameters in P.
  template <optim::update_rule R, class P>
  void update(const R& rule, const optim::ShardState<R>& shard, const float* grads, P* params, std::size_t n,
              const UpdateArgs& args) {
    optim::update_host(rule, shard, std::span<const float>(grads, n), std::span<P>(params, n),
                       optim::StepOptions{args.step, args.grad_scale, false});
  }

private:
  std::vector<double> parts_;
  double sum_sq_ = 0.0;
};

}  // namespace amsp
