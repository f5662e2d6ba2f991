#pragma once
// Bootstrapping NCCL without MPI: one rank makes the unique id (new_unique_id) and the job hands
// it to the others however its launcher can; every rank then calls
// NcclCommunicator::from_unique_id(id, rank, size).
//
//   as text    unique_id_to_hex(id): 256 hexadecimal digits, for an environment variable or a
//              command-line argument; unique_id_from_hex(text), unique_id_from_env("AMSP_NCCL_ID").
//   as a file  write_unique_id_file(path, id) on one rank (written to a temporary name, fsync'ed,
//              then renamed: a reader never sees half a file); read_unique_id_file(path, timeout)
//              on the others waits until the file is there. The path must be on a file system
//              every rank sees and new for each job (a stale file from an earlier job would be
//              read as this job's id). The reader also accepts the 128 raw bytes of an
//              ncclUniqueId, as llm.c's file bootstrap writes them.
//
// Rules: comm.unique_id (text or file that is not an id), comm.unique_id_timeout (no valid file
// within the timeout), comm.unique_id_io (the file cannot be written or read), comm.nccl.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nccl.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

#include "amsp/comm/detail/nccl_world.hpp"
#include "amsp/core/error.hpp"

namespace amsp::comm {

/// Number of hexadecimal digits unique_id_to_hex writes.
inline constexpr std::size_t unique_id_hex_digits = 2 * sizeof(ncclUniqueId);

/// ncclGetUniqueId: call on one rank only, then hand the id to the others.
[[nodiscard]] inline ncclUniqueId new_unique_id() {
  ncclUniqueId id{};
  detail::check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return id;
}

/// The id as unique_id_hex_digits lowercase hexadecimal digits.
[[nodiscard]] inline std::string unique_id_to_hex(const ncclUniqueId& id) {
  static constexpr char digits[] = "0123456789abcdef";
  const auto* bytes = reinterpret_cast<const unsigned char*>(&id);
  std::string text(unique_id_hex_digits, '0');
  for (std::size_t i = 0; i < sizeof id; ++i) {
    text[2 * i] = digits[bytes[i] >> 4];
    text[2 * i + 1] = digits[bytes[i] & 0xf];
  }
  return text;
}

namespace detail {

[[nodiscard]] constexpr int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

[[nodiscard]] constexpr bool is_space(char c) noexcept { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/// Parses hexadecimal text (surrounding white space ignored) into `id`; empty on success, else
/// what is wrong with it.
[[nodiscard]] inline std::string parse_unique_id_hex(std::string_view text, ncclUniqueId& id) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  if (text.size() != unique_id_hex_digits)
    return amsp::detail::concat("it has ", text.size(), " characters, expected ", unique_id_hex_digits,
                                " hexadecimal digits");
  auto* bytes = reinterpret_cast<unsigned char*>(&id);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int value = hex_value(text[i]);
    if (value < 0)
      return amsp::detail::concat("character ", i, " ('", text[i], "') is not a hexadecimal digit");
    if (i % 2 == 0) bytes[i / 2] = static_cast<unsigned char>(value << 4);
    else bytes[i / 2] = static_cast<unsigned char>(bytes[i / 2] | value);
  }
  return {};
}

/// The contents of a unique-id file: unique_id_to_hex's text, or the raw bytes of an ncclUniqueId
/// (exactly that many bytes, and not all hexadecimal digits, which would be truncated text).
[[nodiscard]] inline std::string parse_unique_id_file(std::string_view contents, ncclUniqueId& id) {
  bool all_hex = true;
  for (char c : contents) all_hex = all_hex && hex_value(c) >= 0;
  if (contents.size() == sizeof id && !all_hex) {
    std::memcpy(&id, contents.data(), sizeof id);
    return {};
  }
  std::string why = parse_unique_id_hex(contents, id);
  if (why.empty()) return why;
  return amsp::detail::concat(why, " (", contents.size(), " bytes; expected the ", unique_id_hex_digits,
                              " hexadecimal digits write_unique_id_file writes, or the ", sizeof id,
                              " raw bytes of an ncclUniqueId)");
}

[[noreturn]] inline void fail_unique_id_io(std::string_view what, const std::string& path, int err) {
  fail("comm.unique_id_io", what, " the NCCL unique id file '", path, "': ", std::strerror(err));
}

/// Reads a whole small file; returns 0, or the errno of open/read.
[[nodiscard]] inline int read_small_file(const std::string& path, std::string& contents) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  contents.clear();
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::close(fd);
      return err;
    }
    contents.append(buffer, static_cast<std::size_t>(n));
    if (contents.size() > 1 << 16) {  // not an id; do not read a huge file whole
      ::close(fd);
      return 0;
    }
  }
}

}  // namespace detail

/// Parses unique_id_to_hex's text; `source` names where it came from in the error.
[[nodiscard]] inline ncclUniqueId unique_id_from_hex(std::string_view text, std::string_view source = "the text") {
  ncclUniqueId id{};
  const std::string why = detail::parse_unique_id_hex(text, id);
  check(why.empty(), "comm.unique_id", source, " is not an NCCL unique id: ", why,
        " (as unique_id_to_hex writes it)");
  return id;
}

/// The id in environment variable `variable` (unique_id_to_hex's text).
[[nodiscard]] inline ncclUniqueId unique_id_from_env(const char* variable) {
  const char* value = std::getenv(variable);
  check(value != nullptr, "comm.unique_id", "environment variable ", variable,
        " is not set: the launcher must export unique_id_to_hex(new_unique_id()) of one rank to every rank");
  return unique_id_from_hex(value, amsp::detail::concat("environment variable ", variable));
}

/// Writes `id` to `path` atomically: a temporary file beside it, fsync, rename.
inline void write_unique_id_file(const std::string& path, const ncclUniqueId& id) {
  const std::string text = unique_id_to_hex(id) + "\n";
  const std::string temporary = amsp::detail::concat(path, ".tmp.", ::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) detail::fail_unique_id_io("cannot create a temporary file for", path, errno);
  std::size_t written = 0;
  int err = 0;
  while (written < text.size() && err == 0) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n > 0) written += static_cast<std::size_t>(n);
    else if (n < 0 && errno != EINTR) err = errno;
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(temporary.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(temporary.c_str());
    detail::fail_unique_id_io("cannot write", path, err);
  }
}

/// Waits up to `timeout` for `path` to hold a unique id (polling every 10 ms) and returns it. A file
/// that exists but holds no valid id is read again until the timeout (a writer that does not
/// rename may not have finished), then reported (comm.unique_id); no file at all is
/// comm.unique_id_timeout. Zero: one attempt.
[[nodiscard]] inline ncclUniqueId read_unique_id_file(const std::string& path, std::chrono::milliseconds timeout) {
  check(timeout.count() >= 0, "comm.timeout_range", "read_unique_id_file: the timeout is ", timeout.count(),
        " ms; it must be 0 or positive");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string contents;
  std::string why;  // empty while the file was never there
  for (;;) {
    const int err = detail::read_small_file(path, contents);
    if (err == 0) {
      ncclUniqueId id{};
      why = detail::parse_unique_id_file(contents, id);
      if (why.empty()) return id;
    } else if (err != ENOENT) {
      detail::fail_unique_id_io("cannot read", path, err);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  check(!why.empty(), "comm.unique_id_timeout", "no NCCL unique id file '", path, "' appeared within ",
        timeout.count(), " ms (one rank writes it with write_unique_id_file; the path must be on a file system every "
        "rank sees)");
  fail("comm.unique_id", "the NCCL unique id file '", path, "' is not a unique id: ", why);
}

}  // namespace amsp::comm
