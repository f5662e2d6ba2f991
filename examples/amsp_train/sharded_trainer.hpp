#pragma once
// The sharded training loop of amsp-train, one function per rank, usable with any communicator:
// the CLI (main.cpp) runs it on threads or MPI ranks; tests/examples checks that every plan
// follows DDP's loss curve with it and that the counted traffic is the engine's model.
//
// Buckets: "embed", one per transformer block, "head" (gpt_config.hpp). Per micro-batch:
// - forward: gather bucket b just before it runs, prefetch b + 1 behind it, release b − 1;
// - backward, from the head down: gather b again (unless --keep-gathered kept it), prefetch b − 1,
//   write b's gradient straight into the engine's buffer and hand it in as soon as it is final,
//   so its reduction is issued while the lower blocks' backward is still to come;
// - step(): the update with the schedule's learning rate (set_lr) and AdamW's weight decay on the
//   matrices only (parameter groups), whose spread runs on while the next forward starts (gather(b) waits for
//   bucket b's spread only). --no-overlap issues no prefetch and waits for the spread at once.
// Engine space (--engine-space): HostAsync by default, so reduce_gradients, prefetch and step
// return at once and the engine's worker thread runs each bucket's reduction while the lower
// blocks' backward goes on; HostSerial runs the same work, in the same order, on the caller.
// The loop's own collectives on `world` (loss, validation) wait for the worker first
// (quiesce()). Plans that shard P also gather on the engine's second stream, beside its first,
// so amsp-train asks MPI for MPI_THREAD_MULTIPLE. Exposed communication is the time the host waits in engine calls.
// Integration form: the model reads parameters straight from amsp's gather buffers and writes
// gradients into the buffers amsp hands out (EngineOptions::alignment_bytes = one element keeps
// the engine's flat layout equal to the model's). With bf16 parameters and gradients the model
// still computes in fp32: each gathered bucket is widened into a float copy and each gradient
// rounded into the engine's bf16 buffer.

#include <chrono>
#include <memory>
#include <type_traits>
#include <vector>

#include "amsp/comm/traffic_counter.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/io/checkpoint.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp_train/emulated_device.hpp"
#include "amsp_train/gpt_model.hpp"
#include "amsp_train/hyperparameters.hpp"
#include "amsp_train/text_data.hpp"
#include "amsp_train/timeline.hpp"
#include "amsp_train/train_config.hpp"
#include "amsp_train/train_log.hpp"
#include "amsp_train/validation.hpp"

namespace amsp_train {

/// The model's buckets as engine buckets (fp32 tensors, the model's order).
[[nodiscard]] inline std::vector<amsp::BucketSpec> engine_buckets(const std::vector<ParamBucket>& buckets) {
  std::vector<amsp::BucketSpec> out;
  for (const ParamBucket& b : buckets) {
    amsp::BucketSpec spec{b.name, {}};
    for (const ParamTensor& t : b.tensors)
      spec.tensors.push_back({t.name, std::vector<std::int64_t>(t.shape.begin(), t.shape.end()), amsp::dtype::fp32});
    out.push_back(std::move(spec));
  }
  return out;
}

/// The collectives `comm` recorded (a CountingCommunicator over a TracedCommunicator, main.cpp),
/// null when it records none.
template <class Comm>
[[nodiscard]] const CallTrace* call_trace_of(Comm& comm) {
  if constexpr (requires { comm.inner().call_trace(); }) return comm.inner().call_trace().get();
  else return nullptr;
}

template <class Comm, class ParamT, class Space = amsp::HostAsync>
class ShardedRun {
public:
  using Engine = amsp::ShardedOptimizer<Comm, amsp::optim::AdamW, ParamT, ParamT, Space>;

