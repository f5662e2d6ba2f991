// Inputs the fuzzers of fuzz/ found, kept as regression tests: each must fail with an amsp::error
// naming its rule, never undefined behaviour.
#include <doctest/doctest.h>

#include "amsp/sharding/presets.hpp"

TEST_CASE("a mesh or factor with more ranks than an int holds is named (fuzz_plan: signed overflow)") {
  CHECK_THROWS_WITH_AS((void)amsp::parse_mesh("77777717x77770"), doctest::Contains("has more than 2147483647 ranks"),
                       amsp::error);
  CHECK_THROWS_WITH_AS((void)amsp::Mesh(65536, 65536), doctest::Contains("has more than 2147483647 ranks"), amsp::error);
  CHECK_THROWS_WITH_AS((void)amsp::parse_plan("p=65536x65536,g=1x1,os=1x1", amsp::Mesh(4, 2)),
                       doctest::Contains("factor '65536x65536' has more than"), amsp::error);
  CHECK(amsp::parse_mesh("46340x46340").world_size() == 46340 * 46340);  // the largest square that fits
}
