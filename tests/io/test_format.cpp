#include <doctest/doctest.h>
#include "amsp/io/checkpoint.hpp"
TEST_CASE("placeholder") {}
