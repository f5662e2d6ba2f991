#pragma once
// Command-line arguments for amsp's programs (amsp-plan, amsp-profile, amsp-train, amsp-ckpt):
// typed getters over argv, --help generated from what was declared, and one error convention.
// CMake target: amsp_cli_args (INTERFACE; include as "common/cli_args.hpp").
//
//   int main(int argc, char** argv) {
//     return amsp::cli::guarded_main("amsp-demo", std::cerr, [&] {
//       amsp::cli::Args args("amsp-demo", "amsp-demo: one line on what it does", argc, argv);
//       args.section("Model");
//       const std::int64_t steps = args.integer("--steps", "N", "optimizer steps", 200, amsp::cli::at_least(1));
//       const double lr = args.real("--lr", "X", "learning rate", 3e-3, amsp::cli::positive());
//       const auto out = args.optional_text("--out", "FILE", "where to write (default: stdout)");
//       const Mode mode = args.choice("--mode", "how to run", Mode::fast, {{"fast", Mode::fast}, {"safe", Mode::safe}});
//       const amsp::Mesh mesh = args.value("--mesh", "RxN", "ranks per node x nodes", amsp::Mesh(4, 2),
//                                          [](std::string_view s) { return amsp::parse_mesh(s); });
//       const bool quiet = args.flag("--quiet", "no progress lines");
//       args.epilog("Example: amsp-demo --steps 10");
//       if (args.finish()) { std::cout << args.help(); return 0; }  // --help was given
//       ...; return 0;
//     });
//   }
//
// Syntax: `--name value` or `--name=value`; flags take no value; a value that starts with "--"
// needs the `=` form. Every option may be given once. Tokens that are not options are positional
// arguments, read with positional() after the options. -h is --help.
//
// Error convention (one for every program): bad input throws cli::usage_error, whose message
// names the program, the option, the value and the rule broken, e.g.
//   amsp-plan: --mesh '3x': cannot read node count '' as an integer [rule factor.parse]
//   amsp-plan: --seq '0': expected an integer >= 1
//   amsp-plan: unknown option '--frobnicate'
// guarded_main prints it with a pointer to --help and returns exit status 2. A getter's parse
// function may throw amsp::error (the library's parsers do); it becomes a usage_error for that
// option. amsp::error escaping the body later (input the library rejects: a plan that does not fit
// the mesh, a missing file) is also exit 2; any other exception is exit 1.
//
// While --help is among the arguments, getters return their defaults without reading values, so
// `--help` works next to a bad option; finish() then returns true.

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amsp/core/error.hpp"

namespace amsp::cli {

/// Bad command-line input; what() is the whole message, program name first.
class usage_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Closed range of allowed values, with the wording of its rule ("an integer >= 1").
template <class T>
struct Range {
  T min = std::numeric_limits<T>::lowest();
  T max = std::numeric_limits<T>::max();
  bool exclude_min = false;  ///< (min, ...: for "positive" reals

  [[nodiscard]] bool contains(T v) const { return (exclude_min ? v > min : v >= min) && v <= max; }
  [[nodiscard]] std::string describe() const {
    std::ostringstream s;
    const bool low = min != std::numeric_limits<T>::lowest();
    const bool high = max != std::numeric_limits<T>::max();
    if (low && high) s << "in " << (exclude_min ? "(" : "[") << min << ", " << max << "]";
    else if (low) s << (exclude_min ? "> " : ">= ") << min;
    else if (high) s << "<= " << max;
    return s.str();
  }
};

template <class T>
[[nodiscard]] Range<T> at_least(T min) { return {min, std::numeric_limits<T>::max(), false}; }
template <class T>
[[nodiscard]] Range<T> between(T min, T max) { return {min, max, false}; }
/// > 0 (reals).
[[nodiscard]] inline Range<double> positive() { return {0.0, std::numeric_limits<double>::max(), true}; }
/// In (0, max].
[[nodiscard]] inline Range<double> positive_up_to(double max) { return {0.0, max, true}; }

/// Splits "a,b,c" into its non-empty items (for list options).
[[nodiscard]] inline std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) items.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

