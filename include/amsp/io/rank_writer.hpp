#pragma once
// One rank's part of a save: its pieces (rows of master weights and states) go into one
// safetensors file, its user blob into a file of its own, and a manifest says where each piece
// landed and its checksum (rank 0 merges the manifests into the index). The rows are read
// through pointers, so the same writer serves the synchronous save (pointers into the engine's
// shards) and the asynchronous one (pointers into a staging snapshot).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "amsp/core/json.hpp"
#include "amsp/io/crc32c.hpp"
#include "amsp/io/file.hpp"
#include "amsp/io/safetensors.hpp"

namespace amsp::io {

/// One piece to write: elements [begin, begin + count) of `tensor`, one pointer per row.
struct PiecePayload {
  std::string tensor;
  std::int64_t begin = 0, count = 0;
  std::vector<const float*> rows;
};

/// Everything one rank writes.
struct RankPayload {
  int rank = 0;
  std::vector<std::string> row_names;
  std::vector<PiecePayload> pieces;
  std::vector<std::byte> blob;
  std::unique_ptr<float[]> staging;  ///< the snapshot the rows point into (asynchronous save only)

  /// Copies every row into `staging` and points the pieces there: the engine may then change.
  void snapshot() {
    std::size_t total = 0;
    for (const PiecePayload& p : pieces) total += p.rows.size() * static_cast<std::size_t>(p.count);
    staging.reset(new float[total]);  // uninitialised: the copy is its first and only write
    float* cursor = staging.get();
    for (PiecePayload& p : pieces)
      for (const float*& row : p.rows) {
        std::memcpy(cursor, row, static_cast<std::size_t>(p.count) * sizeof(float));
        row = cursor;
        cursor += p.count;
      }
  }
};

[[nodiscard]] inline std::string rank_file_name(const char* pattern, int rank) {
  char name[64];
  std::snprintf(name, sizeof name, pattern, rank);
  return name;
}
[[nodiscard]] inline std::string shard_file_name(int rank) { return rank_file_name("rank-%05d.safetensors", rank); }
[[nodiscard]] inline std::string blob_file_name(int rank) { return rank_file_name("user-rank-%05d.bin", rank); }
[[nodiscard]] inline std::string manifest_file_name(int rank) { return rank_file_name("manifest-rank-%05d.json", rank); }

namespace detail {
/// Coalesces small writes (many small pieces) into large ones; large rows go straight through.
class CoalescingWriter {
public:
  explicit CoalescingWriter(File& file, std::size_t capacity = std::size_t{1} << 20) : file_(file) {
    buffer_.reserve(capacity);
  }
  void write(const void* data, std::size_t bytes) {
    if (buffer_.size() + bytes > buffer_.capacity()) flush();
    if (bytes >= buffer_.capacity()) {
      file_.write_all(data, bytes);
      return;
    }
    const auto* p = static_cast<const char*>(data);
    buffer_.insert(buffer_.end(), p, p + bytes);
  }
  void flush() {
    file_.write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

private:
  File& file_;
  std::vector<char> buffer_;
};
}  // namespace detail

/// Writes this rank's files into `dir` and returns (and writes) its manifest.
inline Json write_rank_files(const RankPayload& payload, const std::string& dir, const std::string& checkpoint_id,
                             bool fsync) {
  Json manifest = Json::object();
  manifest["rank"] = payload.rank;
  manifest["checkpoint_id"] = checkpoint_id;
  Json pieces = Json::array();
  if (!payload.pieces.empty()) {
    std::vector<SafetensorsEntry> entries;
    const auto rows = static_cast<std::int64_t>(payload.row_names.size());
    for (const PiecePayload& p : payload.pieces)
      entries.push_back({p.tensor + "/" + std::to_string(p.begin), "F32", {rows, p.count}, 0, 0});
    std::string row_list;
    for (const std::string& r : payload.row_names) row_list += (row_list.empty() ? "" : ",") + r;
    const std::string header = encode_safetensors_header(
        entries, {{"format", "amsp-checkpoint-shard"}, {"checkpoint_id", checkpoint_id},
                  {"rank", std::to_string(payload.rank)}, {"rows", row_list}});
    const std::string name = shard_file_name(payload.rank);
    File file = File::create(dir + "/" + name);
    detail::CoalescingWriter out(file);
    out.write(header.data(), header.size());
    for (std::size_t i = 0; i < payload.pieces.size(); ++i) {
      const PiecePayload& p = payload.pieces[i];
      Crc32c crc;
      for (const float* row : p.rows) {
        const std::size_t bytes = static_cast<std::size_t>(p.count) * sizeof(float);
        crc.update(row, bytes);
        out.write(row, bytes);
      }
      Json pj = Json::object();
      pj["tensor"] = p.tensor;
      pj["begin"] = p.begin;
      pj["count"] = p.count;
      pj["offset"] = header.size() + entries[i].begin;
      pj["crc32c"] = crc.value();
      pieces.as_array().push_back(std::move(pj));
    }
    out.flush();
    if (fsync) file.sync();
    Json f = Json::object();
    f["name"] = name;
    f["bytes"] = header.size() + (entries.empty() ? 0 : entries.back().end);
    f["header_bytes"] = header.size();
    f["header_crc32c"] = crc32c(header);
    manifest["file"] = std::move(f);
    file.close();
  }
  manifest["pieces"] = std::move(pieces);
  Json blob = Json::object();
  blob["file"] = payload.blob.empty() ? std::string() : blob_file_name(payload.rank);
  blob["bytes"] = payload.blob.size();
  blob["crc32c"] = crc32c(payload.blob.data(), payload.blob.size());
  if (!payload.blob.empty())
    write_file_synced(dir + "/" + blob_file_name(payload.rank),
                      std::string_view(reinterpret_cast<const char*>(payload.blob.data()), payload.blob.size()), fsync);
  manifest["blob"] = std::move(blob);
  write_file_synced(dir + "/" + manifest_file_name(payload.rank), to_json_string(manifest), fsync);
  return manifest;
}

}  // namespace amsp::io
