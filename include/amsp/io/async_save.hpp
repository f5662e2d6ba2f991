#pragma once
// Asynchronous save: training continues while the checkpoint is written.
//
//   amsp::io::AsyncSave pending = amsp::io::save_async(opt, world, "ckpt/latest");  // snapshot
//   ... train on: step() may change every shard now ...
//   pending.commit();   // collective, at a point every rank reaches (e.g. before the next save)
//
// save_async() is collective and short: it creates the temporary directory (as save() does),
// copies the elements this rank writes (its 1/world share of the states, amsp/io/shard_pieces.hpp)
// into a staging buffer, and hands the writing to a background thread. That thread does file I/O
// only: communicators are used from their own thread (the threads backend and MPI_THREAD_FUNNELED
// require it), so the agreement, the index and the atomic publication wait for commit(), which
// joins the writer first. The checkpoint holds the states as they were at save_async(); until
// commit() returns nothing is visible, and a crash before it leaves the previous checkpoint.
// Dropping an uncommitted AsyncSave waits for its writer and publishes nothing.

#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "amsp/io/checkpoint.hpp"

namespace amsp::io {

template <comm::communicator Comm>
class AsyncSave {
public:
  AsyncSave(const AsyncSave&) = delete;
  AsyncSave& operator=(const AsyncSave&) = delete;
  AsyncSave(AsyncSave&&) noexcept = default;
  AsyncSave& operator=(AsyncSave&&) noexcept = default;
  ~AsyncSave() {
    if (state_ && state_->writer.joinable()) state_->writer.join();
  }

  /// Whether this rank's files are written (non-blocking; other ranks may still be writing).
  [[nodiscard]] bool written() const { return state_ && state_->done.load(std::memory_order_acquire); }

  /// Collective: waits for this rank's writer, then agrees and publishes the checkpoint.
  void commit() {
    check(state_ && !state_->committed, "ckpt.async_commit", "commit() of an asynchronous save that was already committed");
    state_->committed = true;
    if (state_->writer.joinable()) state_->writer.join();
    agree(*state_->world, [&] {
      if (state_->error) std::rethrow_exception(state_->error);
    });
    agree(*state_->world, [&] {
      if (state_->world->rank() == 0) detail::commit_save(std::move(state_->skeleton), state_->dir, state_->id, state_->options);
    });
  }

private:
  template <class C, class R, class P, class G, class S>
  friend AsyncSave<C> save_async(ShardedOptimizer<C, R, P, G, S>&, C&, const std::string&, const UserSection&,
                                 const SaveOptions&);

  struct State {
    Comm* world = nullptr;
    std::string dir, id;
    SaveOptions options;
    Index skeleton;       // rank 0: the index as of the snapshot
    RankPayload payload;  // points into its own staging buffer
    std::thread writer;
    std::exception_ptr error;
    std::atomic<bool> done{false};
    bool committed = false;
  };
  explicit AsyncSave(std::unique_ptr<State> state) : state_(std::move(state)) {}

  std::unique_ptr<State> state_;  // stable address for the writer thread
};

/// Snapshots the engine's states and starts writing them to `dir` in the background; commit() the
/// result. Collective over `world`.
template <class Comm, class Rule, class ParamT, class GradT, class Space>
AsyncSave<Comm> save_async(ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>& engine, Comm& world, const std::string& dir,
                           const UserSection& user = {}, const SaveOptions& options = {}) {
  engine.synchronize();
  auto state = std::make_unique<typename AsyncSave<Comm>::State>();
  state->world = &world;
  state->dir = detail::normalized_directory(dir);
  detail::check_save_options(options);
  state->id = detail::shared_checkpoint_id(world);
  state->options = options;
  agree(world, [&] {
    if (world.rank() == 0) detail::begin_save(state->dir, state->id, options);
  });
  agree(world, [&] {
    state->payload = detail::rank_payload(engine, user, options.max_piece_elements);
    state->payload.snapshot();
    if (world.rank() == 0) state->skeleton = detail::index_skeleton(engine, state->id, user);
  });
  auto* s = state.get();
  s->writer = std::thread([s] {
    try {
      (void)write_rank_files(s->payload, detail::temporary_directory(s->dir, s->id), s->id, s->options.fsync);
    } catch (...) {
      s->error = std::current_exception();
    }
    s->done.store(true, std::memory_order_release);
  });
  return AsyncSave<Comm>(std::move(state));
}

}  // namespace amsp::io
