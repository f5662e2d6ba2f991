// libFuzzer harness: the JSON reader (amsp/core/json.hpp). Any input either parses or fails with
// an amsp::error; a parsed document written back out parses to an equal document.
#include <cstddef>
#include <cstdint>

#include "amsp/core/json.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  amsp::fuzz::expect_only_amsp_errors([&] {
    const amsp::Json doc = amsp::parse_json(amsp::fuzz::text_of(data, size));
    for (int indent : {-1, 2}) {
      const amsp::Json again = amsp::parse_json(amsp::to_json_string(doc, indent));
      if (!(again == doc)) __builtin_trap();
    }
  });
  return 0;
}
