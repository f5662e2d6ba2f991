#pragma once
// Whole-checkpoint operations (the amsp-ckpt tool, inference): export the parameters (the master
// weights, rounded to the chosen dtype exactly as the engine rounds parameters) into one
// safetensors file under the user's tensor names, compare two checkpoints tensor by tensor, and
// verify every checksum.
// Both read one tensor at a time, so memory stays at the largest tensor.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"
#include "amsp/io/crc32c.hpp"
#include "amsp/io/file.hpp"
#include "amsp/io/reader.hpp"
#include "amsp/io/safetensors.hpp"

namespace amsp::io {

/// Writes every tensor's master weights of the checkpoint behind `reader` into the safetensors
/// file `out` in `type` (fp32 or bf16), written to a temporary name and renamed when complete.
inline void export_parameters(CheckpointReader& reader, const std::string& out, dtype type) {
  check(type == dtype::fp32 || type == dtype::bf16, "ckpt.export_dtype", "export writes fp32 or bf16, not ",
        name_of(type));
  const Index& index = reader.index();
  std::vector<SafetensorsEntry> entries;
  for (const IndexTensor& t : index.tensors)
    entries.push_back({t.name, type == dtype::fp32 ? "F32" : "BF16", t.shape, 0, 0});
  const std::string header = encode_safetensors_header(
      entries, {{"format", "pt"}, {"source", "amsp-checkpoint " + index.checkpoint_id},
                {"step", std::to_string(index.step)}});
  const std::string tmp = out + ".tmp";
  File file = File::create(tmp);
  file.write_all(header.data(), header.size());
  for (const IndexTensor& t : index.tensors) {
    const std::vector<float> master = reader.read_tensor(t, 0);
    if (type == dtype::fp32) {
      file.write_all(master.data(), master.size() * sizeof(float));
    } else {
      std::vector<bf16> narrow(master.size());
      std::transform(master.begin(), master.end(), narrow.begin(), [](float x) { return from_float<bf16>(x); });
      file.write_all(narrow.data(), narrow.size() * sizeof(bf16));
    }
  }
  file.sync();
  file.close();
  detail::filesystem_calls([&] { std::filesystem::rename(tmp, out); });
}

/// The largest difference of one row (master or a state) of one tensor between two checkpoints.
struct TensorDifference {
  std::string tensor, row;
  double max_abs = 0;  ///< max_i |a_i - b_i|
  double max_rel = 0;  ///< max_abs / max_i |a_i| (the infinity-norm relative error; 0 when both are 0)
};

/// Compares every row of every tensor present in both checkpoints (same shapes and rows required:
/// ckpt.model_mismatch / ckpt.rule_mismatch otherwise). Tensors only in one are listed in `only`.
inline std::vector<TensorDifference> diff_checkpoints(CheckpointReader& a, CheckpointReader& b,
                                                      std::vector<std::string>* only = nullptr) {
  check(a.index().rows == b.index().rows, "ckpt.rule_mismatch", "the checkpoints hold different state rows (rules ",
        a.index().rule, " and ", b.index().rule, ")");
  std::vector<TensorDifference> out;
  for (const IndexTensor& ta : a.index().tensors) {
    const IndexTensor* tb = b.index().find(ta.name);
    if (tb == nullptr) {
      if (only) only->push_back(ta.name);
      continue;
    }
    check(ta.shape == tb->shape, "ckpt.model_mismatch", "tensor '", ta.name, "' has different shapes");
    for (std::size_t r = 0; r < a.index().rows.size(); ++r) {
      const std::vector<float> x = a.read_tensor(ta, r), y = b.read_tensor(*tb, r);
      TensorDifference d{ta.name, a.index().rows[r]};
      double scale = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        d.max_abs = std::max(d.max_abs, std::abs(double(x[i]) - double(y[i])));
        scale = std::max(scale, std::abs(double(x[i])));
      }
      d.max_rel = d.max_abs == 0 ? 0 : scale == 0 ? INFINITY : d.max_abs / scale;
      out.push_back(d);
    }
  }
  if (only)
    for (const IndexTensor& tb : b.index().tensors)
      if (a.index().find(tb.name) == nullptr) only->push_back(tb.name);
  return out;
}

/// Reads every piece and blob of the checkpoint, verifying each checksum; returns the bytes read.
inline std::uint64_t verify_checkpoint(CheckpointReader& reader) {
  std::uint64_t bytes = 0;
  for (const IndexTensor& t : reader.index().tensors)
    for (const IndexPiece& p : t.pieces) bytes += reader.read_piece(t, p).size() * sizeof(float);
  for (int r = 0; r < reader.index().world_size; ++r) bytes += reader.read_blob(r).size();
  return bytes;
}

}  // namespace amsp::io
