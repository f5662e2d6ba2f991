// NCCL without MPI on a GPU machine (label gpu; exits 77, "skipped", without a GPU): a one-rank
// world from a unique id (every collective, dtype and placement against the host reference of
// collective_checks.hpp), world() over a threads communicator, adopting the caller's communicator
// and stream (both still work after the NcclCommunicator is gone), split in every mode, and the
// watchdog: a collective queued behind a kernel that blocks the stream times out, aborts the
// communicator and every later use is comm.aborted; a world whose second rank never joins times
// out at creation. Every wait is bounded: the blocking kernel ends by itself after 20 s, and a
// guard thread ends the process (exit 124) if the test runs longer than 90 s.
#include <doctest/doctest.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "amsp/comm/nccl.hpp"
#include "amsp/comm/threads.hpp"
#include "amsp/sharding/groups.hpp"
#include "collective_checks.hpp"
#include "device_staged.hpp"
#include "nccl_spin_kernel.hpp"
#include "report.hpp"

namespace {
using namespace amsp;
using comm::NcclCommunicator;
using std::chrono::milliseconds;
using test::rule_thrown;

const std::vector<std::size_t> sweep_counts{0, 1, 7, 4099, std::size_t{1} << 20};

void require_gpu() {
  if (comm::cuda_device_count() == 0) {
    std::puts("test_comm_nccl_bootstrap: no CUDA device, skipped");
    std::exit(77);
  }
  static const bool guard_started = [] {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(90));
      std::fputs("test_comm_nccl_bootstrap: still running after 90 s: a wait is not bounded; ending\n", stderr);
      std::_Exit(124);
    }).detach();
    return true;
  }();
  (void)guard_started;
  amsp::detail::check_cuda(cudaSetDevice(0), "comm.cuda", "cudaSetDevice");
}

GroupSet one_rank_group() { return factor_groups(Mesh(1, 1), Factor{1, 1}); }

/// all_reduce(sum) of 1..n in place on device memory through `nccl`; true if the values are back.
bool all_reduce_round_trip(NcclCommunicator& nccl) {
  std::vector<float> host(1000);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i + 1);
  test::DeviceCopy device(host.data(), host.size() * sizeof(float));
  nccl.all_reduce(device.as<float>(), device.as<float>(), host.size(), comm::reduce_op::sum);
  std::vector<float> back(host.size());
  device.back_to(back.data());
  return back == host;  // one rank: the sum is the value itself
}

/// A device buffer, a host-mapped release flag and a kernel that blocks `stream` until released.
class BlockedStream {
public:
  explicit BlockedStream(cudaStream_t stream) {
    amsp::detail::check_cuda(cudaHostAlloc(&flag_, sizeof(int), cudaHostAllocMapped), "cuda.malloc", "cudaHostAlloc");
    release_flag(0);
    int* device_flag = nullptr;
    amsp::detail::check_cuda(cudaHostGetDevicePointer(&device_flag, flag_, 0), "cuda.malloc",
                             "cudaHostGetDevicePointer");
    amsp::detail::check_cuda(test::launch_spin_until_released(device_flag, 20'000'000'000ull, stream), "cuda.launch",
                             "the blocking kernel");
    // Released when the test says so, or after 5 s in case ncclCommAbort waits for the stream.
    releaser_ = std::thread([this] {
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, std::chrono::seconds(5), [this] { return released_; });
      release_flag(1);
    });
  }
  BlockedStream(const BlockedStream&) = delete;
  BlockedStream& operator=(const BlockedStream&) = delete;
  ~BlockedStream() {
    release();
    releaser_.join();
    cudaFreeHost(flag_);
  }
  void release() {
    {
      std::lock_guard lock(mutex_);
      released_ = true;
    }
    cv_.notify_all();
  }

private:
  void release_flag(int value) { *static_cast<volatile int*>(flag_) = value; }  // read by the kernel

  int* flag_ = nullptr;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool released_ = false;
  std::thread releaser_;
};

struct Stream {
  cudaStream_t s{};
  Stream() {
    amsp::detail::check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "comm.cuda", "cudaStreamCreate");
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { cudaStreamDestroy(s); }
};
}  // namespace

TEST_CASE("nccl without MPI: a one-rank world from a unique id runs every collective against the host reference") {
  require_gpu();
  // The id as a launcher would pass it: through its hex text.
  const ncclUniqueId id = comm::unique_id_from_hex(comm::unique_id_to_hex(comm::new_unique_id()));
  NcclCommunicator nccl = NcclCommunicator::from_unique_id(id, 0, 1);
  CHECK(nccl.rank() == 0);
  CHECK(nccl.size() == 1);
  CHECK(nccl.owns_communicator());
  CHECK(nccl.owns_stream());
  CHECK_FALSE(nccl.aborted());
  test::DeviceStaged staged(nccl);
  test::require_none(test::run_sweep(staged, sweep_counts, test::all_dtypes));
  test::require_none(test::run_sweep(staged, {0, 4099}, test::all_dtypes, true));
  nccl.barrier();
  CHECK(rule_thrown([] { (void)NcclCommunicator::from_unique_id(ncclUniqueId{}, 1, 1); }) == "comm.rank_range");
  CHECK(rule_thrown([] { (void)NcclCommunicator::from_unique_id(ncclUniqueId{}, 0, 0); }) == "comm.world_size");
}

