#pragma once
// Collective error agreement: a checkpoint phase runs on every rank; if any rank fails, every rank
// throws, with the same rule, instead of some ranks waiting forever in the next collective. The
// rank that failed first (lowest rule code, then lowest rank) throws its own exception; the others
// throw an amsp::error with the same rule naming that rank.

#include <cstddef>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/comm/communicator.hpp"
#include "amsp/core/error.hpp"

namespace amsp::io {

/// The rules a checkpoint phase can fail with, in the order in which they are reported when ranks
/// disagree; any other failure is reported as ckpt.failed.
inline constexpr std::string_view checkpoint_rules[] = {
    "ckpt.not_found",     "ckpt.incomplete",   "ckpt.index_mismatch", "ckpt.version",       "ckpt.index",
    "ckpt.missing_file",  "ckpt.truncated",    "ckpt.header_checksum", "ckpt.header",       "ckpt.checksum",
    "ckpt.rule_mismatch", "ckpt.model_mismatch", "ckpt.param_group_mismatch", "ckpt.exists",       "ckpt.io",            "optim.hyperparameter",
    "ckpt.failed"};

namespace detail {
[[nodiscard]] inline int checkpoint_rule_code(std::string_view rule) {
  const int n = static_cast<int>(std::size(checkpoint_rules));
  for (int i = 0; i < n; ++i)
    if (checkpoint_rules[i] == rule) return i;
  return n - 1;  // ckpt.failed
}
}  // namespace detail

/// Runs `phase` on this rank, then agrees with every rank of `world` (one all_gather of a double per
/// rank) and throws on every rank if any rank failed.
template <comm::communicator Comm, class Phase>
void agree(Comm& world, Phase&& phase) {
  std::exception_ptr mine;
  double code = -1.0;
  try {
    phase();
  } catch (const amsp::error& e) {
    mine = std::current_exception();
    code = detail::checkpoint_rule_code(e.rule());
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: still a named error
    mine = std::make_exception_ptr(amsp::error("ckpt.failed", std::string("amsp: ") + e.what()));
    code = detail::checkpoint_rule_code("ckpt.failed");
  }
  std::vector<double> codes(static_cast<std::size_t>(world.size()));
  world.all_gather(&code, codes.data(), 1);
  int first = -1;
  for (int r = 0; r < world.size(); ++r) {
    const double c = codes[static_cast<std::size_t>(r)];
    if (c >= 0.0 && (first < 0 || c < codes[static_cast<std::size_t>(first)])) first = r;
  }
  if (first < 0) return;
  const std::string_view rule = checkpoint_rules[static_cast<std::size_t>(codes[static_cast<std::size_t>(first)])];
  if (first == world.rank()) std::rethrow_exception(mine);
  fail(rule, "rank ", first, " failed with rule ", rule, " (its message says why)");
}

}  // namespace amsp::io
