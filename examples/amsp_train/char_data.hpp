#pragma once
// The data set of the main example: character-level language modelling on the English word list
// of Debian's `wamerican` package (/usr/share/dict/american-english).
//
// - Words: the lines made only of the letters a-z (proper nouns, possessives like "cat's" and
//   accented words are dropped, not rewritten, so every word is a real lowercase dictionary word).
// - Vocabulary: 27 tokens, the boundary '.' (token 0) and 'a'..'z' (tokens 1..26).
// - Examples, as in makemore: a word w of length L gives L + 1 examples. Example i has the C
//   characters before position i as context (boundary tokens before the word's start) and w[i] as
//   target, the last one having the boundary token as target. "cat" with C = 3 gives
//   "..." -> c, "..c" -> a, ".ca" -> t, "cat" -> '.'.
// - Split: a word goes to the validation split when hash(word) mod 1000 < validation_permille,
//   so the split depends on the word alone, never on the file's order or on the other words.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amsp/core/error.hpp"
#include "counter_hash.hpp"
#include "example_set.hpp"

namespace amsp_train {

inline constexpr int vocab_size = 27;
inline constexpr std::uint8_t boundary_token = 0;
inline constexpr char boundary_char = '.';
inline constexpr std::string_view default_word_list = "/usr/share/dict/american-english";

/// True for a non-empty word made only of the letters a-z.
[[nodiscard]] constexpr bool is_plain_word(std::string_view word) noexcept {
  return !word.empty() && std::all_of(word.begin(), word.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

/// The token of '.' or of a letter a-z.
[[nodiscard]] constexpr std::uint8_t token_of(char c) {
  if (c == boundary_char) return boundary_token;
  // fail() only on the bad path, so that token_of stays usable in constant expressions.
  if (c < 'a' || c > 'z')
    amsp::fail("data.character", "character code ", static_cast<int>(c), " is neither '.' nor a letter a-z");
  return static_cast<std::uint8_t>(c - 'a' + 1);
}

/// The character of a token in [0, vocab_size).
[[nodiscard]] constexpr char char_of(std::uint8_t token) {
  if (token >= vocab_size)
    amsp::fail("data.token_range", "token ", static_cast<int>(token), " is outside the vocabulary of ", vocab_size);
  return token == boundary_token ? boundary_char : static_cast<char>('a' + token - 1);
}

/// Reads the word list at `path` and keeps its plain words (see is_plain_word), in file order.
/// Fails with rule "data.word_list_missing" naming the Debian package when the file is absent.
[[nodiscard]] inline std::vector<std::string> read_word_list(const std::filesystem::path& path) {
  std::ifstream in(path);
  amsp::check(in.is_open(), "data.word_list_missing", "cannot open the word list ", path.string(),
              ": install Debian's wamerican package (apt-get install wamerican)");
  std::vector<std::string> words;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (is_plain_word(line)) words.push_back(line);
  }
  amsp::check(!words.empty(), "data.word_list_empty", "the word list ", path.string(),
              " holds no word made only of the letters a-z");
  return words;
}

/// Whether `word` belongs to the validation split (a pure function of the word).
[[nodiscard]] constexpr bool in_validation_split(std::string_view word, unsigned validation_permille) noexcept {
  return detail::string_hash(word) % 1000u < validation_permille;
}

/// All the examples of `words`, word after word, with a context of `context` characters.
[[nodiscard]] inline ExampleSet make_examples(std::span<const std::string> words, int context) {
  amsp::check(context >= 1, "data.context", "context length is ", context, " but must be at least 1");
  ExampleSet set;
  set.context = context;
  const auto c = static_cast<std::size_t>(context);
  std::vector<std::uint8_t> window(c, boundary_token);
  for (const std::string& word : words) {
    std::fill(window.begin(), window.end(), boundary_token);
    for (std::size_t i = 0; i <= word.size(); ++i) {
      const std::uint8_t next = i < word.size() ? token_of(word[i]) : boundary_token;
      set.contexts.insert(set.contexts.end(), window.begin(), window.end());
      set.targets.push_back(next);
      std::shift_left(window.begin(), window.end(), 1);
      window.back() = next;
    }
  }
  return set;
}

/// The two splits of the data set, as words and as examples.
struct CharDataset {
  int context = 0;
  std::vector<std::string> train_words;
  std::vector<std::string> validation_words;
  ExampleSet train;
  ExampleSet validation;
};

struct DatasetOptions {
  std::filesystem::path word_list{default_word_list};
  int context = 8;                    ///< characters of context per example
  unsigned validation_permille = 100;  ///< share of the words held out, in 1/1000
};

/// Splits `words` (each must be a plain word) and builds the examples of both splits.
[[nodiscard]] inline CharDataset make_char_dataset(std::span<const std::string> words, int context,
                                                   unsigned validation_permille) {
  amsp::check(validation_permille <= 1000, "data.split", "validation share is ", validation_permille,
              " per mille but must be at most 1000");
  CharDataset data;
  data.context = context;
  for (const std::string& word : words) {
    amsp::check(is_plain_word(word), "data.word", "word \"", word, "\" is not made only of the letters a-z");
    (in_validation_split(word, validation_permille) ? data.validation_words : data.train_words).push_back(word);
  }
  data.train = make_examples(data.train_words, context);
  data.validation = make_examples(data.validation_words, context);
  return data;
}

/// Reads the word list and builds the data set.
[[nodiscard]] inline CharDataset load_char_dataset(const DatasetOptions& options = {}) {
  const std::vector<std::string> words = read_word_list(options.word_list);
  return make_char_dataset(words, options.context, options.validation_permille);
}

}  // namespace amsp_train
