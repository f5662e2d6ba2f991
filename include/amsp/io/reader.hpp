#pragma once
// Reading a committed checkpoint: the commit marker, the index, and pieces by positioned reads,
// each verified. Used by load() (each rank reads only its pieces) and by the amsp-ckpt tool.
//
// What is checked, and the rule each failure names:
//   directory absent                          ckpt.not_found
//   no commit marker (a save that never ended) ckpt.incomplete
//   index size/CRC or id differ from the marker ckpt.index_mismatch
//   index malformed / unknown version          ckpt.index / ckpt.version
//   a file the index names is absent           ckpt.missing_file
//   a file shorter than the index says         ckpt.truncated
//   a file of another checkpoint               ckpt.index_mismatch
//   a header whose bytes changed               ckpt.header_checksum
//   a piece whose bytes changed                ckpt.checksum

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/io/crc32c.hpp"
#include "amsp/io/file.hpp"
#include "amsp/io/index.hpp"
#include "amsp/io/safetensors.hpp"

namespace amsp::io {

inline constexpr const char* index_file_name = "index.json";
inline constexpr const char* commit_file_name = "COMMIT";

class CheckpointReader {
public:
  /// Opens the committed checkpoint in `dir` (reads and checks the marker and the index only).
  explicit CheckpointReader(std::string dir) : dir_(std::move(dir)) {
    check(std::filesystem::is_directory(dir_), "ckpt.not_found", "no checkpoint directory '", dir_, "'");
    std::string marker_text;
    try {
      marker_text = read_file(path(commit_file_name));
    } catch (const amsp::error& e) {
      fail("ckpt.incomplete", "checkpoint '", dir_, "' has no readable commit marker (the save did not finish): ",
           e.what());
    }
    const CommitMarker marker = parse_commit_marker(marker_text);
    const std::string text = read_file(path(index_file_name));
    check(text.size() == marker.index_bytes && crc32c(text) == marker.index_crc32c, "ckpt.index_mismatch",
          "index of checkpoint '", dir_, "' is not the one its commit marker committed (", text.size(),
          " bytes, CRC-32C ", crc32c(text), "; committed: ", marker.index_bytes, " bytes, ", marker.index_crc32c, ")");
    index_ = parse_index(text);
    check(index_.checkpoint_id == marker.checkpoint_id, "ckpt.index_mismatch", "index of checkpoint '", dir_,
          "' has id ", index_.checkpoint_id, " but its commit marker commits ", marker.checkpoint_id);
    files_.resize(index_.files.size());
  }

  [[nodiscard]] const Index& index() const { return index_; }
  [[nodiscard]] const std::string& directory() const { return dir_; }
  [[nodiscard]] std::string path(const std::string& name) const { return dir_ + "/" + name; }

  /// The rows of one piece, [rows][count] fp32, verified against its CRC-32C.
  [[nodiscard]] std::vector<float> read_piece(const IndexTensor& tensor, const IndexPiece& piece) {
    std::vector<float> rows;
    read_piece(tensor, piece, rows);
    return rows;
  }
  /// The same into `rows` (resized; reusing its memory saves a page-faulting allocation per piece).
  void read_piece(const IndexTensor& tensor, const IndexPiece& piece, std::vector<float>& rows) {
    const File& file = open(piece.file);
    rows.resize(index_.rows.size() * static_cast<std::size_t>(piece.count));
    file.read_at(rows.data(), rows.size() * sizeof(float), piece.offset);
    const std::uint32_t crc = crc32c(rows.data(), rows.size() * sizeof(float));
    check(crc == piece.crc32c, "ckpt.checksum", "piece [", piece.begin, ", ", piece.begin + piece.count,
          ") of tensor '", tensor.name, "' in '", file.path(), "' has CRC-32C ", crc, " but the index says ",
          piece.crc32c);
  }

  /// Row `row` (0: master weights, then each state) of a whole tensor, assembled from its pieces.
  [[nodiscard]] std::vector<float> read_tensor(const IndexTensor& tensor, std::size_t row) {
    check(row < index_.rows.size(), "ckpt.index", "row ", row, " is outside the ", index_.rows.size(), " rows");
    std::vector<float> out(static_cast<std::size_t>(tensor.numel()));
    for (const IndexPiece& p : tensor.pieces) {
      const std::vector<float> rows = read_piece(tensor, p);
      std::copy_n(rows.begin() + static_cast<std::ptrdiff_t>(row * static_cast<std::size_t>(p.count)), p.count,
                  out.begin() + p.begin);
    }
    return out;
  }

  /// The user blob saved by rank `saved_rank`, verified.
  [[nodiscard]] std::vector<std::byte> read_blob(int saved_rank) const {
    check(saved_rank >= 0 && saved_rank < index_.world_size, "ckpt.index", "no user blob of rank ", saved_rank,
          " in a checkpoint of ", index_.world_size, " ranks");
    const IndexBlob& blob = index_.user_blobs[static_cast<std::size_t>(saved_rank)];
    std::vector<std::byte> bytes(blob.bytes);
    if (blob.bytes > 0) {
      const File f = File::open_read(path(blob.file));
      check(f.size() >= blob.bytes, "ckpt.truncated", "user blob '", f.path(), "' holds ", f.size(),
            " bytes but the index says ", blob.bytes);
      f.read_at(bytes.data(), bytes.size(), 0);
    }
    check(crc32c(bytes.data(), bytes.size()) == blob.crc32c, "ckpt.checksum", "user blob of rank ", saved_rank,
          " fails its CRC-32C");
    return bytes;
  }

  /// Opens file i of the index once, checking its size, identity and header checksum.
  const File& open(int i) {
    std::unique_ptr<File>& slot = files_.at(static_cast<std::size_t>(i));
    if (slot) return *slot;
    const IndexFile& entry = index_.files[static_cast<std::size_t>(i)];
    auto file = std::make_unique<File>(File::open_read(path(entry.name)));
    const std::uint64_t size = file->size();
    check(size >= entry.bytes, "ckpt.truncated", "file '", file->path(), "' holds ", size, " bytes but the index says ",
          entry.bytes);
    std::string header(entry.header_bytes, '\0');
    file->read_at(header.data(), header.size(), 0);
    if (crc32c(header) != entry.header_crc32c || size != entry.bytes) {
      // Either damaged or another checkpoint's file: tell them apart by the id the header names.
      std::string id;
      try {
        const std::uint64_t n = safetensors_header_length(std::string_view(header).substr(0, 8), size);
        if (8 + n == header.size()) {
          const SafetensorsHeader parsed = parse_safetensors_header(std::string_view(header).substr(8), size - 8 - n);
          if (const std::string* v = parsed.metadata_value("checkpoint_id")) id = *v;
        }
      } catch (const amsp::error&) {
      }
      check(id.empty() || id == index_.checkpoint_id, "ckpt.index_mismatch", "file '", file->path(),
            "' belongs to checkpoint ", id, ", not to ", index_.checkpoint_id, " whose index names it");
      check(size == entry.bytes, "ckpt.index_mismatch", "file '", file->path(), "' holds ", size,
            " bytes but the index says ", entry.bytes);
      fail("ckpt.header_checksum", "the header of '", file->path(), "' fails its CRC-32C (", crc32c(header),
           ", index: ", entry.header_crc32c, ")");
    }
    slot = std::move(file);
    return *slot;
  }

private:
  std::string dir_;
  Index index_;
  std::vector<std::unique_ptr<File>> files_;
};

}  // namespace amsp::io