class Args {
public:
  /// `args`: the arguments after the program name. `summary`: the first lines of --help.
  Args(std::string program, std::string summary, std::vector<std::string> args)
      : program_(std::move(program)), summary_(std::move(summary)), tokens_(std::move(args)),
        used_(tokens_.size(), false) {
    for (std::size_t i = 0; i < tokens_.size(); ++i)
      if (tokens_[i] == "--help" || tokens_[i] == "-h") {
        help_ = true;
        used_[i] = true;
      }
  }
  Args(std::string program, std::string summary, int argc, char** argv)
      : Args(std::move(program), std::move(summary), std::vector<std::string>(argv + (argc > 0), argv + argc)) {}

  /// Starts a titled group of options in --help.
  void section(std::string_view title) { options_.push_back({std::string(title), "", "", ""}); }
  /// Text printed after the options in --help (examples, notes).
  void epilog(std::string_view text) { epilog_ = text; }

  /// True when `--name` is given (it takes no value).
  [[nodiscard]] bool flag(std::string_view name, std::string_view help) {
    declare(name, "", help);
    const std::optional<std::size_t> at = find(name);
    if (!at) return false;
    if (tokens_[*at].size() > name.size()) fail_option(name, "takes no value");
    return true;
  }

  [[nodiscard]] std::optional<std::string> optional_text(std::string_view name, std::string_view metavar,
                                                         std::string_view help) {
    declare(name, metavar, help);
    return raw(name);
  }
  [[nodiscard]] std::string text(std::string_view name, std::string_view metavar, std::string_view help,
                                 std::string fallback) {
    return optional_text(name, metavar, with_default(help, fallback)).value_or(std::move(fallback));
  }

  template <std::integral T = std::int64_t>
  [[nodiscard]] std::optional<T> optional_integer(std::string_view name, std::string_view metavar,
                                                  std::string_view help, Range<T> range = {}) {
    return optional_value<T>(name, metavar, help, [&](std::string_view s) { return parse_number(s, range, "an integer"); });
  }
  template <std::integral T = std::int64_t>
  [[nodiscard]] T integer(std::string_view name, std::string_view metavar, std::string_view help, T fallback,
                          Range<T> range = {}) {
    return optional_integer<T>(name, metavar, with_default(help, fallback), range).value_or(fallback);
  }

  [[nodiscard]] std::optional<double> optional_real(std::string_view name, std::string_view metavar,
                                                    std::string_view help, Range<double> range = {}) {
    return optional_value<double>(name, metavar, help,
                                  [&](std::string_view s) { return parse_number(s, range, "a number"); });
  }
  [[nodiscard]] double real(std::string_view name, std::string_view metavar, std::string_view help, double fallback,
                            Range<double> range = {}) {
    return optional_real(name, metavar, with_default(help, fallback), range).value_or(fallback);
  }

  /// One of the named `choices`; --help lists them.
  template <class T>
  [[nodiscard]] T choice(std::string_view name, std::string_view help, T fallback,
                         std::initializer_list<std::pair<std::string_view, T>> choices) {
    std::string names;
    std::string fallback_name;
    for (const auto& [choice_name, v] : choices) {
      names += (names.empty() ? "" : "|") + std::string(choice_name);
      if (v == fallback && fallback_name.empty()) fallback_name = choice_name;
    }
    return optional_value<T>(name, names, with_default(help, fallback_name), [&](std::string_view s) {
             for (const auto& [choice_name, v] : choices)
               if (s == choice_name) return v;
             std::string expected = names;
             for (char& c : expected)
               if (c == '|') c = ',';
             throw usage_error("expected one of " + expected);
           }).value_or(fallback);
  }

