#pragma once
// What every harness shares: the rule that bad input may only ever end in amsp::error (anything
// else escaping, or a sanitizer report, is a finding), and splitting the fuzzer's bytes into
// fields.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/core/error.hpp"

namespace amsp::fuzz {

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Splits `text` at every `separator`.
inline std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

/// Runs `body`; an amsp::error is the expected answer to bad input, anything else propagates
/// (libFuzzer reports an uncaught exception as a crash).
template <class Body>
void expect_only_amsp_errors(Body&& body) {
  try {
    body();
  } catch (const amsp::error& e) {
    if (e.rule().empty()) __builtin_trap();  // every error names its rule
  }
}

}  // namespace amsp::fuzz
