// Where the overlapped step's time goes (threads backend, 4 ranks on 2x2, the step of
// overlap_scenario.hpp): per plan, rank 0's step split into its compute and the time the caller
// waited for the engine (in the forward's gathers, in the backward's calls, in step()), next to
// how long each of the engine's streams was busy. A diagnostic behind the figures of
// bench_overlap.cpp; not a benchmark with a target. Run:
//   build/default/bench/engine/bench_engine_overlap_breakdown [plan...]   (default: every plan)
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "overlap_scenario.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace ov = amsp::bench::overlap;

// What a task of the engine's space was: submit (a reduction chain, or the norm's AllReduce),
// launch (an update and spread; before launch_after existed also a prefetch AllGather), or
// launch_after (a prefetch AllGather on the gather stream).
enum class Stream { submitted, launched, gather };

/// Busy time of the streams: one record per task, kept under a mutex (tasks end on the streams).
struct StreamLog {
  struct Task {
    Stream stream;
    Clock::time_point start, end;
  };
  std::mutex mutex;
  std::vector<Task> tasks;

  void add(Stream stream, Clock::time_point start) {
    const Clock::time_point end = Clock::now();
    std::lock_guard lock(mutex);
    tasks.push_back({stream, start, end});
  }
  /// Seconds of busy time on `stream` of the tasks that started in [from, to).
  double busy(Stream stream, Clock::time_point from, Clock::time_point to) {
    std::lock_guard lock(mutex);
    double total = 0;
    for (const Task& t : tasks)
      if (t.stream == stream && t.start >= from && t.start < to)
        total += std::chrono::duration<double>(t.end - t.start).count();
    return total;
  }
};

thread_local StreamLog* constructing_log = nullptr;  // the log the next TracedSpace records into

/// A space that runs everything as Base does and records how long each task ran: launch's
/// collectives are waited inside the task (as HostAsync's stream does anyway).
template <class Base>
class TracedSpace {
public:
  static constexpr bool asynchronous = Base::asynchronous;
  static constexpr bool concurrent_streams = [] {  // a space from before launch_after has one stream
    if constexpr (requires { Base::concurrent_streams; }) return Base::concurrent_streams;
    else return false;
  }();

  TracedSpace() : log_(constructing_log) {}

  template <class F>
  amsp::comm::Handle submit(F&& task) {
    return base_.submit([log = log_, t = std::forward<F>(task)]() mutable {
      const Clock::time_point start = Clock::now();
      t();
      log->add(Stream::submitted, start);
    });
  }
  template <class F>
  amsp::comm::Handle launch(F&& collectives) {
    return base_.launch(timed(Stream::launched, std::forward<F>(collectives)));
  }
  template <class F>
  amsp::comm::Handle launch_after(amsp::comm::Handle& event, F&& collectives) {
    return base_.launch_after(event, timed(Stream::gather, std::forward<F>(collectives)));
  }
  void order_after(amsp::comm::Handle& event) { base_.order_after(event); }

private:
  template <class F>
  auto timed(Stream stream, F&& collectives) {
    return [log = log_, stream, c = std::forward<F>(collectives)]() mutable {
      const Clock::time_point start = Clock::now();
      std::vector<amsp::comm::Handle> handles = c();
      amsp::wait_all(handles);
      log->add(stream, start);
      return std::vector<amsp::comm::Handle>{};
    };
  }

  StreamLog* log_;
  Base base_;
};

struct Busy {
  double submitted = 0, launched = 0, gather = 0;
};

struct Breakdown {
  double comm = 0, step = 0;
  Busy comm_parts;         // the serialized step without compute: its tasks (on the caller's thread)
  ov::CallerTimes caller;  // the overlapped step: the caller's compute and waits
  Busy streams;            // the overlapped step: the streams' busy time
};

/// Runs kSteps steps of a fresh traced engine after a warm-up and returns the mean step time;
/// `caller` and `busy` get the per-step means of the timed steps.
template <class Space>
double traced_steps(amsp::comm::ThreadsCommunicator& comm, const amsp::Mesh& mesh, const amsp::Plan& plan, double c,
                    bool overlap, ov::CallerTimes& caller, Busy& busy) {
  StreamLog log;
  constructing_log = &log;
  auto opt = ov::make_engine<amsp::comm::ThreadsCommunicator, TracedSpace<Space>>(comm, mesh, plan);
  ov::CallerTimes warmup;
  ov::train_steps(opt, c, overlap, warmup);
  const Clock::time_point from = Clock::now();
  const double step = amsp::bench::timed(comm, [&] { ov::train_steps(opt, c, overlap, caller); }) / ov::kSteps;
  const Clock::time_point to = Clock::now();
  opt.synchronize();
  for (double* t : {&caller.compute, &caller.forward_wait, &caller.backward_wait, &caller.step_call})
    *t /= ov::kSteps;
  busy.submitted = log.busy(Stream::submitted, from, to) / ov::kSteps;
  busy.launched = log.busy(Stream::launched, from, to) / ov::kSteps;
  busy.gather = log.busy(Stream::gather, from, to) / ov::kSteps;
  return step;
}

Breakdown measure(amsp::comm::ThreadsCommunicator& comm, const amsp::Mesh& mesh, const amsp::Plan& plan) {
  Breakdown r;
  ov::CallerTimes serial_caller;
  r.comm = traced_steps<amsp::HostSerial>(comm, mesh, plan, 0.0, false, serial_caller, r.comm_parts);
  double c = r.comm / (2 * ov::kBuckets);
  comm.broadcast(&c, &c, 1, 0);
  r.step = traced_steps<amsp::HostAsync>(comm, mesh, plan, c, true, r.caller, r.streams);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> plans(argv + 1, argv + argc);
  if (plans.empty()) plans.assign(std::begin(ov::kPlans), std::end(ov::kPlans));
  const amsp::Mesh mesh(2, 2);
  std::printf("rank 0, ms per step (mean of %d steps). comm: the serialized step without compute, and its "
              "reductions (submit), updates and spreads (launch), gathers; overlap: the step with compute "
              "(= comm), the caller's compute and waits, the streams' busy time\n\n",
              ov::kSteps);
  std::printf("| plan | comm | reductions | updates | gathers | overlap | vs_max | compute | forward waits | "
              "backward waits | step() | reductions | updates | gathers |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& name : plans) {
    const amsp::Plan plan = amsp::parse_plan(name, mesh);
    Breakdown b;
    amsp::comm::run_on_threads(mesh.world_size(), [&](amsp::comm::ThreadsCommunicator& comm) {
      const Breakdown mine = measure(comm, mesh, plan);
      if (comm.rank() == 0) b = mine;
    });
    const auto ms = [](double s) { return s * 1e3; };
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
                name.c_str(), ms(b.comm), ms(b.comm_parts.submitted), ms(b.comm_parts.launched),
                ms(b.comm_parts.gather), ms(b.step), b.step / b.comm, ms(b.caller.compute), ms(b.caller.forward_wait),
                ms(b.caller.backward_wait), ms(b.caller.step_call), ms(b.streams.submitted), ms(b.streams.launched),
                ms(b.streams.gather));
    std::fflush(stdout);
  }
  return 0;
}
