#pragma once
// A device space's gradient staging under EngineOptions::gradient_buffers_in_flight: at most that
// many grad-pool slots, kept by the engine and handed out in turn, each reused once the
// reduction that last read it is done: the user's compute waits for that reduction's ticket
// (user_after, as for a gather), and for nothing issued after it. A device space's worker gives
// a pool slot back once it has issued the reduction, so the pool alone grows by a buffer for
// every bucket the backward's launches run ahead of the device (docs/engine.md, "Gradient buffers
// in flight"). Caller's thread only.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace amsp::detail {

class StagingRing {
public:
  StagingRing() = default;  // no bound: never used
  explicit StagingRing(std::size_t bound) : bound_(bound) {}

  /// A slot to reuse and the ticket of the reduction that last read it, or nullopt where a pool
  /// slot serves: the ring has room for one more (add it), or its next slot is still open (a user
  /// who holds more buffers open than the bound; that one is not kept).
  [[nodiscard]] std::optional<std::pair<int, std::uint64_t>> next() {
    if (bound_ == 0 || entries_.size() < bound_) return std::nullopt;
    Entry& e = entries_[next_];
    if (e.open) return std::nullopt;
    next_ = (next_ + 1) % entries_.size();
    e.open = true;
    return std::pair{e.slot, e.ticket};
  }
  [[nodiscard]] bool has_room() const { return entries_.size() < bound_; }
  /// A new slot, open (handed to the user).
  void add(int slot) { entries_.push_back({slot, 0, true}); }
  [[nodiscard]] bool owns(int slot) const {
    for (const Entry& e : entries_)
      if (e.slot == slot) return true;
    return false;
  }
  /// `slot` was handed in; the reduction with `ticket` reads it.
  void handed_in(int slot, std::uint64_t ticket) {
    for (Entry& e : entries_)
      if (e.slot == slot) {
        e.open = false;
        e.ticket = ticket;
      }
  }
  /// The slots not open, taken out of the ring (trim_scratch, once every reduction is done).
  [[nodiscard]] std::vector<int> take_closed() {
    std::vector<int> closed;
    std::vector<Entry> open;
    for (const Entry& e : entries_) {
      if (e.open) open.push_back(e);
      else closed.push_back(e.slot);
    }
    entries_ = std::move(open);
    next_ = 0;
    return closed;
  }

private:
  struct Entry {
    int slot;
    std::uint64_t ticket;  // of the reduction that last read the slot
    bool open;             // handed to the user and not handed in yet
  };
  std::vector<Entry> entries_;
  std::size_t next_ = 0;
  std::size_t bound_ = 0;
};

}  // namespace amsp::detail
