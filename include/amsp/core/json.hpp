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
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "amsp/core/error.hpp"

namespace amsp {

class Json {
public:
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;
  enum class Kind { null, boolean, integer, number, string, array, object };

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool value) : value_(value) {}
  template <class Int>
    requires(std::is_integral_v<Int> && !std::is_same_v<Int, bool>)
  Json(Int value) : value_(to_int64(value)) {}
  Json(double value) : value_(value) {}
  Json(const char* value) : value_(std::string(value)) {}
  Json(std::string value) : value_(std::move(value)) {}
  Json(std::string_view value) : value_(std::string(value)) {}
  Json(Array value) : value_(std::move(value)) {}
  Json(Object value) : value_(std::move(value)) {}

  [[nodiscard]] static Json array() { return Json(Array{}); }
  [[nodiscard]] static Json object() { return Json(Object{}); }

  [[nodiscard]] Kind kind() const { return static_cast<Kind>(value_.index()); }
  [[nodiscard]] bool is_null() const { return kind() == Kind::null; }
  [[nodiscard]] bool is_bool() const { return kind() == Kind::boolean; }
  [[nodiscard]] bool is_integer() const { return kind() == Kind::integer; }
  /// True for integers and doubles alike.
  [[nodiscard]] bool is_number() const { return kind() == Kind::integer || kind() == Kind::number; }
  [[nodiscard]] bool is_string() const { return kind() == Kind::string; }
  [[nodiscard]] bool is_array() const { return kind() == Kind::array; }
  [[nodiscard]] bool is_object() const { return kind() == Kind::object; }

  [[nodiscard]] bool as_bool() const { return get<bool>("a boolean"); }
  /// Any number as a double (integers beyond 2^53 lose precision).
  [[nodiscard]] double as_number() const {
    if (is_integer()) return static_cast<double>(std::get<std::int64_t>(value_));
    return get<double>("a number");
  }
  /// An integer, or a double with an exactly integral value in int64 range.
  [[nodiscard]] std::int64_t as_int() const {
    if (kind() == Kind::number) {
      const double d = std::get<double>(value_);
      check(std::nearbyint(d) == d && d >= -9.2233720368547758e18 && d < 9.2233720368547758e18, "json.type",
            "JSON number ", d, " is not an integer in int64 range");
      return static_cast<std::int64_t>(d);
    }
    return get<std::int64_t>("an integer");
  }
  [[nodiscard]] const std::string& as_string() const { return get<std::string>("a string"); }
  [[nodiscard]] const Array& as_array() const { return get<Array>("an array"); }
  [[nodiscard]] Array& as_array() { return get<Array>("an array"); }
  [[nodiscard]] const Object& as_object() const { return get<Object>("an object"); }
  [[nodiscard]] Object& as_object() { return get<Object>("an object"); }

  /// The member `key` of an object, or nullptr when absent.
  [[nodiscard]] const Json* find(std::string_view key) const {
    for (const auto& [k, v] : as_object())
      if (k == key) return &v;
    return nullptr;
  }
  [[nodiscard]] bool contains(std::string_view key) const { return find(key) != nullptr; }
  /// The member `key`; fails with json.missing_key when absent.
  [[nodiscard]] const Json& at(std::string_view key) const {
    const Json* v = find(key);
    check(v != nullptr, "json.missing_key", "JSON object has no member '", key, "'");
    return *v;
  }
  /// The member `key`, inserted as null when absent; a null value becomes an empty object first.
  Json& operator[](std::string_view key) {
    if (is_null()) value_ = Object{};
    Object& object = as_object();
    for (auto& [k, v] : object)
      if (k == key) return v;
    object.emplace_back(std::string(key), Json());
    return object.back().second;
  }
  /// Appends to an array; a null value becomes an empty array first.
  void push_back(Json element) {
    if (is_null()) value_ = Array{};
    as_array().push_back(std::move(element));
  }
  /// Elements of an array or members of an object.
  [[nodiscard]] std::size_t size() const { return is_array() ? as_array().size() : as_object().size(); }

  /// Structural equality; integers and doubles compare by value (1 == 1.0).
  friend bool operator==(const Json& a, const Json& b) {
    if (a.is_number() && b.is_number()) {
      if (a.is_integer() && b.is_integer()) return a.as_int() == b.as_int();
      return a.as_number() == b.as_number();
    }
    return a.value_ == b.value_;
  }

private:
  template <class Int>
  static std::int64_t to_int64(Int value) {
    if constexpr (std::is_unsigned_v<Int> && sizeof(Int) >= sizeof(std::int64_t))
      check(value <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), "json.range",
            "integer ", value, " does not fit a JSON int64");
    return static_cast<std::int64_t>(value);
  }

  template <class T>
  const T& get(const char* what) const {
    const T* v = std::get_if<T>(&value_);
    if (v == nullptr) [[unlikely]] fail("json.type", "JSON value is ", kind_name(), ", expected ", what);
    return *v;
  }
  template <class T>
  T& get(const char* what) {
    return const_cast<T&>(std::as_const(*this).get<T>(what));
  }
  [[nodiscard]] const char* kind_name() const {
    constexpr const char* names[] = {"null", "a boolean", "an integer", "a number", "a string", "an array", "an object"};
    return names[value_.index()];
  }

  std::variant<std::nullptr_t, bool, std::int64_t, double, std::string, Array, Object> value_{nullptr};
};

