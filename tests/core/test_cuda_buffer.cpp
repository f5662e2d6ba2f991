// cuda_buffer on a real GPU (label gpu): allocation, zeroing, copies, moves, CUDA errors as
// amsp::error. Without a GPU every case exits 77, which ctest reports as skipped.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "amsp/core/cuda_buffer.hpp"

namespace {
void require_gpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::puts("no CUDA device: skipped");
    std::exit(77);
  }
}
}  // namespace

static_assert(std::is_same_v<amsp::cuda_buffer<float>::space, amsp::CudaSpace>);
static_assert(!std::is_copy_constructible_v<amsp::cuda_buffer<float>>);
static_assert(std::is_nothrow_move_constructible_v<amsp::cuda_buffer<float>>);

TEST_CASE("a fresh device buffer is zeroed and round-trips host data") {
  require_gpu();
  amsp::cuda_buffer<float> buf(1000);
  CHECK(buf.size_bytes() == 4000);
  std::vector<float> host(1000, -1.0f);
  buf.copy_to_host(host.data(), host.size());
  for (float v : host) REQUIRE(v == 0.0f);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  buf.copy_from_host(host.data(), host.size());
  std::vector<float> back(1000);
  buf.copy_to_host(back.data(), back.size());
  CHECK(back == host);
}

TEST_CASE("moves transfer the device pointer") {
  require_gpu();
  amsp::cuda_buffer<int> a(16);
  int* const p = a.data();
  amsp::cuda_buffer<int> b(std::move(a));
  CHECK((b.data() == p && a.data() == nullptr && a.empty()));  // NOLINT(bugprone-use-after-move)
  amsp::cuda_buffer<int> c(4);
  c = std::move(b);
  CHECK((c.data() == p && c.size() == 16));
}

TEST_CASE("CUDA failures become amsp::error naming CUDA's message") {
  require_gpu();
  try {
    amsp::cuda_buffer<char> impossible(std::size_t{1} << 62);  // 4 EiB
    FAIL("allocated 4 EiB");
  } catch (const amsp::error& e) {
    CHECK(e.rule() == "cuda.malloc");
    CHECK(std::string(e.what()).find("cudaErrorMemoryAllocation") != std::string::npos);
  }
  amsp::cuda_buffer<float> small(2);
  float host[4] = {};
  CHECK_THROWS_AS(small.copy_from_host(host, 4), amsp::error);  // more than it holds
}
