// amsp-train: trains a GPT-2-family transformer (gpt_model.hpp) from scratch on byte-level English
// text (Debian's fortunes, text_data.hpp), data-parallel over CPU ranks with the model states
// sharded by an amsp plan. A progress line per step (rank 0), then one JSON line.
//
//   amsp-train                                   # the AMSP plan amsp-13b on a 4x2 mesh, threads
//   amsp-train --plan zero3 --keep-gathered --bf16
//   mpirun -np 8 amsp-train --backend mpi        # one process per rank
//
// The training loop is amsp_train::train_rank (sharded_trainer.hpp); this file is the CLI.

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "amsp/comm/counting.hpp"
#include "amsp/comm/threads.hpp"
#include "amsp/core/json.hpp"
#include "amsp/sharding.hpp"
#include "amsp_train/cli.hpp"
#include "amsp_train/sharded_trainer.hpp"
#include "amsp_train/traced_communicator.hpp"
#if defined(AMSP_HAS_MPI)
#include "amsp/comm/mpi.hpp"
#endif

namespace {

using namespace amsp_train;

template <class C>
using Traced = amsp_train::TracedCommunicator<C>;

/// The record of a rank's collectives for --timeline; none without it. Made on the rank's own
/// thread, which the trace then names its host thread.
std::shared_ptr<CallTrace> call_trace(const CliConfig& cfg) {
  return cfg.train.timeline.empty() ? nullptr : std::make_shared<CallTrace>();
}

template <class ParamT>
TrainOutcome run(const CliConfig& cfg, const amsp::Mesh& mesh, const amsp::Plan& plan, const TextCorpus& data,
                 TrainLog& log, int& rank) {
  auto counter = std::make_shared<amsp::comm::TrafficCounter>(mesh);
  TrainOutcome outcome;
  if (cfg.backend == Backend::threads) {
    amsp::comm::run_on_threads(mesh.world_size(), [&](amsp::comm::ThreadsCommunicator& threads) {
      amsp::comm::CountingCommunicator<Traced<amsp::comm::ThreadsCommunicator>> comm(
          Traced<amsp::comm::ThreadsCommunicator>(std::move(threads), call_trace(cfg)), counter);
      const bool first = comm.rank() == 0;
      TrainOutcome o = train_rank<ParamT>(comm, comm.inner(), mesh, plan, cfg.train, data, counter, first ? &log : nullptr);
      if (first) outcome = std::move(o);
    });
    return outcome;
  }
#if defined(AMSP_HAS_MPI)
  amsp::comm::CountingCommunicator<Traced<amsp::comm::MpiCommunicator>> comm(
      Traced<amsp::comm::MpiCommunicator>(
          amsp::comm::MpiCommunicator::world(amsp::comm::MpiOptions{.check_calls = cfg.mpi_check_calls}),
          call_trace(cfg)),
      counter);
  rank = comm.rank();
  return train_rank<ParamT>(comm, comm.inner(), mesh, plan, cfg.train, data, counter, rank == 0 ? &log : nullptr);
#else
  (void)rank;
  amsp::fail("cli.backend", "--backend mpi: this amsp-train was built without MPI (install libopenmpi-dev and rebuild)");
#endif
}

/// This process's rank under MPI (0 with threads): only rank 0 writes the --log-json file.
int process_rank(Backend backend) {
#if defined(AMSP_HAS_MPI)
  if (backend == Backend::mpi) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
  }
#endif
  (void)backend;
  return 0;
}

/// Every rank's step, communication and update milliseconds per step:
/// [{"step_ms": [...], "comm_ms": [...], "update_ms": [...]}, ...].
amsp::Json::Array rank_splits(const TrainOutcome& o) {
  amsp::Json::Array ranks;
  const std::size_t steps = o.steps.size();
  for (std::size_t first = 0; first + steps <= o.rank_step_seconds.size() && steps > 0; first += steps) {
    amsp::Json::Array step_ms, comm_ms, update_ms;
    for (std::size_t i = first; i < first + steps; ++i) {
      step_ms.emplace_back(1e3 * o.rank_step_seconds[i]);
      comm_ms.emplace_back(1e3 * o.rank_comm_seconds[i]);
      update_ms.emplace_back(1e3 * o.rank_update_seconds[i]);
    }
    ranks.emplace_back(amsp::Json::Object{
        {"step_ms", std::move(step_ms)}, {"comm_ms", std::move(comm_ms)}, {"update_ms", std::move(update_ms)}});
  }
  return ranks;
}

}  // namespace

