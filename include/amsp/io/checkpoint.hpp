#pragma once
// Sharded checkpoints of a ShardedOptimizer: save and load, collective over the world.
//
//   amsp::io::save(opt, world, "ckpt/latest", {.values = {{"epoch", "3"}}, .blob = rng_bytes});
//   amsp::io::Restored r = amsp::io::load(opt, world, "ckpt/latest");   // any plan, mesh, world size
//
// What is saved: the fp32 master weights and every optimizer state of every tensor, the step
// count, the rule's hyperparameters (amsp/io/rule_fields.hpp), and a user section: a string map
// (rank 0's) and an opaque blob per rank. Parameters are not saved: load() rebuilds them from the
// master weights exactly as step() does. docs/checkpoints.md describes the format and the
// commit protocol:
//   1. rank 0 creates `dir.tmp-<id>` (removing leftovers of interrupted saves);
//   2. every rank writes and fsyncs its files and a manifest (only one OS replica writes each
//      element: amsp/io/shard_pieces.hpp);
//   3. after every rank finished, rank 0 merges the manifests into index.json, writes the COMMIT
//      marker, fsyncs the directory, renames it to `dir` (atomically exchanging it with an older
//      checkpoint there, which is then removed) and fsyncs the parent.
// Each phase ends with an agreement (amsp/io/agree.hpp): a failure on any rank is an amsp::error
// with the same ckpt.* rule on every rank.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"
#include "amsp/core/json.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/io/agree.hpp"
#include "amsp/io/crc32c.hpp"
#include "amsp/io/file.hpp"
#include "amsp/io/index.hpp"
#include "amsp/io/rank_writer.hpp"
#include "amsp/io/reader.hpp"
#include "amsp/io/rule_fields.hpp"
#include "amsp/io/shard_pieces.hpp"

