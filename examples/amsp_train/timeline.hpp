#pragma once
// amsp-train --timeline PREFIX: each rank's waits in engine calls and its emulated device time,
// as a Chrome trace (PREFIX.rank<R>.json, the Trace Event Format's complete events, which
// chrome://tracing and Perfetto open). Timestamps are the steady clock's (CLOCK_MONOTONIC on
// Linux), one clock for every process of a machine: the files of the ranks of one emulated
// cluster line up, and merge by concatenating their event lists (docs/example.md). Between the
// events a rank computes on its CPU (the model's forward and backward) or keeps books. With a
// CallTrace (traced_communicator.hpp) the file also holds the rank's collectives: each blocking
// call ("collective") on the thread that made it, each nonblocking one as the instant it was
// issued ("issued"); thread 0 is the host thread, whose waits and device time the rest shows.
// A model term found in such timelines: docs/planner-check-stagger.md.

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/core/json.hpp"
#include "amsp_train/traced_communicator.hpp"

namespace amsp_train {

class Timeline {
public:
  using Clock = std::chrono::steady_clock;

  /// Off for an empty prefix; else opens PREFIX.rank<rank>.json at once, so that a path that
  /// cannot be written fails before training (rule cli.timeline).
  Timeline(const std::string& prefix, int rank) : rank_(rank) {
    if (prefix.empty()) return;
    path_ = prefix + ".rank" + std::to_string(rank) + ".json";
    out_.open(path_, std::ios::trunc);
    amsp::check(out_.good(), "cli.timeline", "--timeline: cannot write ", path_);
  }

  [[nodiscard]] bool on() const { return out_.is_open(); }

  /// One event: `name` (an engine call, or the device's forward / backward) of `category`
  /// ("wait": the host blocked in it; "device": the emulated accelerator), bucket -1 for none.
  void add(const char* name, const char* category, int bucket, Clock::time_point start, Clock::time_point end) {
    if (on()) events_.push_back({name, category, bucket, micros(start), micros(end) - micros(start)});
  }

  /// Runs f and records it as `name`.
  template <class F>
  auto span(const char* name, const char* category, int bucket, F&& f) {
    struct Record {
      Timeline& t;
      const char* name;
      const char* category;
      int bucket;
      Clock::time_point start = Clock::now();
      ~Record() { t.add(name, category, bucket, start, Clock::now()); }
    } record{*this, name, category, bucket};
    return f();
  }

  /// Writes every event recorded, and the calls of `calls` when given (rule cli.timeline when the
  /// file cannot be written).
  void write(const CallTrace* calls = nullptr) {
    if (!on()) return;
    amsp::Json events = amsp::Json::array();
    if (calls) add_calls(*calls, events);
    for (const Event& e : events_) {
      amsp::Json item = amsp::Json::object();
      item["name"] = e.name;
      item["cat"] = e.category;
      item["ph"] = "X";
      item["ts"] = e.ts_us;
      item["dur"] = e.dur_us;
      item["pid"] = rank_;
      item["tid"] = 0;
      if (e.bucket >= 0) {
        amsp::Json args = amsp::Json::object();
        args["bucket"] = e.bucket;
        item["args"] = std::move(args);
      }
      events.push_back(std::move(item));
    }
    amsp::Json doc = amsp::Json::object();
    doc["traceEvents"] = std::move(events);
    doc["displayTimeUnit"] = "ms";
    out_ << amsp::to_json_string(doc) << '\n';
    out_.flush();
    amsp::check(out_.good(), "cli.timeline", "--timeline: writing ", path_, " failed");
  }

private:
  /// The trace's calls as events of `events`, and a name for each thread that made one.
  void add_calls(const CallTrace& calls, amsp::Json& events) const {
    int threads = 1;
    for (const CallTrace::Call& c : calls.calls()) {
      amsp::Json item = amsp::Json::object();
      item["name"] = std::string(amsp::comm::name_of(c.op));
      item["cat"] = c.blocking ? "collective" : "issued";
      item["ph"] = c.blocking ? "X" : "i";
      item["ts"] = micros(c.start);
      if (c.blocking) item["dur"] = micros(c.end) - micros(c.start);
      else item["s"] = "t";  // an instant on its thread
      item["pid"] = rank_;
      item["tid"] = c.thread;
      amsp::Json args = amsp::Json::object();
      args["bytes"] = static_cast<double>(c.bytes);
      args["group"] = c.group_size;
      item["args"] = std::move(args);
      events.push_back(std::move(item));
      threads = std::max(threads, c.thread + 1);
    }
    for (int t = 0; t < threads; ++t) {  // Trace Event Format metadata: the thread's name
      amsp::Json item = amsp::Json::object();
      item["name"] = "thread_name";
      item["ph"] = "M";
      item["pid"] = rank_;
      item["tid"] = t;
      amsp::Json args = amsp::Json::object();
      args["name"] = t == 0 ? std::string("host") : "worker " + std::to_string(t);
      item["args"] = std::move(args);
      events.push_back(std::move(item));
    }
  }

  struct Event {
    const char* name;
    const char* category;
    int bucket;
    double ts_us, dur_us;
  };
  static double micros(Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
  }

  int rank_;
  std::string path_;
  std::ofstream out_;
  std::vector<Event> events_;
};

}  // namespace amsp_train
