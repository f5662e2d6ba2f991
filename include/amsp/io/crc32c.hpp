#pragma once
// CRC-32C (Castagnoli, the iSCSI/ext4/gRPC checksum): the checksum of every checkpoint piece and
// header. Why CRC-32C: it detects every burst error up to 32 bits and every odd number of flipped
// bits, it is the checksum storage systems already use for exactly this job, and x86 computes it
// in hardware (SSE4.2 `crc32`), so checking a checkpoint costs a fraction of reading it.
//
// Two implementations with identical results: slicing-by-8 tables (portable), and the SSE4.2
// instruction, chosen at run time (never by -march: CI hosts differ).

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace amsp::io {

namespace detail {

inline constexpr std::uint32_t crc32c_polynomial = 0x82F63B78u;  // reflected 0x1EDC6F41

using Crc32cTables = std::array<std::array<std::uint32_t, 256>, 8>;

consteval Crc32cTables make_crc32c_tables() {
  Crc32cTables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? crc32c_polynomial : 0u);
    t[0][i] = c;
  }
  for (std::size_t s = 1; s < 8; ++s)
    for (std::size_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
  return t;
}
inline constexpr Crc32cTables crc32c_tables = make_crc32c_tables();

/// Table-driven update of a running (pre-inverted) CRC state.
inline std::uint32_t crc32c_update_portable(std::uint32_t state, const unsigned char* p, std::size_t n) {
  const auto& t = crc32c_tables;
  while (n >= 8) {
    std::uint32_t lo;
    std::uint32_t hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    if constexpr (std::endian::native == std::endian::big) {
      lo = __builtin_bswap32(lo);
      hi = __builtin_bswap32(hi);
    }
    lo ^= state;
    state = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
            t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) state = (state >> 8) ^ t[0][(state ^ *p++) & 0xFF];
  return state;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define AMSP_IO_CRC32C_X86 1
__attribute__((target("sse4.2"))) inline std::uint32_t crc32c_update_sse42(std::uint32_t state, const unsigned char* p,
                                                                             std::size_t n) {
  std::uint64_t s = state;
  while (n >= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    s = __builtin_ia32_crc32di(s, word);
    p += 8;
    n -= 8;
  }
  auto s32 = static_cast<std::uint32_t>(s);
  while (n-- > 0) s32 = __builtin_ia32_crc32qi(s32, *p++);
  return s32;
}
inline bool cpu_has_sse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace detail

/// Incremental CRC-32C: update() any number of times, then value().
class Crc32c {
public:
  Crc32c& update(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
#ifdef AMSP_IO_CRC32C_X86
    if (detail::cpu_has_sse42()) {
      state_ = detail::crc32c_update_sse42(state_, p, bytes);
      return *this;
    }
#endif
    state_ = detail::crc32c_update_portable(state_, p, bytes);
    return *this;
  }
  [[nodiscard]] std::uint32_t value() const { return ~state_; }

private:
  std::uint32_t state_ = 0xFFFFFFFFu;
};

/// CRC-32C of one buffer.
[[nodiscard]] inline std::uint32_t crc32c(const void* data, std::size_t bytes) {
  return Crc32c().update(data, bytes).value();
}
[[nodiscard]] inline std::uint32_t crc32c(std::string_view text) { return crc32c(text.data(), text.size()); }

/// The portable path alone (tests compare it with the hardware path).
[[nodiscard]] inline std::uint32_t crc32c_portable(const void* data, std::size_t bytes) {
  return ~detail::crc32c_update_portable(0xFFFFFFFFu, static_cast<const unsigned char*>(data), bytes);
}

}  // namespace amsp::io
