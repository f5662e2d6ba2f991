#pragma once
// The training text: English quotations from Debian's `fortunes` package (plain-text files under
// /usr/share/games/fortunes, one quotation per record, records separated by a line holding "%").
// Tokens are bytes (0..255), so no tokenizer is needed and any text file would do.
//
// Which files: the prose collections (see `default_fortune_files`), 1.4 MB in all. Left out: the
// ASCII-art and code-heavy files (ascii-art, art, perl, linux, computers, debian, ...), whose
// byte statistics are not English, and the small ones that add little.
//
// Validation split: a quotation goes to validation when the hash of its text is 0 mod 20 (about
// 5 %). The split depends only on the text, not on file order or the seed, and a quotation is
// never cut between the two sides.
//
// Batches: the global batch of step s is G windows of T + 1 bytes of the training stream, window j
// starting at hash(seed, s, j) mod (length − T − 1) (the last possible start is never drawn, a
// harmless off-by-one kept so that every recorded loss curve stays comparable); rank r's
// micro-batch m under W ranks × M micro-batches is windows [(r·M + m)·b, (r·M + m + 1)·b), b = G /
// (W·M). The union over ranks is the same global batch for any W and M, so every plan and mesh
// trains on the same data.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp_train/counter_hash.hpp"

namespace amsp_train {

inline constexpr std::string_view default_fortune_dir = "/usr/share/games/fortunes";
inline constexpr std::string_view default_fortune_files[] = {
    "cookie",   "definitions", "education", "food",     "humorists", "kids",     "law",
    "literature", "love",      "medicine",  "miscellaneous", "people", "platitudes", "politics",
    "science",  "sports",      "wisdom",    "work"};

struct TextCorpus {
  std::string train, validation;  ///< the quotations of each side, each followed by a blank line
  std::size_t train_records = 0, validation_records = 0;
};

/// Splits the text of one fortune file into records and appends each to its side of `corpus`.
inline void add_fortune_records(std::string_view text, TextCorpus& corpus) {
  std::string record;
  const auto flush = [&] {
    if (record.empty()) return;
    const bool validation = detail::string_hash(record) % 20 == 0;
    (validation ? corpus.validation : corpus.train) += record + "\n";
    ++(validation ? corpus.validation_records : corpus.train_records);
    record.clear();
  };
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    if (line == "%") flush();
    else record.append(line).push_back('\n');
    pos = end + 1;
  }
  flush();
}

/// Reads the fortune files `names` from `dir`. A missing file fails with rule data.missing_file,
/// naming the Debian package to install.
inline TextCorpus load_fortunes(const std::string& dir = std::string(default_fortune_dir),
                                const std::vector<std::string>& names = {std::begin(default_fortune_files),
                                                                         std::end(default_fortune_files)}) {
  TextCorpus corpus;
  for (const std::string& name : names) {
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    std::ifstream in(path, std::ios::binary);
    amsp::check(in.good(), "data.missing_file", "cannot read ", path.string(),
                ": install Debian's fortunes package (apt-get install fortunes, or scripts/install-deps.sh)");
    std::ostringstream text;
    text << in.rdbuf();
    add_fortune_records(text.str(), corpus);
  }
  return corpus;
}

/// A batch of windows: tokens and next-byte targets, sequences × context each.
struct TokenBatch {
  std::vector<std::int32_t> tokens, targets;
  std::size_t sequences = 0;
};

/// Copies the windows of `context` + 1 bytes of `text` starting at `starts`.
inline TokenBatch windows_at(std::string_view text, const std::vector<std::size_t>& starts, std::size_t context) {
  TokenBatch batch;
  batch.sequences = starts.size();
  for (std::size_t s : starts) {
    amsp::check(s + context < text.size(), "data.window", "window at ", s, " of ", context + 1,
                " bytes runs past the text's ", text.size(), " bytes");
    for (std::size_t t = 0; t < context; ++t) {
      batch.tokens.push_back(static_cast<unsigned char>(text[s + t]));
      batch.targets.push_back(static_cast<unsigned char>(text[s + t + 1]));
    }
  }
  return batch;
}

/// The training windows of a step, split over ranks and micro-batches (see the contract above).
class WindowSampler {
public:
  WindowSampler(std::size_t text_size, std::size_t context, std::size_t global_batch, std::uint64_t seed)
      : context_(context), global_batch_(global_batch), seed_(seed) {
    amsp::check(text_size > context + 1, "data.too_short", "the training text (", text_size,
                " bytes) is shorter than one window of ", context + 1, " bytes");
    amsp::check(global_batch > 0, "data.batch_size", "the global batch must hold at least one sequence");
    positions_ = text_size - context - 1;
  }

  /// Sequences per micro-batch under W ranks × M micro-batches (fails unless W·M divides G).
  [[nodiscard]] std::size_t micro_batch_size(int world_size, int micro_batches) const {
    const auto parts = static_cast<std::size_t>(world_size) * static_cast<std::size_t>(micro_batches);
    amsp::check(parts > 0 && global_batch_ % parts == 0, "data.batch_split", "a global batch of ", global_batch_,
                " sequences does not split evenly over ", world_size, " ranks x ", micro_batches, " micro-batches");
    return global_batch_ / parts;
  }

  [[nodiscard]] std::vector<std::size_t> starts(std::uint64_t step, int world_size, int micro_batches, int rank,
                                                int micro_batch) const {
    const std::size_t b = micro_batch_size(world_size, micro_batches);
    const std::size_t first = (static_cast<std::size_t>(rank) * static_cast<std::size_t>(micro_batches) +
                               static_cast<std::size_t>(micro_batch)) * b;
    std::vector<std::size_t> out;
    for (std::size_t j = first; j < first + b; ++j) out.push_back(detail::counter_hash(seed_, step, j) % positions_);
    return out;
  }

private:
  std::size_t context_, global_batch_, positions_ = 0;
  std::uint64_t seed_;
};

/// `count` windows evenly spaced over `text` (the fixed validation set).
[[nodiscard]] inline std::vector<std::size_t> spaced_windows(std::size_t text_size, std::size_t context, std::size_t count) {
  amsp::check(text_size > context + 1, "data.too_short", "the validation text (", text_size,
              " bytes) is shorter than one window of ", context + 1, " bytes");
  std::vector<std::size_t> starts;
  const std::size_t span = text_size - context - 1;
  for (std::size_t i = 0; i < count; ++i) starts.push_back(i * span / count);
  return starts;
}

}  // namespace amsp_train
