#pragma once
// The example's tests need the real word list: without it they must fail loudly, naming the
// package to install, rather than skip.

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "amsp_train/char_data.hpp"

namespace amsp_train::test {

/// Fails the current test (with the package to install) when the word list is missing.
inline void require_word_list() {
  REQUIRE_MESSAGE(std::filesystem::exists(std::string(default_word_list)), "the word list ",
                  std::string(default_word_list), " is missing: install Debian's wamerican package (apt-get install wamerican)");
}

}  // namespace amsp_train::test
