// amsp-train-local: trains the example's character-level MLP on one process with plain Adam, as
// the reference loss curve for amsp-train (the sharded trainer). No amsp engine is involved.
//
//   amsp-train-local [--steps N] [--batch G] [--micro-batches M] [--lr X] [--seed S]
//                    [--hidden H] [--layers L] [--eval-every K] [--words PATH]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "local_trainer.hpp"

namespace {

struct Options {
  amsp_train::DatasetOptions data;
  amsp_train::CharMlpConfig model;
  amsp_train::LocalTrainOptions train;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::puts("usage: amsp-train-local [--steps N] [--batch G] [--micro-batches M] [--lr X] [--seed S]\n"
                "                        [--hidden H] [--layers L] [--eval-every K] [--words PATH]");
      std::exit(0);
    }
    amsp::check(i + 1 < argc, "cli.missing_value", "option ", flag, " needs a value");
    const std::string value = argv[++i];
    if (flag == "--steps") o.train.steps = std::stoull(value);
    else if (flag == "--batch") o.train.global_batch = std::stoull(value);
    else if (flag == "--micro-batches") o.train.micro_batches = std::stoi(value);
    else if (flag == "--lr") o.train.adam.lr = std::stof(value);
    else if (flag == "--seed") o.train.seed = std::stoull(value);
    else if (flag == "--hidden") o.model.hidden = std::stoi(value);
    else if (flag == "--layers") o.model.hidden_layers = std::stoi(value);
    else if (flag == "--eval-every") o.train.eval_every = std::stoull(value);
    else if (flag == "--words") o.data.word_list = value;
    else amsp::fail("cli.unknown_option", "unknown option ", flag, " (see --help)");
  }
  o.data.context = o.model.context;
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  const amsp_train::CharDataset data = amsp_train::load_char_dataset(o.data);
  const amsp_train::CharMlp shape(o.model);
  std::printf("data: %zu train / %zu validation words, %zu / %zu examples; model: %zu parameters in %zu layers\n",
              data.train_words.size(), data.validation_words.size(), data.train.size(), data.validation.size(),
              shape.parameter_count(), shape.layer_count());
  const auto start = std::chrono::steady_clock::now();
  const amsp_train::LocalTrainResult result =
      amsp_train::train_local(data, o.model, o.train, [&](const amsp_train::StepReport& r) {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("step %llu  loss %.4f", static_cast<unsigned long long>(r.step), static_cast<double>(r.train_loss));
        if (r.validation_loss) std::printf("  val %.4f", static_cast<double>(*r.validation_loss));
        std::printf("  examples/s %.0f\n", static_cast<double>(r.step * o.train.global_batch) / seconds);
      });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"initial_val_loss\": %.4f, \"final_train_loss\": %.4f, \"final_val_loss\": %.4f, \"steps\": %llu, "
              "\"parameters\": %zu, \"seconds\": %.2f}\n",
              static_cast<double>(result.initial_validation_loss),
              static_cast<double>(result.steps.empty() ? 0.0f : result.steps.back().train_loss),
              static_cast<double>(result.final_validation_loss()), static_cast<unsigned long long>(o.train.steps),
              shape.parameter_count(), seconds);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "amsp-train-local: %s\n", e.what());
  return 1;
}
