#pragma once
// The one point where device memory enters the threads backend, without a CUDA dependency here: a
// table of three functions that amsp/comm/threads_cuda.cuh installs when a program includes it in
// one of its nvcc-compiled files. Host-only programs never install it: every buffer is then host
// memory, no CUDA call is made, and nothing CUDA is linked.

#include <atomic>
#include <string>

#include "amsp/comm/detail/threads_group.hpp"
#include "amsp/core/error.hpp"

namespace amsp::comm::detail {

/// The data mover for device buffers.
struct DeviceMover {
  /// Where the memory at `p` lives (host unless it is device or managed memory).
  BufferPlace (*locate)(const void* p);
  /// Rank `rank`'s data phase of the validated call published in `g`, with every buffer on the
  /// same device. Returns only when the rank's device work has finished (stream synchronised);
  /// throws amsp::error for a failed CUDA call, after waiting for what was already enqueued.
  void (*move)(const ThreadsGroup& g, int rank);
  /// Loads the mover's kernels on the current device now rather than at their first launch.
  void (*preload)();
};

/// A device collective moves data with one kernel whose parameters hold every rank's pointer:
/// worlds above this size are refused (rule comm.device_world_size) on device buffers.
inline constexpr int threads_device_max_ranks = 128;

/// The installed mover, or null. Constant-initialised, so that installing it from a static
/// initialiser cannot run before it exists.
inline constinit std::atomic<const DeviceMover*> threads_device_mover{nullptr};

/// Fills `s.send_place` and `s.recv_place` for rank `r`'s call: one cudaPointerGetAttributes per
/// buffer the rank touches (one for an in-place call), none without the mover or with count 0.
inline void place_buffers(ThreadsSlot& s, int r) {
  const DeviceMover* mover = threads_device_mover.load(std::memory_order_acquire);
  if (mover == nullptr || s.count == 0 || s.op == ThreadsOp::barrier || s.op == ThreadsOp::split) return;
  const bool reads = reads_send(s, r);
  const bool writes = writes_recv(s, r);
  if (reads) s.send_place = mover->locate(s.send);
  if (writes) s.recv_place = reads && s.recv == s.send ? s.send_place : mover->locate(s.recv);
  if (!reads) s.send_place = s.recv_place;
  if (!writes) s.recv_place = s.send_place;
}

/// "host memory" or "memory of CUDA device 0".
[[nodiscard]] inline std::string describe(const BufferPlace& p) {
  return p.kind == memory_kind::host ? std::string("host memory") : amsp::detail::concat("memory of CUDA device ", p.device);
}

}  // namespace amsp::comm::detail
