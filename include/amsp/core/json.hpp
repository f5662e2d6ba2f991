#pragma once
// A small JSON value with a strict reader and a writer (RFC 8259), for the files amsp reads and
// writes itself: bandwidth profiles, planner reports, checkpoint indexes. No dependencies.
//
// Choices, and why:
// - Objects keep their members in insertion order (a vector of pairs), so files written by amsp
//   are stable and diffable; lookups are linear, which is fine at the sizes these files have.
// - Duplicate keys are rejected: RFC 8259 leaves their meaning open, and a checkpoint index with
//   two entries for one tensor is corrupt, not something to resolve silently.
// - Numbers written without fraction or exponent that fit in int64 stay integers (byte offsets of
//   checkpoints must survive exactly); every other number is a double. The writer prints doubles
//   in the shortest form that reads back to the same value, and refuses NaN and infinities.
// - Nesting is limited (max_depth) so that hostile input cannot exhaust the stack.
// - Strings are byte strings: \uXXXX escapes (with surrogate pairs) become UTF-8, other bytes pass
//   through unvalidated.
// Malformed input fails with rule json.parse and the byte offset of the problem; using a value as
// the wrong type fails with json.type; a missing member with json.missing_key.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <string>
#include <string_view>

#include "amsp/core/detail/json_reader.hpp"
#include "amsp/core/error.hpp"
#include "amsp/core/json_value.hpp"

namespace amsp {

namespace detail {

inline void write_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    const auto* it = std::find_if(std::begin(json_short_escapes), std::end(json_short_escapes),
                                  [c](const auto& pair) { return pair.second == c; });
    if (it != std::end(json_short_escapes)) {
      out += '\\';
      out += it->first;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      constexpr char hex[] = "0123456789abcdef";
      out += "\\u00";
      out += hex[(c >> 4) & 0xF];
      out += hex[c & 0xF];
    } else {
      out += c;
    }
  }
  out += '"';
}

inline void write_json_number(std::string& out, double d) {
  check(std::isfinite(d), "json.write", "JSON cannot represent the number ", d);
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, d);
  const std::string_view text(buffer, static_cast<std::size_t>(end - buffer));
  out += text;
  // Keep doubles doubles across a round trip: "2" would read back as an integer.
  if (text.find_first_of(".eEn") == std::string_view::npos) out += ".0";
}

inline void write_json(std::string& out, const Json& value, int indent, int level) {
  // Writes `count` elements between brackets, one per line when indenting.
  const auto sequence = [&](char open, char close, std::size_t count, const auto& write_element) {
    const auto newline = [&](int lvl) {
      if (indent < 0) return;
      out += '\n';
      out.append(static_cast<std::size_t>(indent * lvl), ' ');
    };
    out += open;
    for (std::size_t i = 0; i < count; ++i) {
      if (i > 0) out += ',';
      newline(level + 1);
      write_element(i);
    }
    if (count > 0) newline(level);
    out += close;
  };
  switch (value.kind()) {
    case Json::Kind::null: out += "null"; break;
    case Json::Kind::boolean: out += value.as_bool() ? "true" : "false"; break;
    case Json::Kind::integer: out += std::to_string(value.as_int()); break;
    case Json::Kind::number: write_json_number(out, value.as_number()); break;
    case Json::Kind::string: write_json_string(out, value.as_string()); break;
    case Json::Kind::array: {
      const auto& elements = value.as_array();
      sequence('[', ']', elements.size(), [&](std::size_t i) { write_json(out, elements[i], indent, level + 1); });
      break;
    }
    case Json::Kind::object: {
      const auto& members = value.as_object();
      sequence('{', '}', members.size(), [&](std::size_t i) {
        write_json_string(out, members[i].first);
        out += indent < 0 ? ":" : ": ";
        write_json(out, members[i].second, indent, level + 1);
      });
      break;
    }
  }
}

}  // namespace detail

/// Parses one JSON document (surrounding whitespace allowed, nothing else). Fails with rule
/// json.parse naming the byte offset of the first problem.
[[nodiscard]] inline Json parse_json(std::string_view text) { return detail::JsonReader(text).read_document(); }

/// Writes `value` compactly (indent < 0) or pretty-printed with `indent` spaces per level.
/// Fails with rule json.write for NaN or infinite numbers.
[[nodiscard]] inline std::string to_json_string(const Json& value, int indent = -1) {
  std::string out;
  detail::write_json(out, value, indent, 0);
  return out;
}

}  // namespace amsp
