// Installs the threads backend's CUDA data mover in the test programs that link this file: that
// is all a program needs to do to run threads collectives on device buffers (compiled by nvcc).
#include "amsp/comm/threads_cuda.cuh"
