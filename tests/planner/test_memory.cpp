#include <doctest/doctest.h>

#include "amsp/planner/memory_model.hpp"
#include "amsp/sharding/presets.hpp"

using namespace amsp;
using namespace amsp::planner;

namespace {
double total_on_paper_mesh(const char* preset_name) {
  const Mesh mesh(8, 128);
  return memory_per_rank(preset(preset_name, mesh), parse_model("llama-7b"), Workload{}, ScheduleOptions{}).total();
}
}  // namespace

// Expected totals worked out by hand for LLaMA-7B, Φ = 6,738,415,616, seq 4096, micro-batch 1,
// FlashAttention: activations A = 18,845,007,872 B; the largest unit is a layer, n = 202,383,360
// parameters. bf16 parameters and gradients, so the engine keeps fp32 OS-shard gradients (4Φ/s_os)
// and widens the G shard it reduces (4n/s_g); a sharded G also stages two units' bf16 gradients
// (4n) and widens the staged one (4n); a sharded P gathers two units (4n).
TEST_CASE("memory: presets for LLaMA-7B on 8 x 128 against hand-computed totals") {
  CHECK(total_on_paper_mesh("ddp") == doctest::Approx(154422853632.0).epsilon(1e-12));      // 20Φ + 4n + A
  CHECK(total_on_paper_mesh("zero1") == doctest::Approx(46713491520.0).epsilon(1e-12));     // 4Φ + 16Φ/1024 + 4n + A
  CHECK(total_on_paper_mesh("zero3") == doctest::Approx(21406008432.0).epsilon(1e-12));     // 20Φ/1024 + 12n + 4n/1024 + A
  CHECK(total_on_paper_mesh("amsp-7b") == doctest::Approx(60085035008.0).epsilon(1e-12));   // 4Φ + 16Φ/8 + 4n + A
  CHECK(total_on_paper_mesh("amsp-13b") == doctest::Approx(41691238400.0).epsilon(1e-12));  // Φ + 16Φ/8 + 12n + n + A
  CHECK(total_on_paper_mesh("mics(8)") == doctest::Approx(38220838912.0).epsilon(1e-12));   // 20Φ/8 + 12n + n/2 + A
}

TEST_CASE("memory: the model states follow 2Φ/s_p + 2Φ/s_g + 12Φ/s_os exactly") {
  const ModelSpec m = parse_model("h=64,layers=2,heads=4,ffn=128,vocab=100");
  const double phi = static_cast<double>(m.params());
  const Plan plan{{2, 1}, {4, 1}, {4, 2}};
  const MemoryBreakdown mem = memory_per_rank(plan, m, Workload{}, ScheduleOptions{}, 5.0);
  CHECK(mem.params == doctest::Approx(phi));
  CHECK(mem.grads == doctest::Approx(phi / 2));
  CHECK(mem.optimizer_states == doctest::Approx(12 * phi / 8));
  CHECK(mem.fp32_os_gradients == doctest::Approx(4 * phi / 8));  // bf16 gradients: fp32 copies of the OS shard
  CHECK(mem.reserved == 5.0);
  CHECK(mem.total() == doctest::Approx(mem.states() + mem.fp32_os_gradients + mem.activations + mem.buffers() + 5.0));
}

TEST_CASE("memory: fp32 gradients need no fp32 copy of the OS shard, and bf16 ones do") {
  const ModelSpec m = parse_model("llama-7b");
  const Plan zero2{{1, 1}, {8, 1}, {8, 1}};
  ScheduleOptions fp32;
  fp32.grad_wire_bytes = 4;
  CHECK(memory_per_rank(zero2, m, Workload{}, fp32).fp32_os_gradients == 0);
  CHECK(memory_per_rank(zero2, m, Workload{}, ScheduleOptions{}).fp32_os_gradients == doctest::Approx(4.0 * 6738415616.0 / 8));
  fp32.os_layout = OsLayout::whole_tensor;  // its owned segments live apart from the G store
  const Plan mics{{8, 1}, {8, 1}, {8, 1}};
  CHECK(memory_per_rank(mics, m, Workload{}, fp32).fp32_os_gradients == doctest::Approx(4.0 * 6738415616.0 / 8));
}

// Kept, every unit stays gathered: the first two (embedding, first layer) in buffers of the
// largest unit, the others at their own size (embedding 131,072,000 parameters).
TEST_CASE("memory: keeping gathered parameters costs the whole bf16 model, and a largest unit more") {
  const ModelSpec m = parse_model("llama-7b");
  ScheduleOptions keep;
  keep.reshard_after_forward = false;
  const Plan zero3{{8, 1}, {8, 1}, {8, 1}};
  const double resharded = memory_per_rank(zero3, m, Workload{}, ScheduleOptions{}).gathered_params;
  const double kept = memory_per_rank(zero3, m, Workload{}, keep).gathered_params;
  CHECK(resharded == doctest::Approx(2.0 * 2 * 202383360.0));
  CHECK(kept == doctest::Approx(2.0 * (6738415616.0 + 202383360.0 - 131072000.0)));
}

TEST_CASE("memory: the gradient staging is the engine's gradient buffers in flight, the whole model without a bound") {
  const ModelSpec m = parse_model("llama-7b");  // 202383360 parameters per layer, 6738415616 in all
  const Plan zero2{{1, 1}, {8, 1}, {8, 1}};
  const auto staging = [&](int in_flight, int micro_batches = 1, const Plan* plan = nullptr) {
    ScheduleOptions o;
    o.gradient_buffers_in_flight = in_flight;
    Workload w;
    w.micro_batches = micro_batches;
    return memory_per_rank(plan != nullptr ? *plan : zero2, m, w, o).gradient_staging;
  };
  CHECK(staging(2) == doctest::Approx(2.0 * 2 * 202383360.0));  // bf16, two layers
  CHECK(staging(3) == doctest::Approx(3.0 * 2 * 202383360.0));
  CHECK(staging(0) == doctest::Approx(2.0 * 6738415616.0));
  // With G replicated, the first micro-batch writes into the G store; later ones are staged.
  const Plan ddp{{1, 1}, {1, 1}, {1, 1}};
  CHECK(staging(2, 1, &ddp) == 0);
  CHECK(staging(2, 4, &ddp) == doctest::Approx(2.0 * 2 * 202383360.0));
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
    const double total = memory_per_rank(preset("zero1", mesh), parse_model(model), w, ScheduleOptions{}, 2e9)
                             .total();
    return total <= 80e9;
  };
  CHECK(fits("7b", false));
  CHECK(!fits("13b", false));
  CHECK(!fits("30b", true));
}
