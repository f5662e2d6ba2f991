#pragma once
// Turns the failure lists of the collective checks into doctest assertions (the first ten shown).

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace amsp::test {

inline void require_none(const std::vector<std::string>& failures) {
  for (std::size_t i = 0; i < failures.size() && i < 10; ++i) FAIL_CHECK(failures[i]);
  CHECK(failures.empty());
}

}  // namespace amsp::test