namespace amsp::io {

/// The user's part of a checkpoint: a string map (rank 0's is saved) and an opaque blob per rank
/// (data-loader position, RNG state).
struct UserSection {
  std::vector<std::pair<std::string, std::string>> values;
  std::vector<std::byte> blob;
};

struct SaveOptions {
  /// Replace a checkpoint already at `dir` (atomically); false: fail with ckpt.exists.
  bool overwrite = true;
  /// fsync files and directories (turn off only for tests that do not simulate power loss).
  bool fsync = true;
  /// Largest piece in elements: a reader verifies whole pieces, so this bounds what a resharding
  /// load reads beyond its own elements (4 MiB per row by default).
  std::size_t max_piece_elements = std::size_t{1} << 20;
};

/// What load() restored besides the engine's states.
struct Restored {
  std::int64_t step = 0;
  std::vector<std::pair<std::string, std::string>> values;
  /// This rank's blob when the saved world had this many ranks (else empty: read_blob by saved rank).
  std::vector<std::byte> blob;
  int saved_world_size = 0;
  std::string saved_plan, saved_mesh;
};

namespace detail {

template <class Engine>
[[nodiscard]] std::vector<std::string> checkpoint_rows(const Engine& engine) {
  std::vector<std::string> rows{"master"};
  for (std::string_view s : checkpoint_state_names(engine.rule())) rows.emplace_back(s);
  return rows;
}

/// The pieces this rank writes, with row pointers into the engine's shards.
template <class Engine>
[[nodiscard]] RankPayload rank_payload(Engine& engine, const UserSection& user, std::size_t max_piece) {
  RankPayload payload;
  payload.rank = engine.rank();
  payload.row_names = checkpoint_rows(engine);
  payload.blob = user.blob;
  const GroupSet& os = engine.groups().os();
  const int replicas = static_cast<int>(os.groups().size());
  for (const ShardPiece& p : pieces_to_write(engine, os.index_of_group(engine.rank()), replicas, max_piece)) {
    PiecePayload piece;
    piece.tensor = p.slot->name;
    piece.begin = static_cast<std::int64_t>(p.tensor_begin);
    piece.count = static_cast<std::int64_t>(p.count);
    piece.rows.push_back(engine.master_shard(p.bucket).data() + p.shard_offset);
    for (int s = 0; s < static_cast<int>(payload.row_names.size()) - 1; ++s)
      piece.rows.push_back(engine.state_shard(p.bucket, s).data() + p.shard_offset);
    payload.pieces.push_back(std::move(piece));
  }
  return payload;
}

/// Everything of the index that rank 0 knows without the manifests.
template <class Engine>
[[nodiscard]] Index index_skeleton(const Engine& engine, const std::string& id, const UserSection& user) {
  Index index;
  index.checkpoint_id = id;
  index.step = engine.steps();
  index.mesh = to_string(engine.mesh());
  index.world_size = engine.mesh().world_size();
  index.plan = to_string(engine.plan());
  index.os_layout = std::string(name_of(engine.options().os_layout));
  index.param_dtype = std::string(name_of(dtype_of_v<typename Engine::param_type>));
  index.rule = std::string(std::remove_cvref_t<decltype(engine.rule())>::name);
  index.hyperparameters = rule_fields_to_json(engine.rule());
  index.rows = checkpoint_rows(engine);
  index.user_values = user.values;
  for (int b = 0; b < engine.bucket_count(); ++b)
    for (const TensorSlot& slot : engine.layout(b).slots())
      index.tensors.push_back({slot.name, engine.bucket(b).name, slot.shape,
                               rule_fields_to_json(engine.param_group(slot.name)), {}});
  return index;
}

/// Rank 0: merges every rank's manifest into the index.
inline void merge_manifests(Index& index, const std::string& dir, const std::string& id) {
  for (int r = 0; r < index.world_size; ++r) {
    const std::string path = dir + "/" + manifest_file_name(r);
    const Json m = parse_json(read_file(path));
    check(m.at("checkpoint_id").as_string() == id, "ckpt.index_mismatch", "manifest '", path,
          "' belongs to another save");
    int file = -1;
    if (const Json* f = m.find("file")) {
      file = static_cast<int>(index.files.size());
      index.files.push_back({f->at("name").as_string(), static_cast<std::uint64_t>(f->at("bytes").as_int()),
                             static_cast<std::uint64_t>(f->at("header_bytes").as_int()),
                             static_cast<std::uint32_t>(f->at("header_crc32c").as_int())});
    }
    for (const Json& p : m.at("pieces").as_array()) {
      const std::string& name = p.at("tensor").as_string();
      IndexTensor* tensor = nullptr;
      for (IndexTensor& t : index.tensors)
        if (t.name == name) tensor = &t;
      check(tensor != nullptr && file >= 0, "ckpt.index", "manifest '", path, "' names unknown tensor '", name, "'");
      tensor->pieces.push_back({p.at("begin").as_int(), p.at("count").as_int(), file,
                                static_cast<std::uint64_t>(p.at("offset").as_int()),
                                static_cast<std::uint32_t>(p.at("crc32c").as_int())});
    }
    const Json& blob = m.at("blob");
    index.user_blobs.push_back({blob.at("file").as_string(), static_cast<std::uint64_t>(blob.at("bytes").as_int()),
                                static_cast<std::uint32_t>(blob.at("crc32c").as_int())});
  }
  for (IndexTensor& t : index.tensors)
    std::sort(t.pieces.begin(), t.pieces.end(), [](const IndexPiece& a, const IndexPiece& b) { return a.begin < b.begin; });
}

/// `dir` without trailing separators or dot segments ("ckpt/latest/" -> "ckpt/latest"), so that
/// its temporary sibling is a sibling and not a child.
[[nodiscard]] inline std::string normalized_directory(const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  check(!p.empty() && p.filename() != "." && p.filename() != "..", "ckpt.io", "checkpoint directory '", dir,
        "' must name a directory");
  return p.string();
}

[[nodiscard]] inline std::string temporary_directory(const std::string& dir, const std::string& id) {
  return dir + ".tmp-" + id;
}

inline void check_save_options(const SaveOptions& options) {
  check(options.max_piece_elements > 0, "ckpt.options", "SaveOptions::max_piece_elements must be > 0");
}

/// begin_save's work, whose std::filesystem failures begin_save reports as ckpt.io.
inline void begin_save_directories(const std::string& dir, const std::string& id, const SaveOptions& options) {
  namespace fs = std::filesystem;
  const fs::path target(dir);
  if (fs::exists(target)) {
    check(options.overwrite, "ckpt.exists", "a checkpoint already exists at '", dir, "' and overwrite is off");
    // Replacing removes the old directory: only ever an amsp checkpoint (or an empty directory).
    check(fs::is_directory(target) && (fs::exists(target / commit_file_name) || fs::is_empty(target)), "ckpt.exists",
          "'", dir, "' exists and is not an amsp checkpoint; refusing to replace it");
  }
  const fs::path parent = fs::path(parent_directory(target.string()));
  fs::create_directories(parent);
  const std::string prefix = target.filename().string() + ".tmp-";
  for (const fs::directory_entry& e : fs::directory_iterator(parent))
    if (e.path().filename().string().starts_with(prefix)) fs::remove_all(e.path());
  fs::create_directory(temporary_directory(target.string(), id));
}

/// Rank 0, phase 1: a fresh temporary directory; leftovers of interrupted saves of `dir` removed.
inline void begin_save(const std::string& dir, const std::string& id, const SaveOptions& options) {
  filesystem_calls([&] { begin_save_directories(dir, id, options); });
}

/// Rank 0, last phase: index, commit marker, atomic publication.
inline void commit_save(Index index, const std::string& dir, const std::string& id, const SaveOptions& options) {
  const std::string tmp = temporary_directory(dir, id);
  merge_manifests(index, tmp, id);
  const std::string text = to_json_string(to_json(index), 1) + "\n";
  (void)parse_index(text);  // the index must read back: coverage, ranges (a bug here is caught before commit)
  filesystem_calls([&] {
    for (int r = 0; r < index.world_size; ++r) std::filesystem::remove(tmp + "/" + manifest_file_name(r));
  });
  write_file_synced(tmp + "/" + index_file_name, text, options.fsync);
  write_file_synced(tmp + "/" + commit_file_name, commit_marker_text({id, text.size(), crc32c(text)}), options.fsync);
  if (options.fsync) sync_directory(tmp);
  const bool replaced = publish_directory(tmp, dir);
  if (options.fsync) sync_directory(parent_directory(dir));
  if (replaced) filesystem_calls([&] { std::filesystem::remove_all(tmp); });  // the previous checkpoint, swapped out
}

/// A fresh checkpoint id from rank 0, shared with every rank (52 random bits: exact in a double).
template <comm::communicator Comm>
[[nodiscard]] std::string shared_checkpoint_id(Comm& world) {
  double id = 0;
  if (world.rank() == 0) {
    std::random_device device;
    const std::uint64_t bits = (std::uint64_t{device()} << 32 | device()) & ((std::uint64_t{1} << 52) - 1);
    id = static_cast<double>(bits);
  }
  world.broadcast(&id, &id, 1, 0);
  char text[32];
  std::snprintf(text, sizeof text, "%013llx", static_cast<unsigned long long>(id));
  return text;
}

template <class Engine>
void check_compatible(const Engine& engine, const Index& index) {
  using Rule = std::remove_cvref_t<decltype(engine.rule())>;
  check(index.rule == Rule::name, "ckpt.rule_mismatch", "the checkpoint holds states of rule '", index.rule,
        "' but this engine runs '", Rule::name, "'");
  check(index.rows == checkpoint_rows(engine), "ckpt.rule_mismatch", "the checkpoint's state rows differ from rule ",
        Rule::name, "'s");
  std::size_t tensors = 0;
  for (int b = 0; b < engine.bucket_count(); ++b)
    for (const TensorSlot& slot : engine.layout(b).slots()) {
      ++tensors;
      const IndexTensor* t = index.find(slot.name);
      check(t != nullptr, "ckpt.model_mismatch", "tensor '", slot.name, "' is not in the checkpoint");
      check(t->shape == slot.shape, "ckpt.model_mismatch", "tensor '", slot.name,
            "' has another shape in the checkpoint");
      check(t->group == rule_fields_to_json(engine.param_group(slot.name)), "ckpt.param_group_mismatch", "tensor '",
            slot.name, "' was saved with parameter-group options ", to_json_string(t->group),
            " but the engine gives it ", to_json_string(rule_fields_to_json(engine.param_group(slot.name))),
            " (EngineOptions::param_groups must match to resume the same run)");
    }
  check(tensors == index.tensors.size(), "ckpt.model_mismatch", "the checkpoint holds ", index.tensors.size(),
        " tensors but the engine has ", tensors);
}

/// Reads this rank's elements (its own runs, whatever plan wrote them) into its shards.
template <class Engine>
void read_own_pieces(Engine& engine, CheckpointReader& reader) {
  const Index& index = reader.index();
  const std::size_t rows = index.rows.size();
  const IndexPiece* cached = nullptr;  // consecutive runs often need the same piece
  std::vector<float> data;
  for (int b = 0; b < engine.bucket_count(); ++b) {
    std::vector<std::span<float>> shards{engine.master_shard(b)};
    for (std::size_t s = 0; s + 1 < rows; ++s) shards.push_back(engine.state_shard(b, static_cast<int>(s)));
    for (const ShardPiece& want : owned_pieces(engine, b)) {
      const IndexTensor& tensor = *index.find(want.slot->name);
      const auto lo = static_cast<std::int64_t>(want.tensor_begin);
      const auto hi = lo + static_cast<std::int64_t>(want.count);
      auto it = std::upper_bound(tensor.pieces.begin(), tensor.pieces.end(), lo,
                                 [](std::int64_t v, const IndexPiece& p) { return v < p.begin; });
      for (--it; it != tensor.pieces.end() && it->begin < hi; ++it) {
        if (cached != &*it) {
          reader.read_piece(tensor, *it, data);
          cached = &*it;
        }
        const std::int64_t from = std::max(lo, it->begin);
        const std::int64_t to = std::min(hi, it->begin + it->count);
        for (std::size_t r = 0; r < rows; ++r)
          std::copy(data.begin() + static_cast<std::ptrdiff_t>(r * static_cast<std::size_t>(it->count)) + (from - it->begin),
                    data.begin() + static_cast<std::ptrdiff_t>(r * static_cast<std::size_t>(it->count)) + (to - it->begin),
                    shards[r].begin() + static_cast<std::ptrdiff_t>(want.shard_offset) + (from - lo));
      }
    }
  }
}

}  // namespace detail

/// Saves the engine's model states into `dir`. Collective over `world`, the communicator the
/// engine was built on. `user.values` is taken from rank 0; every rank's `user.blob` is saved.
template <class Comm, class Rule, class ParamT, class GradT, class Space>
void save(ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>& engine, Comm& world, const std::string& directory,
          const UserSection& user = {}, const SaveOptions& options = {}) {
  engine.synchronize();
  const std::string dir = detail::normalized_directory(directory);
  detail::check_save_options(options);
  const std::string id = detail::shared_checkpoint_id(world);
  agree(world, [&] {
    if (world.rank() == 0) detail::begin_save(dir, id, options);
  });
  agree(world, [&] {
    const RankPayload payload = detail::rank_payload(engine, user, options.max_piece_elements);
    (void)write_rank_files(payload, detail::temporary_directory(dir, id), id, options.fsync);
  });
  agree(world, [&] {
    if (world.rank() == 0) detail::commit_save(detail::index_skeleton(engine, id, user), dir, id, options);
  });
}

/// Loads the checkpoint in `dir` into the engine, whatever plan, mesh and world size saved it:
/// master weights, states, step count and hyperparameters, then rebuilds the parameters.
/// Collective over `world`.
template <class Comm, class Rule, class ParamT, class GradT, class Space>
Restored load(ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>& engine, Comm& world, const std::string& dir) {
  engine.synchronize();
  Restored restored;
  std::unique_ptr<CheckpointReader> reader;
  agree(world, [&] {
    reader = std::make_unique<CheckpointReader>(dir);
    detail::check_compatible(engine, reader->index());
  });
  Rule rule{};
  agree(world, [&] {
    const Index& index = reader->index();
    rule = rule_from_json<Rule>(index.hyperparameters);
    detail::read_own_pieces(engine, *reader);
    restored.step = index.step;
    restored.values = index.user_values;
    restored.saved_world_size = index.world_size;
    restored.saved_plan = index.plan;
    restored.saved_mesh = index.mesh;
    if (index.world_size == world.size()) restored.blob = reader->read_blob(world.rank());
  });
  engine.set_rule(rule);
  engine.set_steps(restored.step);
  engine.refresh_params_from_master();
  return restored;
}

}  // namespace amsp::io
