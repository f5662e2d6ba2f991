// amsp-train's loop in both engine spaces (examples/amsp_train/sharded_trainer.hpp): HostAsync
// (the default: the engine's worker thread reduces each block's gradient while the backward goes on)
// issues the same collectives in the same order as HostSerial, so every loss of the run, the
// validation loss and the counted traffic are bitwise those of the HostSerial run. Short enough
// to run under ThreadSanitizer (label tsan): the worker, the ranks' threads and the threads
// backend's progress threads all touch the gradient and parameter buffers.
#include <doctest/doctest.h>

#include <string>

#include "train_runner.hpp"

using namespace amsp_train;
using amsp_train::test::small_run;
using amsp_train::test::train_on_threads;

namespace {

TrainConfig short_run(EngineSpace space) {
  TrainConfig cfg = small_run(3);  // validation after step 2 and after the last: both byte-count windows
  cfg.micro_batches = 2;
  cfg.eval_every = 2;
  cfg.engine_space = space;
  return cfg;
}

template <class ParamT = float>
void check_spaces_agree(const std::string& plan, TrainConfig cfg) {
  const TextCorpus data = load_fortunes();
  const amsp::Mesh mesh(4, 2);
  cfg.engine_space = EngineSpace::serial;
  const TrainOutcome serial = train_on_threads<ParamT>(data, mesh, plan, cfg);
  cfg.engine_space = EngineSpace::async;
  const TrainOutcome async = train_on_threads<ParamT>(data, mesh, plan, cfg);
  CAPTURE(plan);
  REQUIRE(async.steps.size() == serial.steps.size());
  for (std::size_t s = 0; s < serial.steps.size(); ++s) {
    CAPTURE(s);
    CHECK(async.steps[s].loss == serial.steps[s].loss);
    CHECK(async.steps[s].validation_loss == serial.steps[s].validation_loss);
    CHECK(async.steps[s].bytes_intra == serial.steps[s].bytes_intra);
    CHECK(async.steps[s].bytes_inter == serial.steps[s].bytes_inter);
  }
  CHECK(async.initial_validation_loss == serial.initial_validation_loss);
  CHECK(async.bytes_intra == async.expected_intra);  // the mean per step: exact in both spaces
  CHECK(serial.bytes_intra == serial.expected_intra);
  CHECK(async.bytes_inter == async.expected_inter);
  CHECK(async.expected_intra == serial.expected_intra);
  CHECK(async.expected_inter == serial.expected_inter);
}

}  // namespace

TEST_CASE("amsp-train: HostAsync trains bitwise like HostSerial on every kind of plan") {
  for (const char* plan : {"ddp", "zero3", "hsdp", "amsp-13b", "p=1x1,g=2x1,os=4x2"})
    check_spaces_agree(plan, short_run(EngineSpace::async));
}

TEST_CASE("amsp-train: HostAsync equals HostSerial with --keep-gathered, --no-overlap and bf16") {
  TrainConfig keep = short_run(EngineSpace::async);
  keep.keep_gathered = true;
  check_spaces_agree("zero3", keep);
  TrainConfig serialized = short_run(EngineSpace::async);
  serialized.overlap = false;
  check_spaces_agree("amsp-13b", serialized);
  check_spaces_agree<amsp::bf16>("zero3", short_run(EngineSpace::async));
}
