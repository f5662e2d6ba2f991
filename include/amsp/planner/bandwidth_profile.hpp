#pragma once
// The bandwidth-profile format, reader and writer together: measured effective bandwidth of the
// cluster's collectives, per op × group shape (p0 × p1: ranks per node × nodes of one group) ×
// message size. `amsp-profile` (tools/amsp_profile) measures and writes it with
// bandwidth_profile_json; amsp-plan reads it with BandwidthProfile::load:
//
//   {"format": "amsp-bandwidth-profile/1", "backend": "nccl", "mesh": "8x2", "host": "...",
//    "entries": [{"op": "all_gather", "group": "8x1", "bytes": 4194304, "seconds": 0.00123,
//                 "algbw_gbps": 3.41, "busbw_gbps": 2.98}, ...]}
//
// `bytes` is the full buffer S of the collective and t(op, S, group) = S / algbw, as nccl-tests
// defines algbw. An entry needs `seconds` or `algbw_gbps` (seconds wins when both are given).
// A profile of calls after an idle gap (amsp-profile --gap-us) also gives `first_pair_seconds`: when
// the first pair of partners half a group apart had both ended (in the group where that came
// last; `seconds` is the slowest rank's end). On a shared link the ranks' transfers end one
// after another, and such a pair, the one that recursive doubling closes with and recursive
// halving opens with, starts its next exchange while the others still receive
// (pair_head_start: docs/planner-check-stagger.md). It also gives `end_spread_seconds`: how far
// apart the ranks of a group, released together, leave the call (the widest group's spread), which
// is how far apart they reach the next call after equal compute (end_spread:
// docs/planner-check-arrival-spread.md).
//
// Between measured sizes we interpolate log(time) linearly in log(bytes): collective time is a
// latency plateau followed by a straight line of slope 1 on a log-log plot, so piecewise log-log
// lines follow both regimes and never produce a negative or non-monotone time. Below the smallest
// measured size the time stays that of the smallest (latency bound: less data is never slower);
// above the largest, the bandwidth of the largest is kept (it has saturated).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amsp/comm/op.hpp"
#include "amsp/comm/traffic.hpp"
#include "amsp/core/error.hpp"
#include "amsp/core/json.hpp"
#include "amsp/sharding/mesh.hpp"

namespace amsp::planner {

/// The "format" field of every profile document; the reader accepts this version only.
inline constexpr std::string_view bandwidth_profile_format = "amsp-bandwidth-profile/1";

/// One measurement, as written: the mean time of one collective `op` on every group of shape
/// `group` at once, for a buffer of `bytes` (gathered size for AllGather, input size for
/// ReduceScatter, buffer size for AllReduce and Broadcast).
struct ProfileEntry {
  comm::op_kind op = comm::op_kind::all_gather;
  Factor group;
  std::uint64_t bytes = 0;
  /// Mean over the calls of the slowest rank's time (rank 0's loop when timed back to back).
  double seconds = 0;
  /// Mean over the calls of when the first pair of ranks half a group apart had both ended, in
  /// the group where that came last (amsp-profile --gap-us); 0: not measured.
  double first_pair_seconds = 0;
  /// Mean over the calls of the spread of the ranks' ends within a group, every rank timed from
  /// its own release after the barrier and the gap, the widest group's (amsp-profile --gap-us);
  /// 0: not measured.
  double end_spread_seconds = 0;

  [[nodiscard]] double algbw_gbps() const { return static_cast<double>(bytes) / seconds / 1e9; }
  [[nodiscard]] double busbw_gbps() const { return algbw_gbps() * comm::bus_bandwidth_factor(op, group.size()); }
};

/// The profile document: {"format", "backend", "mesh", "host", "entries": [...]}, each entry with
/// op, group, bytes, seconds and (for people and nccl-tests comparisons) algbw_gbps, busbw_gbps.
[[nodiscard]] inline Json bandwidth_profile_json(const std::vector<ProfileEntry>& entries, std::string_view backend,
                                                 const Mesh& mesh, std::string_view host) {
  Json doc = Json::object();
  doc["format"] = bandwidth_profile_format;
  doc["backend"] = backend;
  doc["mesh"] = to_string(mesh);
  doc["host"] = host;
  Json list = Json::array();
  for (const ProfileEntry& e : entries) {
    Json item = Json::object();
    item["op"] = comm::name_of(e.op);
    item["group"] = to_string(e.group);
    item["bytes"] = e.bytes;
    item["seconds"] = e.seconds;
    if (e.first_pair_seconds > 0) item["first_pair_seconds"] = e.first_pair_seconds;
    if (e.end_spread_seconds > 0) item["end_spread_seconds"] = e.end_spread_seconds;
    item["algbw_gbps"] = e.algbw_gbps();
    item["busbw_gbps"] = e.busbw_gbps();
    list.push_back(std::move(item));
  }
  doc["entries"] = std::move(list);
  return doc;
}

struct ProfilePoint {
  double bytes = 0;
  double seconds = 0;
  double first_pair_fraction = -1;  ///< first_pair_seconds / seconds; < 0: not measured
  double end_spread_fraction = -1;  ///< end_spread_seconds / seconds; < 0: not measured
};

class BandwidthProfile {
public:
  BandwidthProfile() = default;

