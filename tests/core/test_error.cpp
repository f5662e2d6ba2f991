// amsp::error and the check helpers: rule ids, messages that name the values, no formatting cost
// when a check passes.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "amsp/core/error.hpp"

namespace {
// Streams and counts how often it was formatted.
struct Counted {
  int* count;
  friend std::ostream& operator<<(std::ostream& out, const Counted& c) {
    ++*c.count;
    return out << "counted";
  }
};

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const amsp::error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("error carries its rule and a message naming it") {
  const amsp::error e("plan.ordering", "s0_p = 4 exceeds s0_g = 2");
  CHECK(e.rule() == "plan.ordering");
  CHECK(std::string(e.what()) == "amsp: s0_p = 4 exceeds s0_g = 2 [rule plan.ordering]");
  const std::runtime_error& base = e;  // callers may catch the standard base
  CHECK(std::string(base.what()).find("plan.ordering") != std::string::npos);
}

TEST_CASE("fail streams every part in order") {
  try {
    amsp::fail("comm.count_mismatch", "count ", 12, " vs ", 3.5, ' ', std::string("end"));
    FAIL("fail returned");
  } catch (const amsp::error& e) {
    CHECK(e.rule() == "comm.count_mismatch");
    CHECK(std::string(e.what()) == "amsp: count 12 vs 3.5 end [rule comm.count_mismatch]");
  }
}

TEST_CASE("check throws only when the condition is false, and formats only then") {
  int formatted = 0;
  CHECK_NOTHROW(amsp::check(true, "x.rule", Counted{&formatted}));
  CHECK(formatted == 0);
  CHECK_THROWS_AS(amsp::check(false, "x.rule", Counted{&formatted}), amsp::error);
  CHECK(formatted == 1);
  CHECK(message_of([] { amsp::check(1 + 1 == 3, "math.sum", "1 + 1 is ", 2); }) ==
        "amsp: 1 + 1 is 2 [rule math.sum]");
}

TEST_CASE("check_equal names both values and what they are") {
  CHECK_NOTHROW(amsp::check_equal(4, 4, "engine.gradient_size", "gradient element count"));
  CHECK(message_of([] { amsp::check_equal(std::size_t{7}, 8, "engine.gradient_size", "gradient element count"); }) ==
        "amsp: gradient element count is 7 but must equal 8 [rule engine.gradient_size]");
  CHECK(message_of([] { amsp::check_equal(std::string("a"), "b", "io.name", "tensor name"); }) ==
        "amsp: tensor name is a but must equal b [rule io.name]");
}

TEST_CASE("check_equal compares integers of different signedness by value") {
  CHECK_NOTHROW(amsp::check_equal(std::size_t{8}, 8, "x.rule", "count"));
  // -1 converted to size_t would equal SIZE_MAX under a plain ==.
  CHECK_THROWS_AS(amsp::check_equal(static_cast<std::size_t>(-1), -1, "x.rule", "count"), amsp::error);
  CHECK_THROWS_AS(amsp::check_equal(-1, 4294967295u, "x.rule", "count"), amsp::error);
}