  ShardedRun(Comm& comm, const amsp::Mesh& mesh, const amsp::Plan& plan, const TrainConfig& cfg)
      : cfg_(cfg), model_(cfg.model), buckets_(model_.buckets()),
        opt_(comm, mesh, plan, rule(cfg), engine_buckets(buckets_), options(cfg, buckets_)),
        device_(cfg.device_ms_per_sequence, buckets_, cfg.device_timing), timeline_(cfg.timeline, comm.rank()),
        params_(buckets_.size()), grads_(buckets_.size()), wide_params_(buckets_.size()),
        wide_grads_(buckets_.size()), gathered_(buckets_.size(), false) {
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      const auto& slots = opt_.layout(static_cast<int>(b)).slots();
      for (std::size_t i = 0; i < slots.size(); ++i)
        amsp::check(slots[i].offset == buckets_[b].tensors[i].offset, "example.layout", "tensor ", slots[i].name,
                    " sits at ", slots[i].offset, " in the engine's layout but at ", buckets_[b].tensors[i].offset,
                    " in the model's");
      std::vector<float> init(buckets_[b].numel);
      init_bucket(buckets_[b], cfg.seed, b, std::span(init));
      for (const ParamTensor& t : buckets_[b].tensors)
        opt_.set_tensor(t.name, std::span<const float>(init.data() + t.offset, t.numel()));
    }
  }

  [[nodiscard]] Engine& engine() { return opt_; }
  [[nodiscard]] Gpt<float>& model() { return model_; }
  [[nodiscard]] double comm_seconds() const { return comm_seconds_; }
  /// The part of comm_seconds spent in step(): the update (and a sharded plan's norm reduction
  /// and spread), all of it with --no-overlap, the part the caller waits for with overlap.
  [[nodiscard]] double update_seconds() const { return update_seconds_; }
  [[nodiscard]] Timeline& timeline() { return timeline_; }
  /// Gathers per micro-batch of each bucket (what expected_traffic needs).
  [[nodiscard]] int gathers_per_micro_batch() const { return cfg_.keep_gathered ? 1 : 2; }

  /// One micro-batch: forward, backward, every gradient handed in. Returns its mean loss.
  double micro_batch(const TokenBatch& batch, bool last) {
    device_.host_begins();
    timed("start_micro_batch", -1, [&] { opt_.start_micro_batch(last); });
    const std::size_t n = buckets_.size();
    const double loss = model_.forward(params_, batch.tokens.data(), batch.targets.data(), batch.sequences,
                                       [&](std::size_t b) {
                                         gather(b);
                                         // b - 1 goes back before b + 1 is asked for: two gathered
                                         // units at a time, as the planner's memory model prices.
                                         if (!cfg_.keep_gathered && b > 0) release(b - 1);
                                         if (cfg_.overlap && b + 1 < n)
                                           timed("prefetch", int(b + 1), [&] { opt_.prefetch(int(b + 1)); });
                                         compute(b, false, batch.sequences);
                                       });
    if (!cfg_.keep_gathered) release(n - 1);
    model_.backward(
        params_, grads_,
        [&](std::size_t b) {
          if (!gathered_[b]) gather(b);
          if (cfg_.overlap && !cfg_.keep_gathered && b > 0)
            timed("prefetch", int(b - 1), [&] { opt_.prefetch(int(b - 1)); });
          compute(b, true, batch.sequences);
          if constexpr (std::is_same_v<ParamT, float>) {
            grads_[b] = timed("grad_buffer", int(b), [&] { return opt_.grad_buffer(int(b)).data(); });
          } else {
            wide_grads_[b].resize(buckets_[b].numel);
            grads_[b] = wide_grads_[b].data();
          }
        },
        [&](std::size_t b) {
          timed("reduce_gradients", int(b), [&] {
            if constexpr (!std::is_same_v<ParamT, float>) {
              const std::span<ParamT> out = opt_.grad_buffer(int(b));
              for (std::size_t e = 0; e < buckets_[b].numel; ++e) out[e] = amsp::from_float<ParamT>(grads_[b][e]);
            }
            opt_.reduce_gradients(int(b));
          });
          release(b);
        });
    return loss;
  }

  /// The optimizer step, with the learning rate of the schedule for the step it takes.
  amsp::StepResult step() {
    opt_.set_lr(cfg_.schedule.at(opt_.steps() + 1));
    const double comm_before = comm_seconds_;
    amsp::StepResult result = timed("step", -1, [&] {
      amsp::StepResult r = opt_.step();
      if (!cfg_.overlap) opt_.synchronize();
      return r;
    });
    update_seconds_ += comm_seconds_ - comm_before;
    return result;
  }

  /// Waits in a barrier of `world`, counted as communication (TrainConfig::compute_turns).
  template <class Raw>
  void wait_for_turn(Raw& world) {
    timed("turn barrier", -1, [&] { world.barrier(); });
  }

