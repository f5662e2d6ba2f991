// libFuzzer harness: the amsp-plan command line (amsp::planner::parse_cli and the inputs it
// describes). Input: the arguments separated by '\n'. Either fails with an amsp::error or gives
// planner inputs that validate.
#include <cstddef>
#include <cstdint>

#include "amsp/planner/cli.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> args = amsp::fuzz::split(amsp::fuzz::text_of(data, size), '\n');
  amsp::fuzz::expect_only_amsp_errors([&] {
    const amsp::planner::CliOptions options = amsp::planner::parse_cli(args);
    if (options.profile) return;  // names a file: the profile reader has its own harness
    (void)amsp::planner::planner_inputs(options);
  });
  return 0;
}
