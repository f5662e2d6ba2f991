#pragma once
// What rank 0 shows while training: a progress line per step (rewritten in place on a terminal,
// one line per step otherwise) and, with --log-json FILE, one JSON record per step (JSON Lines;
// the plot script plot_runs.py reads them).

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

#include "amsp/core/error.hpp"
#include "amsp/core/json.hpp"
#include "amsp_train/train_config.hpp"

namespace amsp_train {

[[nodiscard]] inline amsp::Json::Object step_json(const StepRecord& r, double tokens_per_step) {
  amsp::Json::Object o{{"step", r.step},
                       {"loss", r.loss},
                       {"lr", r.lr},
                       {"step_ms", 1e3 * r.seconds},
                       {"compute_ms", 1e3 * (r.seconds - r.comm_seconds)},
                       {"comm_ms", 1e3 * r.comm_seconds},
                       {"update_ms", 1e3 * r.update_seconds},
                       {"tokens_per_second", tokens_per_step / r.seconds},
                       {"bytes_intra", r.bytes_intra},
                       {"bytes_inter", r.bytes_inter}};
  if (r.validation_loss >= 0.0) o.emplace_back("validation_loss", r.validation_loss);
  return o;
}

class TrainLog {
public:
  TrainLog(bool print, const std::string& json_path, int steps, double tokens_per_step)
      : print_(print), tty_(print && isatty(fileno(stdout)) != 0), steps_(steps), tokens_per_step_(tokens_per_step) {
    if (json_path.empty()) return;
    json_.open(json_path, std::ios::trunc);
    amsp::check(json_.good(), "cli.log_json", "--log-json: cannot write ", json_path);
  }

  void record(const StepRecord& r) {
    if (json_.is_open()) json_ << amsp::to_json_string(amsp::Json(step_json(r, tokens_per_step_))) << '\n' << std::flush;
    if (!print_) return;
    char val[32] = "";
    if (r.validation_loss >= 0.0) std::snprintf(val, sizeof val, "  val %.3f", r.validation_loss);
    std::printf("%sstep %4d/%d  loss %.3f%s  lr %.2e  %7.0f tok/s  %6.1f ms (compute %6.1f, comm %5.1f)  "
                "sent intra %.2f MB inter %.2f MB%s",
                tty_ ? "\r" : "", r.step, steps_, r.loss, val, r.lr, tokens_per_step_ / r.seconds, 1e3 * r.seconds,
                1e3 * (r.seconds - r.comm_seconds), 1e3 * r.comm_seconds, r.bytes_intra / 1e6, r.bytes_inter / 1e6,
                tty_ && r.validation_loss < 0.0 && r.step != steps_ ? "" : "\n");
    std::fflush(stdout);
  }

  /// The final record (also printed to stdout as the run's last line by the caller).
  void final(const amsp::Json::Object& result) {
    if (json_.is_open()) json_ << amsp::to_json_string(amsp::Json(result)) << '\n' << std::flush;
  }

private:
  bool print_, tty_;
  int steps_;
  double tokens_per_step_;
  std::ofstream json_;
};

}  // namespace amsp_train
