// amsp-train: trains the character-level MLP language model of this folder from scratch on the
// English word list of Debian's wamerican package, data-parallel over CPU ranks, with the model
// states sharded by an amsp plan. One progress line per step (rank 0), then one JSON line.
//
//   amsp-train                                   # the AMSP plan amsp-13b on a 4x2 mesh, threads
//   amsp-train --plan ddp --steps 100
//   amsp-train --plan p=2x1,g=2x1,os=4x2 --micro-batches 2 --optimizer sgd
//   mpirun -np 8 amsp-train --backend mpi        # one process per rank
//
// The training loop itself is amsp_train::train_rank (sharded_trainer.hpp); this file is the CLI.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "amsp/comm/counting.hpp"
#include "amsp/comm/threads.hpp"
#include "amsp/core/json.hpp"
#include "amsp/optim/optimizer.hpp"
#include "amsp/sharding.hpp"
#include "amsp_train/char_data.hpp"
#include "amsp_train/sharded_trainer.hpp"
#if defined(AMSP_HAS_MPI)
#include "amsp/comm/mpi.hpp"
#endif

namespace {

constexpr std::string_view usage = R"(amsp-train: train a character-level MLP language model with sharded model states

Options (defaults in brackets):
  --plan PLAN            preset name or p=AxB,g=CxD,os=ExF                          [amsp-13b]
                         presets: ddp zero1 zero2 zero3 fsdp mics(k) hsdp hsdp(k) amsp-7b amsp-13b amsp-30b
  --mesh RxN             ranks per node x nodes                                    [4x2]
  --backend NAME         threads (ranks are threads of this process) or mpi         [threads]
  --steps N              optimizer steps                                           [200]
  --micro-batches M      gradient-accumulation micro-batches per step              [1]
  --global-batch B       examples per step, split over ranks and micro-batches     [256]
  --optimizer NAME       adamw, adam, sgd or lion                                  [adamw]
  --lr X                 learning rate                                             [3e-3; sgd 0.1; lion 3e-4]
  --max-grad-norm X      global-norm clipping, 0 = off                             [1.0]
  --os-layout NAME       even_split or whole_tensor (needs s_g = s_p)               [even_split]
  --hidden H             width of the hidden layers                                [256]
  --layers L             number of hidden layers                                   [2]
  --seed S               initial weights and batches                               [1]
  --eval-every N         validation loss every N steps (0: only at the end)        [50]
  --word-list FILE       word list                                                 [/usr/share/dict/american-english]
  --quiet                no progress lines, only the final JSON line
  --help                 this text

Example: amsp-train --plan zero3 --mesh 2x2 --steps 100 --optimizer sgd
)";

struct Config {
  std::string plan = "amsp-13b";
  std::string mesh = "4x2";
  std::string backend = "threads";
  int steps = 200;
  int micro_batches = 1;
  std::size_t global_batch = 256;
  std::string optimizer = "adamw";
  std::optional<float> lr;
  float max_grad_norm = 1.0f;
  std::string os_layout = "even_split";
  int hidden = 256;
  int layers = 2;
  std::uint64_t seed = 1;
  int eval_every = 50;
  std::string word_list = "/usr/share/dict/american-english";
  bool quiet = false;
};

template <class T>
T parse_number(std::string_view flag, std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  if constexpr (std::is_floating_point_v<T>) {
    const double v = std::strtod(s.c_str(), &end);
    amsp::check(end != s.c_str() && *end == '\0' && errno == 0 && std::isfinite(v), "cli.number", flag,
                " needs a number, got '", text, "'");
    return static_cast<T>(v);
  } else {
    const long long v = std::strtoll(s.c_str(), &end, 10);
    amsp::check(end != s.c_str() && *end == '\0' && errno == 0 && v >= 0, "cli.number", flag,
                " needs a non-negative integer, got '", text, "'");
    return static_cast<T>(v);
  }
}

Config parse_args(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(usage.data(), stdout);
      std::exit(0);
    }
    if (flag == "--quiet") {
      c.quiet = true;
      continue;
    }
    amsp::check(i + 1 < argc, "cli.value", flag, " needs a value (see --help)");
    const std::string_view value = argv[++i];
    if (flag == "--plan") c.plan = value;
    else if (flag == "--mesh") c.mesh = value;
    else if (flag == "--backend") c.backend = value;
    else if (flag == "--steps") c.steps = parse_number<int>(flag, value);
    else if (flag == "--micro-batches") c.micro_batches = parse_number<int>(flag, value);
    else if (flag == "--global-batch") c.global_batch = parse_number<std::size_t>(flag, value);
    else if (flag == "--optimizer") c.optimizer = value;
    else if (flag == "--lr") c.lr = parse_number<float>(flag, value);
    else if (flag == "--max-grad-norm") c.max_grad_norm = parse_number<float>(flag, value);
    else if (flag == "--os-layout") c.os_layout = value;
    else if (flag == "--hidden") c.hidden = parse_number<int>(flag, value);
    else if (flag == "--layers") c.layers = parse_number<int>(flag, value);
    else if (flag == "--seed") c.seed = parse_number<std::uint64_t>(flag, value);
    else if (flag == "--eval-every") c.eval_every = parse_number<int>(flag, value);
    else if (flag == "--word-list") c.word_list = value;
    else amsp::fail("cli.unknown_option", "unknown option '", flag, "' (see --help)");
  }
  amsp::check(c.steps >= 1 && c.micro_batches >= 1, "cli.range", "--steps and --micro-batches must be at least 1");
  amsp::check(c.backend == "threads" || c.backend == "mpi", "cli.backend", "unknown backend '", c.backend,
              "' (expected threads or mpi)");
  return c;
}

