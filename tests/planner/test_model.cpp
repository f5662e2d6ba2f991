#include <doctest/doctest.h>

#include <numeric>

#include "amsp/planner/model.hpp"
#include "amsp/planner/workload.hpp"

using namespace amsp::planner;

TEST_CASE("model: LLaMA parameter counts match the published models") {
  // Counts of the released checkpoints (Hugging Face configs, untied embeddings).
  CHECK(parse_model("llama-7b").params() == 6738415616LL);
  CHECK(parse_model("13b").params() == 13015864320LL);
  CHECK(parse_model("llama-30b").params() == 32528943616LL);
  CHECK(parse_model("65b").params() == 65285660672LL);
}

TEST_CASE("model: modules add up to the model, nine per layer, in forward order") {
  const ModelSpec m = parse_model("h=64,layers=3,heads=4,ffn=176,vocab=1000");
  const auto modules = m.modules();
  CHECK(modules.size() == 3u * 9u + 3u);
  const auto sum = std::accumulate(modules.begin(), modules.end(), std::int64_t{0},
                                   [](std::int64_t s, const Module& x) { return s + x.params; });
  CHECK(sum == m.params());
  CHECK(m.params() == 3 * (4 * 64 * 64 + 3 * 64 * 176 + 2 * 64) + 2 * 1000 * 64 + 64);
  CHECK(modules.front().name == "embed");
  CHECK(modules.back().name == "lm_head");
  CHECK(modules[1].name == "layers.0.input_norm");
  CHECK(modules[9].name == "layers.0.mlp.down");
  CHECK(modules[9].params == 176 * 64);
}

TEST_CASE("model: bad descriptions are errors naming the problem") {
  CHECK_THROWS_WITH_AS((void)parse_model("gpt-5"), doctest::Contains("planner.model"), amsp::error);
  CHECK_THROWS_WITH_AS((void)parse_model("h=64,layers=2,heads=4,ffn=128"), doctest::Contains("lacks 'vocab='"),
                       amsp::error);
  CHECK_THROWS_WITH_AS((void)parse_model("h=64,h=64,layers=2,heads=4,ffn=128,vocab=10"),
                       doctest::Contains("appears twice"), amsp::error);
  CHECK_THROWS_WITH_AS((void)parse_model("h=64,layers=2,heads=4,ffn=128,vocab=10,depth=3"),
                       doctest::Contains("unknown key 'depth'"), amsp::error);
  CHECK_THROWS_WITH_AS((void)parse_model("h=6x,layers=2,heads=4,ffn=128,vocab=10"), doctest::Contains("'6x'"),
                       amsp::error);
  CHECK_THROWS_WITH_AS((void)parse_model("h=66,layers=2,heads=4,ffn=128,vocab=10"),
                       doctest::Contains("not a multiple of the 4 heads"), amsp::error);
}

TEST_CASE("workload: activation memory against hand-computed Megatron figures") {
  const ModelSpec m = parse_model("llama-7b");
  Workload w;  // seq 4096, micro-batch 1, FlashAttention, no recomputation
  // 32 layers x 34·s·h + s·(4h + 4V), s = h = 4096, V = 32000
  CHECK(activation_bytes(m, w) == doctest::Approx(18845007872.0).epsilon(1e-12));
  w.flash_attention = false;  // + 5·a·s² per layer
  CHECK(activation_bytes(m, w) == doctest::Approx(104744353792.0).epsilon(1e-12));
  w.flash_attention = true;
  w.recompute = true;  // 32 layer inputs 2·s·h, one layer rebuilt, output side
  CHECK(activation_bytes(m, w) == doctest::Approx(2235564032.0).epsilon(1e-12));
  w.recompute = false;
  w.micro_batch = 2;  // linear in the micro-batch
  CHECK(activation_bytes(m, w) == doctest::Approx(2 * 18845007872.0).epsilon(1e-12));
}

TEST_CASE("workload: FLOPs per token and the micro-batch count") {
  const ModelSpec m = parse_model("llama-7b");
  Workload w;
  CHECK(model_flops_per_token(m, w) == doctest::Approx(6.0 * 6738415616.0 + 12.0 * 32 * 4096 * 4096));
  w.recompute = true;
  CHECK(executed_flops_per_token(m, w) ==
        doctest::Approx(8.0 * 6738415616.0 + 16.0 * 32 * 4096 * 4096));
  CHECK(micro_batches_for(1024, 1, 1024) == 1);
  CHECK(micro_batches_for(1024, 1, 8) == 128);
  CHECK(micro_batches_for(1024, 2, 64) == 8);
  CHECK_THROWS_WITH_AS((void)micro_batches_for(1000, 1, 16), doctest::Contains("planner.batch"), amsp::error);
  Workload bad;
  bad.seq = 0;
  CHECK_THROWS_WITH_AS(validate(bad), doctest::Contains("planner.workload"), amsp::error);
}
