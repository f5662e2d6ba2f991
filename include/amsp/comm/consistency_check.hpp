#pragma once
// The collective consistency check: before a collective, the ranks of a communicator agree on a
// fingerprint of the call they are about to issue (operation, label, count, element type,
// reduction, root, size of the group it runs in, the caller's phase, step and micro-batch, and a
// sequence number), by one all_gather of a fixed-size record. Any difference throws amsp::error with rule
// comm.collective_mismatch on every rank, naming both sides:
//
//   amsp: collective #12: rank 3 issued reduce_scatter of 'h.2' (count 1024 fp32, sum, group of 4,
//   step 0, micro-batch 0) where rank 0 issued reduce_scatter of 'h.1' (...) [rule comm.collective_mismatch]
//
// A backend's own checks (comm.count_mismatch, ...) compare the arguments of the collective that
// runs; this one also compares what the caller means by it (which bucket, which stage), so that
// two ranks that reduce two different buckets of the same size are caught instead of silently
// adding the wrong gradients. It is a debugging aid (docs/reliability.md: cost and use):
//
//   amsp::comm::CollectiveChecker checker;                  // one per checking communicator
//   checker(world, {.kind = amsp::comm::op_kind::all_reduce, .type = amsp::dtype::fp32,
//                   .count = n, .label = "h.1"});
//   sub.all_reduce(data, data, n);                            // the collective it describes
//
// The check is itself a collective on the communicator it is given (the engine checks each
// collective on the communicator that runs it): every rank of that communicator must call it the
// same number of times. Ranks that diverge onto different communicators wait for each other
// there instead; the threads and MPI watchdogs turn that wait into an error. The record travels
// as 16-bit words (bf16 elements, which every backend moves bit for bit in an all_gather).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/op.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"

namespace amsp::comm {

/// What a rank is about to issue. `label` names the data (e.g. a bucket); only its first
/// CallFingerprint::label_chars characters travel, but the whole of it is compared (a hash).
struct CollectiveCall {
  op_kind kind = op_kind::all_reduce;
  dtype type = dtype::fp32;
  std::size_t count = 0;
  reduce_op reduction = reduce_op::sum;  ///< compared for reductions only
  int root = 0;                          ///< compared for broadcast and reduce only
  std::string_view label{};              ///< what is moved, e.g. the bucket name
  std::string_view group{};              ///< which communicator it runs on, e.g. "P group"
  std::string_view phase{};              ///< where in the caller's loop, e.g. "last backward"
  int group_size = 0;                    ///< that communicator's size
  std::int64_t step = -1;                ///< the caller's loop position; -1: not applicable
  int micro_batch = -1;
};

/// The fixed-size record the ranks exchange: plain data, zero-filled, so it can travel as bytes.
struct CallFingerprint {
  static constexpr std::size_t label_chars = 47;
  static constexpr std::size_t group_chars = 15;
  static constexpr std::size_t phase_chars = 15;