/// The rule named on the command line, with the example's learning rate.
amsp::optim::AnyRule make_rule(const Config& c) {
  amsp::optim::AnyRule rule = amsp::optim::parse_rule(c.optimizer);
  const std::string_view name = amsp::optim::rule_name(rule);
  amsp::optim::learning_rate(rule) = c.lr ? *c.lr : name == "sgd" ? 0.1f : name == "lion" ? 3e-4f : 3e-3f;
  if (std::holds_alternative<amsp::optim::AdamW>(rule)) std::get<amsp::optim::AdamW>(rule).weight_decay = 0.0f;
  return rule;
}

amsp_train::ShardedTrainConfig trainer_config(const Config& c) {
  amsp_train::ShardedTrainConfig t;
  t.steps = c.steps;
  t.micro_batches = c.micro_batches;
  t.global_batch = c.global_batch;
  t.max_grad_norm = c.max_grad_norm;
  t.os_layout = amsp::parse_os_layout(c.os_layout);
  t.hidden = c.hidden;
  t.layers = c.layers;
  t.seed = c.seed;
  t.eval_every = c.eval_every;
  t.print = !c.quiet;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  try {
#if defined(AMSP_HAS_MPI)
    std::optional<amsp::comm::MpiSession> mpi_session;
    for (int i = 1; i + 1 < argc; ++i)
      if (std::string_view(argv[i]) == "--backend" && std::string_view(argv[i + 1]) == "mpi") mpi_session.emplace(argc, argv);
#endif
    const Config cfg = parse_args(argc, argv);
    const amsp::Mesh mesh = amsp::parse_mesh(cfg.mesh);
    const amsp::Plan plan = amsp::parse_plan(cfg.plan, mesh);
    const amsp::optim::AnyRule any_rule = make_rule(cfg);
    const amsp_train::CharDataset data =
        amsp_train::load_char_dataset({.word_list = cfg.word_list, .context = 8, .validation_permille = 100});
    auto counter = std::make_shared<amsp::comm::TrafficCounter>(mesh);
    const amsp_train::ShardedTrainConfig train = trainer_config(cfg);
    amsp_train::TrainOutcome outcome;
    int rank = 0;
    std::visit(
        [&](const auto& rule) {
          if (cfg.backend == "threads") {
            amsp::comm::run_on_threads(mesh.world_size(), [&](amsp::comm::ThreadsCommunicator& threads) {
              amsp::comm::CountingCommunicator<amsp::comm::ThreadsCommunicator> comm(std::move(threads), counter);
              const amsp_train::TrainOutcome o = amsp_train::train_rank(comm, comm.inner(), mesh, plan, rule, train, data, counter);
              if (comm.rank() == 0) outcome = o;
            });
          } else {
#if defined(AMSP_HAS_MPI)
            amsp::comm::CountingCommunicator<amsp::comm::MpiCommunicator> comm(amsp::comm::MpiCommunicator::world(), counter);
            rank = comm.rank();
            outcome = amsp_train::train_rank(comm, comm.inner(), mesh, plan, rule, train, data, counter);
#else
            amsp::fail("cli.backend", "this amsp-train was built without MPI (install libopenmpi-dev and rebuild)");
#endif
          }
        },
        any_rule);
    if (rank == 0) {
      amsp::Json::Object result{
          {"final_loss", double(outcome.final_loss)},
          {"initial_validation_loss", double(outcome.initial_validation_loss)},
          {"final_validation_loss", double(outcome.final_validation_loss)},
          {"steps", cfg.steps},
          {"plan", amsp::to_string(plan)},
          {"mesh", amsp::to_string(mesh)},
          {"backend", cfg.backend},
          {"optimizer", std::string(amsp::optim::rule_name(any_rule))},
          {"micro_batches", cfg.micro_batches},
          {"bytes_intra_per_step", outcome.bytes_intra},
          {"bytes_inter_per_step", outcome.bytes_inter},
          {"expected_bytes_intra_per_step", outcome.expected_intra},
          {"expected_bytes_inter_per_step", outcome.expected_inter},
          {"model_state_bytes_per_rank", outcome.model_state_bytes},
          {"seconds", outcome.seconds},
          {"tokens_per_second", double(cfg.global_batch) * cfg.steps / outcome.seconds},
      };
      std::printf("%s\n", amsp::to_json_string(amsp::Json(std::move(result))).c_str());
    }
    return 0;
  } catch (const amsp::error& e) {
    std::fprintf(stderr, "amsp-train: %s\n", e.what());
    return 2;
  }
}