  /// A value read by `parse(std::string_view) -> T`, which may throw amsp::error or usage_error
  /// (its message is then the rule: "expected ..."). Absent: nullopt.
  template <class T, class Parse>
  [[nodiscard]] std::optional<T> optional_value(std::string_view name, std::string_view metavar, std::string_view help,
                                                Parse&& parse) {
    declare(name, metavar, help);
    const std::optional<std::string> text = raw(name);
    if (!text || help_) return std::nullopt;
    try {
      return static_cast<T>(std::invoke(parse, std::string_view(*text)));
    } catch (const usage_error& e) {
      fail_value(name, *text, e.what());
    } catch (const amsp::error& e) {
      fail_value(name, *text, without_prefix(e.what()));
    }
  }
  template <class T, class Parse>
  [[nodiscard]] T value(std::string_view name, std::string_view metavar, std::string_view help, T fallback,
                        Parse&& parse) {
    return optional_value<T>(name, metavar, help, std::forward<Parse>(parse)).value_or(std::move(fallback));
  }

  /// A comma-separated list, each item read by `parse`; absent: `fallback`; an empty list is an error.
  template <class T, class Parse>
  [[nodiscard]] std::vector<T> list(std::string_view name, std::string_view metavar, std::string_view help,
                                    std::vector<T> fallback, Parse&& parse) {
    return optional_value<std::vector<T>>(name, metavar, help, [&](std::string_view s) {
             std::vector<T> items;
             for (const std::string& item : split_list(s)) items.push_back(static_cast<T>(std::invoke(parse, item)));
             if (items.empty()) throw usage_error("expected a comma-separated list");
             return items;
           }).value_or(std::move(fallback));
  }

  /// The next positional argument (call after every option getter), or nullopt when none is left.
  [[nodiscard]] std::optional<std::string> positional(std::string_view metavar, std::string_view help) {
    positionals_.push_back({std::string(metavar), std::string(help)});
    for (std::size_t i = 0; i < tokens_.size(); ++i)
      if (!used_[i] && !is_option(tokens_[i])) {
        used_[i] = true;
        return tokens_[i];
      }
    return std::nullopt;
  }

  /// Call after the last getter. Returns true when --help was given: print help() and exit 0.
  /// Otherwise throws usage_error for an unknown option or an argument nothing asked for.
  [[nodiscard]] bool finish() const {
    if (help_) return true;
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      if (used_[i]) continue;
      if (is_option(tokens_[i]))
        throw usage_error(program_ + ": unknown option '" + option_name(tokens_[i]) + "' (see --help)");
      throw usage_error(program_ + ": unexpected argument '" + tokens_[i] + "' (see --help)");
    }
    return false;
  }

  [[nodiscard]] bool help_requested() const { return help_; }

  /// The --help text: summary, then every declared option in declaration order, then the epilog.
  [[nodiscard]] std::string help() const {
    std::string usage = "Usage: " + program_ + " [options]";
    for (const Positional& p : positionals_) usage += " [" + p.metavar + "]";
    std::string out = summary_ + "\n\n" + usage + "\n";
    for (const Positional& p : positionals_) out += format_row(p.metavar, p.help);
    for (const Declared& o : options_) {
      if (!o.section.empty()) out += "\n" + o.section + "\n";
      else out += format_row(o.name + (o.metavar.empty() ? "" : " " + o.metavar), o.help);
    }
    out += format_row("--help", "this text");
    if (!epilog_.empty()) out += "\n" + epilog_ + (epilog_.ends_with('\n') ? "" : "\n");
    return out;
  }

  [[nodiscard]] const std::string& program() const { return program_; }