int main(int argc, char** argv) {
  return amsp::cli::guarded_main("amsp-train", std::cerr, [&] {
#if defined(AMSP_HAS_MPI)
    // MPI starts before the options are parsed (mpirun's arguments are removed from argv). The
    // HostAsync engine space (the default) makes its MPI calls from its two worker threads.
    std::optional<amsp::comm::MpiSession> mpi_session;
    bool mpi = false, serial_space = false;
    for (int i = 1; i + 1 < argc; ++i) {
      mpi = mpi || (std::string_view(argv[i]) == "--backend" && std::string_view(argv[i + 1]) == "mpi");
      serial_space = serial_space || (std::string_view(argv[i]) == "--engine-space" && std::string_view(argv[i + 1]) == "serial");
    }
    if (mpi) mpi_session.emplace(argc, argv, serial_space ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE);
#endif
    amsp::cli::Args args("amsp-train",
                         "amsp-train: trains a GPT-2-family transformer on English text (bytes) with sharded model states",
                         argc, argv);
    const std::optional<CliConfig> parsed = parse_cli(args);
    if (!parsed) {
      std::cout << args.help();
      return 0;
    }
    const CliConfig& cfg = *parsed;
    const amsp::Mesh& mesh = cfg.mesh;
    const amsp::Plan plan = amsp::parse_plan(cfg.plan, mesh);
    const TextCorpus data = load_fortunes(cfg.fortune_dir);
    const double tokens_per_step = double(cfg.train.global_batch) * cfg.train.model.context;
    int rank = 0;
    // Only rank 0 writes the log; under MPI every process parses the same options, so the
    // others open nothing.
    TrainLog log(cfg.train.print, cfg.backend == Backend::mpi && process_rank(cfg.backend) != 0 ? std::string() : cfg.train.log_json,
                 cfg.train.steps, tokens_per_step);
    const TrainOutcome o = cfg.bf16 ? run<amsp::bf16>(cfg, mesh, plan, data, log, rank)
                                    : run<float>(cfg, mesh, plan, data, log, rank);
    if (rank != 0) return 0;
    amsp::Json::Object result{
        {"final_loss", o.final_loss},
        {"initial_validation_loss", o.initial_validation_loss},
        {"final_validation_loss", o.final_validation_loss},
        {"tokens_per_second", tokens_per_step * cfg.train.steps / o.seconds},
        {"plan", amsp::to_string(plan)},
        {"mesh", amsp::to_string(mesh)},
        {"backend", cfg.backend == Backend::mpi ? "mpi" : "threads"},
        {"steps", cfg.train.steps},
        {"micro_batches", cfg.train.micro_batches},
        {"parameters", o.parameters},
        {"dtype", cfg.bf16 ? "bf16" : "fp32"},
        {"keep_gathered", cfg.train.keep_gathered},
        {"overlap", cfg.train.overlap},
        {"engine_space", cfg.train.engine_space == EngineSpace::async ? "async" : "serial"},
        {"bytes_intra_per_step", o.bytes_intra},
        {"bytes_inter_per_step", o.bytes_inter},
        {"expected_bytes_intra_per_step", o.expected_intra},
        {"expected_bytes_inter_per_step", o.expected_inter},
        {"model_state_bytes_per_rank", o.model_state_bytes},
        {"seconds", o.seconds},
        {"comm_seconds", o.comm_seconds},
        {"sample", o.sample},
        {"ranks", rank_splits(o)},
    };
    log.final(result);
    std::printf("%s\n", amsp::to_json_string(amsp::Json(std::move(result))).c_str());
    return 0;
  });
}
