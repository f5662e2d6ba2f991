#pragma once
// How a CudaAsync engine makes the user's later work wait for one of its tasks (a gather, a G
// store handed out): on the device, by a one-thread kernel on the user's stream that spins until
// the task is done (the caller's thread never waits), or on the host (the caller's thread waits
// until the task is done; nothing on the device waits for work not yet issued). Host code: read
// by amsp/engine/cuda_space.cuh; the environment variable is the default of CudaStreams.

#include <cstdlib>
#include <string_view>

#include "amsp/core/error.hpp"

namespace amsp {

enum class CudaTaskWait {
  on_device,  ///< a spinning kernel on the user's stream (docs/engine.md, "The CUDA space")
  on_host,    ///< the caller's thread waits for the task
};

namespace detail {

/// CudaStreams' default: AMSP_CUDA_TASK_WAIT=host or device (unset or empty: device).
[[nodiscard]] inline CudaTaskWait cuda_task_wait_from_environment() {
  const char* value = std::getenv("AMSP_CUDA_TASK_WAIT");
  const std::string_view text = value == nullptr ? std::string_view{} : std::string_view(value);
  if (text.empty() || text == "device") return CudaTaskWait::on_device;
  if (text == "host") return CudaTaskWait::on_host;
  fail("engine.cuda_task_wait_env", "AMSP_CUDA_TASK_WAIT is '", text, "'; expected host or device");
}

}  // namespace detail
}  // namespace amsp
