// The example's data pipeline: word list, examples, split, and the batch sampler's contract.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "amsp_train/batch_sampler.hpp"
#include "amsp_train/char_data.hpp"
#include "word_list.hpp"

using namespace amsp_train;

TEST_CASE("tokens: '.' is 0 and a..z are 1..26") {
  CHECK(token_of('.') == 0);
  CHECK(token_of('a') == 1);
  CHECK(token_of('z') == 26);
  for (char c = 'a'; c <= 'z'; ++c) CHECK(char_of(token_of(c)) == c);
  CHECK(char_of(0) == '.');
  CHECK_THROWS_WITH_AS((void)token_of('A'), doctest::Contains("data.character"), amsp::error);
  CHECK_THROWS_WITH_AS((void)char_of(27), doctest::Contains("data.token_range"), amsp::error);
  static_assert(token_of('m') == 13);  // usable at compile time
}

TEST_CASE("plain words are non-empty and only a-z") {
  CHECK(is_plain_word("cat"));
  CHECK_FALSE(is_plain_word(""));
  CHECK_FALSE(is_plain_word("Cat"));
  CHECK_FALSE(is_plain_word("cat's"));
  CHECK_FALSE(is_plain_word("caf\xc3\xa9"));
}

TEST_CASE("examples of a word, makemore style") {
  const std::vector<std::string> words{"cat", "o"};
  const ExampleSet set = make_examples(words, 3);
  // "cat": ... -> c, ..c -> a, .ca -> t, cat -> . ; "o": ... -> o, ..o -> .
  const std::vector<std::string> contexts{"...", "..c", ".ca", "cat", "...", "..o"};
  const std::string targets = "cat.o.";
  REQUIRE(set.size() == targets.size());
  CHECK(set.context == 3);
  for (std::size_t i = 0; i < set.size(); ++i) {
    CAPTURE(i);
    for (std::size_t k = 0; k < 3; ++k) CHECK(set.contexts[i * 3 + k] == token_of(contexts[i][k]));
    CHECK(set.targets[i] == token_of(targets[i]));
  }
  CHECK_THROWS_WITH_AS((void)make_examples(words, 0), doctest::Contains("data.context"), amsp::error);
}

TEST_CASE("the wamerican word list: plain words only, the right size") {
  test::require_word_list();
  const std::vector<std::string> words = read_word_list(std::string(default_word_list));
  // wamerican 2020.12 has 104k lines of which ~64k are plain lowercase words.
  CHECK(words.size() > 50000);
  CHECK(words.size() < 104334);
  CHECK(std::all_of(words.begin(), words.end(), [](const std::string& w) {
    return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) { return c >= 'a' && c <= 'z'; });
  }));
  CHECK(std::find(words.begin(), words.end(), "zebra") != words.end());
  CHECK(std::set<std::string>(words.begin(), words.end()).size() == words.size());
}

TEST_CASE("a missing word list fails naming the package") {
  CHECK_THROWS_WITH_AS((void)read_word_list("/nonexistent/american-english"), doctest::Contains("wamerican"),
                       amsp::error);
  CHECK_THROWS_WITH_AS((void)read_word_list("/nonexistent/american-english"),
                       doctest::Contains("data.word_list_missing"), amsp::error);
}

TEST_CASE("the split is disjoint, complete, about 10%, and depends on the word alone") {
  test::require_word_list();
  std::vector<std::string> words = read_word_list(std::string(default_word_list));
  const CharDataset data = make_char_dataset(words, 8, 100);
  const std::set<std::string> train(data.train_words.begin(), data.train_words.end());
  const std::set<std::string> validation(data.validation_words.begin(), data.validation_words.end());
  CHECK(train.size() + validation.size() == words.size());
  CHECK(std::none_of(validation.begin(), validation.end(), [&](const std::string& w) { return train.contains(w); }));
  const double share = static_cast<double>(validation.size()) / static_cast<double>(words.size());
  CHECK(share > 0.09);
  CHECK(share < 0.11);

  // Same words in another order: the same split.
  std::reverse(words.begin(), words.end());
  const CharDataset reversed = make_char_dataset(words, 8, 100);
  CHECK(std::set<std::string>(reversed.validation_words.begin(), reversed.validation_words.end()) == validation);

  // Examples: one per character plus the final boundary, all tokens in the vocabulary.
  std::size_t expected = 0;
  for (const std::string& w : data.train_words) expected += w.size() + 1;
  CHECK(data.train.size() == expected);
  CHECK(data.train.contexts.size() == expected * 8);
  CHECK(std::all_of(data.train.contexts.begin(), data.train.contexts.end(), [](auto t) { return t < vocab_size; }));
  CHECK(std::all_of(data.validation.targets.begin(), data.validation.targets.end(), [](auto t) { return t < vocab_size; }));
  CHECK(std::count(data.train.targets.begin(), data.train.targets.end(), boundary_token) ==
        static_cast<std::ptrdiff_t>(data.train_words.size()));
}

