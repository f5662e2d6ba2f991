// Flat layouts: tensor placement and alignment, even shard ranges that tile each flat buffer once
// per group and nest P ⊃ G ⊃ OS for the rank's own shard indices, and greedy whole-tensor
// ownership.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "amsp/sharding/groups.hpp"
#include "amsp/sharding/layout.hpp"
#include "sharding_test_util.hpp"

using amsp::dtype;
using amsp::FlatLayout;
using amsp::ShardRange;
using amsp::TensorSpec;

namespace {
// A deterministic model-like mix: odd shapes, scalars, an empty tensor, three dtypes.
std::vector<TensorSpec> sample_tensors(std::uint32_t seed) {
  std::vector<TensorSpec> specs;
  const dtype types[] = {dtype::bf16, dtype::fp32, dtype::fp16, dtype::bf16};
  for (int i = 0; i < 12; ++i) {
    seed = seed * 1664525u + 1013904223u;  // LCG: reproducible without <random>'s distributions
    const std::int64_t rows = 1 + (seed >> 8) % 37;
    const std::int64_t cols = 1 + (seed >> 20) % 53;
    std::vector<std::int64_t> shape = i % 5 == 4 ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{rows, cols};
    if (i == 7) shape = {0, 5};
    std::string name = "t";  // (not "t" + ...: g++ 12 raises a false -Wrestrict on that at -O3)
    name += std::to_string(i);
    specs.push_back({name, shape, types[(seed >> 4) % 4]});
  }
  return specs;
}

// Independent placement: each tensor at the next multiple of the alignment, in order.
void check_placement(const FlatLayout& layout, const std::vector<TensorSpec>& specs, std::size_t alignment_bytes,
                     int multiple) {
  std::size_t end[4] = {0, 0, 0, 0};
  REQUIRE(layout.slots().size() == specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const amsp::TensorSlot& slot = layout.slots()[i];
    const std::size_t elem = amsp::size_of(specs[i].type);
    const std::size_t align = std::max<std::size_t>(1, alignment_bytes / elem);
    std::size_t numel = 1;
    for (std::int64_t d : specs[i].shape) numel *= static_cast<std::size_t>(d);
    std::size_t& e = end[static_cast<int>(specs[i].type)];
    const std::size_t offset = (e + align - 1) / align * align;
    CHECK(slot.name == specs[i].name);
    CHECK(slot.shape == specs[i].shape);
    CHECK(slot.type == specs[i].type);
    CHECK(slot.offset == offset);
    CHECK(slot.numel == numel);
    if (alignment_bytes >= elem) CHECK(slot.offset * elem % alignment_bytes == 0);
    CHECK(&layout.slot(slot.name) == &slot);
    e = offset + numel;
  }
  for (dtype t : {dtype::fp32, dtype::fp64, dtype::bf16, dtype::fp16}) {
    const std::size_t align = std::max<std::size_t>(1, alignment_bytes / amsp::size_of(t));
    const std::size_t unit = align * static_cast<std::size_t>(multiple);
    const std::size_t expected = (end[static_cast<int>(t)] + unit - 1) / unit * unit;
    CHECK(layout.buffer_size(t) == expected);
    std::size_t real = 0;
    for (const TensorSpec& s : specs)
      if (s.type == t) real += s.numel();
    CHECK(layout.tensor_elements(t) == real);
    const std::vector<dtype> present = layout.dtypes();
    CHECK((std::find(present.begin(), present.end(), t) != present.end()) == (expected > 0));
  }
}
}  // namespace

TEST_CASE("tensors are placed in order, aligned, one flat buffer per dtype") {
  for (std::size_t alignment : {std::size_t{1}, std::size_t{2}, std::size_t{64}, std::size_t{256}})
    for (int multiple : {1, 3, 8, 16})
      for (std::uint32_t seed : {1u, 2u, 3u}) {
        INFO("alignment ", alignment, ", shard multiple ", multiple, ", seed ", seed);
        const std::vector<TensorSpec> specs = sample_tensors(seed);
        check_placement(FlatLayout(specs, alignment, multiple), specs, alignment, multiple);
      }
}

