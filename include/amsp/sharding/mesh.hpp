#pragma once
// The data-parallel mesh: R ranks per node × N nodes, ranks numbered node-major
// (rank = node × R + local), the one convention every module shares.

#include <charconv>
#include <climits>
#include <string>
#include <string_view>

#include "amsp/core/error.hpp"

namespace amsp {

/// A two-dimensional size a × b: `intra` ranks inside a node times `inter` nodes. Used for the
/// mesh itself and for every sharding factor s = s0 × s1.
struct Factor {
  int intra = 1;
  int inter = 1;

  [[nodiscard]] constexpr int size() const { return intra * inter; }
  friend constexpr bool operator==(const Factor&, const Factor&) = default;
};

/// "8x1"
[[nodiscard]] inline std::string to_string(const Factor& f) {
  return std::to_string(f.intra) + "x" + std::to_string(f.inter);
}

namespace detail {
[[nodiscard]] inline int parse_positive_int(std::string_view text, std::string_view rule, std::string_view what) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  check(ec == std::errc{} && end == text.data() + text.size() && !text.empty(), rule, "cannot read ", what,
        " '", text, "' as an integer");
  check(value >= 1, rule, what, " must be at least 1, got ", value);
  return value;
}
}  // namespace detail

/// Parses "AxB" (ASCII x). Errors name the text. A x B must fit an int (Factor::size()).
[[nodiscard]] inline Factor parse_factor(std::string_view text) {
  const auto x = text.find('x');
  check(x != std::string_view::npos, "factor.parse", "factor '", text, "' must read AxB, e.g. 8x1");
  const Factor f{detail::parse_positive_int(text.substr(0, x), "factor.parse", "intra-node size"),
                 detail::parse_positive_int(text.substr(x + 1), "factor.parse", "node count")};
  check(f.intra <= INT_MAX / f.inter, "factor.parse", "factor '", text, "' has more than ", INT_MAX, " ranks");
  return f;
}

class Mesh {
public:
  /// `ranks_per_node` × `nodes`; both must be at least 1.
  Mesh(int ranks_per_node, int nodes) : ranks_per_node_(ranks_per_node), nodes_(nodes) {
    check(ranks_per_node >= 1 && nodes >= 1, "mesh.positive", "mesh ", ranks_per_node, "x", nodes,
          " must have at least one rank per node and one node");
    check(ranks_per_node <= INT_MAX / nodes, "mesh.positive", "mesh ", ranks_per_node, "x", nodes,
          " has more than ", INT_MAX, " ranks");
  }
  explicit Mesh(Factor f) : Mesh(f.intra, f.inter) {}

  [[nodiscard]] int ranks_per_node() const { return ranks_per_node_; }
  [[nodiscard]] int nodes() const { return nodes_; }
  [[nodiscard]] int world_size() const { return ranks_per_node_ * nodes_; }
  [[nodiscard]] Factor shape() const { return {ranks_per_node_, nodes_}; }

  [[nodiscard]] int node_of(int rank) const { return checked(rank) / ranks_per_node_; }
  [[nodiscard]] int local_of(int rank) const { return checked(rank) % ranks_per_node_; }
  [[nodiscard]] int rank_of(int node, int local) const {
    check(node >= 0 && node < nodes_ && local >= 0 && local < ranks_per_node_, "mesh.rank_range", "node ", node,
          ", local rank ", local, " is outside mesh ", to_string(shape()));
    return node * ranks_per_node_ + local;
  }

  /// Fails with rule mesh.world_size unless `world` ranks exactly fill the mesh.
  void check_world_size(int world) const {
    check(world == world_size(), "mesh.world_size", "mesh ", to_string(shape()), " needs ", world_size(),
          " ranks but the communicator has ", world);
  }

  friend bool operator==(const Mesh&, const Mesh&) = default;

private:
  [[nodiscard]] int checked(int rank) const {
    check(rank >= 0 && rank < world_size(), "mesh.rank_range", "rank ", rank, " is outside mesh ",
          to_string(shape()), " of ", world_size(), " ranks");
    return rank;
  }

  int ranks_per_node_;
  int nodes_;
};

[[nodiscard]] inline std::string to_string(const Mesh& m) { return to_string(m.shape()); }
[[nodiscard]] inline Mesh parse_mesh(std::string_view text) { return Mesh(parse_factor(text)); }

}  // namespace amsp
