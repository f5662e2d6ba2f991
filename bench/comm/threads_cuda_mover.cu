// Installs the threads backend's CUDA data mover in bench_comm_threads_cuda (compiled by nvcc).
#include "amsp/comm/threads_cuda.cuh"
