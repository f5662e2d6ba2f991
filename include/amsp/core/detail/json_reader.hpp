#pragma once
// amsp's strict JSON reader (parse_json in amsp/core/json.hpp): RFC 8259, duplicate keys refused,
// integers kept exact, nesting bounded, errors as rule json.parse with the byte offset.

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "amsp/core/error.hpp"
#include "amsp/core/json_value.hpp"

namespace amsp::detail {

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

}  // namespace amsp::detail