TEST_CASE("bad words and shares are rejected") {
  const std::vector<std::string> bad{"cat", "Dog"};
  CHECK_THROWS_WITH_AS((void)make_char_dataset(bad, 3, 100), doctest::Contains("data.word"), amsp::error);
  const std::vector<std::string> good{"cat"};
  CHECK_THROWS_WITH_AS((void)make_char_dataset(good, 3, 1001), doctest::Contains("data.split"), amsp::error);
}

TEST_CASE("sampler: deterministic, seed-dependent, step-dependent, in range") {
  const BatchSampler a(1000, 64, 7);
  const BatchSampler b(1000, 64, 7);
  const BatchSampler c(1000, 64, 8);
  CHECK(a.global_indices(3) == b.global_indices(3));
  CHECK(a.global_indices(3) != c.global_indices(3));
  CHECK(a.global_indices(3) != a.global_indices(4));
  for (std::uint64_t step = 0; step < 10; ++step)
    for (const std::size_t e : a.global_indices(step)) CHECK(e < 1000);
  CHECK_THROWS_WITH_AS((void)a.example_index(0, 64), doctest::Contains("data.batch_position"), amsp::error);
  CHECK_THROWS_AS(BatchSampler(0, 64, 1), amsp::error);
  CHECK_THROWS_AS(BatchSampler(10, 0, 1), amsp::error);
}

TEST_CASE("sampler: draws are close to uniform") {
  const BatchSampler sampler(10, 1000, 3);
  std::vector<int> counts(10, 0);
  for (std::uint64_t step = 0; step < 100; ++step)
    for (const std::size_t e : sampler.global_indices(step)) ++counts[e];
  // 100k draws into 10 bins: 10000 each, binomial std ~95; 5% is over 5 standard deviations.
  for (const int n : counts) CHECK(std::abs(n - 10000) < 500);
}

TEST_CASE("sampler: every split of the global batch covers it exactly, in rank-major order") {
  const BatchSampler sampler(5000, 96, 11);
  const std::vector<std::size_t> global = sampler.global_indices(5);
  for (const BatchSplit split : {BatchSplit{1, 1}, BatchSplit{1, 3}, BatchSplit{2, 1}, BatchSplit{4, 2},
                                 BatchSplit{8, 1}, BatchSplit{8, 3}, BatchSplit{2, 4}, BatchSplit{6, 2}}) {
    CAPTURE(split.world_size);
    CAPTURE(split.micro_batches);
    const std::size_t b = sampler.micro_batch_size(split);
    CHECK(b * static_cast<std::size_t>(split.world_size * split.micro_batches) == 96);
    std::vector<std::size_t> joined;
    for (int r = 0; r < split.world_size; ++r)
      for (int m = 0; m < split.micro_batches; ++m) {
        const std::vector<std::size_t> part = sampler.micro_batch_indices(5, split, r, m);
        CHECK(part.size() == b);
        joined.insert(joined.end(), part.begin(), part.end());
      }
    CHECK(joined == global);
  }
  CHECK_THROWS_WITH_AS((void)sampler.micro_batch_size({5, 1}), doctest::Contains("data.batch_split"), amsp::error);
  CHECK_THROWS_WITH_AS((void)sampler.micro_batch_indices(0, {2, 1}, 2, 0), doctest::Contains("data.batch_rank"),
                       amsp::error);
  CHECK_THROWS_WITH_AS((void)sampler.micro_batch_indices(0, {2, 2}, 0, 2), doctest::Contains("data.batch_micro"),
                       amsp::error);
}

TEST_CASE("sampler: a micro-batch gathers the examples at its indices") {
  const std::vector<std::string> words{"alpha", "beta", "gamma", "delta"};
  const ExampleSet set = make_examples(words, 4);
  const BatchSampler sampler(set.size(), 12, 2);
  const BatchSplit split{2, 2};
  const std::vector<std::size_t> indices = sampler.micro_batch_indices(1, split, 1, 0);
  const ExampleSet batch = sampler.micro_batch(set.view(), 1, split, 1, 0);
  REQUIRE(batch.size() == indices.size());
  CHECK(batch.context == 4);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    CHECK(batch.targets[i] == set.targets[indices[i]]);
    for (std::size_t k = 0; k < 4; ++k) CHECK(batch.contexts[i * 4 + k] == set.contexts[indices[i] * 4 + k]);
  }
  const BatchSampler wrong(set.size() + 1, 12, 2);
  CHECK_THROWS_WITH_AS((void)wrong.micro_batch(set.view(), 0, split, 0, 0), doctest::Contains("data.example_count"),
                       amsp::error);
}
