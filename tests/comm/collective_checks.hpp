#pragma once
// The backend-independent body of the collective tests: one case runs one collective on any
// Communicator and compares every element with a serial reference computed in float64 from the
// inputs of all ranks (which every rank can regenerate: inputs are a function of rank and index).
// Inputs are small integers, exact in every dtype, so sums are exact and the only rounding is the
// documented one of avg: (sum / n) in the accumulation type, rounded once to the element type.

#include <cstddef>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "amsp/comm/communicator.hpp"
#include "amsp/core/dtype.hpp"

namespace amsp::test {

/// Element `i` of rank `rank`'s input: an integer in [-8, 8].
[[nodiscard]] inline int input_value(int rank, std::size_t i) {
  return static_cast<int>((static_cast<std::size_t>(rank) * 131u + i * 7u) % 17u) - 8;
}

template <class T>
[[nodiscard]] T element(double value) {
  if constexpr (std::is_same_v<T, double>) return value;
  else return from_float<T>(static_cast<float>(value));
}
template <class T>
[[nodiscard]] double value_of(T x) {
  if constexpr (std::is_same_v<T, double>) return x;
  else return static_cast<double>(to_float(x));
}

/// The reduction of element `i` over the inputs of `n` ranks, rounded as documented.
template <class T>
[[nodiscard]] T reduced(int n, std::size_t i, comm::reduce_op op) {
  double sum = 0;
  for (int r = 0; r < n; ++r) sum += input_value(r, i);
  if (op == comm::reduce_op::avg) sum /= n;
  return element<T>(sum);
}

struct CollectiveCase {
  comm::op_kind kind = comm::op_kind::all_gather;
  comm::reduce_op op = comm::reduce_op::sum;
  std::size_t count = 0;
  bool in_place = false;
  int root = 0;
  bool async = false;
};

[[nodiscard]] inline std::string describe(const CollectiveCase& c, dtype type, int n) {
  std::ostringstream out;
  out << comm::name_of(c.kind) << " " << name_of(type) << " count=" << c.count << " n=" << n
      << (c.in_place ? " in-place" : " out-of-place") << " " << comm::name_of(c.op) << " root=" << c.root
      << (c.async ? " async" : "");
  return out.str();
}

namespace detail {
inline constexpr double sentinel = 99.0;

template <class T>
[[nodiscard]] std::vector<T> inputs_of(int rank, std::size_t count, std::size_t offset = 0) {
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = element<T>(input_value(rank, offset + i));
  return v;
}

// First element of `got[0, count)` that differs from expected(i), described; "" if none.
template <class T, class Expected>
[[nodiscard]] std::string first_mismatch(const T* got, std::size_t count, Expected expected) {
  for (std::size_t i = 0; i < count; ++i) {
    const double want = value_of(expected(i));
    if (value_of(got[i]) != want) {
      std::ostringstream out;
      out << "element " << i << " is " << value_of(got[i]) << ", expected " << want;
      return out.str();
    }
  }
  return {};
}

template <class Comm, class Call, class AsyncCall>
void issue(Comm&, bool async, Call call, AsyncCall async_call) {
  if (async) {
    comm::Handle h = async_call();
    h.wait();
  } else {
    call();
  }
}
}  // namespace detail

/// Runs one collective on `comm` and returns "" or a description of the first wrong element.
template <class T, class Comm>
[[nodiscard]] std::string run_case(Comm& comm, const CollectiveCase& c) {
  using comm::op_kind;
  const int n = comm.size();
  const int r = comm.rank();
  const std::size_t count = c.count;
  std::string bad;
  switch (c.kind) {
    case op_kind::all_gather: {
      std::vector<T> recv(static_cast<std::size_t>(n) * count, element<T>(detail::sentinel));
      std::vector<T> send = detail::inputs_of<T>(r, count);
      T* my_block = recv.data() + static_cast<std::size_t>(r) * count;
      if (c.in_place && count != 0) std::memcpy(my_block, send.data(), count * sizeof(T));
      const T* src = c.in_place ? my_block : send.data();
      detail::issue(comm, c.async, [&] { comm.all_gather(src, recv.data(), count); },
                    [&] { return comm.all_gather_async(src, recv.data(), count); });
      bad = detail::first_mismatch(recv.data(), recv.size(), [&](std::size_t i) {
        return element<T>(input_value(static_cast<int>(i / count), i % count));
      });
      break;
    }
    case op_kind::reduce_scatter: {
      std::vector<T> send = detail::inputs_of<T>(r, static_cast<std::size_t>(n) * count);
      std::vector<T> out(count, element<T>(detail::sentinel));
      T* dst = c.in_place ? send.data() + static_cast<std::size_t>(r) * count : out.data();
      detail::issue(comm, c.async, [&] { comm.reduce_scatter(send.data(), dst, count, c.op); },
                    [&] { return comm.reduce_scatter_async(send.data(), dst, count, c.op); });
      bad = detail::first_mismatch(dst, count, [&](std::size_t i) {
        return reduced<T>(n, static_cast<std::size_t>(r) * count + i, c.op);
      });
      break;
    }
    case op_kind::all_reduce:
    case op_kind::reduce: {
      std::vector<T> send = detail::inputs_of<T>(r, count);
      std::vector<T> out(count, element<T>(detail::sentinel));
      T* dst = c.in_place ? send.data() : out.data();
      if (c.kind == op_kind::all_reduce)
        detail::issue(comm, c.async, [&] { comm.all_reduce(send.data(), dst, count, c.op); },
                      [&] { return comm.all_reduce_async(send.data(), dst, count, c.op); });
      else
        detail::issue(comm, c.async, [&] { comm.reduce(send.data(), dst, count, c.op, c.root); },
                      [&] { return comm.reduce_async(send.data(), dst, count, c.op, c.root); });
      if (c.kind == op_kind::all_reduce || r == c.root)
        bad = detail::first_mismatch(dst, count, [&](std::size_t i) { return reduced<T>(n, i, c.op); });
      else if (!c.in_place)  // a non-root's receive buffer is not written
        bad = detail::first_mismatch(dst, count, [](std::size_t) { return element<T>(detail::sentinel); });
      break;
    }
    case op_kind::broadcast: {
      // Non-roots' send buffers hold their own inputs, which must not leak into the result.
      std::vector<T> send = detail::inputs_of<T>(r, count);
      std::vector<T> out(count, element<T>(detail::sentinel));
      T* dst = c.in_place ? send.data() : out.data();
      detail::issue(comm, c.async, [&] { comm.broadcast(send.data(), dst, count, c.root); },
                    [&] { return comm.broadcast_async(send.data(), dst, count, c.root); });
      bad = detail::first_mismatch(dst, count, [&](std::size_t i) { return element<T>(input_value(c.root, i)); });
      break;
    }
  }
  return bad.empty() ? bad : describe(c, dtype_of_v<T>, n) + " on rank " + std::to_string(r) + ": " + bad;
}

/// Every collective and reduce op for the given count and in-place flag (root = last rank).
[[nodiscard]] inline std::vector<CollectiveCase> cases_for(std::size_t count, bool in_place, int n, bool async) {
  std::vector<CollectiveCase> cases;
  for (comm::op_kind kind : comm::all_op_kinds) {
    const bool reduces = kind != comm::op_kind::all_gather && kind != comm::op_kind::broadcast;
    for (comm::reduce_op op : {comm::reduce_op::sum, comm::reduce_op::avg}) {
      if (!reduces && op == comm::reduce_op::avg) continue;
      cases.push_back(CollectiveCase{kind, op, count, in_place, n - 1, async});
    }
  }
  return cases;
}

/// Runs every case for every dtype; returns the failures.
template <class Comm>
[[nodiscard]] std::vector<std::string> run_sweep(Comm& comm, const std::vector<std::size_t>& counts,
                                                 const std::vector<dtype>& types, bool async = false) {
  std::vector<std::string> failures;
  for (std::size_t count : counts)
    for (bool in_place : {false, true})
      for (const CollectiveCase& c : cases_for(count, in_place, comm.size(), async))
        for (dtype type : types) {
          std::string bad = visit_dtype(type, [&](auto e) { return run_case<decltype(e)>(comm, c); });
          if (!bad.empty()) failures.push_back(std::move(bad));
        }
  return failures;
}

inline const std::vector<dtype> all_dtypes{dtype::fp32, dtype::fp64, dtype::bf16, dtype::fp16};

/// The rule of the amsp::error `f()` throws, or "" when it throws nothing.
template <class F>
[[nodiscard]] std::string rule_thrown(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return e.rule();
  }
  return {};
}

/// The whole message of the amsp::error `f()` throws, or "" when it throws nothing.
template <class F>
[[nodiscard]] std::string message_thrown(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return e.what();
  }
  return {};
}

}  // namespace amsp::test
