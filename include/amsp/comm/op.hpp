#pragma once
// The vocabulary every backend shares: which collective (op_kind) and how it combines values
// (reduce_op). The traffic counter, the benchmarks and the bandwidth profile key on op_kind.

#include <array>
#include <cstdint>
#include <string_view>

#include "amsp/core/error.hpp"

namespace amsp::comm {

/// The collectives of the Communicator concept.
enum class op_kind : std::uint8_t { all_gather, reduce_scatter, all_reduce, broadcast, reduce };

inline constexpr std::array<op_kind, 5> all_op_kinds{op_kind::all_gather, op_kind::reduce_scatter,
                                                     op_kind::all_reduce, op_kind::broadcast, op_kind::reduce};

/// How a reduction combines the ranks' values. `avg` is the sum divided by the group size, both in
/// the accumulation type (see docs/collectives.md, "Numerics").
enum class reduce_op : std::uint8_t { sum, avg };

[[nodiscard]] constexpr std::string_view name_of(op_kind kind) {
  switch (kind) {
    case op_kind::all_gather: return "all_gather";
    case op_kind::reduce_scatter: return "reduce_scatter";
    case op_kind::all_reduce: return "all_reduce";
    case op_kind::broadcast: return "broadcast";
    case op_kind::reduce: return "reduce";
  }
  return "unknown";
}

[[nodiscard]] constexpr std::string_view name_of(reduce_op op) { return op == reduce_op::sum ? "sum" : "avg"; }

/// Parses the names name_of(op_kind) prints (the spelling of bandwidth profiles).
[[nodiscard]] inline op_kind parse_op_kind(std::string_view text) {
  for (op_kind kind : all_op_kinds)
    if (name_of(kind) == text) return kind;
  fail("comm.op_parse", "unknown collective '", text,
       "' (expected all_gather, reduce_scatter, all_reduce, broadcast or reduce)");
}

}  // namespace amsp::comm