  /// Adds a measurement; bytes and seconds must be positive, first_pair_seconds (0: not measured)
  /// at most seconds, end_spread_seconds (0: not measured) non-negative and at most seconds (a rank
  /// cannot leave later than the slowest one) (rule planner.profile).
  void add(comm::op_kind op, Factor group, double bytes, double seconds, double first_pair_seconds = 0,
           double end_spread_seconds = 0) {
    check(bytes > 0 && seconds > 0 && std::isfinite(bytes) && std::isfinite(seconds), "planner.profile",
          "profile entry ", comm::name_of(op), " on ", to_string(group), " needs positive bytes and seconds, got ",
          bytes, " bytes in ", seconds, " s");
    check(first_pair_seconds >= 0 && first_pair_seconds <= seconds, "planner.profile", "profile entry ",
          comm::name_of(op), " on ", to_string(group),
          ": first_pair_seconds (when the first pair had ended) must lie in (0, seconds = ", seconds, "], got ",
          first_pair_seconds);
    check(end_spread_seconds >= 0 && end_spread_seconds <= seconds, "planner.profile", "profile entry ",
          comm::name_of(op), " on ", to_string(group),
          ": end_spread_seconds (how far apart the ranks ended) must lie in [0, seconds = ", seconds, "], got ",
          end_spread_seconds);
    auto& points = curves_[key(op, group)];
    points.push_back({bytes, seconds, first_pair_seconds > 0 ? first_pair_seconds / seconds : -1.0,
                      end_spread_seconds > 0 ? end_spread_seconds / seconds : -1.0});
    std::sort(points.begin(), points.end(), [](const ProfilePoint& a, const ProfilePoint& b) { return a.bytes < b.bytes; });
    // Repeated sizes (several runs) are averaged into one point; a fraction only over the runs
    // that measured one.
    std::vector<ProfilePoint> merged;
    for (std::size_t i = 0; i < points.size();) {
      std::size_t j = i;
      double sum = 0, pairs = 0, spreads = 0;
      int pairs_measured = 0, spreads_measured = 0;
      for (; j < points.size() && points[j].bytes == points[i].bytes; ++j) {
        sum += points[j].seconds;
        if (points[j].first_pair_fraction >= 0) pairs += points[j].first_pair_fraction, ++pairs_measured;
        if (points[j].end_spread_fraction >= 0) spreads += points[j].end_spread_fraction, ++spreads_measured;
      }
      merged.push_back({points[i].bytes, sum / static_cast<double>(j - i),
                        pairs_measured ? pairs / pairs_measured : -1.0,
                        spreads_measured ? spreads / spreads_measured : -1.0});
      i = j;
    }
    points = std::move(merged);
  }

  [[nodiscard]] bool empty() const { return curves_.empty(); }
  [[nodiscard]] bool has(comm::op_kind op, Factor group) const { return curves_.contains(key(op, group)); }

  /// Interpolated seconds of `op` on a group of shape `group` for a buffer of `bytes`, or nullopt
  /// when the profile has no entry for that op and shape.
  [[nodiscard]] std::optional<double> seconds(comm::op_kind op, Factor group, double bytes) const {
    const auto it = curves_.find(key(op, group));
    if (it == curves_.end()) return std::nullopt;
    if (bytes <= 0) return 0.0;
    const std::vector<ProfilePoint>& points = it->second;
    if (bytes <= points.front().bytes) return points.front().seconds;
    if (bytes >= points.back().bytes) return points.back().seconds * bytes / points.back().bytes;
    const Bracket b = bracket(points, bytes);
    return std::exp(std::log(b.lo.seconds) + b.f * std::log(b.hi.seconds / b.lo.seconds));
  }

  /// Seconds by which the first pair of partners half a group apart ends `op` on a group of shape
  /// `group` for a buffer of `bytes` before its slowest rank does (seconds × (1 −
  /// first_pair_seconds / seconds), the fraction interpolated linearly in log(bytes) and held
  /// beyond the measured sizes), or nullopt when the profile has no entry for that op and shape
  /// or not every entry of it measured the first pair.
  [[nodiscard]] std::optional<double> pair_head_start(comm::op_kind op, Factor group, double bytes) const {
    const auto fraction = interpolated_fraction(op, group, bytes, &ProfilePoint::first_pair_fraction);
    if (!fraction) return std::nullopt;
    return *seconds(op, group, bytes) * (1.0 - *fraction);
  }

