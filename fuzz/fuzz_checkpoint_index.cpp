// libFuzzer harness: the checkpoint readers that see bytes from disk before any checksum vouches
// for them: the index (amsp/io/index.hpp), the commit marker, and the safetensors header of a
// shard file (amsp/io/safetensors.hpp). The first byte picks the reader, the rest is its input.
// Any input either parses or fails with an amsp::error naming a rule; a parsed index written back
// out parses to the same text.
// Seeds: fuzz/corpus/checkpoint_index (an index, a commit marker, a shard file of a small checkpoint).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "amsp/io/index.hpp"
#include "amsp/io/safetensors.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text = amsp::fuzz::text_of(data + 1, size - 1);
  amsp::fuzz::expect_only_amsp_errors([&] {
    switch (data[0] % 3) {
      case 0: {
        const amsp::io::Index index = amsp::io::parse_index(text);
        const std::string once = amsp::to_json_string(amsp::io::to_json(index));
        if (amsp::to_json_string(amsp::io::to_json(amsp::io::parse_index(once))) != once) __builtin_trap();
        break;
      }
      case 1: (void)amsp::io::parse_commit_marker(text); break;
      default: {
        // A whole shard file: length prefix, header, data.
        const std::uint64_t n = amsp::io::safetensors_header_length(text.substr(0, 8), text.size());
        const auto header = amsp::io::parse_safetensors_header(text.substr(8, n), text.size() - 8 - n);
        for (const auto& e : header.entries)
          if (e.end > text.size() - 8 - n || e.begin > e.end) __builtin_trap();
      }
    }
  });
  return 0;
}
