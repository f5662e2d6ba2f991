#pragma once
// The rule of the amsp::error a body throws on the ranks of a threads world (the engine's error
// tests: bad input fails with an error naming the rule, on every rank, never a hang).
#include <string>

#include "amsp/comm/threads.hpp"
#include "amsp/core/error.hpp"
#include "amsp/sharding.hpp"

namespace amsp::test {

/// Runs `body` on every rank of a 2 x 1 world and returns the rule of the error rank 0 saw.
template <class F>
inline std::string rule_of_error(F&& body, const amsp::Mesh& mesh = amsp::Mesh(2, 1), int world = 2) {
  std::string rule = "(no error)";
  try {
    amsp::comm::run_on_threads(world, [&](amsp::comm::ThreadsCommunicator& comm) {
      try {
        body(comm, mesh);
      } catch (const amsp::error& e) {
        if (comm.rank() == 0) rule = e.rule();
        throw;
      }
    });
  } catch (const amsp::error& e) {
    if (rule == "(no error)") rule = e.rule();
  }
  return rule;
}

}  // namespace amsp::test
