#pragma once
// amsp-train's command line on the project's shared argument helper (tools/common/cli_args.hpp):
// bad input names the option, the value and the rule, and ends the program with exit status 2.

#include <cstdint>
#include <optional>
#include <string>

#include "amsp/engine/options.hpp"
#include "amsp/sharding.hpp"
#include "amsp_train/text_data.hpp"
#include "amsp_train/train_config.hpp"
#include "common/cli_args.hpp"
#include "common/mpi_args.hpp"

namespace amsp_train {

enum class Backend { threads, mpi };

struct CliConfig {
  std::string plan;
  amsp::Mesh mesh{4, 2};
  Backend backend = Backend::threads;
  bool mpi_check_calls = true;
  std::string fortune_dir;
  bool bf16 = false;
  TrainConfig train;
};

/// Parses argv; nullopt when --help was given (the caller prints args.help()).
inline std::optional<CliConfig> parse_cli(amsp::cli::Args& args) {
  using amsp::cli::at_least;
  using amsp::cli::between;
  CliConfig c;
  TrainConfig& t = c.train;
  args.section("Sharding");
  c.plan = args.text("--plan", "PLAN",
                     "preset (ddp zero1 zero2 zero3 fsdp mics(k) hsdp hsdp(k) amsp-7b amsp-13b amsp-30b) or "
                     "p=AxB,g=CxD,os=ExF",
                     "amsp-13b");
  c.mesh = args.value("--mesh", "RxN", "ranks per node x nodes (default 4x2)", amsp::Mesh(4, 2),
                      [](std::string_view s) { return amsp::parse_mesh(s); });
  c.backend = args.choice("--backend", "ranks as threads of this process, or one MPI process per rank",
                          Backend::threads, {{"threads", Backend::threads}, {"mpi", Backend::mpi}});
  c.mpi_check_calls = amsp::cli::mpi_check_calls(args);
  t.os_layout = args.choice("--os-layout", "optimizer-state layout (whole_tensor needs s_g = s_p)",
                            amsp::OsLayout::even_split,
                            {{"even_split", amsp::OsLayout::even_split}, {"whole_tensor", amsp::OsLayout::whole_tensor}});
  t.keep_gathered = args.flag("--keep-gathered", "keep each gathered block from its forward to its backward");
  t.overlap = !args.flag("--no-overlap", "no prefetch; wait for the spread at once (serialized communication)");
  t.engine_space = args.choice("--engine-space",
                               "the engine's communication on a worker thread (reductions overlap the backward) or "
                               "on the calling thread",
                               EngineSpace::async, {{"async", EngineSpace::async}, {"serial", EngineSpace::serial}});
  t.compute_turns = args.integer<int>("--compute-turns", "T",
                                      "calibration: compute each micro-batch in T turns (rank r in turn (r + step) % T, "
                                      "the others in a barrier), so world/T ranks compute at once; 1 = off",
                                      1, between(1, 1 << 20));
  t.device_ms_per_sequence = args.real("--device-ms-per-sequence", "X",
                                       "emulated accelerator: sleep X ms per sequence of each micro-batch's forward "
                                       "(1/3) and backward (2/3), where a GPU trainer's host waits for its device; 0 = off",
                                       0.0, {0.0, 1e6});
  t.device_timing = args.choice("--device-timing",
                                "the emulated accelerator waits for the host before each bucket (blocking) or runs "
                                "the buckets back to back unless the host blocked in a wait (queued, as a GPU whose "
                                "host launches ahead)",
                                DeviceTiming::blocking,
                                {{"blocking", DeviceTiming::blocking}, {"queued", DeviceTiming::queued}});
  c.bf16 = args.flag("--bf16", "bf16 parameters and gradients (fp32 optimizer states)");

  args.section("Model");
  t.model.context = args.integer<int>("--context", "T", "bytes per sequence", 64, between(1, 4096));
  t.model.width = args.integer<int>("--width", "C", "embedding width", 64, between(1, 8192));
  t.model.heads = args.integer<int>("--heads", "H", "attention heads (the width must be a multiple)", 4, between(1, 1024));
  t.model.layers = args.integer<int>("--layers", "L", "transformer blocks", 2, between(1, 1024));

  args.section("Training");
  t.steps = args.integer<int>("--steps", "N", "optimizer steps", 300, between(1, 100'000'000));
  t.micro_batches = args.integer<int>("--micro-batches", "M", "gradient-accumulation micro-batches per step", 1,
                                      between(1, 1'000'000));
  t.global_batch = args.integer<std::size_t>("--global-batch", "B", "sequences per step, split over ranks and micro-batches",
                                             32, at_least<std::size_t>(1));
  t.schedule.peak = float(args.real("--lr", "X", "peak learning rate (AdamW, betas 0.9/0.95)", 6e-3, amsp::cli::positive()));
  t.schedule.warmup = args.integer<std::int64_t>("--warmup", "N", "linear warm-up steps, then cosine decay", 30, at_least<std::int64_t>(0));
  t.schedule.min_ratio = float(args.real("--min-lr-ratio", "X", "final learning rate / peak", 0.1, {0.0, 1.0}));
  t.weight_decay = float(args.real("--weight-decay", "X", "AdamW decay of the matrices (not biases or LayerNorm)", 0.1, {0.0, 10.0}));
  t.max_grad_norm = float(args.real("--max-grad-norm", "X", "global-norm clipping, 0 = off", 1.0, {0.0, 1e30}));
  t.seed = args.integer<std::uint64_t>("--seed", "S", "initial weights and batches", 1);

  args.section("Data and output");
  c.fortune_dir = args.text("--fortune-dir", "DIR", "where Debian's fortunes package keeps its files",
                            std::string(default_fortune_dir));
  t.eval_every = args.integer<int>("--eval-every", "N", "validation loss every N steps (0: only at the end)", 50,
                                   at_least(0));
  t.eval_windows = args.integer<std::size_t>("--eval-windows", "N", "validation windows", 64, at_least<std::size_t>(1));
  t.sample_bytes = args.integer<int>("--sample-bytes", "N", "bytes of text sampled at the end", 120, between(0, 100000));
  t.log_json = args.text("--log-json", "FILE", "one JSON record per step, then the final one (JSON Lines)", "");
  t.timeline = args.text("--timeline", "PREFIX",
                         "each rank's waits in engine calls and emulated device time, a Chrome trace per rank "
                         "(PREFIX.rank<R>.json)",
                         "");
  t.print = !args.flag("--quiet", "no progress lines, only the final JSON line");
  t.checkpoint_dir = args.text("--checkpoint-dir", "DIR", "save a checkpoint here (amsp/io) after the last step", "");
  t.checkpoint_every = args.integer<int>("--checkpoint-every", "N", "also every N steps (0: only after the last)", 0,
                                         at_least(0));
  t.resume_dir = args.text("--resume", "DIR", "continue from a checkpoint (also into another plan or mesh)", "");
  args.epilog("Examples\n  amsp-train --plan zero3 --mesh 2x2 --steps 100 --micro-batches 2\n"
              "  mpirun -np 8 amsp-train --backend mpi --plan amsp-30b --bf16");
  if (args.finish()) return std::nullopt;
  t.schedule.total = t.steps;
  t.model.validate();
  return c;
}

}  // namespace amsp_train
