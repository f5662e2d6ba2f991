#pragma once
// The checkpoint index (index.json): what a checkpoint holds and where every byte of it lies.
//
//   { "format": "amsp-checkpoint", "version": 1, "checkpoint_id": "...", "step": 10,
//     "mesh": "4x2", "world_size": 8, "plan": "p=1x1,g=4x1,os=4x2", "os_layout": "even_split",
//     "param_dtype": "bf16", "state_dtype": "F32",
//     "rule": {"name": "adamw", "hyperparameters": {"lr": 0.01, ...}},
//     "rows": ["master", "exp_avg", "exp_avg_sq"],
//     "files": [{"name": "rank-00000.safetensors", "bytes": ..., "header_bytes": ..., "header_crc32c": ...}],
//     "tensors": [{"name": "l0.weight", "bucket": "layer0", "shape": [13, 7],
//                  "group": {"lr_scale": 1.0, "weight_decay": true},
//                  "pieces": [{"begin": 0, "count": 45, "file": 0, "offset": 176, "crc32c": ...}]}],
//     "user": {"values": {...}, "blobs": [{"file": "user-rank-00000.bin", "bytes": 8, "crc32c": ...}]} }
//
// A piece is elements [begin, begin + count) of one tensor, stored as a [rows, count] F32
// safetensors entry (master weights, then each optimizer state) at byte `offset` of its file; its
// CRC-32C covers all rows. The pieces of a tensor tile [0, numel) exactly. parse_index validates
// all of this and fails with ckpt.index (malformed) or ckpt.version (an unknown format version).

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/core/json.hpp"

namespace amsp::io {

inline constexpr std::int64_t checkpoint_format_version = 1;
inline constexpr std::string_view checkpoint_format_name = "amsp-checkpoint";

struct IndexPiece {
  std::int64_t begin = 0, count = 0;  ///< tensor elements
  int file = 0;                       ///< into Index::files
  std::uint64_t offset = 0;           ///< byte offset of row 0 in the file
  std::uint32_t crc32c = 0;           ///< over all rows
};

struct IndexTensor {
  std::string name;
  std::string bucket;
  std::vector<std::int64_t> shape;
  Json group = Json::object();     ///< the tensor's parameter-group options (rule_fields.hpp)
  std::vector<IndexPiece> pieces;  ///< sorted by begin, tiling [0, numel)

  [[nodiscard]] std::int64_t numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
  }
};

struct IndexFile {
  std::string name;  ///< relative to the checkpoint directory
  std::uint64_t bytes = 0, header_bytes = 0;
  std::uint32_t header_crc32c = 0;
};

struct IndexBlob {
  std::string file;  ///< empty when the rank saved no blob
  std::uint64_t bytes = 0;
  std::uint32_t crc32c = 0;
};

struct Index {
  std::string checkpoint_id;
  std::int64_t step = 0;
  std::string mesh, plan, os_layout, param_dtype;
  int world_size = 0;
  std::string rule;
  Json hyperparameters = Json::object();
  std::vector<std::string> rows;  ///< "master", then the rule's state names
  std::vector<IndexFile> files;
  std::vector<IndexTensor> tensors;
  std::vector<std::pair<std::string, std::string>> user_values;
  std::vector<IndexBlob> user_blobs;  ///< one per saved rank

