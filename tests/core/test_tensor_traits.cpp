// tensor_traits: the built-in std::span and RawTensor specialisations, and a user's own tensor
// type plugged in the documented way.
#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "amsp/core/tensor_traits.hpp"

namespace user {
// A user's tensor class that knows nothing of amsp.
class Tensor {
public:
  Tensor(std::vector<float> storage, bool on_gpu) : storage_(std::move(storage)), on_gpu_(on_gpu) {}
  [[nodiscard]] float* ptr() const { return const_cast<float*>(storage_.data()); }
  [[nodiscard]] std::size_t elements() const { return storage_.size(); }
  [[nodiscard]] bool on_gpu() const { return on_gpu_; }

private:
  std::vector<float> storage_;
  bool on_gpu_;
};
}  // namespace user

template <>
struct amsp::tensor_traits<user::Tensor> {
  static void* data(const user::Tensor& t) { return t.ptr(); }
  static std::size_t numel(const user::Tensor& t) { return t.elements(); }
  static amsp::dtype dtype(const user::Tensor&) { return amsp::dtype::fp32; }
  static amsp::memory_kind space(const user::Tensor& t) { return t.on_gpu() ? memory_kind::cuda : memory_kind::host; }
};

static_assert(amsp::tensor_like<user::Tensor>);
static_assert(amsp::tensor_like<const user::Tensor&>);
static_assert(amsp::tensor_like<std::span<float>>);
static_assert(amsp::tensor_like<std::span<const amsp::bf16, 4>>);
static_assert(amsp::tensor_like<amsp::RawTensor<double>>);
static_assert(!amsp::tensor_like<std::vector<float>>);  // not specialised: not a tensor
static_assert(!amsp::tensor_like<int*>);

TEST_CASE("std::span is a host tensor of its element type") {
  std::array<amsp::fp16, 5> storage{};
  const std::span<const amsp::fp16, 5> fixed(storage);
  const amsp::tensor_view v = amsp::view_of(fixed);
  CHECK(v.data == static_cast<void*>(storage.data()));
  CHECK(v.numel == 5);
  CHECK(v.type == amsp::dtype::fp16);
  CHECK(v.space == amsp::memory_kind::host);
  CHECK(v.size_bytes() == 10);

  std::vector<double> dyn(7, 1.5);
  const amsp::tensor_view w = amsp::view_of(std::span<double>(dyn));
  CHECK((w.type == amsp::dtype::fp64 && w.numel == 7 && w.size_bytes() == 56));
  const std::span<double> back = w.as<double>();
  CHECK(back.data() == dyn.data());
  back[6] = 3.0;
  CHECK(dyn[6] == 3.0);
}

TEST_CASE("RawTensor carries its memory space in its type") {
  float host[3] = {1, 2, 3};
  const amsp::tensor_view h = amsp::view_of(amsp::RawTensor<float>{host, 3});
  CHECK((h.data == host && h.numel == 3 && h.type == amsp::dtype::fp32 && h.space == amsp::memory_kind::host));
  const amsp::tensor_view d = amsp::view_of(amsp::RawTensor<amsp::bf16, amsp::CudaSpace>{nullptr, 1024});
  CHECK((d.space == amsp::memory_kind::cuda && d.type == amsp::dtype::bf16 && d.size_bytes() == 2048));
  CHECK(amsp::name_of(d.space) == "cuda");
  CHECK(amsp::name_of(h.space) == "host");
}

TEST_CASE("a user type specialises tensor_traits") {
  const user::Tensor cpu({1.0f, 2.0f, 3.0f, 4.0f}, false);
  const amsp::tensor_view v = amsp::view_of(cpu);
  CHECK(v.data == cpu.ptr());
  CHECK((v.numel == 4 && v.type == amsp::dtype::fp32 && v.space == amsp::memory_kind::host));
  CHECK(v.as<float>()[3] == 4.0f);
  const user::Tensor gpu({0.0f}, true);
  CHECK(amsp::view_of(gpu).space == amsp::memory_kind::cuda);
}

TEST_CASE("reading a view as the wrong dtype fails with rule tensor.dtype") {
  float x[2] = {};
  const amsp::tensor_view v = amsp::view_of(std::span<float>(x));
  try {
    (void)v.as<amsp::bf16>();
    FAIL("read fp32 as bf16");
  } catch (const amsp::error& e) {
    CHECK(e.rule() == "tensor.dtype");
    CHECK(std::string(e.what()).find("holds fp32 but was read as bf16") != std::string::npos);
  }
}