namespace detail {

// The two-character escapes of JSON strings: the letter after the backslash, and the character.
// ('/' may be escaped on input but is never escaped on output.)
inline constexpr std::pair<char, char> json_short_escapes[] = {
    {'"', '"'}, {'\\', '\\'}, {'b', '\b'}, {'f', '\f'}, {'n', '\n'}, {'r', '\r'}, {'t', '\t'}};

class JsonReader {
public:
  static constexpr int max_depth = 256;

  explicit JsonReader(std::string_view text) : text_(text) {}

  Json read_document() {
    skip_space();
    Json value = read_value(0);
    skip_space();
    if (pos_ != text_.size()) error("unexpected '", text_[pos_], "' after the JSON value");
    return value;
  }

private:
  template <class... Parts>
  [[noreturn]] void error(const Parts&... parts) const {
    fail("json.parse", "malformed JSON at offset ", pos_, ": ", parts...);
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  [[nodiscard]] char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void expect(char c) {
    if (pos_ >= text_.size()) error("expected '", c, "' but the text ended");
    if (text_[pos_] != c) error("expected '", c, "' but found '", text_[pos_], "'");
    ++pos_;
  }
  void expect_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) error("unknown literal (expected '", word, "')");
    pos_ += word.size();
  }

  Json read_value(int depth) {
    if (pos_ >= text_.size()) error("expected a value but the text ended");
    switch (text_[pos_]) {
      case '{': return read_object(depth + 1);
      case '[': return read_array(depth + 1);
      case '"': return Json(read_string());
      case 't': expect_word("true"); return Json(true);
      case 'f': expect_word("false"); return Json(false);
      case 'n': expect_word("null"); return Json();
      default:
        if (text_[pos_] == '-' || (text_[pos_] >= '0' && text_[pos_] <= '9')) return read_number();
        error("unexpected '", text_[pos_], "' where a value should start");
    }
  }

  // Reads "[" or "{", then elements separated by commas up to `close`, each by read_element().
  template <class ReadElement>
  void read_sequence(int depth, char close, ReadElement&& read_element) {
    if (depth > max_depth) error("nesting deeper than ", max_depth, " levels");
    ++pos_;  // the opening bracket
    skip_space();
    if (peek() == close) {
      ++pos_;
      return;
    }
    while (true) {
      skip_space();
      read_element();
      skip_space();
      if (peek() != ',') break;
      ++pos_;
    }
    expect(close);
  }

  Json read_object(int depth) {
    Json::Object members;
    read_sequence(depth, '}', [&] {
      if (peek() != '"') error("expected a string key");
      const std::size_t key_offset = pos_;
      std::string key = read_string();
      for (const auto& m : members)
        if (m.first == key) fail("json.parse", "malformed JSON at offset ", key_offset, ": duplicate key '", key, "'");
      skip_space();
      expect(':');
      skip_space();
      members.emplace_back(std::move(key), read_value(depth));
    });
    return Json(std::move(members));
  }

  Json read_array(int depth) {
    Json::Array elements;
    read_sequence(depth, ']', [&] { elements.push_back(read_value(depth)); });
    return Json(std::move(elements));
  }

  unsigned read_hex4() {
    if (pos_ + 4 > text_.size()) error("\\u needs four hex digits");
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(text_.data() + pos_, text_.data() + pos_ + 4, value, 16);
    if (ec != std::errc{} || end != text_.data() + pos_ + 4) error("\\u needs four hex digits");
    pos_ += 4;
    return value;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  unsigned read_escaped_code_point() {
    const unsigned first = read_hex4();
    if (first >= 0xDC00 && first <= 0xDFFF) error("lone low surrogate \\u", std::hex, first);
    if (first < 0xD800 || first > 0xDBFF) return first;
    if (text_.substr(pos_, 2) != "\\u") error("high surrogate not followed by a low surrogate");
    pos_ += 2;
    const unsigned second = read_hex4();
    if (second < 0xDC00 || second > 0xDFFF) error("high surrogate not followed by a low surrogate");
    return 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
  }

  std::string read_string() {
    ++pos_;  // the opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) error("unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) error("control character in a string (escape it)");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= text_.size()) error("unterminated escape");
      const char e = text_[pos_++];
      if (e == 'u') {
        append_utf8(out, read_escaped_code_point());
      } else if (e == '/') {
        out += '/';
      } else {
        const auto* it = std::find_if(std::begin(json_short_escapes), std::end(json_short_escapes),
                                      [e](const auto& pair) { return pair.first == e; });
        if (it == std::end(json_short_escapes)) {
          --pos_;
          error("unknown escape '\\", e, "'");
        }
        out += it->second;
      }
    }
  }

  void digits() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    if (pos_ == start) error("expected a digit");
  }

  Json read_number() {
    const std::size_t start = pos_;
    bool integral = true;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
      if (peek() >= '0' && peek() <= '9') error("leading zero in a number");
    } else {
      digits();
    }
    if (peek() == '.') {
      ++pos_;
      integral = false;
      digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      integral = false;
      if (peek() == '+' || peek() == '-') ++pos_;
      digits();
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integral) {
      std::int64_t value = 0;
      const auto [end, ec] = std::from_chars(first, last, value);
      if (ec == std::errc{} && end == last) return Json(value);
    }
    double value = 0;
    const auto [end, ec] = std::from_chars(first, last, value);
    if (ec == std::errc::result_out_of_range) {
      pos_ = start;
      error("number ", std::string_view(first, static_cast<std::size_t>(last - first)), " is out of double range");
    }
    if (ec != std::errc{} || end != last) error("malformed number");
    return Json(value);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

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
