#pragma once
// The record a CountingCommunicator keeps: per world rank, per collective kind and per group (its
// members' world ranks) the number of calls, the full bytes S and the bytes sent under the ring
// conventions of amsp/comm/traffic.hpp, each group marked intra- or inter-node on the mesh.
// Shared by every wrapper of one world (thread-safe: the ranks of a threads world record at once).

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "amsp/comm/op.hpp"
#include "amsp/comm/traffic.hpp"
#include "amsp/sharding/mesh.hpp"

namespace amsp::comm {

/// Whether a collective's group stays inside one node of the mesh (intra) or spans several
/// (inter). A group spanning nodes counts all its traffic as inter-node, including the part a
/// hierarchical algorithm would keep inside a node: the convention of the planner's model.
enum class Locality : std::uint8_t { intra_node, inter_node };

struct TrafficKey {
  int world_rank = 0;
  op_kind kind = op_kind::all_gather;
  std::vector<int> group;  ///< members' world ranks, in the group's order
  friend bool operator<(const TrafficKey& a, const TrafficKey& b) {
    return std::tie(a.world_rank, a.kind, a.group) < std::tie(b.world_rank, b.kind, b.group);
  }
  friend bool operator==(const TrafficKey&, const TrafficKey&) = default;
};

struct TrafficEntry {
  Locality locality = Locality::intra_node;
  std::uint64_t calls = 0;
  std::uint64_t full_bytes = 0;  ///< sum of S over the calls
  ByteVolume sent;               ///< bytes this rank sent (= received) over the calls
};

/// Selects entries: every field left empty matches everything.
struct TrafficQuery {
  std::optional<int> world_rank = std::nullopt;
  std::optional<op_kind> kind = std::nullopt;
  std::optional<Locality> locality = std::nullopt;
  std::optional<std::vector<int>> group = std::nullopt;
};

class TrafficCounter {
public:
  explicit TrafficCounter(const Mesh& mesh) : mesh_(mesh) {}

  [[nodiscard]] const Mesh& mesh() const noexcept { return mesh_; }

  /// Records one collective of `kind` with full buffer `full_bytes`, issued by `world_rank` in
  /// the group `members` (world ranks).
  void record(int world_rank, op_kind kind, const std::vector<int>& members, std::uint64_t full_bytes) {
    const ByteVolume sent = bytes_sent_per_rank(kind, full_bytes, static_cast<int>(members.size()));
    std::lock_guard lock(mutex_);
    auto [it, fresh] = entries_.try_emplace(TrafficKey{world_rank, kind, members});
    if (fresh) it->second.locality = locality_of(members);
    it->second.calls += 1;
    it->second.full_bytes += full_bytes;
    it->second.sent += sent;
  }

  /// Bytes sent by the matching entries.
  [[nodiscard]] ByteVolume sent(const TrafficQuery& query = {}) const {
    ByteVolume total;
    for_matching(query, [&](const TrafficEntry& e) { total += e.sent; });
    return total;
  }
  /// Number of calls of the matching entries.
  [[nodiscard]] std::uint64_t calls(const TrafficQuery& query = {}) const {
    std::uint64_t total = 0;
    for_matching(query, [&](const TrafficEntry& e) { total += e.calls; });
    return total;
  }
  /// A snapshot of every entry, ordered by (world rank, kind, group).
  [[nodiscard]] std::vector<std::pair<TrafficKey, TrafficEntry>> entries() const {
    std::lock_guard lock(mutex_);
    return {entries_.begin(), entries_.end()};
  }
  void reset() {
    std::lock_guard lock(mutex_);
    entries_.clear();
  }

  [[nodiscard]] Locality locality_of(const std::vector<int>& members) const {
    for (int r : members)
      if (mesh_.node_of(r) != mesh_.node_of(members.front())) return Locality::inter_node;
    return Locality::intra_node;
  }

private:
  template <class F>
  void for_matching(const TrafficQuery& q, F&& f) const {
    std::lock_guard lock(mutex_);
    for (const auto& [key, entry] : entries_)
      if ((!q.world_rank || *q.world_rank == key.world_rank) && (!q.kind || *q.kind == key.kind) &&
          (!q.locality || *q.locality == entry.locality) && (!q.group || *q.group == key.group))
        f(entry);
  }

  Mesh mesh_;
  mutable std::mutex mutex_;
  std::map<TrafficKey, TrafficEntry> entries_;
};

}  // namespace amsp::comm