TEST_CASE("shard ranges tile every flat buffer exactly once per group, nested P > G > OS, on every sweep mesh") {
  const std::vector<TensorSpec> specs = sample_tensors(7);
  int checked = 0;
  amsp_test::for_each_mesh([&](const amsp::Mesh& mesh) {
    for (const amsp::Plan& plan : amsp::enumerate_plans(mesh)) {
      INFO("plan ", amsp::to_string(plan), " on ", amsp::to_string(mesh));
      // The OS factor is the largest; s_p | s_g | s_os, so it serves all three splits.
      const FlatLayout layout(specs, 64, plan.os.size());
      const amsp::PlanGroups groups(mesh, plan);
      const amsp::GroupSet* sets[3] = {&groups.p(), &groups.g(), &groups.os()};
      for (dtype t : layout.dtypes()) {
        const std::size_t size = layout.buffer_size(t);
        for (amsp::Component c : amsp::all_components) {
          for (const amsp::RankGroup& group : sets[static_cast<int>(c)]->groups()) {
            std::vector<ShardRange> ranges;
            for (int r : group.ranks) ranges.push_back(layout.shard(t, plan.factor(c).size(), groups.shard_index(c, r)));
            std::sort(ranges.begin(), ranges.end(), [](const ShardRange& a, const ShardRange& b) { return a.begin < b.begin; });
            std::size_t covered = 0;
            for (const ShardRange& range : ranges) {
              REQUIRE(range.begin == covered);  // no gap, no overlap
              REQUIRE(range.size() == size / static_cast<std::size_t>(plan.factor(c).size()));
              REQUIRE(range.begin * amsp::size_of(t) % 64 == 0);  // every shard starts aligned
              covered = range.end;
            }
            REQUIRE(covered == size);
          }
        }
        for (int r = 0; r < mesh.world_size(); ++r) {
          const ShardRange p = layout.shard(t, plan.p.size(), groups.shard_index(amsp::Component::params, r));
          const ShardRange g = layout.shard(t, plan.g.size(), groups.shard_index(amsp::Component::grads, r));
          const ShardRange os = layout.shard(t, plan.os.size(), groups.shard_index(amsp::Component::optimizer_states, r));
          REQUIRE(p.intersect(g) == g);  // the G shard lies inside the rank's P shard
          REQUIRE(g.intersect(os) == os);
        }
      }
      ++checked;
    }
  });
  CHECK(checked > 700);  // 784 valid plans on the sweep alone
}

TEST_CASE("even_shard and ShardRange") {
  CHECK(amsp::even_shard(12, 3, 1) == ShardRange{4, 8});
  CHECK(amsp::even_shard(0, 4, 3).empty());
  CHECK(ShardRange{2, 9}.intersect({5, 20}) == ShardRange{5, 9});
  CHECK(ShardRange{2, 4}.intersect({6, 8}).empty());
  CHECK(amsp::round_up(13, 8) == 16);
  CHECK(amsp::round_up(16, 8) == 16);
  CHECK(amsp_test::error_of([] { (void)amsp::even_shard(10, 3, 0); })->rule() == "layout.even_split");
  CHECK(amsp_test::error_of([] { (void)amsp::even_shard(12, 3, 3); })->rule() == "layout.shard_index");
  CHECK(amsp_test::error_of([] { (void)amsp::even_shard(12, 0, 0); })->rule() == "layout.shard_index");
}

