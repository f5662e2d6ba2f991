#pragma once
// A scriptable stand-in for the parts of libnccl and libcudart that amsp/comm/nccl.hpp calls
// (fake_nccl_runtime.cpp defines those C functions), so that the NCCL backend's state machine
// (nonblocking creation and split, ncclInProgress, asynchronous errors, the watchdog, abort of a
// whole world, ownership) runs on a machine without a GPU. A test program links these instead of
// the real libraries. It models NCCL's documented behaviour, not its data movement: collectives
// move nothing.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <mutex>
#include <vector>

namespace amsp::test::fake {

/// One fake communicator; never freed, so that a use after ncclCommAbort/Destroy is counted, not
/// undefined.
struct Comm {
  int rank = 0;
  int size = 1;
  int device = 0;
  bool blocking = true;
  ncclResult_t state = ncclSuccess;  // what ncclCommGetAsyncError reports
  int polls_left = 0;                // ncclInProgress for this many more polls, then `after`
  ncclResult_t after = ncclSuccess;
  ncclComm_t* deliver_to = nullptr;  // a nonblocking split writes the child here when it completes
  Comm* deliver = nullptr;
  bool finalized = false;
  bool destroyed = false;
  bool aborted = false;
  unsigned char id[NCCL_UNIQUE_ID_BYTES] = {};
};

/// cudaEventRecord(event, stream) (waits = false) or cudaStreamWaitEvent(stream, event) (true).
struct StreamEventCall {
  bool waits = false;
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
};

/// What the fake does; reset() between test cases.
struct Control {
  int ready_after_polls = 0;             // nonblocking creation, split, enqueue, finalize: ncclInProgress this long
  bool creation_never_ready = false;     // a peer that never joins
  int event_polls_until_done = 0;        // cudaEventQuery: not ready this many times; < 0: never done
  ncclResult_t enqueue_result = ncclSuccess;  // returned by every collective (e.g. ncclInvalidArgument)
  Comm* fails_while_waited = nullptr;  // this communicator reports ncclRemoteError after 10 event polls
  int comm_device = 0;                 // the CUDA device of communicators created from now on
  int current_device = 0;              // cudaSetDevice / cudaGetDevice (one for all threads)
  int calls_on_wrong_device = 0;       // enqueues and event records while another device was current
  // Counters.
  int enqueues = 0;
  int aborts = 0;
  int finalizes = 0;
  int destroys = 0;
  int uses_after_release = 0;  // any call on an aborted or destroyed communicator
  int streams_created = 0;
  int streams_destroyed = 0;
  std::vector<ncclRedOp_t> reduce_ops;  // the op of every ReduceScatter, AllReduce and Reduce, in call order
  int events_alive = 0;
  std::vector<StreamEventCall> stream_event_calls;  // in call order
  std::vector<std::unique_ptr<Comm>> comms;
};

/// Every fake function holds this lock (the threads backend runs several ranks at once).
std::recursive_mutex& mutex();
Control& control();
void reset();
Comm& comm_of(ncclComm_t handle);
/// A blocking communicator as a user's llm.c-style trainer makes it (ncclCommInitRank).
ncclComm_t user_comm(int rank, int size);
/// A stream the test owns (a fake handle; never destroyed by the fake's counters unless passed
/// to cudaStreamDestroy).
cudaStream_t user_stream();

}  // namespace amsp::test::fake
