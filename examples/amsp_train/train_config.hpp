#pragma once
// What one training run is told (filled by the command line, cli.hpp, or by a test) and what it
// reports back.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "amsp/engine/options.hpp"
#include "amsp_train/emulated_device.hpp"
#include "amsp_train/gpt_config.hpp"
#include "amsp_train/hyperparameters.hpp"

namespace amsp_train {

/// Where the engine runs its communication (amsp/engine/space.hpp): HostAsync's worker thread, so
/// that reduce_gradients returns at once and each block's reduction overlaps the rest of the
/// backward, or HostSerial, where the caller's thread issues it (the same arithmetic, in the same order).
enum class EngineSpace { async, serial };

struct TrainConfig {
  GptConfig model;
  int steps = 300;
  int micro_batches = 1;
  std::size_t global_batch = 32;  ///< sequences of model.context bytes per step
  LrSchedule schedule;            ///< its total is set to `steps` unless given
  float weight_decay = 0.1f;      ///< AdamW's decoupled decay, on matrices only (hyperparameters.hpp)
  float max_grad_norm = 1.0f;     ///< global-norm clipping, 0 = off
  amsp::OsLayout os_layout = amsp::OsLayout::even_split;
  bool keep_gathered = false;  ///< keep each gathered bucket from its forward to its backward
  bool overlap = true;         ///< prefetch the next bucket and let the spread run into the next forward
  EngineSpace engine_space = EngineSpace::async;
  /// Compute calibration under CPU contention (scripts/cluster/check.py): each micro-batch is
  /// computed in this many turns, rank r in turn (r + step) % compute_turns (a later turn computes
  /// beside the earlier turns' waiting reductions: rotating spreads that over every rank), the others waiting in a barrier
  /// of the world (counted as communication), so world / compute_turns ranks compute at once. The
  /// training is the same; 1 = off. Needs replicated parameters and the async engine space.
  int compute_turns = 1;
  /// Emulated accelerator time per sequence of a micro-batch, in ms (emulated_device.hpp): the
  /// rank sleeps where a GPU trainer's host waits for its device; 0 = off.
  double device_ms_per_sequence = 0.0;
  /// Whether the emulated device waits for the host between kernels (blocking) or runs them back
  /// to back unless the host blocked (queued, as a GPU whose host runs ahead); emulated_device.hpp.
  DeviceTiming device_timing = DeviceTiming::blocking;
  int eval_every = 50;         ///< validation loss every N steps and after the last (0: only the last)
  std::size_t eval_windows = 64;
  int sample_bytes = 0;        ///< bytes of text sampled at the end (rank 0)
  std::uint64_t seed = 1;
  bool print = true;           ///< rank 0 prints a progress line per step
  std::string log_json;        ///< one JSON record per step (rank 0), empty = none
  std::string timeline;        ///< each rank's waits and device time as PREFIX.rank<R>.json, empty = none
  std::string checkpoint_dir;  ///< checkpoint here every checkpoint_every steps and after the last
  int checkpoint_every = 0;    ///< 0: only after the last step
  std::string resume_dir;      ///< start from this checkpoint (any plan, mesh or OS layout)
};

/// Per-step measurements (rank 0's view for times and bytes).
struct StepRecord {
  int step = 0;
  double loss = 0.0, lr = 0.0;
  double validation_loss = -1.0;  ///< < 0: not evaluated at this step
  double seconds = 0.0, comm_seconds = 0.0;
  /// The part of comm_seconds spent in the optimizer step (ShardedRun::update_seconds).
  double update_seconds = 0.0;
  double bytes_intra = 0.0, bytes_inter = 0.0;
};

struct TrainOutcome {
  double initial_validation_loss = 0.0, final_validation_loss = 0.0, final_loss = 0.0;
  std::vector<StepRecord> steps;
  double seconds = 0.0, comm_seconds = 0.0;
  double bytes_intra = 0.0, bytes_inter = 0.0;        ///< per step, counted on this rank
  double expected_intra = 0.0, expected_inter = 0.0;  ///< per step, the engine's traffic model
  std::size_t model_state_bytes = 0;                  ///< this rank's P + G + OS stores
  std::size_t parameters = 0;
  std::string sample;  ///< sampled text (rank 0)
  /// Every rank's step, communication and update seconds per step, rank-major: rank r's step i at
  /// r × steps.size() + i (gathered after the last step; rank 0's equal `steps`).
  std::vector<double> rank_step_seconds, rank_comm_seconds, rank_update_seconds;
};

}  // namespace amsp_train
