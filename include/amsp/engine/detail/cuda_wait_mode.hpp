#pragma once
// How a CudaAsync engine makes the user's later work wait for one of its tasks (a gather, a G
// store handed out): on the host (the default: the caller's thread waits until the task is done,
// and nothing on the device waits for work not yet issued), or on the device, by a one-thread
// kernel on the user's stream that spins until the task is done (the caller's thread never
// waits; deadlocked on a GPU shared by several ranks of one process: docs/engine.md, "Waiting for
// a task"). Host code: read by amsp/engine/cuda_space.cuh; the environment variable is the
// default of CudaStreams.

#include <cstdlib>
#include <string_view>

#include "amsp/core/error.hpp"

namespace amsp {

enum class CudaTaskWait {
  on_host,    ///< the caller's thread waits for the task (the default)
  on_device,  ///< a spinning kernel on the user's stream (docs/engine.md, "The CUDA space")
};

namespace detail {

/// CudaStreams' default: AMSP_CUDA_TASK_WAIT=host or device (unset or empty: host).
[[nodiscard]] inline CudaTaskWait cuda_task_wait_from_environment() {
  const char* value = std::getenv("AMSP_CUDA_TASK_WAIT");
  const std::string_view text = value == nullptr ? std::string_view{} : std::string_view(value);
  if (text.empty() || text == "host") return CudaTaskWait::on_host;
  if (text == "device") return CudaTaskWait::on_device;
  fail("engine.cuda_task_wait_env", "AMSP_CUDA_TASK_WAIT is '", text, "'; expected host or device");
}

}  // namespace detail
}  // namespace amsp
