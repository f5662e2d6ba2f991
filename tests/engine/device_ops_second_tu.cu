// A second translation unit of test_engine_device_ops that includes amsp/engine/device_ops.cuh and
// instantiates every operation, kept out of the unity build: a kernel defined in the header with
// external linkage and no template (a duplicate symbol once two .cu files of a program include
// it) fails the link of this test.
#include <cuda_runtime_api.h>

#include "amsp/engine/device_ops.cuh"
#include "amsp/optim/adam.hpp"

namespace amsp_test {

void device_ops_in_a_second_translation_unit(amsp::device_ops::StepControl* control, float* g, const float* z,
                                             amsp::bf16* out, std::size_t n, void* workspace, std::size_t bytes,
                                             cudaStream_t stream) {
  namespace ops = amsp::device_ops;
  ops::fill_zero(g, n, stream);
  ops::convert(z, out, n, stream);
  ops::accumulate(g, z, n, false, stream);
  ops::reset_sum_of_squares(control, stream);
  ops::add_sum_of_squares(g, n, control, workspace, bytes, stream);
  ops::decide_step(control, 1.0, 1.0f, 0.0f, true, stream);
  ops::set_step(control, 0, stream);
  amsp::optim::ShardState<amsp::optim::AdamW> shard{{g, n}, {}};
  ops::update(amsp::optim::AdamW{}, shard, z, out, n, control, stream);
}

}  // namespace amsp_test
