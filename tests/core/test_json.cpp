#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "amsp/core/json.hpp"

using amsp::Json;
using amsp::parse_json;
using amsp::to_json_string;

namespace {
// The offset a json.parse error names, read back from its message.
long parse_error_offset(const std::string& text) {
  try {
    (void)parse_json(text);
  } catch (const amsp::error& e) {
    CHECK(e.rule() == "json.parse");
    const std::string what = e.what();
    const auto at = what.find("offset ");
    REQUIRE(at != std::string::npos);
    return std::stol(what.substr(at + 7));
  }
  FAIL("no json.parse error for: " << text);
  return -1;
}
}  // namespace

TEST_CASE("json: reads every kind of value") {
  const Json v = parse_json(R"( {"a": [1, -2.5, 3e2, true, false, null], "b": {"c": "d\n\u00e9\ud83d\ude00"}, "e": -0} )");
  REQUIRE(v.is_object());
  const auto& a = v.at("a").as_array();
  REQUIRE(a.size() == 6);
  CHECK(a[0].is_integer());
  CHECK(a[0].as_int() == 1);
  CHECK(a[1].as_number() == -2.5);
  CHECK(!a[2].is_integer());
  CHECK(a[2].as_number() == 300.0);
  CHECK(a[2].as_int() == 300);
  CHECK(a[3].as_bool());
  CHECK(!a[4].as_bool());
  CHECK(a[5].is_null());
  // U+00E9 is C3 A9 in UTF-8, U+1F600 (a surrogate pair) is F0 9F 98 80.
  CHECK(v.at("b").at("c").as_string() == "d\n\xC3\xA9\xF0\x9F\x98\x80");
  CHECK(v.at("e").as_int() == 0);
  CHECK(v.find("missing") == nullptr);
}

TEST_CASE("json: integers keep all 64 bits, larger ones become doubles") {
  CHECK(parse_json("9007199254740993").as_int() == 9007199254740993LL);  // 2^53 + 1: not a double
  CHECK(parse_json("-9223372036854775808").as_int() == INT64_MIN);
  const Json big = parse_json("18446744073709551616");  // 2^64
  CHECK(!big.is_integer());
  CHECK(big.as_number() == 18446744073709551616.0);
}

TEST_CASE("json: an unsigned integer above int64's range is refused, not wrapped") {
  CHECK(Json(std::uint64_t{INT64_MAX}).as_int() == INT64_MAX);
  const std::uint64_t too_big = std::uint64_t{INT64_MAX} + 1;
  CHECK_THROWS_WITH_AS((void)Json(too_big), doctest::Contains("[rule json.range]"), amsp::error);
  CHECK_THROWS_WITH_AS((void)Json(too_big), doctest::Contains("integer 9223372036854775808"), amsp::error);
}

TEST_CASE("json: write then read gives the same value") {
  Json doc;
  doc["name"] = "profile \"x\"\\\t\x01";
  doc["offsets"].push_back(0);
  doc["offsets"].push_back(std::int64_t{1} << 40);
  doc["ratio"] = 0.1;
  doc["third"] = 1.0 / 3.0;
  doc["whole"] = 2.0;
  doc["tiny"] = 5e-324;
  doc["flags"] = Json::array();
  doc["flags"].push_back(true);
  doc["flags"].push_back(nullptr);
  doc["empty"] = Json::object();
  for (int indent : {-1, 0, 2}) {
    const std::string text = to_json_string(doc, indent);
    const Json back = parse_json(text);
    CHECK(back == doc);
    CHECK(back.at("third").as_number() == 1.0 / 3.0);  // shortest form still round-trips exactly
    CHECK(!back.at("whole").is_integer());             // 2.0 stays a double
    CHECK(to_json_string(back, indent) == text);
  }
  CHECK(to_json_string(doc.at("name")) == R"("profile \"x\"\\\t\u0001")");
  CHECK(to_json_string(parse_json(R"({"a":[1,2],"b":{}})"), 1) == "{\n \"a\": [\n  1,\n  2\n ],\n \"b\": {}\n}");
}

TEST_CASE("json: members keep insertion order") {
  const Json v = parse_json(R"({"z":1,"a":2,"m":3})");
  const auto& members = v.as_object();
  REQUIRE(members.size() == 3);
  CHECK(members[0].first == "z");
  CHECK(members[1].first == "a");
  CHECK(members[2].first == "m");
  CHECK(to_json_string(v) == R"({"z":1,"a":2,"m":3})");
}

TEST_CASE("json: malformed input names the offset") {
  CHECK(parse_error_offset("") == 0);
  CHECK(parse_error_offset("   ") == 3);
  CHECK(parse_error_offset("{\"a\":1,}") == 7);
  CHECK(parse_error_offset("[1 2]") == 3);
  CHECK(parse_error_offset("[1,]") == 3);
  CHECK(parse_error_offset("01") == 1);
  CHECK(parse_error_offset("1.") == 2);
  CHECK(parse_error_offset("-") == 1);
  CHECK(parse_error_offset("tru") == 0);
  CHECK(parse_error_offset("\"abc") == 4);
  CHECK(parse_error_offset("\"a\nb\"") == 2);
  CHECK(parse_error_offset(R"("\x")") == 2);
  CHECK(parse_error_offset(R"("\u12G4")") == 3);
  CHECK(parse_error_offset(R"("\udc00")") == 7);
  CHECK(parse_error_offset(R"("\ud800x")") == 7);
  CHECK(parse_error_offset(R"({"a":1,"a":2})") == 7);
  CHECK(parse_error_offset("{1:2}") == 1);
  CHECK(parse_error_offset("[] []") == 3);
  CHECK(parse_error_offset("1e999") == 0);
  CHECK(parse_error_offset("NaN") == 0);
  CHECK(parse_error_offset(std::string(300, '[') + std::string(300, ']')) == 256);
}

TEST_CASE("json: deep but legal nesting is read") {
  const Json v = parse_json(std::string(200, '[') + std::string(200, ']'));
  CHECK(v.is_array());
}

TEST_CASE("json: wrong-type access and missing keys are errors") {
  const Json v = parse_json(R"({"n": 1.5, "s": "x"})");
  CHECK_THROWS_WITH_AS((void)v.at("s").as_number(), doctest::Contains("json.type"), amsp::error);
  CHECK_THROWS_WITH_AS((void)v.at("n").as_int(), doctest::Contains("not an integer"), amsp::error);
  CHECK_THROWS_WITH_AS((void)v.at("q"), doctest::Contains("json.missing_key"), amsp::error);
  CHECK_THROWS_WITH_AS((void)v.as_array(), doctest::Contains("is an object"), amsp::error);
  CHECK_THROWS_WITH_AS((void)to_json_string(Json(std::nan(""))), doctest::Contains("json.write"), amsp::error);
  CHECK_THROWS_WITH_AS((void)to_json_string(Json(INFINITY)), doctest::Contains("json.write"), amsp::error);
}