  std::uint64_t sequence = 0;
  std::uint64_t count = 0;
  std::uint64_t label_hash = 0;
  std::int64_t step = -1;
  std::int32_t micro_batch = -1;
  std::int32_t root = 0;
  std::int32_t group_size = 0;
  std::uint8_t kind = 0;
  std::uint8_t type = 0;
  std::uint8_t reduction = 0;
  std::uint8_t reserved = 0;
  char label[label_chars + 1] = {};
  char group[group_chars + 1] = {};
  char phase[phase_chars + 1] = {};
};
static_assert(std::is_trivially_copyable_v<CallFingerprint> && sizeof(CallFingerprint) % sizeof(bf16) == 0);

namespace detail {

/// FNV-1a over the whole label: a truncated label still compares in full.
[[nodiscard]] constexpr std::uint64_t label_hash(std::string_view text) {
  std::uint64_t h = 1469598103934665603ull;
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

[[nodiscard]] inline bool rooted(std::uint8_t kind) {
  return kind == static_cast<std::uint8_t>(op_kind::broadcast) || kind == static_cast<std::uint8_t>(op_kind::reduce);
}
[[nodiscard]] inline bool reduces(std::uint8_t kind) {
  return kind == static_cast<std::uint8_t>(op_kind::reduce_scatter) ||
         kind == static_cast<std::uint8_t>(op_kind::all_reduce) || kind == static_cast<std::uint8_t>(op_kind::reduce);
}

[[nodiscard]] inline bool same_call(const CallFingerprint& a, const CallFingerprint& b) {
  return a.sequence == b.sequence && a.count == b.count && a.label_hash == b.label_hash && a.step == b.step &&
         a.micro_batch == b.micro_batch && a.group_size == b.group_size && a.kind == b.kind && a.type == b.type &&
         std::string_view(a.group) == std::string_view(b.group) && std::string_view(a.phase) == std::string_view(b.phase) &&
         (!reduces(a.kind) || a.reduction == b.reduction) && (!rooted(a.kind) || a.root == b.root);
}

[[nodiscard]] inline std::string describe(const CallFingerprint& f) {
  std::string text = std::string(name_of(static_cast<op_kind>(f.kind))) + " of '" + f.label + "'";
  text += " (count " + std::to_string(f.count) + " " + std::string(name_of(static_cast<dtype>(f.type)));
  if (reduces(f.kind)) text += ", " + std::string(name_of(static_cast<reduce_op>(f.reduction)));
  if (rooted(f.kind)) text += ", root " + std::to_string(f.root);
  if (f.group[0] != '\0') text += std::string(", ") + f.group;
  text += " of " + std::to_string(f.group_size) + " ranks";
  if (f.phase[0] != '\0') text += std::string(", ") + f.phase;
  if (f.step >= 0) text += ", step " + std::to_string(f.step);
  if (f.micro_batch >= 0) text += ", micro-batch " + std::to_string(f.micro_batch);
  if (f.sequence != 0) text += ", call #" + std::to_string(f.sequence);
  return text + ")";
}

}  // namespace detail

/// The record of `call` as the `sequence`-th check (text fields truncated, zero-padded).
[[nodiscard]] inline CallFingerprint fingerprint_of(const CollectiveCall& call, std::uint64_t sequence) {
  CallFingerprint f;
  f.sequence = sequence;
  f.count = call.count;
  f.label_hash = detail::label_hash(call.label);
  f.step = call.step;
  f.micro_batch = call.micro_batch;
  f.root = call.root;
  f.group_size = call.group_size;
  f.kind = static_cast<std::uint8_t>(call.kind);
  f.type = static_cast<std::uint8_t>(call.type);
  f.reduction = static_cast<std::uint8_t>(call.reduction);
  const std::string_view label = call.label.substr(0, CallFingerprint::label_chars);
  std::copy(label.begin(), label.end(), f.label);
  const std::string_view group = call.group.substr(0, CallFingerprint::group_chars);
  std::copy(group.begin(), group.end(), f.group);
  const std::string_view phase = call.phase.substr(0, CallFingerprint::phase_chars);
  std::copy(phase.begin(), phase.end(), f.phase);
  return f;
}

/// The ranks of `comm` agree that `call` is what each of them issues next, or every rank throws
/// rule comm.collective_mismatch naming the first rank that differs from rank 0 and both calls.
/// Collective over `comm` (one all_gather of sizeof(CallFingerprint) bytes per rank).
template <communicator C>
void check_collective(C& comm, const CollectiveCall& call, std::uint64_t sequence = 0) {
  const CallFingerprint mine = fingerprint_of(call, sequence);
  constexpr std::size_t words = sizeof(CallFingerprint) / sizeof(bf16);
  const auto n = static_cast<std::size_t>(comm.size());
  std::vector<bf16> send(words);
  std::vector<bf16> all(words * n);
  std::memcpy(send.data(), &mine, sizeof mine);
  comm.all_gather(send.data(), all.data(), words);
  std::vector<CallFingerprint> calls(n);
  std::memcpy(static_cast<void*>(calls.data()), all.data(), sizeof(CallFingerprint) * n);
  for (CallFingerprint& f : calls) {  // whatever arrived, its texts end
    f.label[CallFingerprint::label_chars] = '\0';
    f.group[CallFingerprint::group_chars] = '\0';
    f.phase[CallFingerprint::phase_chars] = '\0';
  }
  for (std::size_t r = 1; r < n; ++r)
    if (!detail::same_call(calls[r], calls[0]))
      fail("comm.collective_mismatch", "rank ", r, " issued ", detail::describe(calls[r]), " where rank 0 issued ",
           detail::describe(calls[0]), " (seen by rank ", comm.rank(),
           "): every rank must issue the same collectives on the same data in the same order");
}

/// Checks calls, numbering them per communicator (the sequence number is part of the fingerprint
/// and of the message). A communicator is known by its address: it must not move while checked.
class CollectiveChecker {
public:
  template <communicator C>
  void operator()(C& comm, const CollectiveCall& call) {
    check_collective(comm, call, ++sequence_of(&comm));
  }
  /// Calls checked so far, over every communicator.
  [[nodiscard]] std::uint64_t checked() const noexcept {
    std::uint64_t total = 0;
    for (const auto& [comm, sequence] : sequences_) total += sequence;
    return total;
  }

private:
  std::uint64_t& sequence_of(const void* comm) {
    for (auto& [known, sequence] : sequences_)
      if (known == comm) return sequence;
    return sequences_.emplace_back(comm, 0).second;
  }

  std::vector<std::pair<const void*, std::uint64_t>> sequences_;  // a handful of communicators
};

/// Whether the environment asks for the check: AMSP_CHECK_COLLECTIVES=1 (0 or unset: no). Any
/// other value is rule comm.check_collectives_env: a typo must not silently turn the check off.
/// Every rank must see the same value (under Open MPI: mpirun -x AMSP_CHECK_COLLECTIVES).
[[nodiscard]] inline bool collective_checks_requested() {
  const char* value = std::getenv("AMSP_CHECK_COLLECTIVES");
  if (value == nullptr) return false;
  const std::string_view text(value);
  if (text.empty() || text == "0") return false;
  if (text == "1") return true;
  fail("comm.check_collectives_env", "AMSP_CHECK_COLLECTIVES is '", text, "'; expected 1 (check) or 0 (do not)");
}

}  // namespace amsp::comm