  /// Seconds from the first to the last rank of a group to leave `op` on a group of shape `group`
  /// for a buffer of `bytes`, the ranks released together (seconds × end_spread_seconds / seconds,
  /// the fraction interpolated as pair_head_start's), or nullopt when the profile has no entry
  /// for that op and shape or not every entry of it measured the spread.
  [[nodiscard]] std::optional<double> end_spread(comm::op_kind op, Factor group, double bytes) const {
    const auto fraction = interpolated_fraction(op, group, bytes, &ProfilePoint::end_spread_fraction);
    if (!fraction) return std::nullopt;
    return *seconds(op, group, bytes) * *fraction;
  }

  /// Reads the document bandwidth_profile_json writes; errors name the entry (rule planner.profile, or
  /// json.parse for malformed JSON).
  [[nodiscard]] static BandwidthProfile from_json(const Json& doc) {
    check(doc.is_object() && doc.contains("format") && doc.at("format").is_string() &&
              doc.at("format").as_string() == bandwidth_profile_format,
          "planner.profile", "not a bandwidth profile: expected \"format\": \"", bandwidth_profile_format, "\"");
    check(doc.contains("entries") && doc.at("entries").is_array(), "planner.profile",
          "bandwidth profile has no \"entries\" array");
    BandwidthProfile profile;
    std::size_t index = 0;
    for (const Json& e : doc.at("entries").as_array()) {
      try {
        const comm::op_kind op = comm::parse_op_kind(e.at("op").as_string());
        const Factor group = parse_factor(e.at("group").as_string());
        const double bytes = e.at("bytes").as_number();
        double seconds = 0;
        if (const Json* s = e.find("seconds")) seconds = s->as_number();
        else seconds = bytes / (e.at("algbw_gbps").as_number() * 1e9);
        const Json* first = e.find("first_pair_seconds");
        check(!first || first->as_number() > 0, "planner.profile",
              "first_pair_seconds must be positive when given, got ", first ? first->as_number() : 0.0);
        const Json* spread = e.find("end_spread_seconds");
        check(!spread || spread->as_number() > 0, "planner.profile",
              "end_spread_seconds must be positive when given, got ", spread ? spread->as_number() : 0.0);
        profile.add(op, group, bytes, seconds, first ? first->as_number() : 0.0, spread ? spread->as_number() : 0.0);
      } catch (const error& err) {
        fail("planner.profile", "bandwidth profile entry ", index, ": ", err.what());
      }
      ++index;
    }
    return profile;
  }

  /// Reads a profile file (rule planner.profile when it cannot be opened).
  [[nodiscard]] static BandwidthProfile load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    check(in.good(), "planner.profile", "cannot open bandwidth profile '", path, "'");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return from_json(parse_json(text));
  }

private:
  /// `field` (a fraction of seconds) at `bytes`, interpolated linearly in log(bytes) between the
  /// measured sizes and held beyond them; nullopt when the profile has no entry for `op` and
  /// `group` or one of its entries did not measure it.
  [[nodiscard]] std::optional<double> interpolated_fraction(comm::op_kind op, Factor group, double bytes,
                                                            double ProfilePoint::*field) const {
    const auto it = curves_.find(key(op, group));
    if (it == curves_.end()) return std::nullopt;
    const std::vector<ProfilePoint>& points = it->second;
    if (std::any_of(points.begin(), points.end(), [&](const ProfilePoint& p) { return p.*field < 0; }))
      return std::nullopt;
    if (bytes <= 0) return 0.0;
    if (bytes <= points.front().bytes) return points.front().*field;
    if (bytes >= points.back().bytes) return points.back().*field;
    const Bracket b = bracket(points, bytes);
    return b.lo.*field + b.f * (b.hi.*field - b.lo.*field);
  }

  /// The measured points either side of `bytes` (strictly inside the measured sizes) and how far
  /// between them it lies in log(bytes), 0 at `lo` and 1 at `hi`.
  struct Bracket {
    const ProfilePoint& lo;
    const ProfilePoint& hi;
    double f;
  };
  static Bracket bracket(const std::vector<ProfilePoint>& points, double bytes) {
    const auto upper = std::upper_bound(points.begin(), points.end(), bytes,
                                        [](double b, const ProfilePoint& p) { return b < p.bytes; });
    const ProfilePoint& lo = *std::prev(upper);
    return {lo, *upper, std::log(bytes / lo.bytes) / std::log(upper->bytes / lo.bytes)};
  }

  static std::pair<int, std::pair<int, int>> key(comm::op_kind op, Factor group) {
    return {static_cast<int>(op), {group.intra, group.inter}};
  }

  std::map<std::pair<int, std::pair<int, int>>, std::vector<ProfilePoint>> curves_;
};

}  // namespace amsp::planner