  /// Waits for the engine's worker (HostAsync) before the loop's own collectives: afterwards no
  /// thread but the caller's talks to the communicator. A no-op in HostSerial, whose calls all
  /// come from the caller's thread already.
  void quiesce() {
    if constexpr (Space::asynchronous) timed("synchronize", -1, [&] { opt_.synchronize(); });
  }

  /// Gathers every bucket, runs `use(params)`, releases them and gives the gather buffers back
  /// (collective: every rank calls it). Without the trim the engine's pool would keep the whole
  /// model's gathers from the first evaluation on, above what the planner prices for training.
  template <class Use>
  auto with_all_gathered(Use&& use) {
    for (std::size_t b = 0; b < buckets_.size(); ++b) gather(b);
    quiesce();
    struct Releaser {
      ShardedRun* run;
      ~Releaser() {
        for (std::size_t b = 0; b < run->buckets_.size(); ++b) run->release(b);
      }
    };
    auto result = [&] {
      const Releaser releaser{this};
      return use(std::span<const float* const>(params_));
    }();
    (void)opt_.trim_scratch();
    return result;
  }

private:
  static amsp::optim::AdamW rule(const TrainConfig& cfg) {
    return amsp::optim::AdamW{.lr = cfg.schedule.at(1), .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                              .weight_decay = cfg.weight_decay};
  }
  static amsp::EngineOptions options(const TrainConfig& cfg, const std::vector<ParamBucket>& buckets) {
    amsp::EngineOptions o;
    o.param_groups = decay_groups(buckets);
    o.os_layout = cfg.os_layout;
    o.max_grad_norm = cfg.max_grad_norm;
    o.alignment_bytes = sizeof(ParamT);  // the model's own layout: tensors back to back
    return o;
  }

  /// Runs f, adding its wall time to the communication time (what the engine's calls block for),
  /// and records it on the timeline as `name` (bucket -1: none). The emulated device's next
  /// kernels are ordered after it if it blocked (EmulatedDevice::host_waited).
  template <class F>
  auto timed(const char* name, int bucket, F&& f) {
    const auto start = std::chrono::steady_clock::now();
    struct Add {
      ShardedRun& run;
      const char* name;
      int bucket;
      std::chrono::steady_clock::time_point start;
      ~Add() {
        const auto end = std::chrono::steady_clock::now();
        run.comm_seconds_ += std::chrono::duration<double>(end - start).count();
        run.timeline_.add(name, "wait", bucket, start, end);
        run.device_.host_waited(start, end);
      }
    } add{*this, name, bucket, start};
    return f();
  }
  /// Bucket b's forward or backward on the emulated device, on the timeline when it is on.
  void compute(std::size_t b, bool backward, std::size_t sequences) {
    if (!device_.on()) return;
    timeline_.span(backward ? "backward" : "forward", "device", int(b),
                   [&] { device_.compute(b, backward, sequences); });
  }

  void gather(std::size_t b) {
    const std::span<const ParamT> full = timed("gather", int(b), [&] { return opt_.gather(int(b)); });
    gathered_[b] = true;
    if constexpr (std::is_same_v<ParamT, float>) {
      params_[b] = full.data();
    } else {
      wide_params_[b].resize(buckets_[b].numel);
      for (std::size_t e = 0; e < buckets_[b].numel; ++e) wide_params_[b][e] = amsp::to_float(full[e]);
      params_[b] = wide_params_[b].data();
    }
  }
  void release(std::size_t b) {
    if (!gathered_[b]) return;
    timed("release", int(b), [&] { opt_.release(int(b)); });
    gathered_[b] = false;
    params_[b] = nullptr;
  }

  const TrainConfig& cfg_;
  Gpt<float> model_;
  std::vector<ParamBucket> buckets_;
  Engine opt_;
  EmulatedDevice device_;  ///< --device-ms-per-sequence (off by default)
  Timeline timeline_;      ///< --timeline (off by default)
  std::vector<const float*> params_;
  std::vector<float*> grads_;
  std::vector<std::vector<float>> wide_params_, wide_grads_;
  std::vector<bool> gathered_;
  double comm_seconds_ = 0.0, update_seconds_ = 0.0;
};

