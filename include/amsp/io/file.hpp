#pragma once
// POSIX file access for checkpoints: whole writes, positioned reads, fsync of files and
// directories, atomic directory replacement. Every failure is an amsp::error naming the path and
// the system's reason: ckpt.missing_file when a file that must exist does not, ckpt.truncated
// when a read runs past its end, ckpt.io for everything else the operating system refuses.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "amsp/core/error.hpp"

namespace amsp::io {

namespace detail {
[[noreturn]] inline void fail_errno(std::string_view what, const std::string& path, int err) {
  if (err == ENOENT) fail("ckpt.missing_file", what, " '", path, "': ", std::strerror(err));
  fail("ckpt.io", what, " '", path, "': ", std::strerror(err));
}

/// Runs `f`, whose std::filesystem calls report the operating system's refusals as
/// std::filesystem::filesystem_error: those become rule ckpt.io with their paths and reason, as
/// File's own failures are (a std::filesystem error is no amsp::error, and agree would otherwise
/// report it as ckpt.failed, "anything else").
template <class F>
decltype(auto) filesystem_calls(F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const std::filesystem::filesystem_error& e) {
    fail("ckpt.io", e.what());
  }
}
}  // namespace detail

/// An open file descriptor, closed on destruction.
class File {
public:
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  File(File&& other) noexcept : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}
  File& operator=(File&& other) noexcept {
    if (this != &other) {
      close_quietly();
      fd_ = std::exchange(other.fd_, -1);
      path_ = std::move(other.path_);
    }
    return *this;
  }
  ~File() { close_quietly(); }

  /// Creates (or truncates) `path` for writing.
  [[nodiscard]] static File create(const std::string& path) {
    return File(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), path, "cannot create");
  }
  /// Opens an existing `path` for reading.
  [[nodiscard]] static File open_read(const std::string& path) {
    return File(::open(path.c_str(), O_RDONLY | O_CLOEXEC), path, "cannot open");
  }
  /// Opens a directory (for fsync).
  [[nodiscard]] static File open_directory(const std::string& path) {
    return File(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC), path, "cannot open directory");
  }

  [[nodiscard]] const std::string& path() const { return path_; }

  /// Appends all `bytes` at the current position.
  void write_all(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::write(fd_, p, bytes);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) detail::fail_errno("cannot write", path_, n < 0 ? errno : EIO);
      p += n;
      bytes -= static_cast<std::size_t>(n);
    }
  }
  /// Reads exactly `bytes` at `offset`; fails with ckpt.truncated if the file ends first.
  void read_at(void* data, std::size_t bytes, std::uint64_t offset) const {
    auto* p = static_cast<char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) detail::fail_errno("cannot read", path_, errno);
      if (n == 0) fail("ckpt.truncated", "file '", path_, "' ends before byte ", offset + bytes);
      p += n;
      offset += static_cast<std::uint64_t>(n);
      bytes -= static_cast<std::size_t>(n);
    }
  }
  [[nodiscard]] std::uint64_t size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) detail::fail_errno("cannot stat", path_, errno);
    return static_cast<std::uint64_t>(st.st_size);
  }
  /// Flushes the file's data and metadata to the device.
  void sync() {
    if (::fsync(fd_) != 0) detail::fail_errno("cannot fsync", path_, errno);
  }
  /// Closes, reporting a failure (a write error can surface only here on some file systems).
  void close() {
    const int fd = std::exchange(fd_, -1);
    if (fd >= 0 && ::close(fd) != 0) detail::fail_errno("cannot close", path_, errno);
  }

private:
  File(int fd, std::string path, std::string_view what) : fd_(fd), path_(std::move(path)) {
    if (fd_ < 0) detail::fail_errno(what, path_, errno);
  }
  void close_quietly() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  int fd_ = -1;
  std::string path_;
};

/// fsync of a directory: makes the creation, removal and renaming of its entries durable.
inline void sync_directory(const std::string& path) { File::open_directory(path).sync(); }

/// Reads a whole (small) file.
[[nodiscard]] inline std::string read_file(const std::string& path) {
  const File f = File::open_read(path);
  std::string text(f.size(), '\0');
  f.read_at(text.data(), text.size(), 0);
  return text;
}

/// Writes a whole (small) file and fsyncs it.
inline void write_file_synced(const std::string& path, std::string_view text, bool fsync = true) {
  File f = File::create(path);
  f.write_all(text.data(), text.size());
  if (fsync) f.sync();
  f.close();
}

/// Makes `from` visible as `to` in one atomic step: renameat2(RENAME_EXCHANGE) swaps the two
/// directories when `to` exists (the old one is then at `from`, for the caller to remove), a
/// plain rename otherwise. Returns true when an old `to` now sits at `from`.
inline bool publish_directory(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) == 0) return false;
  const int rename_errno = errno;
  if (rename_errno != EEXIST && rename_errno != ENOTEMPTY) detail::fail_errno("cannot rename to", to, rename_errno);
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) return true;
  detail::fail_errno("cannot exchange (renameat2) with", to, errno);
#else
  detail::fail_errno("cannot rename to", to, rename_errno);
#endif
}

/// The parent directory of `path` ("." for a bare name).
[[nodiscard]] inline std::string parent_directory(const std::string& path) {
  const std::filesystem::path p = std::filesystem::path(path).lexically_normal();
  const std::filesystem::path parent = (p.has_filename() ? p : p.parent_path()).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace amsp::io
