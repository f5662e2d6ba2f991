#pragma once
// The one definition of how many bytes a collective moves, shared by the traffic counter, the
// engine's expectations, the planner's cost model and the benchmarks' busbw.
//
// Conventions (nccl-tests' ring algorithm): for a group of n ranks and a collective whose full
// buffer is S bytes (the gathered output of AllGather, the unreduced input of ReduceScatter, the
// buffer of AllReduce / Broadcast / Reduce), each rank sends (and, symmetrically, receives)
//   all_gather, reduce_scatter, broadcast, reduce   (n-1)/n × S
//   all_reduce                                      2(n-1)/n × S
// and a group of one rank moves nothing. These volumes are not whole bytes in general (S = 12,
// n = 8), so they are kept as exact fractions: counted and expected traffic compare exactly.

#include <compare>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <string>

#include "amsp/comm/op.hpp"
#include "amsp/core/error.hpp"

namespace amsp::comm {

/// An exact, non-negative number of bytes: numerator() / denominator(), always in lowest terms.
class ByteVolume {
public:
  constexpr ByteVolume() = default;
  constexpr ByteVolume(std::uint64_t bytes) : num_(bytes) {}  // NOLINT: whole bytes convert implicitly

  /// numerator / denominator bytes; the denominator must be positive.
  [[nodiscard]] static ByteVolume fraction(std::uint64_t numerator, std::uint64_t denominator) {
    check(denominator != 0, "comm.byte_volume", "byte volume with denominator 0");
    const std::uint64_t g = std::gcd(numerator, denominator);
    ByteVolume v;
    v.num_ = g == 0 ? 0 : numerator / g;
    v.den_ = g == 0 ? 1 : denominator / g;
    return v;
  }

  [[nodiscard]] constexpr std::uint64_t numerator() const noexcept { return num_; }
  [[nodiscard]] constexpr std::uint64_t denominator() const noexcept { return den_; }
  [[nodiscard]] constexpr bool is_whole() const noexcept { return den_ == 1; }
  [[nodiscard]] constexpr double to_double() const noexcept {
    return static_cast<double>(num_) / static_cast<double>(den_);
  }

  ByteVolume& operator+=(const ByteVolume& other) {
    const std::uint64_t l = std::lcm(den_, other.den_);
    *this = fraction(checked_mul(num_, l / den_) + checked_mul(other.num_, l / other.den_), l);
    return *this;
  }
  friend ByteVolume operator+(ByteVolume a, const ByteVolume& b) { return a += b; }
  /// Exact scaling, e.g. a per-call volume times a number of calls.
  friend ByteVolume operator*(const ByteVolume& v, std::uint64_t k) { return fraction(checked_mul(v.num_, k), v.den_); }

  friend constexpr bool operator==(const ByteVolume&, const ByteVolume&) = default;
  friend std::strong_ordering operator<=>(const ByteVolume& a, const ByteVolume& b) {
    return static_cast<unsigned __int128>(a.num_) * b.den_ <=> static_cast<unsigned __int128>(b.num_) * a.den_;
  }

private:
  [[nodiscard]] static std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b) {
    std::uint64_t out = 0;
    check(!__builtin_mul_overflow(a, b, &out), "comm.byte_volume", "byte volume ", a, " x ", b,
          " overflows 64 bits");
    return out;
  }

  std::uint64_t num_ = 0;
  std::uint64_t den_ = 1;
};

/// "1536" or "3584/3".
[[nodiscard]] inline std::string to_string(const ByteVolume& v) {
  return v.is_whole() ? std::to_string(v.numerator())
                      : std::to_string(v.numerator()) + "/" + std::to_string(v.denominator());
}
inline std::ostream& operator<<(std::ostream& out, const ByteVolume& v) { return out << to_string(v); }

/// Bytes each rank of a `group_size`-rank group sends in one `kind` collective whose full buffer
/// is `full_bytes` (see the conventions at the top of this file).
[[nodiscard]] inline ByteVolume bytes_sent_per_rank(op_kind kind, std::uint64_t full_bytes, int group_size) {
  check(group_size >= 1, "comm.group_size", "group size must be at least 1, got ", group_size);
  const auto n = static_cast<std::uint64_t>(group_size);
  const std::uint64_t steps = kind == op_kind::all_reduce ? 2 * (n - 1) : n - 1;
  return ByteVolume::fraction(full_bytes, n) * steps;
}

/// The nccl-tests bus-bandwidth factor: busbw = algbw × factor, algbw = full_bytes / seconds.
/// (n-1)/n for all_gather and reduce_scatter, 2(n-1)/n for all_reduce, 1 for broadcast and reduce
/// (nccl-tests' choice for rooted collectives, whose per-rank volume above is still (n-1)/n × S).
[[nodiscard]] inline double bus_bandwidth_factor(op_kind kind, int group_size) {
  const double n = group_size;
  switch (kind) {
    case op_kind::all_gather:
    case op_kind::reduce_scatter: return (n - 1) / n;
    case op_kind::all_reduce: return 2 * (n - 1) / n;
    case op_kind::broadcast:
    case op_kind::reduce: return 1.0;
  }
  return 1.0;
}

}  // namespace amsp::comm