private:
  struct Declared {
    std::string section;  // non-empty: a section title, not an option
    std::string name;
    std::string metavar;
    std::string help;
  };
  struct Positional {
    std::string metavar;
    std::string help;
  };

  static bool is_option(std::string_view token) { return token.starts_with("--") && token.size() > 2; }
  static std::string option_name(std::string_view token) { return std::string(token.substr(0, token.find('='))); }
  static std::string_view without_prefix(std::string_view message) {
    return message.starts_with("amsp: ") ? message.substr(6) : message;
  }

  template <class T>
  static std::string with_default(std::string_view help, const T& fallback) {
    std::ostringstream s;
    s << fallback;
    if (s.str().empty()) return std::string(help);
    return std::string(help) + " (default " + s.str() + ")";
  }

  // "  --name METAVAR         help", continuation lines of the help indented to its column.
  static std::string format_row(const std::string& left, std::string_view help) {
    constexpr std::size_t column = 26;
    std::string row = "  " + left;
    if (row.size() + 2 > column) row += "\n" + std::string(column, ' ');
    else row.append(column - row.size(), ' ');
    for (const char c : help) {
      row += c;
      if (c == '\n') row.append(column, ' ');
    }
    return row + "\n";
  }

  void declare(std::string_view name, std::string_view metavar, std::string_view help) {
    // A programming error in the tool, not bad input: amsp::error, not usage_error.
    check(name.starts_with("--") && name.size() > 2 && name.find('=') == std::string_view::npos, "cli.declare",
          "option name '", name, "' must read --name");
    for (const Declared& o : options_)
      check(o.name != name && name != "--help", "cli.declare", "option ", name, " declared twice");
    options_.push_back({"", std::string(name), std::string(metavar), std::string(help)});
  }

  // Index of the token naming `name` (`--name` or `--name=...`), marked used; nullopt if absent.
  std::optional<std::size_t> find(std::string_view name) {
    std::optional<std::size_t> at;
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      if (used_[i] || !is_option(tokens_[i]) || option_name(tokens_[i]) != name) continue;
      if (at) fail_option(name, "given more than once");
      at = i;
    }
    if (at) used_[*at] = true;
    return at;
  }

  // The text of value option `name`, or nullopt when absent.
  std::optional<std::string> raw(std::string_view name) {
    const std::optional<std::size_t> at = find(name);
    if (!at) return std::nullopt;
    const std::string& token = tokens_[*at];
    if (token.size() > name.size()) return token.substr(name.size() + 1);
    if (*at + 1 >= tokens_.size() || used_[*at + 1] || is_option(tokens_[*at + 1])) {
      if (help_) return std::nullopt;
      fail_option(name, "needs a value (--name VALUE or --name=VALUE)");
    }
    used_[*at + 1] = true;
    return tokens_[*at + 1];
  }

  template <class T>
  static T parse_number(std::string_view text, const Range<T>& range, std::string_view kind) {
    T v{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    const std::string rule = "expected " + std::string(kind) + (range.describe().empty() ? "" : " ") + range.describe();
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) throw usage_error(rule);
    if constexpr (std::floating_point<T>)
      if (!std::isfinite(v)) throw usage_error(rule);
    if (!range.contains(v)) throw usage_error(rule);
    return v;
  }

  [[noreturn]] void fail_option(std::string_view name, std::string_view rule) const {
    throw usage_error(program_ + ": " + std::string(name) + ": " + std::string(rule));
  }
  [[noreturn]] void fail_value(std::string_view name, std::string_view text, std::string_view rule) const {
    throw usage_error(program_ + ": " + std::string(name) + " '" + std::string(text) + "': " + std::string(rule));
  }

  std::string program_;
  std::string summary_;
  std::string epilog_;
  std::vector<std::string> tokens_;
  std::vector<bool> used_;
  std::vector<Declared> options_;
  std::vector<Positional> positionals_;
  bool help_ = false;
};

/// Runs `body()` (returning the exit status) and applies the error convention: usage_error and
/// amsp::error -> message on `err`, exit 2; any other exception -> message, exit 1.
template <class Body>
[[nodiscard]] int guarded_main(std::string_view program, std::ostream& err, Body&& body) {
  try {
    return std::invoke(std::forward<Body>(body));
  } catch (const usage_error& e) {
    err << e.what() << "\n(run " << program << " --help for usage)\n";
    return 2;
  } catch (const amsp::error& e) {
    err << program << ": " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    err << program << ": internal error: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace amsp::cli
