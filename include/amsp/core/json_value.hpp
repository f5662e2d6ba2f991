#pragma once
// amsp::Json, the value amsp's JSON reader builds and its writer prints (amsp/core/json.hpp has
// both, and the choices they make), and the escapes both share.

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

}  // namespace detail

}  // namespace amsp
