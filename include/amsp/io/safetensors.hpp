#pragma once
// The safetensors container (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON (padded with spaces so that the data starts 8-byte aligned),
// then the data. The JSON maps each tensor name to {dtype, shape, data_offsets: [begin, end]}
// (relative to the data start) and may hold "__metadata__", a string-to-string map. Readers
// require the entries to tile the data exactly; so does this one (rule ckpt.header for any
// violation), which also caps the header at 100 MB as the reference implementation does.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/core/json.hpp"

namespace amsp::io {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;                 ///< "F32", "BF16", ...
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  ///< byte range relative to the start of the data
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;                     ///< in data order
  std::vector<std::pair<std::string, std::string>> metadata;  ///< "__metadata__"
  std::uint64_t data_start = 0;                               ///< 8 + N: where the data begins in the file

  [[nodiscard]] const std::string* metadata_value(std::string_view key) const {
    for (const auto& [k, v] : metadata)
      if (k == key) return &v;
    return nullptr;
  }
};

inline constexpr std::uint64_t safetensors_max_header = 100'000'000;

/// Bytes per element of a safetensors dtype name, 0 if unknown.
[[nodiscard]] inline std::size_t safetensors_dtype_size(std::string_view dtype) {
  constexpr std::pair<std::string_view, std::size_t> sizes[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1}};
  for (const auto& [name, size] : sizes)
    if (name == dtype) return size;
  return 0;
}

/// The header bytes (length prefix, JSON, space padding) of a file holding `entries` in order,
/// each tensor's data right after the previous one.
[[nodiscard]] inline std::string encode_safetensors_header(
    std::vector<SafetensorsEntry>& entries, const std::vector<std::pair<std::string, std::string>>& metadata) {
  Json root = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    root["__metadata__"] = std::move(meta);
  }
  std::uint64_t offset = 0;
  for (SafetensorsEntry& e : entries) {
    std::uint64_t numel = 1;
    Json shape = Json::array();
    for (std::int64_t d : e.shape) {
      numel *= static_cast<std::uint64_t>(d);
      shape.as_array().emplace_back(d);
    }
    e.begin = offset;
    e.end = offset + numel * safetensors_dtype_size(e.dtype);
    offset = e.end;
    Json entry = Json::object();
    entry["dtype"] = e.dtype;
    entry["shape"] = std::move(shape);
    entry["data_offsets"] = Json(Json::Array{Json(e.begin), Json(e.end)});
    root[e.name] = std::move(entry);
  }
  std::string json = to_json_string(root);
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  return out + json;
}

/// The header length N stored in the first 8 bytes (little-endian), checked against the cap and
/// the file size. Fails with ckpt.header.
[[nodiscard]] inline std::uint64_t safetensors_header_length(std::string_view first8, std::uint64_t file_size) {
  check(first8.size() == 8, "ckpt.header", "a safetensors file starts with 8 bytes of header length, found ",
        first8.size(), " bytes");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(first8[static_cast<std::size_t>(i)]);
  check(n <= safetensors_max_header, "ckpt.header", "safetensors header length ", n, " exceeds the limit of ",
        safetensors_max_header, " bytes");
  check(n + 8 <= file_size, "ckpt.header", "safetensors header length ", n, " runs past the end of a ", file_size,
        "-byte file");
  return n;
}

namespace detail {
[[nodiscard]] inline std::uint64_t header_u64(const Json& v, std::string_view what) {
  check(v.is_integer() && v.as_int() >= 0, "ckpt.header", "safetensors ", what, " must be a non-negative integer");
  return static_cast<std::uint64_t>(v.as_int());
}
}  // namespace detail

/// Parses and validates the header JSON (`json`: the N bytes after the length) of a file whose
/// data section holds `data_bytes` bytes. Fails with ckpt.header naming the problem.
[[nodiscard]] inline SafetensorsHeader parse_safetensors_header(std::string_view json, std::uint64_t data_bytes) {
  SafetensorsHeader header;
  header.data_start = 8 + json.size();
  Json root;
  try {
    root = parse_json(json);
  } catch (const amsp::error& e) {
    fail("ckpt.header", "safetensors header is not valid JSON: ", e.what());
  }
  check(root.is_object(), "ckpt.header", "safetensors header must be a JSON object");
  for (const auto& [name, value] : root.as_object()) {
    check(value.is_object(), "ckpt.header", "safetensors entry '", name, "' must be an object");
    if (name == "__metadata__") {
      for (const auto& [k, v] : value.as_object()) {
        check(v.is_string(), "ckpt.header", "safetensors metadata '", k, "' must be a string");
        header.metadata.emplace_back(k, v.as_string());
      }
      continue;
    }
    SafetensorsEntry e;
    e.name = name;
    const Json* dtype = value.find("dtype");
    const Json* shape = value.find("shape");
    const Json* offsets = value.find("data_offsets");
    check(dtype && shape && offsets && dtype->is_string() && shape->is_array() && offsets->is_array() &&
              offsets->as_array().size() == 2,
          "ckpt.header", "safetensors entry '", name, "' needs dtype (string), shape (array), data_offsets ([begin, end])");
    e.dtype = dtype->as_string();
    const std::size_t element = safetensors_dtype_size(e.dtype);
    check(element > 0, "ckpt.header", "safetensors entry '", name, "' has unknown dtype '", e.dtype, "'");
    std::uint64_t numel = 1;
    for (const Json& d : shape->as_array()) {
      const std::uint64_t dim = detail::header_u64(d, "shape dimension");
      check(dim == 0 || numel <= data_bytes / dim, "ckpt.header", "safetensors entry '", name,
            "' has more elements than the file holds");
      numel *= dim;
      e.shape.push_back(static_cast<std::int64_t>(dim));
    }
    e.begin = detail::header_u64(offsets->as_array()[0], "data offset");
    e.end = detail::header_u64(offsets->as_array()[1], "data offset");
    check(e.begin <= e.end && e.end <= data_bytes, "ckpt.header", "safetensors entry '", name, "' data_offsets [",
          e.begin, ", ", e.end, "] lie outside the ", data_bytes, "-byte data section");
    check(e.end - e.begin == numel * element, "ckpt.header", "safetensors entry '", name, "' spans ",
          e.end - e.begin, " bytes but its shape and dtype need ", numel * element);
    header.entries.push_back(std::move(e));
  }
  std::sort(header.entries.begin(), header.entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  std::uint64_t cursor = 0;
  for (const SafetensorsEntry& e : header.entries) {
    check(e.begin == cursor, "ckpt.header", "safetensors entries must tile the data: entry '", e.name,
          "' starts at byte ", e.begin, " but the previous one ends at ", cursor);
    cursor = e.end;
  }
  check(cursor == data_bytes, "ckpt.header", "safetensors entries cover ", cursor, " bytes of a ", data_bytes,
        "-byte data section");
  return header;
}

}  // namespace amsp::io
