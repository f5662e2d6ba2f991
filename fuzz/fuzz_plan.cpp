// libFuzzer harness: the mesh and plan-string parsers (amsp::parse_mesh, amsp::parse_plan).
// Input: "<mesh>\n<plan>". Either fails with an amsp::error or gives a plan that validates on the
// mesh and whose printed form parses back to the same plan.
#include <cstddef>
#include <cstdint>
#include <string>

#include "amsp/sharding/presets.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = amsp::fuzz::text_of(data, size);
  const std::size_t newline = text.find('\n');
  const std::string_view mesh_text = text.substr(0, newline);
  const std::string_view plan_text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
  amsp::fuzz::expect_only_amsp_errors([&] {
    const amsp::Mesh mesh = amsp::parse_mesh(mesh_text);
    if (mesh.world_size() > (1 << 20)) return;  // the parser accepts big meshes; presets enumerate groups
    const amsp::Plan plan = amsp::parse_plan(plan_text, mesh);
    amsp::validate(plan, mesh);
    if (!(amsp::parse_plan(amsp::to_string(plan), mesh) == plan)) __builtin_trap();
  });
  return 0;
}