/// train_rank in the engine space `Space`.
template <class ParamT, class Space, class Comm, class Raw>
TrainOutcome train_rank_in(Comm& comm, Raw& world, const amsp::Mesh& mesh, const amsp::Plan& plan,
                           const TrainConfig& cfg, const TextCorpus& data,
                           const std::shared_ptr<amsp::comm::TrafficCounter>& counter, TrainLog* log) {
  // Turns wait in a barrier of `world` while the engine's worker may still reduce on its own groups:
  // gathers (sharded parameters) or a serial engine would block the caller inside a turn.
  amsp::check(cfg.compute_turns == 1 || (cfg.compute_turns >= 1 && mesh.world_size() % cfg.compute_turns == 0 &&
                                         plan.p.size() == 1 && Space::asynchronous),
              "cli.compute_turns", "--compute-turns ", cfg.compute_turns,
              " needs a divisor of the world size ", mesh.world_size(),
              ", replicated parameters (p=1x1) and --engine-space async");
  ShardedRun<Comm, ParamT, Space> run(comm, mesh, plan, cfg);
  const auto context = static_cast<std::size_t>(cfg.model.context);
  const WindowSampler sampler(data.train.size(), context, cfg.global_batch, cfg.seed);
  (void)sampler.micro_batch_size(mesh.world_size(), cfg.micro_batches);  // fails before training
  const ValidationSet validation(data.validation, context, cfg.eval_windows, comm.rank(), mesh.world_size());
  const auto validation_loss = [&] {
    return run.with_all_gathered([&](std::span<const float* const> p) { return validation.loss(run.model(), p, world); });
  };
  const auto sent = [&](amsp::comm::Locality where) {
    return counter ? counter->sent({.world_rank = comm.rank(), .locality = where}).to_double() : 0.0;
  };
  // Bytes are read only where the engine's worker is idle (after quiesce()), or its collectives
  // would land in a step by timing: a step counts from the last such point before its optimizer
  // step to the next, so it holds the previous step's spread, which ran into its forward (the
  // first step holds none; a step with validation, a checkpoint, or the last, also holds its own).
  // Both spaces count alike; the total, and so the mean per step, is exact.
  double intra_mark = 0.0, inter_mark = 0.0;
  const auto count_since_mark = [&](StepRecord& r) {
    const double intra = sent(amsp::comm::Locality::intra_node), inter = sent(amsp::comm::Locality::inter_node);
    r.bytes_intra += intra - intra_mark;
    r.bytes_inter += inter - inter_mark;
    intra_mark = intra;
    inter_mark = inter;
  };
  const auto skip_since_mark = [&] {
    StepRecord ignored;
    count_since_mark(ignored);
  };

  int first_step = 0;
  if (!cfg.resume_dir.empty()) {
    first_step = static_cast<int>(amsp::io::load(run.engine(), comm, cfg.resume_dir).step);
    amsp::check(first_step < cfg.steps, "example.resume", "the checkpoint in ", cfg.resume_dir, " is at step ",
                first_step, ": nothing left to train for --steps ", cfg.steps);
  }
  TrainOutcome out;
  out.parameters = parameter_count(run.model().buckets());
  out.initial_validation_loss = validation_loss();
  skip_since_mark();
  for (int step = first_step; step < cfg.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    const double comm_before = run.comm_seconds();
    double loss_sum = 0.0;
    for (int m = 0; m < cfg.micro_batches; ++m)
      for (int turn = 0; turn < cfg.compute_turns; ++turn) {  // one turn unless calibrating (compute_turns)
        if ((comm.rank() + step) % cfg.compute_turns == turn)  // rotating: every rank takes every turn
          loss_sum += run.micro_batch(windows_at(data.train, sampler.starts(std::uint64_t(step), mesh.world_size(),
                                                                              cfg.micro_batches, comm.rank(), m),
                                                 context),
                                      m == cfg.micro_batches - 1);
        if (cfg.compute_turns > 1) run.wait_for_turn(world);
      }
    // The loss reduction is the loop's own collective: it waits for the last gradient reductions,
    // which step() would wait for anyway, and leaves the spread free to overlap the next forward.
    run.quiesce();
    StepRecord r;
    count_since_mark(r);
    run.timeline().span("loss all_reduce", "wait", -1,
                        [&] { world.all_reduce(&loss_sum, &loss_sum, 1, amsp::comm::reduce_op::sum); });
    const double update_before = run.update_seconds();
    run.step();
    r.update_seconds = run.update_seconds() - update_before;
    const bool last = step + 1 == cfg.steps;
    const bool evaluate = last || (cfg.eval_every > 0 && (step + 1) % cfg.eval_every == 0);
    const bool checkpoint =
        !cfg.checkpoint_dir.empty() && (last || (cfg.checkpoint_every > 0 && (step + 1) % cfg.checkpoint_every == 0));
    if (evaluate || checkpoint) {
      run.quiesce();  // the spread ends here: this step's own
      count_since_mark(r);
    }
    r.step = step + 1;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.comm_seconds = run.comm_seconds() - comm_before;
    r.lr = run.engine().rule().lr;
    r.loss = loss_sum / (mesh.world_size() * cfg.micro_batches);
    if (evaluate) r.validation_loss = validation_loss();
    // Checkpoints go after the step's byte count: their traffic is not the step's.
    if (checkpoint) amsp::io::save(run.engine(), comm, cfg.checkpoint_dir);
    if (evaluate || checkpoint) skip_since_mark();  // the worker is idle again after both
    out.steps.push_back(r);
    out.seconds += r.seconds;
    out.comm_seconds += r.comm_seconds;
    out.bytes_intra += r.bytes_intra;  // summed here, divided by the step count at the end
    out.bytes_inter += r.bytes_inter;
    if (log) log->record(r);
  }
  // Every rank's split, for the check of the contention model (rank 0's alone shows one rank).
  run.quiesce();
  std::vector<double> mine;
  for (const StepRecord& r : out.steps) mine.push_back(r.seconds);
  for (const StepRecord& r : out.steps) mine.push_back(r.comm_seconds);
  for (const StepRecord& r : out.steps) mine.push_back(r.update_seconds);
  std::vector<double> all(mine.size() * std::size_t(mesh.world_size()));
  world.all_gather(mine.data(), all.data(), mine.size());
  const auto steps = std::ptrdiff_t(out.steps.size());
  for (int r = 0; r < mesh.world_size(); ++r) {
    const auto first = all.begin() + std::ptrdiff_t(r * mine.size());
    out.rank_step_seconds.insert(out.rank_step_seconds.end(), first, first + steps);
    out.rank_comm_seconds.insert(out.rank_comm_seconds.end(), first + steps, first + 2 * steps);
    out.rank_update_seconds.insert(out.rank_update_seconds.end(), first + 2 * steps, first + 3 * steps);
  }
  run.timeline().write(call_trace_of(comm));
  out.bytes_intra /= double(out.steps.size());
  out.bytes_inter /= double(out.steps.size());
  out.final_loss = out.steps.back().loss;
  out.final_validation_loss = out.steps.back().validation_loss;
  const amsp::TrafficExpectation expected =
      run.engine().expected_traffic(cfg.micro_batches, run.gathers_per_micro_batch());
  out.expected_intra = expected.intra_total().to_double();
  out.expected_inter = expected.inter_total().to_double();
  out.model_state_bytes = run.engine().memory().model_states();
  if (cfg.sample_bytes > 0)
    out.sample = run.with_all_gathered([&](std::span<const float* const> p) {
      return comm.rank() == 0 ? sample_text(run.model(), p, "The ", std::size_t(cfg.sample_bytes), cfg.seed)
                              : std::string();
    });
  return out;
}

/// One rank's training run, in the engine space cfg.engine_space. `comm` counts traffic; `world`
/// is the same world, uncounted, for the loss reductions that are not the engine's traffic. `log`
/// is rank 0's (null elsewhere).
template <class ParamT, class Comm, class Raw>
TrainOutcome train_rank(Comm& comm, Raw& world, const amsp::Mesh& mesh, const amsp::Plan& plan, const TrainConfig& cfg,
                        const TextCorpus& data, const std::shared_ptr<amsp::comm::TrafficCounter>& counter,
                        TrainLog* log = nullptr) {
  if (cfg.engine_space == EngineSpace::serial)
    return train_rank_in<ParamT, amsp::HostSerial>(comm, world, mesh, plan, cfg, data, counter, log);
  return train_rank_in<ParamT, amsp::HostAsync>(comm, world, mesh, plan, cfg, data, counter, log);
}

}  // namespace amsp_train
