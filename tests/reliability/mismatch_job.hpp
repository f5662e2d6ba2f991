#pragma once
// The mismatch table of issue 16: a small training job (two buckets of the SAME size, two steps of
// two micro-batches) in which one rank commits one fault. Shared by the threads and MPI tests.
//   bucket_order  hands its buckets' gradients in the opposite order (the reported bug: a wrong
//                 gradient norm and no error, because both buckets have the same size)
//   count         its model's second bucket has more elements
//   dtype         it keeps its parameters in bf16, the others in fp32
//   skip_bucket   it never hands the first bucket in the last micro-batch
//   early_step    it marks its first micro-batch as the last and steps after it

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/optim/adam.hpp"

namespace amsp::test {

enum class Fault { none, bucket_order, count, dtype, skip_bucket, early_step };

struct FaultCase {
  Fault fault;
  std::string_view name;
  std::array<std::string_view, 2> message_parts;  ///< the check's message must contain these
  bool needs_sharded_params = false;  ///< only visible where parameters travel (P sharded)
};

inline constexpr std::array<FaultCase, 5> fault_table{{
    {Fault::bucket_order, "bucket order", {"rank 1 issued", "of 'h.2' (count"}},
    {Fault::count, "count", {"rank 1 issued", "of 'h.2' (count"}},
    {Fault::dtype, "dtype", {"bf16", "fp32"}, true},
    {Fault::skip_bucket, "skipped bucket", {"of 'h.2'", "of 'h.1'"}},
    {Fault::early_step, "early step", {"last backward", "micro-batch 0"}},
}};

/// The plans the table runs under on a 2 x 2 mesh: no sharding, everything sharded, and the OS
/// sharded inside the node (different communicators carry the first mismatching collective).
inline constexpr std::array<std::string_view, 3> fault_plans{"ddp", "zero3", "amsp-7b"};

/// Two buckets of the same size; with `wider`, the second is larger (the count fault).
inline std::vector<BucketSpec> twin_buckets(bool wider) {
  return {{"h.1", {{"h.1.w", {8, 16}, dtype::fp32}}}, {"h.2", {{"h.2.w", {8, wider ? 24 : 16}, dtype::fp32}}}};
}

/// A deterministic value in [-1, 1) of its keys (same on every backend).
inline float job_value(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  std::uint64_t x = (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xbf58476d1ce4e5b9ull) ^ (c * 0x94d049bb133111ebull) ^ d;
  x ^= x >> 31;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  return static_cast<float>(static_cast<double>(x >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/// Runs the job on this rank; rank `faulty` commits `fault`. Returns the last step's gradient
/// norm as this rank computed it.
template <class Comm, class ParamT = float>
double mismatch_job(Comm& comm, const Mesh& mesh, const Plan& plan, Fault fault, int faulty, bool check) {
  const bool me = comm.rank() == faulty;
  if constexpr (std::is_same_v<ParamT, float>)
    if (me && fault == Fault::dtype) return mismatch_job<Comm, bf16>(comm, mesh, plan, fault, faulty, check);
  EngineOptions options;
  options.check_collectives = check;
  ShardedOptimizer<Comm, optim::AdamW, ParamT> opt(comm, mesh, plan, optim::AdamW{.lr = 1e-2f},
                                                   twin_buckets(me && fault == Fault::count), options);
  for (int b = 0; b < opt.bucket_count(); ++b)
    for (const TensorSlot& slot : opt.layout(b).slots()) {
      std::vector<float> init(slot.numel);
      for (std::size_t i = 0; i < init.size(); ++i) init[i] = job_value(1, static_cast<std::uint64_t>(b), i, 0);
      opt.set_tensor(slot.name, std::span<const float>(init));
    }
  constexpr int micro_batches = 2;
  double norm = 0.0;
  for (int step = 0; step < 2; ++step) {
    for (int m = 0; m < micro_batches; ++m) {
      const bool last = m == micro_batches - 1 || (me && fault == Fault::early_step);
      opt.start_micro_batch(last);
      for (int b = 0; b < opt.bucket_count(); ++b) {
        (void)opt.gather(b);
        opt.release(b);
      }
      const bool reversed = me && fault == Fault::bucket_order;
      for (int k = 0; k < opt.bucket_count(); ++k) {
        const int b = reversed ? opt.bucket_count() - 1 - k : k;
        if (me && fault == Fault::skip_bucket && last && b == 0) continue;
        const std::span<ParamT> grads = opt.grad_buffer(b);
        for (const TensorSlot& slot : opt.layout(b).slots())
          for (std::size_t i = 0; i < slot.numel; ++i)
            grads[slot.offset + i] = from_float<ParamT>(
                job_value(2 + static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(m * 16 + comm.rank()),
                          static_cast<std::uint64_t>(b), i));
        opt.reduce_gradients(b);
      }
      if (last) break;
    }
    norm = opt.step().grad_norm;
  }
  opt.synchronize();
  return norm;
}

}  // namespace amsp::test