  [[nodiscard]] const IndexTensor* find(std::string_view name) const {
    for (const IndexTensor& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
  /// Bytes one element takes across all rows.
  [[nodiscard]] std::uint64_t row_set_bytes() const { return rows.size() * sizeof(float); }
};

[[nodiscard]] inline Json to_json(const Index& index) {
  Json root = Json::object();
  root["format"] = checkpoint_format_name;
  root["version"] = checkpoint_format_version;
  root["checkpoint_id"] = index.checkpoint_id;
  root["step"] = index.step;
  root["mesh"] = index.mesh;
  root["world_size"] = index.world_size;
  root["plan"] = index.plan;
  root["os_layout"] = index.os_layout;
  root["param_dtype"] = index.param_dtype;
  root["state_dtype"] = "F32";
  root["rule"]["name"] = index.rule;
  root["rule"]["hyperparameters"] = index.hyperparameters;
  Json rows = Json::array();
  for (const std::string& r : index.rows) rows.as_array().emplace_back(r);
  root["rows"] = std::move(rows);
  Json files = Json::array();
  for (const IndexFile& f : index.files) {
    Json j = Json::object();
    j["name"] = f.name;
    j["bytes"] = f.bytes;
    j["header_bytes"] = f.header_bytes;
    j["header_crc32c"] = f.header_crc32c;
    files.as_array().push_back(std::move(j));
  }
  root["files"] = std::move(files);
  Json tensors = Json::array();
  for (const IndexTensor& t : index.tensors) {
    Json j = Json::object();
    j["name"] = t.name;
    j["bucket"] = t.bucket;
    Json shape = Json::array();
    for (std::int64_t d : t.shape) shape.as_array().emplace_back(d);
    j["shape"] = std::move(shape);
    j["group"] = t.group;
    Json pieces = Json::array();
    for (const IndexPiece& p : t.pieces) {
      Json pj = Json::object();
      pj["begin"] = p.begin;
      pj["count"] = p.count;
      pj["file"] = p.file;
      pj["offset"] = p.offset;
      pj["crc32c"] = p.crc32c;
      pieces.as_array().push_back(std::move(pj));
    }
    j["pieces"] = std::move(pieces);
    tensors.as_array().push_back(std::move(j));
  }
  root["tensors"] = std::move(tensors);
  Json values = Json::object();
  for (const auto& [k, v] : index.user_values) values[k] = v;
  root["user"]["values"] = std::move(values);
  Json blobs = Json::array();
  for (const IndexBlob& b : index.user_blobs) {
    Json j = Json::object();
    j["file"] = b.file;
    j["bytes"] = b.bytes;
    j["crc32c"] = b.crc32c;
    blobs.as_array().push_back(std::move(j));
  }
  root["user"]["blobs"] = std::move(blobs);
  return root;
}

namespace detail {
// Typed member access that reports every problem as ckpt.index.
inline const Json& index_member(const Json& object, std::string_view key) {
  check(object.is_object(), "ckpt.index", "expected a JSON object holding '", key, "'");
  const Json* v = object.find(key);
  check(v != nullptr, "ckpt.index", "checkpoint index lacks '", key, "'");
  return *v;
}
inline std::string index_string(const Json& object, std::string_view key) {
  const Json& v = index_member(object, key);
  check(v.is_string(), "ckpt.index", "checkpoint index field '", key, "' must be a string");
  return v.as_string();
}
inline std::int64_t index_int(const Json& object, std::string_view key, std::int64_t min, std::int64_t max) {
  const Json& v = index_member(object, key);
  check(v.is_integer() && v.as_int() >= min && v.as_int() <= max, "ckpt.index", "checkpoint index field '", key,
        "' must be an integer in [", min, ", ", max, "]");
  return v.as_int();
}
inline const Json::Array& index_array(const Json& object, std::string_view key) {
  const Json& v = index_member(object, key);
  check(v.is_array(), "ckpt.index", "checkpoint index field '", key, "' must be an array");
  return v.as_array();
}
inline constexpr std::int64_t index_max = std::int64_t{1} << 62;
inline constexpr std::int64_t crc_max = 0xFFFFFFFFll;
}  // namespace detail

/// Parses and validates index.json text: fields, types, ranges, each tensor's pieces tiling
/// [0, numel) inside the byte range their file's data section holds.
[[nodiscard]] inline Index parse_index(std::string_view text) {
  using namespace detail;
  Json root;
  try {
    root = parse_json(text);
  } catch (const amsp::error& e) {
    fail("ckpt.index", "checkpoint index is not valid JSON: ", e.what());
  }
  check(root.is_object(), "ckpt.index", "checkpoint index must be a JSON object");
  check(index_string(root, "format") == checkpoint_format_name, "ckpt.index", "not an amsp checkpoint index");
  const std::int64_t version = index_int(root, "version", 0, index_max);
  check(version == checkpoint_format_version, "ckpt.version", "checkpoint format version ", version,
        " is not the version ", checkpoint_format_version, " this amsp reads");
  Index index;
  index.checkpoint_id = index_string(root, "checkpoint_id");
  index.step = index_int(root, "step", 0, index_max);
  index.mesh = index_string(root, "mesh");
  index.world_size = static_cast<int>(index_int(root, "world_size", 1, 1 << 24));
  index.plan = index_string(root, "plan");
  index.os_layout = index_string(root, "os_layout");
  index.param_dtype = index_string(root, "param_dtype");
  check(index_string(root, "state_dtype") == "F32", "ckpt.index", "optimizer states must be F32");
  const Json& rule = index_member(root, "rule");
  index.rule = index_string(rule, "name");
  index.hyperparameters = index_member(rule, "hyperparameters");
  check(index.hyperparameters.is_object(), "ckpt.index", "rule hyperparameters must be an object");
  for (const Json& r : index_array(root, "rows")) {
    check(r.is_string(), "ckpt.index", "rows must be strings");
    index.rows.push_back(r.as_string());
  }
  check(!index.rows.empty() && index.rows.front() == "master", "ckpt.index", "the first row must be 'master'");
  for (const Json& f : index_array(root, "files")) {
    IndexFile file;
    file.name = index_string(f, "name");
    check(!file.name.empty() && file.name.find('/') == std::string::npos && file.name[0] != '.', "ckpt.index",
          "file name '", file.name, "' must be a plain name inside the checkpoint directory");
    file.bytes = static_cast<std::uint64_t>(index_int(f, "bytes", 8, index_max));
    file.header_bytes = static_cast<std::uint64_t>(index_int(f, "header_bytes", 8, index_max));
    file.header_crc32c = static_cast<std::uint32_t>(index_int(f, "header_crc32c", 0, crc_max));
    check(file.header_bytes <= file.bytes, "ckpt.index", "file '", file.name, "' header is larger than the file");
    index.files.push_back(std::move(file));
  }
  const std::uint64_t row_bytes = index.row_set_bytes();
  for (const Json& t : index_array(root, "tensors")) {
    IndexTensor tensor;
    tensor.name = index_string(t, "name");
    check(index.find(tensor.name) == nullptr, "ckpt.index", "tensor '", tensor.name, "' appears twice");
    tensor.bucket = index_string(t, "bucket");
    std::int64_t numel = 1;
    for (const Json& d : index_array(t, "shape")) {
      check(d.is_integer() && d.as_int() >= 0 && (d.as_int() == 0 || numel <= index_max / d.as_int()), "ckpt.index",
            "tensor '", tensor.name, "' has an invalid shape");
      tensor.shape.push_back(d.as_int());
      numel *= d.as_int();
    }
    tensor.group = index_member(t, "group");
    check(tensor.group.is_object(), "ckpt.index", "tensor '", tensor.name, "' group must be an object");
    std::int64_t cursor = 0;
    for (const Json& p : index_array(t, "pieces")) {
      IndexPiece piece;
      piece.begin = index_int(p, "begin", 0, index_max);
      piece.count = index_int(p, "count", 1, index_max);
      piece.file = static_cast<int>(index_int(p, "file", 0, static_cast<std::int64_t>(index.files.size()) - 1));
      piece.offset = static_cast<std::uint64_t>(index_int(p, "offset", 0, index_max));
      piece.crc32c = static_cast<std::uint32_t>(index_int(p, "crc32c", 0, crc_max));
      check(piece.begin == cursor && piece.count <= numel - cursor, "ckpt.index", "the pieces of tensor '",
            tensor.name, "' must tile [0, ", numel, ") in order; a piece covers [", piece.begin, ", ",
            piece.begin + piece.count, ") where ", cursor, " comes next");
      const IndexFile& file = index.files[static_cast<std::size_t>(piece.file)];
      check(piece.offset >= file.header_bytes &&
                static_cast<std::uint64_t>(piece.count) <= (file.bytes - piece.offset) / row_bytes,
            "ckpt.index", "a piece of tensor '", tensor.name, "' lies outside the data of file '", file.name, "'");
      cursor += piece.count;
      tensor.pieces.push_back(piece);
    }
    check(cursor == numel, "ckpt.index", "the pieces of tensor '", tensor.name, "' cover ", cursor, " of ", numel,
          " elements");
    index.tensors.push_back(std::move(tensor));
  }
  const Json& user = index_member(root, "user");
  const Json& values = index_member(user, "values");
  check(values.is_object(), "ckpt.index", "user values must be an object");
  for (const auto& [k, v] : values.as_object()) {
    check(v.is_string(), "ckpt.index", "user value '", k, "' must be a string");
    index.user_values.emplace_back(k, v.as_string());
  }
  for (const Json& b : index_array(user, "blobs")) {
    IndexBlob blob;
    blob.file = index_string(b, "file");
    check(blob.file.find('/') == std::string::npos && (blob.file.empty() || blob.file[0] != '.'), "ckpt.index",
          "blob file '", blob.file, "' must be a plain name inside the checkpoint directory");
    blob.bytes = static_cast<std::uint64_t>(index_int(b, "bytes", 0, index_max));
    blob.crc32c = static_cast<std::uint32_t>(index_int(b, "crc32c", 0, crc_max));
    index.user_blobs.push_back(std::move(blob));
  }
  check(index.user_blobs.size() == static_cast<std::size_t>(index.world_size), "ckpt.index", "the index lists ",
        index.user_blobs.size(), " user blobs for ", index.world_size, " saved ranks");
  return index;
}

/// The commit marker (file COMMIT): written last, it names the index it commits by size and
/// checksum, so a directory without it is incomplete and an index that does not match it is foreign.
struct CommitMarker {
  std::string checkpoint_id;
  std::uint64_t index_bytes = 0;
  std::uint32_t index_crc32c = 0;
};

[[nodiscard]] inline std::string commit_marker_text(const CommitMarker& m) {
  Json j = Json::object();
  j["format"] = checkpoint_format_name;
  j["checkpoint_id"] = m.checkpoint_id;
  j["index_bytes"] = m.index_bytes;
  j["index_crc32c"] = m.index_crc32c;
  return to_json_string(j, 2) + "\n";
}

[[nodiscard]] inline CommitMarker parse_commit_marker(std::string_view text) {
  using namespace detail;
  Json root;
  try {
    root = parse_json(text);
  } catch (const amsp::error& e) {
    fail("ckpt.incomplete", "the commit marker is not valid JSON: ", e.what());
  }
  CommitMarker m;
  try {
    check(index_string(root, "format") == checkpoint_format_name, "ckpt.index", "not an amsp commit marker");
    m.checkpoint_id = index_string(root, "checkpoint_id");
    m.index_bytes = static_cast<std::uint64_t>(index_int(root, "index_bytes", 0, index_max));
    m.index_crc32c = static_cast<std::uint32_t>(index_int(root, "index_crc32c", 0, crc_max));
  } catch (const amsp::error& e) {
    fail("ckpt.incomplete", "the commit marker is malformed: ", e.what());
  }
  return m;
}

}  // namespace amsp::io
