// libFuzzer harness: the checkpoint readers of amsp/io (index.json, the COMMIT marker, the
// safetensors header length and header JSON). The first byte picks the reader, the rest is its
// input. Either fails with an amsp::error or gives a value; an index that parses survives being
// written out and parsed again.
#include <cstddef>
#include <cstdint>

#include "amsp/io/index.hpp"
#include "amsp/io/safetensors.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text = amsp::fuzz::text_of(data + 1, size - 1);
  amsp::fuzz::expect_only_amsp_errors([&] {
    switch (data[0] % 4) {
      case 0: {
        const amsp::io::Index index = amsp::io::parse_index(text);
        (void)amsp::io::parse_index(amsp::to_json_string(amsp::io::to_json(index), 2));
        break;
      }
      case 1: (void)amsp::io::parse_commit_marker(text); break;
      case 2: (void)amsp::io::safetensors_header_length(text.substr(0, 8), text.size()); break;
      default: (void)amsp::io::parse_safetensors_header(text, text.size() * 16); break;
    }
  });
  return 0;
}
