// See fake_nccl_runtime.hpp. Definitions of the C functions of libnccl and libcudart that amsp's
// NCCL backend calls, with the declarations of the real headers.
#include "fake_nccl_runtime.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace amsp::test::fake {
namespace {
Control the_control;

Comm* checked(ncclComm_t handle) {
  Comm* c = reinterpret_cast<Comm*>(handle);
  if (c->aborted || c->destroyed) ++the_control.uses_after_release;
  return c;
}

Comm* new_comm(int rank, int size, bool blocking) {
  the_control.comms.push_back(std::make_unique<Comm>());
  Comm* c = the_control.comms.back().get();
  c->rank = rank;
  c->size = size;
  c->device = the_control.comm_device;
  c->blocking = blocking;
  return c;
}

/// A nonblocking operation: in progress for the scripted number of polls, then `after`.
ncclResult_t start(Comm* c, ncclResult_t after = ncclSuccess) {
  if (c->blocking || the_control.ready_after_polls == 0) {
    c->state = after;
    return after;
  }
  c->state = ncclInProgress;
  c->polls_left = the_control.ready_after_polls;
  c->after = after;
  return ncclInProgress;
}
}  // namespace

std::recursive_mutex& mutex() {
  static std::recursive_mutex m;
  return m;
}
Control& control() { return the_control; }
void reset() { the_control = Control{}; }
Comm& comm_of(ncclComm_t handle) { return *reinterpret_cast<Comm*>(handle); }
ncclComm_t user_comm(int rank, int size) { return reinterpret_cast<ncclComm_t>(new_comm(rank, size, true)); }
cudaStream_t user_stream() {
  static int stream_storage;
  return reinterpret_cast<cudaStream_t>(&stream_storage);
}

}  // namespace amsp::test::fake

using amsp::test::fake::checked;
using amsp::test::fake::Comm;
using amsp::test::fake::new_comm;
using amsp::test::fake::start;
using amsp::test::fake::the_control;

extern "C" {

// ---- NCCL ----
const char* ncclGetErrorString(ncclResult_t result) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "some NCCL error";
  }
}
const char* ncclGetLastError(ncclComm_t) { return "fake NCCL's last error"; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  static unsigned char next = 1;
  std::memset(id, 0, sizeof *id);
  id->internal[0] = static_cast<char>(next++);
  id->internal[100] = 42;
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  Comm* c = new_comm(rank, nranks, config == nullptr || config->blocking != 0);
  std::memcpy(c->id, id.internal, sizeof c->id);
  *comm = reinterpret_cast<ncclComm_t>(c);
  if (the_control.creation_never_ready && !c->blocking) {
    c->state = ncclInProgress;
    c->polls_left = -1;
    return ncclInProgress;
  }
  return start(c);
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  Comm* parent = checked(comm);
  (void)color;
  Comm* child = new_comm(key, 1, config == nullptr ? parent->blocking : config->blocking != 0);
  *newcomm = nullptr;  // as NCCL: written when the split completes
  const ncclResult_t result = start(parent);
  if (result == ncclInProgress) {
    parent->deliver_to = newcomm;
    parent->deliver = child;
  } else {
    *newcomm = reinterpret_cast<ncclComm_t>(child);
  }
  return result;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  Comm* c = checked(comm);
  if (c->state == ncclInProgress && c->polls_left > 0 && --c->polls_left == 0) {
    c->state = c->after;
    if (c->deliver_to != nullptr) *std::exchange(c->deliver_to, nullptr) = reinterpret_cast<ncclComm_t>(c->deliver);
  }
  *state = c->state;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  *rank = checked(comm)->rank;
  return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  *device = checked(comm)->device;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  *count = checked(comm)->size;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  Comm* c = checked(comm);
  ++the_control.finalizes;
  c->finalized = true;
  return start(c);
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  Comm* c = checked(comm);
  ++the_control.destroys;
  c->destroyed = true;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  Comm* c = checked(comm);
  ++the_control.aborts;
  c->aborted = true;
  return ncclSuccess;
}

static ncclResult_t enqueue(ncclComm_t comm) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  Comm* c = checked(comm);
  ++the_control.enqueues;
  if (the_control.current_device != c->device) ++the_control.calls_on_wrong_device;
  if (the_control.enqueue_result != ncclSuccess) return the_control.enqueue_result;
  if (c->state != ncclSuccess && c->state != ncclInProgress) return c->state;  // a broken communicator
  return start(c);
}
ncclResult_t ncclAllGather(const void*, void*, size_t, ncclDataType_t, ncclComm_t comm, cudaStream_t) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  return enqueue(comm);
}
ncclResult_t ncclReduceScatter(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  the_control.reduce_ops.push_back(op);
  return enqueue(comm);
}
ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  the_control.reduce_ops.push_back(op);
  return enqueue(comm);
}
ncclResult_t ncclBroadcast(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t comm, cudaStream_t) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  return enqueue(comm);
}
ncclResult_t ncclReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t op, int, ncclComm_t comm,
                        cudaStream_t) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  the_control.reduce_ops.push_back(op);
  return enqueue(comm);
}

// ---- CUDA runtime ----
static int event_polls = 0;

cudaError_t cudaGetDeviceCount(int* count) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  *count = 2;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  the_control.current_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  *device = the_control.current_device;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t) { return "fake CUDA error"; }
const char* cudaGetErrorName(cudaError_t) { return "cudaErrorFake"; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  ++the_control.streams_created;
  *stream = reinterpret_cast<cudaStream_t>(std::malloc(1));
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  ++the_control.streams_destroyed;
  std::free(stream);
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  ++the_control.events_alive;
  *event = reinterpret_cast<cudaEvent_t>(std::malloc(1));
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  --the_control.events_alive;
  std::free(event);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  the_control.stream_event_calls.push_back({.waits = false, .stream = stream, .event = event});
  event_polls = 0;
  const Comm* last = the_control.comms.empty() ? nullptr : the_control.comms.back().get();
  if (last != nullptr && last->device != the_control.current_device) ++the_control.calls_on_wrong_device;
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  the_control.stream_event_calls.push_back({.waits = true, .stream = stream, .event = event});
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  const int polls = event_polls++;
  if (the_control.fails_while_waited != nullptr && polls >= 10)
    std::exchange(the_control.fails_while_waited, nullptr)->state = ncclRemoteError;
  const int wanted = the_control.event_polls_until_done;
  if (wanted < 0 || polls < wanted) return cudaErrorNotReady;
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t bytes) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  *p = std::malloc(bytes == 0 ? 1 : bytes);
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  const std::lock_guard lock(amsp::test::fake::mutex());
  std::free(p);
  return cudaSuccess;
}

}  // extern "C"
