#pragma once
// The familiar plans by name, and the parser of plan strings. A preset depends on the mesh
// (ZeRO-3 shards over the whole world), so names resolve against one.
//
//   ddp                 p=1x1, g=1x1, os=1x1
//   zero1               os = world
//   zero2               g = os = world
//   zero3 (fsdp)        p = g = os = world
//   mics(k), hsdp(k)    p = g = os = k ranks (k <= R: k x 1; else R x k/R), replicated across groups;
//                       hsdp without k shards inside one node (FSDP HYBRID_SHARD's default)
//   amsp-7b             the paper's LLaMA-7B plan:  os = R x 1            (8x1 on 8-GPU nodes)
//   amsp-13b            the paper's LLaMA-13B plan: p = g = R/2 x 1, os = R x 1 (4x1, 4x1, 8x1)
//   amsp-30b            the paper's LLaMA-30B plan: p = g = R x 1, os = R x gcd(4, N) (8x1, 8x1, 8x4)
//
// The paper's plans are stated for 8 ranks per node; on other meshes they keep their shape
// relative to the node, so that the examples can run them on a 4 x 2 mesh.

#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/sharding/plan_rules.hpp"

namespace amsp {

/// Names parse_plan understands, for help texts.
inline const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names{"ddp",     "zero1",   "zero2",  "zero3",    "fsdp",
                                              "mics(k)", "hsdp(k)", "hsdp",   "amsp-7b",  "amsp-13b",
                                              "amsp-30b"};
  return names;
}

/// The factor of a group of k ranks on the mesh: k x 1 inside a node, R x k/R across nodes.
[[nodiscard]] inline Factor group_factor(const Mesh& mesh, int k) {
  const int R = mesh.ranks_per_node();
  check(k >= 1 && k <= mesh.world_size(), "plan.group_size", "group of ", k, " ranks does not fit mesh ",
        to_string(mesh), " of ", mesh.world_size(), " ranks");
  if (k <= R) {
    check(R % k == 0, "plan.group_size", "group of ", k, " ranks must divide the ", R, " ranks per node");
    return {k, 1};
  }
  check(k % R == 0 && mesh.nodes() % (k / R) == 0, "plan.group_size", "group of ", k,
        " ranks spanning nodes must be whole nodes (a multiple of ", R, ") dividing the ", mesh.nodes(), " nodes");
  return {R, k / R};
}

namespace detail {
inline bool parse_group_preset(std::string_view text, std::string_view name, int& k) {
  if (text.size() < name.size() + 3 || text.substr(0, name.size()) != name) return false;
  const std::string_view rest = text.substr(name.size());
  if (rest.front() != '(' || rest.back() != ')') return false;
  k = parse_positive_int(rest.substr(1, rest.size() - 2), "plan.parse", std::string(name) + " group size");
  return true;
}
}  // namespace detail

/// A preset by name, resolved on `mesh` and validated there. Unknown names fail with rule
/// plan.parse and list the known ones.
[[nodiscard]] inline Plan preset(std::string_view name, const Mesh& mesh) {
  const Factor one{1, 1};
  const Factor world = mesh.shape();
  const Factor node{mesh.ranks_per_node(), 1};
  Plan plan;
  int k = 0;
  if (name == "ddp") plan = {one, one, one};
  else if (name == "zero1") plan = {one, one, world};
  else if (name == "zero2") plan = {one, world, world};
  else if (name == "zero3" || name == "fsdp") plan = {world, world, world};
  else if (name == "hsdp") plan = {node, node, node};
  else if (detail::parse_group_preset(name, "mics", k) || detail::parse_group_preset(name, "hsdp", k)) {
    const Factor f = group_factor(mesh, k);
    plan = {f, f, f};
  } else if (name == "amsp-7b") plan = {one, one, node};
  else if (name == "amsp-13b") {
    const Factor half{std::max(1, mesh.ranks_per_node() / 2), 1};
    plan = {half, half, node};
  } else if (name == "amsp-30b") plan = {node, node, {mesh.ranks_per_node(), std::gcd(4, mesh.nodes())}};
  else {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    fail("plan.parse", "unknown plan '", name, "': expected p=AxB,g=CxD,os=ExF or one of ", known);
  }
  validate(plan, mesh);
  return plan;
}

/// Parses "p=AxB,g=CxD,os=ExF" (keys in any order, each exactly once) or a preset name, and
/// validates the result on `mesh`.
[[nodiscard]] inline Plan parse_plan(std::string_view text, const Mesh& mesh) {
  if (text.find('=') == std::string_view::npos) return preset(text, mesh);
  Plan plan;
  bool seen[3] = {false, false, false};
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const std::size_t eq = item.find('=');
    check(eq != std::string_view::npos, "plan.parse", "plan '", text, "': item '", item, "' must read key=AxB");
    const std::string_view key = item.substr(0, eq);
    int index = key == "p" ? 0 : key == "g" ? 1 : key == "os" ? 2 : -1;
    check(index >= 0, "plan.parse", "plan '", text, "': unknown key '", key, "' (expected p, g or os)");
    check(!seen[index], "plan.parse", "plan '", text, "': key '", key, "' appears twice");
    seen[index] = true;
    const Factor f = parse_factor(item.substr(eq + 1));
    (index == 0 ? plan.p : index == 1 ? plan.g : plan.os) = f;
    start = comma + 1;
  }
  for (int i = 0; i < 3; ++i)
    check(seen[i], "plan.parse", "plan '", text, "' lacks the factor for ", name_of(all_components[i]));
  validate(plan, mesh);
  return plan;
}

}  // namespace amsp
