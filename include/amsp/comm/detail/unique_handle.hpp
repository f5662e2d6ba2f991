#pragma once
// Move-only ownership of a C library handle (MPI_Comm, ncclComm_t, a device pointer), so that the
// backends' communicators get correct moves by default. A handle may also be held without
// ownership (a borrowed MPI communicator): then it is never released.

#include <utility>

namespace amsp::comm::detail {

template <class H, class Release>
class UniqueHandle {
public:
  UniqueHandle() = default;
  UniqueHandle(H handle, bool owned) : handle_(handle), owned_(owned) {}
  UniqueHandle(UniqueHandle&& other) noexcept : handle_(other.handle_), owned_(std::exchange(other.owned_, false)) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = other.handle_;
      owned_ = std::exchange(other.owned_, false);
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  [[nodiscard]] H get() const noexcept { return handle_; }
  [[nodiscard]] bool owned() const noexcept { return owned_; }
  void reset() noexcept {
    if (owned_) Release{}(handle_);
    owned_ = false;
  }

private:
  H handle_{};
  bool owned_ = false;
};

}  // namespace amsp::comm::detail
