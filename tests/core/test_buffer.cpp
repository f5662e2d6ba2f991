// host_buffer: aligned, zeroed, move-only ownership.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "amsp/core/buffer.hpp"
#include "amsp/core/dtype.hpp"

namespace {
bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % amsp::buffer_alignment == 0; }
}  // namespace

static_assert(!std::is_copy_constructible_v<amsp::host_buffer<float>>);
static_assert(!std::is_copy_assignable_v<amsp::host_buffer<float>>);
static_assert(std::is_nothrow_move_constructible_v<amsp::host_buffer<float>>);
static_assert(std::is_nothrow_move_assignable_v<amsp::host_buffer<float>>);

TEST_CASE("a fresh buffer is aligned and zeroed, whatever its size") {
  for (std::size_t n : {1u, 3u, 15u, 16u, 17u, 1000u, 4099u}) {
    amsp::host_buffer<float> f(n);
    amsp::host_buffer<amsp::bf16> h(n);
    amsp::host_buffer<double> d(n);
    CHECK(f.size() == n);
    CHECK(f.size_bytes() == n * sizeof(float));
    CHECK(!f.empty());
    CHECK((aligned(f.data()) && aligned(h.data()) && aligned(d.data())));
    for (std::size_t i = 0; i < n; ++i) REQUIRE((f[i] == 0.0f && h[i].bits == 0 && d[i] == 0.0));
    f[n - 1] = 2.0f;  // the last element is writable (ASan would flag an undersized allocation)
    CHECK(f.span().back() == 2.0f);
    CHECK(static_cast<std::size_t>(f.end() - f.begin()) == n);
  }
}

TEST_CASE("an empty buffer owns nothing") {
  amsp::host_buffer<float> a;
  amsp::host_buffer<float> b(0);
  CHECK((a.empty() && b.empty()));
  CHECK((a.data() == nullptr && b.data() == nullptr));
  CHECK(a.span().empty());
}

TEST_CASE("moving transfers ownership and empties the source") {
  amsp::host_buffer<int> a(8);
  a[3] = 42;
  int* const p = a.data();
  amsp::host_buffer<int> b(std::move(a));
  CHECK(b.data() == p);
  CHECK(b[3] == 42);
  CHECK((a.data() == nullptr && a.size() == 0));  // NOLINT(bugprone-use-after-move): documented state
  amsp::host_buffer<int> c(2);
  c = std::move(b);  // c's old allocation is released (LeakSanitizer checks it)
  CHECK(c.data() == p);
  CHECK(c.size() == 8);
  CHECK(b.empty());  // NOLINT(bugprone-use-after-move)
  auto& self = c;
  c = std::move(self);  // self-move keeps the buffer
  CHECK(c.data() == p);
}

TEST_CASE("an impossible size fails with rule buffer.size") {
  try {
    amsp::host_buffer<double> huge(std::numeric_limits<std::size_t>::max() / 4);
    FAIL("allocated an impossible buffer");
  } catch (const amsp::error& e) {
    CHECK(e.rule() == "buffer.size");
  }
}
