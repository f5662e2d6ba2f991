#pragma once
// The CUDA space's choice before each collective (amsp::CudaAsync::before_collective, in
// amsp/engine/cuda_space.cuh, which a host test cannot include): order_after_stream where the
// communicator has it (the concept amsp::comm::orders_after_stream, which the space uses too),
// else a synchronisation of the stream. Tests call this to see which of the two a communicator
// type gets and to issue the ordering, with a real cudaStream_t or a stand-in.

#include "amsp/comm/communicator.hpp"

namespace amsp::test {

/// Orders `comm` after `producer` as the CUDA space would and returns true, or returns false
/// where the space would synchronise its stream instead.
template <class Comm, class Stream>
bool ordered_by_event(Comm& comm, Stream producer) {
  if constexpr (comm::orders_after_stream<Comm, Stream>) {
    comm.order_after_stream(producer);
    return true;
  } else {
    return false;
  }
}

}  // namespace amsp::test
