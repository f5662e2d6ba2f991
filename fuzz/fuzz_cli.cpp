// libFuzzer harness: the command-line parsing of amsp's programs, through amsp-plan's
// (tools/amsp_plan/plan_cli.hpp, built on the shared tools/common/cli_args.hpp) and a direct use
// of cli::Args with one getter of every kind. Input: the arguments separated by '\n'. Bad input
// may only end in cli::usage_error (exit status 2 in the programs) or amsp::error.
#include <cstddef>
#include <cstdint>

#include "common/cli_args.hpp"
#include "fuzz_input.hpp"
#include "plan_cli.hpp"

namespace {

enum class Mode { fast, safe };

void every_getter(const std::vector<std::string>& argv) {
  namespace cli = amsp::cli;
  cli::Args args("amsp-fuzz", "every getter", argv);
  (void)args.integer<std::int64_t>("--steps", "N", "steps", 10, cli::at_least<std::int64_t>(1));
  (void)args.integer<int>("--ranks", "N", "ranks", 4, cli::between(1, 1024));
  (void)args.real("--lr", "X", "learning rate", 1e-3, cli::positive());
  (void)args.real("--fraction", "X", "fraction", 0.5, cli::positive_up_to(1.0));
  (void)args.choice("--mode", "mode", Mode::fast, {{"fast", Mode::fast}, {"safe", Mode::safe}});
  (void)args.value("--mesh", "RxN", "mesh", amsp::Mesh(4, 2), [](std::string_view s) { return amsp::parse_mesh(s); });
  (void)args.optional_text("--out", "FILE", "output");
  (void)args.flag("--quiet", "quiet");
  (void)args.list<std::string>("--names", "A,B", "names", {"a"}, [](std::string_view s) { return std::string(s); });
  if (args.finish()) (void)args.help();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> argv = amsp::fuzz::split(amsp::fuzz::text_of(data, size), '\n');
  for (const std::string& a : argv)
    if (a.find("profile") != std::string::npos) return 0;  // names a file: fuzz_bandwidth_profile reads those
  for (const auto& run : {+[](const std::vector<std::string>& v) { every_getter(v); },
                          +[](const std::vector<std::string>& v) {
                            (void)amsp_plan::planner_inputs(amsp_plan::parse_cli(v));
                          }}) {
    try {
      run(argv);
    } catch (const amsp::cli::usage_error& e) {
      if (std::string_view(e.what()).empty()) __builtin_trap();
    } catch (const amsp::error& e) {
      if (e.rule().empty()) __builtin_trap();
    }
  }
  return 0;
}
