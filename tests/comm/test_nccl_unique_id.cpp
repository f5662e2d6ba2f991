// The NCCL unique id as text and as a file (amsp/comm/nccl_unique_id.hpp): host code, runs
// wherever NCCL is installed, with or without a GPU. The ids are synthetic bytes (no NCCL call),
// and the expected text is formatted independently with snprintf.
#include <doctest/doctest.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>

#include "amsp/comm/nccl_unique_id.hpp"
#include "collective_checks.hpp"

namespace {
using namespace amsp;
namespace fs = std::filesystem;
using std::chrono::milliseconds;
using test::message_thrown;
using test::rule_thrown;

ncclUniqueId random_id(unsigned seed) {
  std::mt19937 gen(seed);
  ncclUniqueId id{};
  for (char& c : id.internal) c = static_cast<char>(gen() & 0xff);
  return id;
}

bool same(const ncclUniqueId& a, const ncclUniqueId& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

std::string snprintf_hex(const ncclUniqueId& id) {
  std::string text;
  for (char c : id.internal) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
    text += two;
  }
  return text;
}

/// A fresh directory under the temporary directory, removed at the end of the test case.
struct ScratchDir {
  fs::path path;
  ScratchDir() : path(fs::temp_directory_path() / ("amsp_unique_id_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() { fs::remove_all(path); }
  [[nodiscard]] std::string file(const char* name) const { return (path / name).string(); }
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
}  // namespace

TEST_CASE("unique id as hex text: 256 lowercase digits, as snprintf formats the bytes, and back") {
  for (unsigned seed : {1u, 2u, 3u}) {
    const ncclUniqueId id = random_id(seed);
    const std::string hex = comm::unique_id_to_hex(id);
    CHECK(hex.size() == 256);
    CHECK(hex == snprintf_hex(id));
    CHECK(same(comm::unique_id_from_hex(hex), id));
    std::string upper = hex;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK(same(comm::unique_id_from_hex(" " + upper + "\n"), id));  // case and surrounding space are fine
  }
  const ncclUniqueId zero{};
  CHECK(comm::unique_id_to_hex(zero) == std::string(256, '0'));
}

TEST_CASE("unique id as hex text: malformed text is comm.unique_id naming where it came from") {
  const std::string hex = comm::unique_id_to_hex(random_id(4));
  CHECK(rule_thrown([&] { (void)comm::unique_id_from_hex(hex.substr(1)); }) == "comm.unique_id");
  CHECK(rule_thrown([&] { (void)comm::unique_id_from_hex(hex + "0"); }) == "comm.unique_id");
  CHECK(rule_thrown([&] { (void)comm::unique_id_from_hex(""); }) == "comm.unique_id");
  std::string bad = hex;
  bad[17] = 'g';
  const std::string message = message_thrown([&] { (void)comm::unique_id_from_hex(bad, "argument --nccl-id"); });
  CHECK(message.find("argument --nccl-id") != std::string::npos);
  CHECK(message.find("character 17") != std::string::npos);
  CHECK(message.find("[rule comm.unique_id]") != std::string::npos);
}

TEST_CASE("unique id from an environment variable") {
  const ncclUniqueId id = random_id(5);
  ::setenv("AMSP_TEST_NCCL_ID", comm::unique_id_to_hex(id).c_str(), 1);
  CHECK(same(comm::unique_id_from_env("AMSP_TEST_NCCL_ID"), id));
  ::setenv("AMSP_TEST_NCCL_ID", "12ab", 1);
  CHECK(message_thrown([] { (void)comm::unique_id_from_env("AMSP_TEST_NCCL_ID"); })
            .find("environment variable AMSP_TEST_NCCL_ID is not an NCCL unique id") != std::string::npos);
  ::unsetenv("AMSP_TEST_NCCL_ID");
  const std::string unset = message_thrown([] { (void)comm::unique_id_from_env("AMSP_TEST_NCCL_ID"); });
  CHECK(unset.find("AMSP_TEST_NCCL_ID is not set") != std::string::npos);
  CHECK(unset.find("[rule comm.unique_id]") != std::string::npos);
}

TEST_CASE("unique id file: written atomically as hex text, read back; llm.c's raw bytes are read too") {
  const ScratchDir dir;
  const ncclUniqueId id = random_id(6);
  const std::string path = dir.file("nccl.id");
  comm::write_unique_id_file(path, id);
  std::ifstream in(path, std::ios::binary);
  const std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(contents == snprintf_hex(id) + "\n");
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);  // no temporary left
  CHECK(same(comm::read_unique_id_file(path, milliseconds(0)), id));

  const ncclUniqueId other = random_id(7);
  comm::write_unique_id_file(path, other);  // replaces the old file
  CHECK(same(comm::read_unique_id_file(path, milliseconds(0)), other));

  const std::string raw_path = dir.file("raw.id");
  write_bytes(raw_path, std::string(id.internal, sizeof id.internal));
  CHECK(same(comm::read_unique_id_file(raw_path, milliseconds(0)), id));
}

TEST_CASE("unique id file: short, corrupt and truncated files are comm.unique_id naming the path") {
  const ScratchDir dir;
  const std::string hex = comm::unique_id_to_hex(random_id(8));
  const std::string path = dir.file("bad.id");
  std::string corrupt = hex;
  corrupt[200] = 'z';
  for (const std::string& contents : {std::string(100, '\x01'), hex.substr(0, 128), corrupt, std::string()}) {
    write_bytes(path, contents);
    const auto start = std::chrono::steady_clock::now();
    const std::string message = message_thrown([&] { (void)comm::read_unique_id_file(path, milliseconds(50)); });
    CHECK(message.find("[rule comm.unique_id]") != std::string::npos);
    CHECK(message.find(path) != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start >= milliseconds(50));  // read again until the timeout
  }
}

TEST_CASE("unique id file: a file that never appears is comm.unique_id_timeout; one that appears later is read") {
  const ScratchDir dir;
  const std::string path = dir.file("late.id");
  const auto start = std::chrono::steady_clock::now();
  const std::string message = message_thrown([&] { (void)comm::read_unique_id_file(path, milliseconds(100)); });
  CHECK(message.find("[rule comm.unique_id_timeout]") != std::string::npos);
  CHECK(message.find(path) != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start >= milliseconds(100));

  const ncclUniqueId id = random_id(9);
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    comm::write_unique_id_file(path, id);
  });
  const ncclUniqueId read = comm::read_unique_id_file(path, milliseconds(30000));
  writer.join();
  CHECK(same(read, id));
}

TEST_CASE("unique id file: an unwritable path is comm.unique_id_io, a negative timeout comm.timeout_range") {
  const ScratchDir dir;
  const std::string path = dir.file("no/such/dir/nccl.id");
  const std::string message = message_thrown([&] { comm::write_unique_id_file(path, random_id(10)); });
  CHECK(message.find("[rule comm.unique_id_io]") != std::string::npos);
  CHECK(message.find(path) != std::string::npos);
  CHECK(rule_thrown([&] { (void)comm::read_unique_id_file(dir.file("x"), milliseconds(-1)); }) == "comm.timeout_range");
  CHECK(rule_thrown([&] { (void)comm::read_unique_id_file(dir.path.string(), milliseconds(0)); }) ==
        "comm.unique_id_io");  // a directory: read fails with EISDIR
}
