// The example's model really learns the word list: a short single-process Adam run takes the
// validation loss from ln(27) to well below the unigram baseline.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstddef>

#include "amsp_train/local_trainer.hpp"
#include "word_list.hpp"

using namespace amsp_train;

namespace {
/// Entropy (nats) of the next-character distribution: the loss of the best context-free model.
double unigram_entropy(const ExampleSet& set) {
  std::array<double, vocab_size> counts{};
  for (const std::uint8_t t : set.targets) counts[t] += 1.0;
  double entropy = 0.0;
  for (const double n : counts)
    if (n > 0.0) {
      const double p = n / static_cast<double>(set.size());
      entropy -= p * std::log(p);
    }
  return entropy;
}
}  // namespace

TEST_CASE("200 Adam steps on the word list beat the unigram baseline by a clear margin") {
  test::require_word_list();
  const CharDataset data = load_char_dataset();
  const double baseline = unigram_entropy(data.train);
  CHECK(baseline > 2.7);  // letters plus the boundary: about 2.9 nats, well above what a model reaches
  CHECK(baseline < std::log(27.0));

  const CharMlpConfig model{.hidden = 128};
  LocalTrainOptions options;
  options.steps = 200;
  options.global_batch = 128;
  options.micro_batches = 2;  // also exercises gradient accumulation
  options.eval_every = 100;
  options.eval_examples = 2048;
  options.adam.lr = 3e-3f;
  const LocalTrainResult result = train_local(data, model, options);

  MESSAGE("unigram entropy ", baseline, ", validation loss ", result.initial_validation_loss, " -> ",
          result.final_validation_loss());
  CHECK(result.initial_validation_loss == doctest::Approx(std::log(27.0)).epsilon(0.02));
  CHECK(result.final_validation_loss() < 2.5);
  CHECK(result.final_validation_loss() < baseline - 0.3);
  REQUIRE(result.steps.size() == 200);
  CHECK(result.steps.back().step == 200);
}