TEST_CASE("layout errors") {
  CHECK(amsp_test::error_of([] { FlatLayout({{"a", {2}, dtype::fp32}, {"a", {3}, dtype::bf16}}); })->rule() ==
        "layout.duplicate_name");
  CHECK(amsp_test::error_of([] { FlatLayout({{"a", {2, -1}, dtype::fp32}}); })->rule() == "layout.shape");
  CHECK(amsp_test::error_of([] { FlatLayout({{"a", {std::int64_t{1} << 40, std::int64_t{1} << 40}, dtype::fp32}}); })
            ->rule() == "layout.shape");  // 2^80 elements: the count would wrap
  CHECK(TensorSpec{"e", {std::int64_t{1} << 40, 0, std::int64_t{1} << 40}, dtype::fp32}.numel() == 0);
  CHECK(amsp_test::error_of([] { FlatLayout({{"a", {2}, dtype::fp32}}, 48); })->rule() == "layout.alignment");
  CHECK(amsp_test::error_of([] { FlatLayout({{"a", {2}, dtype::fp32}}, 64, 0); })->rule() == "layout.shard_multiple");
  const FlatLayout layout({{"w", {10, 10}, dtype::bf16}}, 64, 4);
  CHECK(amsp_test::error_of([&] { (void)layout.slot("v"); })->rule() == "layout.unknown_tensor");
  CHECK(amsp_test::error_of([&] { (void)layout.shard(dtype::bf16, 3, 0); })->rule() == "layout.even_split");
  CHECK(layout.buffer_size(dtype::fp32) == 0);
  CHECK(layout.shard(dtype::bf16, 2, 1) == ShardRange{64, 128});  // 100 elements padded to 4 × 32
}

TEST_CASE("greedy ownership: a worked example") {
  const std::vector<std::size_t> sizes{5, 4, 3, 3, 3};
  // Largest first, each to the least loaded owner (ties to the lower owner, equal sizes in item
  // order): 5 -> 0, 4 -> 1, 3 -> 1 (4 < 5), 3 -> 0 (5 < 7), 3 -> 1 (7 < 8).
  const amsp::Ownership own = amsp::greedy_ownership(sizes, 2);
  CHECK(own.owner == std::vector<int>{0, 1, 1, 0, 1});
  CHECK(own.load == std::vector<std::size_t>{8, 10});
}

TEST_CASE("greedy ownership: every item owned once, loads consistent and bounded") {
  for (std::uint32_t seed = 1; seed <= 20; ++seed)
    for (int owners : {1, 2, 3, 4, 7, 8, 16}) {
      std::vector<std::size_t> sizes;
      std::uint32_t x = seed;
      for (int i = 0; i < 5 + static_cast<int>(seed) * 3; ++i) {
        x = x * 1664525u + 1013904223u;
        sizes.push_back((x >> 10) % (seed % 3 == 0 ? 10 : 100000));  // some runs with many ties and zeros
      }
      INFO("seed ", seed, ", owners ", owners);
      const amsp::Ownership own = amsp::greedy_ownership(sizes, owners);
      REQUIRE(own.owner.size() == sizes.size());
      REQUIRE(own.load.size() == static_cast<std::size_t>(owners));
      std::vector<std::size_t> load(static_cast<std::size_t>(owners), 0);
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        REQUIRE((own.owner[i] >= 0 && own.owner[i] < owners));
        load[static_cast<std::size_t>(own.owner[i])] += sizes[i];
      }
      CHECK(load == own.load);
      const std::size_t total = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
      const std::size_t largest = *std::max_element(sizes.begin(), sizes.end());
      const std::size_t heaviest = *std::max_element(load.begin(), load.end());
      // Documented bound: at most the ideal share plus the largest item.
      CHECK(heaviest * static_cast<std::size_t>(owners) <= total + largest * static_cast<std::size_t>(owners));
      // Deterministic: every rank computes the same assignment.
      CHECK(amsp::greedy_ownership(sizes, owners).owner == own.owner);
    }
  // Equal items, a multiple of the owners: perfectly balanced.
  const std::vector<std::size_t> equal(12, 7);
  const amsp::Ownership own = amsp::greedy_ownership(equal, 4);
  CHECK(own.load == std::vector<std::size_t>(4, 21));
  CHECK(amsp_test::error_of([&] { (void)amsp::greedy_ownership(equal, 0); })->rule() == "layout.owners");
  CHECK(amsp::greedy_ownership(std::vector<std::size_t>{}, 3).load == std::vector<std::size_t>(3, 0));
}
