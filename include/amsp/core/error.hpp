#pragma once
// The one error model of amsp: every rule the library enforces fails with an amsp::error whose
// message names the rule that was broken and the values that broke it.

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace amsp {

/// Thrown for every violated rule (invalid plan, mismatched sizes, corrupt input, backend failure).
/// `rule()` is a short stable identifier ("plan.ordering", "comm.count_mismatch", ...) that tests
/// and callers can match on; `what()` is the full human-readable message.
class error : public std::runtime_error {
public:
  error(std::string rule, const std::string& message)
      : std::runtime_error("amsp: " + message + " [rule " + rule + "]"), rule_(std::move(rule)) {}

  [[nodiscard]] const std::string& rule() const noexcept { return rule_; }

private:
  std::string rule_;
};

namespace detail {
template <class... Parts>
[[nodiscard]] std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

/// Throws amsp::error for `rule` with a message built by streaming every part in order.
template <class... Parts>
[[noreturn]] void fail(std::string_view rule, const Parts&... parts) {
  throw error(std::string(rule), detail::concat(parts...));
}

/// Throws amsp::error for `rule` unless `condition` holds. The message parts are only formatted
/// when the check fails, so checks are cheap on the hot path.
template <class... Parts>
void check(bool condition, std::string_view rule, const Parts&... parts) {
  if (!condition) [[unlikely]] fail(rule, parts...);
}

namespace detail {
// Integers std::cmp_equal accepts (it rejects bool and the character types).
template <class T>
concept plain_integer = std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
                        !std::is_same_v<T, wchar_t> && !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> &&
                        !std::is_same_v<T, char32_t>;

template <class A, class B>
[[nodiscard]] constexpr bool values_equal(const A& a, const B& b) {
  // Mixed signed/unsigned integers compare by value (size_t 7 vs int -1 is not equal), without
  // the sign-compare warning a plain == would raise in the caller's -Werror build.
  if constexpr (plain_integer<A> && plain_integer<B>) return std::cmp_equal(a, b);
  else return a == b;
}
}  // namespace detail

/// Checks `actual == expected` and names both values, e.g.
/// check_equal(n, layout.size(), "engine.gradient_size", "gradient element count").
/// Integers of different signedness compare by value.
template <class A, class B>
void check_equal(const A& actual, const B& expected, std::string_view rule, std::string_view what) {
  if (!detail::values_equal(actual, expected)) [[unlikely]]
    fail(rule, what, " is ", actual, " but must equal ", expected);
}

}  // namespace amsp
