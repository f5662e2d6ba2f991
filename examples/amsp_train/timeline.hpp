#pragma once
// amsp-train --timeline PREFIX: each rank's waits in engine calls and its emulated device time,
// as a Chrome trace (PREFIX.rank<R>.json, the Trace Event Format's complete events, which
// chrome://tracing and Perfetto open). Timestamps are the steady clock's (CLOCK_MONOTONIC on
// Linux), one clock for every process of a machine: the files of the ranks of one emulated
// cluster line up, and merge by concatenating their event lists (docs/example.md). Between the
// events a rank computes on its CPU (the model's forward and backward) or keeps books.
// A model term found in such timelines: docs/planner-check-stagger.md.

#include <chrono>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/core/json.hpp"

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

  /// Writes every event recorded (rule cli.timeline when the file cannot be written).
  void write() {
    if (!on()) return;
    amsp::Json events = amsp::Json::array();
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
