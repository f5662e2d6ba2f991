#include <doctest/doctest.h>

#include "amsp/planner/memory_model.hpp"
#include "amsp/sharding/presets.hpp"

using namespace amsp;
using namespace amsp::planner;

namespace {
double total_on_paper_mesh(const char* preset_name) {
  const Mesh mesh(8, 128);
  return memory_per_rank(preset(preset_name, mesh), mesh.world_size(), parse_model("llama-7b"), Workload{},
                         ScheduleOptions{})
      .total();
}
}  // namespace

// Expected totals worked out by hand (python) for LLaMA-7B, Φ = 6,738,415,616, seq 4096, micro-batch
// 1, FlashAttention: activations 18,845,007,872 B; the largest unit is a layer of 202,383,360
// parameters; buckets 2 × 25 MB.
TEST_CASE("memory: presets for LLaMA-7B on 8 x 128 against hand-computed totals") {
  CHECK(total_on_paper_mesh("ddp") == doctest::Approx(126709657728.0).epsilon(1e-12));      // 16Φ + act + buckets
  CHECK(total_on_paper_mesh("zero1") == doctest::Approx(45927636144.0).epsilon(1e-12));     // 4Φ + 12Φ/1024 + ...
  CHECK(total_on_paper_mesh("zero3") == doctest::Approx(20569362496.0).epsilon(1e-12));     // 16Φ/1024 + 2 staging pairs
  CHECK(total_on_paper_mesh("amsp-7b") == doctest::Approx(55956293760.0).epsilon(1e-12));   // 4Φ + 12Φ/8 + ...
  CHECK(total_on_paper_mesh("amsp-13b") == doctest::Approx(37360113792.0).epsilon(1e-12));  // Φ + 12Φ/8 + ...
  CHECK(total_on_paper_mesh("mics(8)") == doctest::Approx(33990905984.0).epsilon(1e-12));   // 16Φ/8 + ...
}

TEST_CASE("memory: the model states follow 2Φ/s_p + 2Φ/s_g + 12Φ/s_os exactly") {
  const ModelSpec m = parse_model("h=64,layers=2,heads=4,ffn=128,vocab=100");
  const double phi = static_cast<double>(m.params());
  const Plan plan{{2, 1}, {4, 1}, {4, 2}};
  const MemoryBreakdown mem = memory_per_rank(plan, 8, m, Workload{}, ScheduleOptions{}, 5.0);
  CHECK(mem.params == doctest::Approx(phi));
  CHECK(mem.grads == doctest::Approx(phi / 2));
  CHECK(mem.optimizer_states == doctest::Approx(12 * phi / 8));
  CHECK(mem.reserved == 5.0);
  CHECK(mem.total() == doctest::Approx(mem.states() + mem.activations + mem.buffers + 5.0));
}

TEST_CASE("memory: keeping gathered parameters costs the whole bf16 model") {
  const ModelSpec m = parse_model("llama-7b");
  ScheduleOptions keep;
  keep.reshard_after_forward = false;
  const Plan zero3{{8, 1}, {8, 1}, {8, 1}};
  const double resharded = memory_per_rank(zero3, 8, m, Workload{}, ScheduleOptions{}).buffers;
  const double kept = memory_per_rank(zero3, 8, m, Workload{}, keep).buffers;
  CHECK(kept - resharded == doctest::Approx(2.0 * 6738415616.0 - 2.0 * 2 * 202383360.0));
}

TEST_CASE("memory: the gradient staging is the engine's gradient buffers in flight, the whole model without a bound") {
  const ModelSpec m = parse_model("llama-7b");  // 202383360 parameters per layer, 6738415616 in all
  const Plan zero2{{1, 1}, {8, 1}, {8, 1}};
  const auto staging = [&](int in_flight) {
    ScheduleOptions o;
    o.gradient_buffers_in_flight = in_flight;
    return memory_per_rank(zero2, 8, m, Workload{}, o).buffers;
  };
  CHECK(staging(2) == doctest::Approx(2.0 * 2 * 202383360.0));  // bf16 on the wire, two layers
  CHECK(staging(3) - staging(2) == doctest::Approx(2.0 * 202383360.0));
  CHECK(staging(0) == doctest::Approx(2.0 * 6738415616.0));
  ScheduleOptions negative;
  negative.gradient_buffers_in_flight = -1;
  try {
    validate(negative);
    FAIL("validate accepted -1 gradient buffers in flight");
  } catch (const amsp::error& e) {
    CHECK(e.rule() == "engine.gradient_buffers");
  }
}

TEST_CASE("memory: on the paper's cluster ZeRO-1 fits LLaMA-7B but not 13B or 30B (paper Table IV has no ZeRO-1 entry for them)") {
  const Mesh mesh(8, 128);
  const auto fits = [&](const char* model, bool recompute) {
    Workload w;
    w.recompute = recompute;
    const double total = memory_per_rank(preset("zero1", mesh), mesh.world_size(), parse_model(model), w,
                                         ScheduleOptions{}, 2e9)
                             .total();
    return total <= 80e9;
  };
  CHECK(fits("7b", false));
  CHECK(!fits("13b", false));
  CHECK(!fits("30b", true));
}
