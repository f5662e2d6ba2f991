// The example's text data and validation set used directly: input that amsp-train's command line
// cannot give (its options ask for a global batch and a validation set of at least one, and the
// sampler draws only windows inside the text) fails with the rule named.
#include <doctest/doctest.h>

#include <string>

#include "amsp_train/text_data.hpp"
#include "amsp_train/validation.hpp"

using namespace amsp_train;

TEST_CASE("text data: a window past the text, an empty batch and an empty validation set are errors") {
  const std::string text = "Hello, world.\n";  // 14 bytes
  const TokenBatch last = windows_at(text, {9}, 4);  // the last window of 5 bytes: 9 + 4 < 14
  CHECK(last.tokens.size() == 4);
  CHECK(last.targets.back() == '\n');
  CHECK_THROWS_WITH_AS((void)windows_at(text, {10}, 4), doctest::Contains("rule data.window"), amsp::error);

  CHECK(WindowSampler(text.size(), 4, 2, 1).micro_batch_size(2, 1) == 1);
  CHECK_THROWS_WITH_AS((void)WindowSampler(text.size(), 4, 0, 1), doctest::Contains("rule data.batch_size"),
                       amsp::error);
  CHECK_THROWS_WITH_AS((void)WindowSampler(text.size(), 13, 2, 1), doctest::Contains("rule data.too_short"),
                       amsp::error);

  CHECK_NOTHROW((void)ValidationSet(text, 4, 1, 0, 1));
  CHECK_THROWS_WITH_AS((void)ValidationSet(text, 4, 0, 0, 1), doctest::Contains("rule data.validation"), amsp::error);
}
