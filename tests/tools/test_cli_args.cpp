// tools/common/cli_args.hpp: each getter against the syntax and error convention its header
// documents (exact messages, since programs and their users rely on them), --help, finish().
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "amsp/sharding/mesh.hpp"
#include "common/cli_args.hpp"

namespace cli = amsp::cli;

namespace {

enum class Color { red, green };

cli::Args demo(std::vector<std::string> argv) { return cli::Args("demo", "demo: a test program", std::move(argv)); }

// The message of the usage_error `f` throws, or "no error".
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const cli::usage_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("cli_args: values in both spellings, defaults when absent, positionals after options") {
  cli::Args args = demo({"--steps", "12", "--lr=0.5", "in.txt", "--name", "x=y", "--quiet", "out.txt"});
  CHECK(args.integer("--steps", "N", "steps", 200, cli::at_least(1)) == 12);
  CHECK(args.real("--lr", "X", "rate", 3e-3, cli::positive()) == 0.5);
  CHECK(args.text("--name", "S", "name", "none") == "x=y");
  CHECK(args.text("--other", "S", "absent", "fallback") == "fallback");
  CHECK(!args.optional_integer("--seed", "S", "absent").has_value());
  CHECK(args.flag("--quiet", "quiet"));
  CHECK(!args.flag("--verbose", "absent"));
  CHECK(args.positional("IN", "input") == "in.txt");
  CHECK(args.positional("OUT", "output") == "out.txt");
  CHECK(!args.positional("MORE", "nothing left").has_value());
  CHECK(!args.finish());
}

TEST_CASE("cli_args: choices, custom parsers and lists") {
  cli::Args args = demo({"--color", "green", "--mesh", "4x2", "--sizes", "1,2,,3"});
  CHECK(args.choice("--color", "color", Color::red, {{"red", Color::red}, {"green", Color::green}}) == Color::green);
  const amsp::Mesh mesh = args.value("--mesh", "RxN", "mesh", amsp::Mesh(1, 1), [](std::string_view s) { return amsp::parse_mesh(s); });
  CHECK(mesh.world_size() == 8);
  const std::vector<int> sizes = args.list<int>("--sizes", "N,...", "sizes", {7}, [](std::string_view s) { return std::stoi(std::string(s)); });
  CHECK(sizes == std::vector<int>{1, 2, 3});
  CHECK(!args.finish());
  cli::Args none = demo({});
  CHECK(none.list<int>("--sizes", "N,...", "sizes", {7}, [](std::string_view s) { return std::stoi(std::string(s)); }) ==
        std::vector<int>{7});
}

TEST_CASE("cli_args: every kind of bad input names the program, the option and the rule") {
  const auto integer = [](std::vector<std::string> argv) {
    return message_of([&] { (void)demo(std::move(argv)).integer("--n", "N", "n", 1, cli::between(1, 10)); });
  };
  CHECK(integer({"--n", "0"}) == "demo: --n '0': expected an integer in [1, 10]");
  CHECK(integer({"--n", "11"}) == "demo: --n '11': expected an integer in [1, 10]");
  CHECK(integer({"--n", "4k"}) == "demo: --n '4k': expected an integer in [1, 10]");
  CHECK(integer({"--n", ""}) == "demo: --n '': expected an integer in [1, 10]");
  CHECK(integer({"--n", "99999999999999999999"}) == "demo: --n '99999999999999999999': expected an integer in [1, 10]");
  CHECK(integer({"--n"}) == "demo: --n: needs a value (--name VALUE or --name=VALUE)");
  CHECK(integer({"--n", "--m"}) == "demo: --n: needs a value (--name VALUE or --name=VALUE)");
  CHECK(integer({"--n", "1", "--n=2"}) == "demo: --n: given more than once");
  const auto real = [](std::vector<std::string> argv) {
    return message_of([&] { (void)demo(std::move(argv)).real("--x", "X", "x", 1.0, cli::positive()); });
  };
  CHECK(real({"--x", "0"}) == "demo: --x '0': expected a number > 0");
  CHECK(real({"--x", "nan"}) == "demo: --x 'nan': expected a number > 0");
  CHECK(real({"--x", "inf"}) == "demo: --x 'inf': expected a number > 0");
  CHECK(message_of([] {
          (void)demo({"--color", "blue"}).choice("--color", "c", Color::red, {{"red", Color::red}, {"green", Color::green}});
        }) == "demo: --color 'blue': expected one of red,green");
  CHECK(message_of([] { (void)demo({"--quiet=1"}).flag("--quiet", "q"); }) == "demo: --quiet: takes no value");
  // A library parser's amsp::error becomes a usage error of the option, its rule id kept.
  const std::string mesh = message_of([] {
    (void)demo({"--mesh", "3x"}).optional_value<amsp::Mesh>("--mesh", "RxN", "m", [](std::string_view s) { return amsp::parse_mesh(s); });
  });
  CHECK(mesh.starts_with("demo: --mesh '3x': "));
  CHECK(mesh.find("[rule factor.parse]") != std::string::npos);
  CHECK(mesh.find("amsp: ") == std::string::npos);
  CHECK(message_of([] { (void)demo({"--sizes", ","}).list<int>("--sizes", "N", "s", {}, [](std::string_view) { return 1; }); }) ==
        "demo: --sizes ',': expected a comma-separated list");
}

TEST_CASE("cli_args: finish rejects unknown options and arguments nothing asked for") {
  CHECK(message_of([] { (void)demo({"--frobnicate=3"}).finish(); }) == "demo: unknown option '--frobnicate' (see --help)");
  CHECK(message_of([] { (void)demo({"stray"}).finish(); }) == "demo: unexpected argument 'stray' (see --help)");
  CHECK(message_of([] {
          cli::Args args = demo({"--n", "1", "stray"});
          (void)args.integer("--n", "N", "n", 0);
          (void)args.finish();
        }) == "demo: unexpected argument 'stray' (see --help)");
}

TEST_CASE("cli_args: --help lists the declared options and wins over bad values") {
  cli::Args args = demo({"--n", "bad", "--help", "--unknown"});
  args.section("Numbers");
  CHECK(args.integer("--n", "N", "how many\nsecond line", 5) == 5);
  CHECK(args.choice("--color", "which color", Color::green, {{"red", Color::red}, {"green", Color::green}}) == Color::green);
  CHECK(!args.flag("--quiet", "no output"));
  args.epilog("Example: demo --n 3");
  REQUIRE(args.finish());
  const std::string help = args.help();
  CHECK(help.starts_with("demo: a test program\n\nUsage: demo [options]\n"));
  CHECK(help.find("\nNumbers\n  --n N                   how many\n                          second line (default 5)\n") !=
        std::string::npos);
  CHECK(help.find("  --color red|green       which color (default green)\n") != std::string::npos);
  CHECK(help.find("  --quiet                 no output\n") != std::string::npos);
  CHECK(help.find("  --help                  this text\n") != std::string::npos);
  CHECK(help.ends_with("Example: demo --n 3\n"));
}

TEST_CASE("cli_args: guarded_main turns errors into exit status 2 (1 for the unexpected)") {
  std::ostringstream err;
  CHECK(cli::guarded_main("demo", err, [] { return 0; }) == 0);
  CHECK(cli::guarded_main("demo", err, []() -> int { throw cli::usage_error("demo: --n '0': expected 1"); }) == 2);
  CHECK(err.str() == "demo: --n '0': expected 1\n(run demo --help for usage)\n");
  err.str("");
  CHECK(cli::guarded_main("demo", err, []() -> int { amsp::fail("plan.fit", "does not fit"); }) == 2);
  CHECK(err.str() == "demo: amsp: does not fit [rule plan.fit]\n");
  err.str("");
  CHECK(cli::guarded_main("demo", err, []() -> int { throw std::runtime_error("boom"); }) == 1);
  CHECK(err.str() == "demo: internal error: boom\n");
}

TEST_CASE("cli_args: a program declaring an option twice or misspelled is an amsp::error (cli.declare)") {
  // A fault of the program, not of its user: amsp::error, not usage_error (exit status 1, not 2).
  cli::Args args = demo({});
  (void)args.integer("--steps", "N", "steps", 200, cli::at_least(1));
  CHECK_THROWS_WITH_AS((void)args.integer("--steps", "N", "again", 200, cli::at_least(1)),
                       doctest::Contains("option --steps declared twice [rule cli.declare]"), amsp::error);
  CHECK_THROWS_WITH_AS((void)args.flag("steps", "no dashes"), doctest::Contains("must read --name [rule cli.declare]"),
                       amsp::error);
  CHECK_THROWS_WITH_AS((void)args.flag("--help", "reserved"), doctest::Contains("[rule cli.declare]"), amsp::error);
}
