#pragma once
// amsp-train's command line: options → CliConfig. Malformed input is an amsp::error with rule
// cli.* naming the option; main() turns it into exit code 2. (When the project's shared
// command-line helper lands, this file is what switches to it.)

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>

#include "amsp/core/error.hpp"
#include "amsp_train/train_config.hpp"

namespace amsp_train {

inline constexpr std::string_view usage = R"(amsp-train: train a GPT-2-family transformer on English text with sharded model states

Options (defaults in brackets):
  --plan PLAN            preset name or p=AxB,g=CxD,os=ExF                          [amsp-13b]
                         presets: ddp zero1 zero2 zero3 fsdp mics(k) hsdp hsdp(k) amsp-7b amsp-13b amsp-30b
  --mesh RxN             ranks per node x nodes                                    [4x2]
  --backend NAME         threads (ranks are threads of this process) or mpi         [threads]
  --steps N              optimizer steps                                           [300]
  --micro-batches M      gradient-accumulation micro-batches per step              [1]
  --global-batch B       sequences per step, split over ranks and micro-batches     [32]
  --context T            bytes per sequence                                        [64]
  --width C              embedding width                                           [64]
  --heads H              attention heads (C must be a multiple)                    [4]
  --layers L             transformer blocks                                        [2]
  --lr X                 peak learning rate (AdamW, betas 0.9/0.95)                [1e-2]
  --warmup N             linear warm-up steps, then cosine decay to the minimum     [30]
  --min-lr-ratio X       final learning rate / peak                                [0.1]
  --weight-decay X       decay of the matrices (not biases or LayerNorm)           [0]
  --max-grad-norm X      global-norm clipping, 0 = off                             [1.0]
  --bf16                 bf16 parameters and gradients (fp32 optimizer states)
  --keep-gathered        keep each gathered block from its forward to its backward
  --no-overlap           no prefetch, spread waited for at once (serialized communication)
  --os-layout NAME       even_split or whole_tensor (needs s_g = s_p)               [even_split]
  --eval-every N         validation loss every N steps (0: only at the end)        [50]
  --eval-windows N       validation windows                                        [64]
  --sample-bytes N       bytes of text sampled at the end                          [120]
  --seed S               initial weights and batches                               [1]
  --fortune-dir DIR      where the fortunes package's files are                    [/usr/share/games/fortunes]
  --log-json FILE        one JSON record per step, then the final one (JSON Lines)
  --quiet                no progress lines, only the final JSON line
  --help                 this text

Example: amsp-train --plan zero3 --mesh 2x2 --steps 100 --micro-batches 2
)";

struct CliConfig {
  std::string plan = "amsp-13b";
  std::string mesh = "4x2";
  std::string backend = "threads";
  std::string fortune_dir = "/usr/share/games/fortunes";
  bool bf16 = false;
  TrainConfig train;
};

template <class T>
T parse_number(std::string_view flag, std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  if constexpr (std::is_floating_point_v<T>) {
    const double v = std::strtod(s.c_str(), &end);
    amsp::check(end != s.c_str() && *end == '\0' && errno == 0 && std::isfinite(v) && v >= 0.0, "cli.number", flag,
                " needs a non-negative number, got '", text, "'");
    return static_cast<T>(v);
  } else {
    const long long v = std::strtoll(s.c_str(), &end, 10);
    amsp::check(end != s.c_str() && *end == '\0' && errno == 0 && v >= 0 && v <= 1'000'000'000, "cli.number", flag,
                " needs a non-negative integer, got '", text, "'");
    return static_cast<T>(v);
  }
}

/// Parses argv; --help prints the usage and exits 0.
inline CliConfig parse_cli(int argc, char** argv) {
  CliConfig c;
  TrainConfig& t = c.train;
  t.schedule.warmup = 30;
  t.sample_bytes = 120;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(usage.data(), stdout);
      std::exit(0);
    }
    if (flag == "--quiet") t.print = false;
    else if (flag == "--bf16") c.bf16 = true;
    else if (flag == "--keep-gathered") t.keep_gathered = true;
    else if (flag == "--no-overlap") t.overlap = false;
    else {
      amsp::check(i + 1 < argc, "cli.value", flag, " needs a value (see --help)");
      const std::string_view value = argv[++i];
      if (flag == "--plan") c.plan = value;
      else if (flag == "--mesh") c.mesh = value;
      else if (flag == "--backend") c.backend = value;
      else if (flag == "--fortune-dir") c.fortune_dir = value;
      else if (flag == "--log-json") t.log_json = value;
      else if (flag == "--os-layout") t.os_layout = amsp::parse_os_layout(value);
      else if (flag == "--steps") t.steps = parse_number<int>(flag, value);
      else if (flag == "--micro-batches") t.micro_batches = parse_number<int>(flag, value);
      else if (flag == "--global-batch") t.global_batch = parse_number<std::size_t>(flag, value);
      else if (flag == "--context") t.model.context = parse_number<int>(flag, value);
      else if (flag == "--width") t.model.width = parse_number<int>(flag, value);
      else if (flag == "--heads") t.model.heads = parse_number<int>(flag, value);
      else if (flag == "--layers") t.model.layers = parse_number<int>(flag, value);
      else if (flag == "--lr") t.schedule.peak = parse_number<float>(flag, value);
      else if (flag == "--warmup") t.schedule.warmup = parse_number<int>(flag, value);
      else if (flag == "--min-lr-ratio") t.schedule.min_ratio = parse_number<float>(flag, value);
      else if (flag == "--weight-decay") t.weight_decay = parse_number<float>(flag, value);
      else if (flag == "--max-grad-norm") t.max_grad_norm = parse_number<float>(flag, value);
      else if (flag == "--eval-every") t.eval_every = parse_number<int>(flag, value);
      else if (flag == "--eval-windows") t.eval_windows = parse_number<std::size_t>(flag, value);
      else if (flag == "--sample-bytes") t.sample_bytes = parse_number<int>(flag, value);
      else if (flag == "--seed") t.seed = parse_number<std::uint64_t>(flag, value);
      else amsp::fail("cli.unknown_option", "unknown option '", flag, "' (see --help)");
    }
  }
  amsp::check(t.steps >= 1, "cli.range", "--steps must be at least 1");
  amsp::check(t.micro_batches >= 1, "cli.range", "--micro-batches must be at least 1");
  amsp::check(t.schedule.min_ratio <= 1.0f, "cli.range", "--min-lr-ratio must be at most 1");
  amsp::check(c.backend == "threads" || c.backend == "mpi", "cli.backend", "--backend: unknown backend '", c.backend,
              "' (expected threads or mpi)");
  t.schedule.total = t.steps;
  t.model.validate();
  return c;
}

}  // namespace amsp_train
