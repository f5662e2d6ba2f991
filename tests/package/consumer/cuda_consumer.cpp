// The cuda component: host code calling the CUDA runtime through amsp (compiled and linked, not
// run: the CI machine has no GPU).
#include <amsp/core/cuda_buffer.hpp>

int main() {
  amsp::cuda_buffer<float> device(1024);
  return device.size() == 1024 ? 0 : 1;
}