TEST_CASE("nccl without MPI: world() over a one-rank threads communicator, and split of a one-rank world") {
  require_gpu();
  comm::run_on_threads(1, [](comm::ThreadsCommunicator& host) {
    amsp::detail::check_cuda(cudaSetDevice(0), "comm.cuda", "cudaSetDevice");
    NcclCommunicator nccl = NcclCommunicator::world(host);
    CHECK(nccl.size() == 1);
    NcclCommunicator sub = nccl.split(one_rank_group());
    CHECK(sub.owns_communicator());
    CHECK(sub.stream() == nccl.stream());
    CHECK(sub.native() != nccl.native());
    test::DeviceStaged staged(sub);
    test::require_none(test::run_sweep(staged, {0, 7, 4099}, test::all_dtypes));
    CHECK(rule_thrown([&] { (void)nccl.split(factor_groups(Mesh(2, 1), Factor{2, 1})); }) == "comm.split_size");
  });
}

TEST_CASE("nccl adopt: the caller's communicator and stream are used, not owned, and still work afterwards") {
  require_gpu();
  ncclComm_t raw{};
  REQUIRE(ncclCommInitRank(&raw, 1, comm::new_unique_id(), 0) == ncclSuccess);  // blocking, as users make them
  Stream stream;
  {
    NcclCommunicator nccl = NcclCommunicator::adopt(raw, stream.s);
    CHECK_FALSE(nccl.owns_communicator());
    CHECK_FALSE(nccl.owns_stream());
    CHECK(nccl.native() == raw);
    CHECK(nccl.stream() == stream.s);
    test::DeviceStaged staged(nccl);
    test::require_none(test::run_sweep(staged, {0, 7, 4099}, test::all_dtypes));
    NcclCommunicator sub = nccl.split(one_rank_group());  // the split owns what it creates
    CHECK(sub.owns_communicator());
    CHECK_FALSE(sub.owns_stream());
    CHECK(sub.stream() == stream.s);
    CHECK(all_reduce_round_trip(sub));
  }
  // Neither was finalised nor destroyed: both still run a collective.
  std::vector<float> host{1, 2, 3};
  test::DeviceCopy device(host.data(), host.size() * sizeof(float));
  CHECK(ncclAllReduce(device.as<float>(), device.as<float>(), host.size(), ncclFloat32, ncclSum, raw, stream.s) ==
        ncclSuccess);
  CHECK(cudaStreamSynchronize(stream.s) == cudaSuccess);
  ncclResult_t state = ncclInternalError;
  CHECK(ncclCommGetAsyncError(raw, &state) == ncclSuccess);
  CHECK(state == ncclSuccess);
  std::vector<float> back(host.size());
  device.back_to(back.data());
  CHECK(back == host);
  CHECK(ncclCommDestroy(raw) == ncclSuccess);
}

TEST_CASE("nccl watchdog: a collective behind a blocked stream times out, aborts, and the communicator is dead") {
  require_gpu();
  Stream stream;
  const comm::NcclOptions options{.collective_timeout = milliseconds(300)};
  NcclCommunicator nccl = NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 1, stream.s, options);
  CHECK(all_reduce_round_trip(nccl));  // works before the stream is blocked
  std::vector<float> host(1024, 1.0f);
  test::DeviceCopy device(host.data(), host.size() * sizeof(float));
  {
    BlockedStream blocked(stream.s);
    comm::Handle handle = nccl.all_reduce_async(device.as<float>(), device.as<float>(), host.size());
    CHECK_FALSE(handle.test());  // pending behind the kernel: no error, no timeout in test()
    const auto start = std::chrono::steady_clock::now();
    std::string message;
    try {
      handle.wait();
    } catch (const error& e) {
      message = e.what();
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    blocked.release();
    CHECK(message.find("[rule comm.timeout]") != std::string::npos);
    CHECK(message.find("all_reduce (count 1024)") != std::string::npos);
    CHECK(waited >= milliseconds(300));
    CHECK(waited < std::chrono::seconds(15));
    CHECK(nccl.aborted());
    CHECK(rule_thrown([&] { nccl.all_reduce(device.as<float>(), device.as<float>(), host.size()); }) == "comm.aborted");
    CHECK(rule_thrown([&] { (void)nccl.native(); }) == "comm.aborted");
    CHECK(rule_thrown([&] { (void)nccl.split(one_rank_group()); }) == "comm.aborted");
  }
  CHECK(cudaStreamSynchronize(stream.s) == cudaSuccess);  // the caller's stream is usable again
}

TEST_CASE("nccl watchdog: a blocking collective times out the same way; a sub-communicator is aborted with it") {
  require_gpu();
  const comm::NcclOptions options{.collective_timeout = milliseconds(300)};
  NcclCommunicator nccl = NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 1, options);
  NcclCommunicator sub = nccl.split(one_rank_group());
  std::vector<float> host(16, 1.0f);
  test::DeviceCopy device(host.data(), host.size() * sizeof(float));
  {
    BlockedStream blocked(nccl.stream());
    CHECK(rule_thrown([&] { sub.broadcast(device.as<float>(), device.as<float>(), host.size(), 0); }) ==
          "comm.timeout");
    blocked.release();
  }
  CHECK(sub.aborted());
  CHECK(nccl.aborted());  // the world: one abort ends every communicator of it
  CHECK(rule_thrown([&] { nccl.barrier(); }) == "comm.aborted");
  CHECK(cudaStreamSynchronize(nccl.stream()) == cudaSuccess);
}

TEST_CASE("nccl watchdog: a world whose second rank never joins times out at creation") {
  require_gpu();
  const comm::NcclOptions options{.collective_timeout = milliseconds(2000)};
  const auto start = std::chrono::steady_clock::now();
  CHECK(rule_thrown([&] { (void)NcclCommunicator::from_unique_id(comm::new_unique_id(), 0, 2, options); }) ==
        "comm.timeout");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
}
