// Every bad input named: each command-line program is run with every value option missing its
// value, with malformed and out-of-range values, unknown options, and files that do not exist,
// are empty, are not JSON or are JSON of the wrong shape. Each must exit with status 2 (amsp-ckpt:
// 1 for an unreadable checkpoint, its documented status) and a message naming the option (or
// file) and the rule, never a crash, a sanitizer report, an uncaught exception or a silent
// default. The programs come from the environment (AMSP_PLAN, AMSP_PROFILE, AMSP_CKPT,
// AMSP_TRAIN, set by CMake); one that is not built is reported and skipped.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct Outcome {
  int status = -1;  ///< exit status, or 128 + signal
  std::string output;
};

std::string quoted(const std::string& s) {
  std::string q(1, '\'');
  for (char c : s) {
    if (c == '\'') q.append("'\\''");
    else q.push_back(c);
  }
  q.push_back('\'');
  return q;
}

Outcome run(const std::string& program, const std::vector<std::string>& args) {
  std::string command = "timeout 60 ";
  command.append(quoted(program));
  for (const std::string& a : args) {
    command.push_back(' ');
    command.append(quoted(a));
  }
  command.append(" </dev/null 2>&1");
  Outcome out;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) out.output.append(buffer.data(), n);
  const int raw = pclose(pipe);
  out.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return out;
}

/// One row: the arguments, and what the message must contain (the option or file; a fragment of
/// the rule).
struct Row {
  std::vector<std::string> args;
  std::vector<std::string> names;
};

void check_rows(const char* env, const std::vector<Row>& rows, int status = 2) {
  const char* program = std::getenv(env);
  if (program == nullptr || *program == '\0') {
    MESSAGE(env << " is not set: that program is not built here; its rows are skipped");
    return;
  }
  for (const Row& row : rows) {
    const Outcome out = run(program, row.args);
    std::string shown;
    for (const std::string& a : row.args) shown += " " + a;
    CAPTURE(shown);
    CAPTURE(out.output);
    CHECK(out.status == status);
    for (const std::string& name : row.names) CHECK(out.output.find(name) != std::string::npos);
    for (const char* bad : {"terminate called", "Sanitizer", "Aborted", "core dumped", "Segmentation"})
      CHECK(out.output.find(bad) == std::string::npos);
  }
}

/// Files of every bad kind, in a fresh directory.
struct BadFiles {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("amsp_bad_input_" + std::to_string(::getpid()));
  std::string missing = (dir / "does_not_exist.json").string();
  std::string empty = (dir / "empty.json").string();
  std::string not_json = (dir / "not_json.json").string();
  std::string wrong_shape = (dir / "wrong_shape.json").string();
  std::string wrong_entry = (dir / "wrong_entry.json").string();
  BadFiles() {
    std::filesystem::create_directories(dir);
    std::ofstream(empty).flush();
    std::ofstream(not_json) << "this is not JSON {";
    std::ofstream(wrong_shape) << "[1, 2, 3]";
    std::ofstream(wrong_entry) << R"({"format": "amsp-bandwidth-profile/1", "entries": [{"op": "all_gather", "group": "2x1"}]})";
  }
  ~BadFiles() { std::filesystem::remove_all(dir); }
};

/// Fortune directories for amsp-train's --fortune-dir, holding the files it reads (text_data.hpp):
/// `good` has 200 short quotations in its first file (about 10 go to validation, about 200 bytes),
/// `empty` only empty files.
struct FortuneDirs {
  std::filesystem::path good, empty;
  explicit FortuneDirs(const std::filesystem::path& dir) : good(dir / "fortunes"), empty(dir / "fortunes_empty") {
    for (const std::filesystem::path& d : {good, empty}) {
      std::filesystem::create_directories(d);
      for (const char* name : {"cookie", "definitions", "education", "food", "humorists", "kids", "law", "literature",
                               "love", "medicine", "miscellaneous", "people", "platitudes", "politics", "science",
                               "sports", "wisdom", "work"})
        std::ofstream(d / name).flush();
    }
    std::ofstream cookie(good / "cookie");
    for (int i = 0; i < 200; ++i) cookie << "Quotation number " << i << ".\n%\n";
  }
};

/// amsp-train's arguments for a tiny run on one rank reading `fortune_dir`, then `more`.
std::vector<std::string> tiny_run(const std::filesystem::path& fortune_dir, const std::vector<std::string>& more) {
  std::vector<std::string> args{"--fortune-dir", fortune_dir.string(), "--mesh", "1x1", "--plan", "ddp", "--width",
                                "8", "--heads", "1", "--layers", "1", "--global-batch", "1", "--steps", "1",
                                "--eval-windows", "1", "--sample-bytes", "0", "--quiet"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::vector<Row> missing_values(const std::vector<std::string>& options) {
  std::vector<Row> rows;
  for (const std::string& o : options) rows.push_back({{o}, {o}});
  return rows;
}

}  // namespace

TEST_CASE("amsp-plan: every bad input exits 2 naming the option and the rule") {
  const BadFiles files;
  std::vector<Row> rows = missing_values({"--model", "--seq", "--micro-batch", "--global-batch", "--cluster", "--mesh",
                                          "--gpu-memory", "--reserve", "--peak-tflops", "--efficiency",
                                          "--overlap-slowdown", "--profile", "--mode", "--os-layout", "--units",
                                          "--grad-bytes", "--bucket-mb", "--rules", "--rank-by", "--top", "--evaluate"});
  const std::vector<Row> table{
      {{"--frobnicate"}, {"unknown option '--frobnicate'"}},
      {{"positional"}, {"positional"}},
      {{"--model", "llama-1b"}, {"--model", "llama-1b"}},
      {{"--model", "h=4096,layers=0"}, {"--model"}},
      {{"--seq", "abc"}, {"--seq", "abc"}},
      {{"--seq", "0"}, {"--seq", ">= 1"}},
      {{"--seq", "-5"}, {"--seq"}},
      {{"--seq", "99999999999999999999999"}, {"--seq"}},
      {{"--micro-batch", "1.5"}, {"--micro-batch"}},
      {{"--global-batch", "x"}, {"--global-batch"}},
      {{"--cluster", "moon"}, {"--cluster", "moon"}},
      {{"--mesh", "3x"}, {"--mesh", "factor.parse"}},
      {{"--mesh", "0x1"}, {"--mesh"}},
      {{"--mesh", "77777717x77770"}, {"--mesh", "more than"}},
      {{"--gpu-memory", "-1"}, {"--gpu-memory"}},
      {{"--gpu-memory", "nan"}, {"--gpu-memory"}},
      {{"--gpu-memory", "inf"}, {"--gpu-memory"}},
      {{"--reserve", "-1"}, {"--reserve"}},
      {{"--peak-tflops", "0"}, {"--peak-tflops"}},
      {{"--efficiency", "abc"}, {"--efficiency"}},
      {{"--overlap-slowdown", "x"}, {"--overlap-slowdown"}},
      {{"--mode", "fast"}, {"--mode", "fast"}},
      {{"--os-layout", "diagonal"}, {"--os-layout", "diagonal"}},
      {{"--units", "atoms"}, {"--units"}},
      {{"--grad-bytes", "3"}, {"--grad-bytes"}},
      {{"--bucket-mb", "0"}, {"--bucket-mb"}},
      {{"--rules", "mine"}, {"--rules"}},
      {{"--rank-by", "luck"}, {"--rank-by"}},
      {{"--top", "0"}, {"--top"}},
      {{"--evaluate", "p=3x1,g=1x1,os=1x1"}, {"p=3x1"}},
      {{"--evaluate", "nonsense"}, {"nonsense"}},
      {{"--json=yes"}, {"--json"}},
      {{"--seq", "1", "--seq", "2"}, {"--seq"}},
      {{"--profile", files.missing}, {"--profile", files.missing}},
      {{"--profile", files.empty}, {"--profile"}},
      {{"--profile", files.not_json}, {"--profile"}},
      {{"--profile", files.wrong_shape}, {"--profile", "planner.profile"}},
      {{"--profile", files.wrong_entry}, {"--profile", "entry 0"}},
  };
  rows.insert(rows.end(), table.begin(), table.end());
  check_rows("AMSP_PLAN", rows);
}

TEST_CASE("amsp-profile: every bad input exits 2 naming the option and the rule") {
  const BadFiles files;
  const std::string under_file = files.empty + "/profile.json";  // a path under a regular file: root cannot write it
  std::vector<Row> rows = missing_values({"--backend", "--mesh", "--out", "--ops", "--groups", "--sizes", "--plans",
                                          "--max-iterations", "--gap-us"});
  const std::vector<Row> table{
      {{"--frobnicate"}, {"unknown option '--frobnicate'"}},
      {{"--backend", "carrier-pigeon"}, {"--backend", "carrier-pigeon"}},
      {{"--mesh", "4y2"}, {"--mesh", "factor.parse"}},
      {{"--mesh", "0x2"}, {"--mesh"}},
      {{"--ops", "all_gather,teleport"}, {"--ops", "teleport"}},
      {{"--ops", ""}, {"--ops"}},
      {{"--groups", "3x"}, {"--groups"}},
      {{"--sizes", "0"}, {"--sizes"}},
      {{"--sizes", "1024,abc"}, {"--sizes", "abc"}},
      {{"--sizes", "-1"}, {"--sizes"}},
      {{"--mesh", "2x1", "--mesh", "4x1"}, {"--mesh"}},
      {{"--mesh", "2x1", "--plans", "teleport"}, {"--plans", "teleport", "plan."}},
      {{"--mesh", "2x1", "--plans", "ddp;zero3;p=4x1,g=4x1,os=4x1"}, {"--plans", "p=4x1"}},
      {{"--max-iterations", "1"}, {"--max-iterations"}},
      {{"--max-iterations", "many"}, {"--max-iterations", "many"}},
      {{"--gap-us", "-1"}, {"--gap-us"}},
      {{"--gap-us", "soon"}, {"--gap-us", "soon"}},
      {{"--mpi-check-calls", "maybe"}, {"--mpi-check-calls", "maybe"}},
      {{"--mesh", "2x1", "--ops", "broadcast", "--sizes", "1024", "--max-iterations", "2", "--out", under_file},
       {under_file, "profile.write"}},
  };
  rows.insert(rows.end(), table.begin(), table.end());
  check_rows("AMSP_PROFILE", rows);
}

TEST_CASE("amsp-ckpt: bad usage exits 2; a missing or unreadable checkpoint exits 1 naming its rule") {
  const BadFiles files;
  check_rows("AMSP_CKPT", {
                              {{}, {"usage"}},
                              {{"frobnicate", "x"}, {"frobnicate"}},
                              {{"info"}, {"info"}},
                              {{"diff", "a"}, {"diff"}},
                              {{"export", "a"}, {"export"}},
                              {{"export", "a", "b", "--dtype", "fp8"}, {"--dtype", "fp8"}},
                              {{"export", "a", "b", "--dtype"}, {"--dtype"}},
                          });
  // An empty directory, one whose index is empty, not JSON, or JSON of the wrong shape.
  const std::filesystem::path bad = files.dir / "ckpt";
  std::filesystem::create_directories(bad);
  std::vector<Row> unreadable{{{"info", files.missing}, {"ckpt."}}, {{"verify", (files.dir / "ckpt").string()}, {"ckpt."}}};
  for (const std::string& text : {std::string(), std::string("not JSON {"), std::string("[1, 2]"),
                                  std::string(R"({"format": "amsp-checkpoint", "version": 1})")}) {
    std::ofstream(bad / "index.json") << text;
    std::ofstream(bad / "COMMIT") << text;
    unreadable.push_back({{"verify", bad.string()}, {"ckpt."}});
  }
  check_rows("AMSP_CKPT", unreadable, 1);
}

TEST_CASE("amsp-train: every bad input exits 2 naming the option and the rule") {
  std::vector<Row> rows = missing_values({"--plan", "--mesh", "--backend", "--steps", "--micro-batches",
                                          "--global-batch", "--context", "--width", "--heads", "--layers", "--lr",
                                          "--warmup", "--min-lr-ratio", "--weight-decay", "--max-grad-norm",
                                          "--os-layout", "--eval-every", "--eval-windows", "--sample-bytes", "--seed",
                                          "--fortune-dir", "--log-json", "--mpi-check-calls"});
  const std::vector<Row> table{
      {{"--frobnicate"}, {"--frobnicate"}},
      {{"--steps", "abc"}, {"--steps"}},
      {{"--steps", "0"}, {"--steps"}},
      {{"--steps", "-3"}, {"--steps"}},
      {{"--micro-batches", "0"}, {"--micro-batches"}},
      {{"--lr", "x"}, {"--lr"}},
      {{"--lr", "nan"}, {"--lr"}},
      {{"--min-lr-ratio", "2"}, {"--min-lr-ratio"}},
      {{"--backend", "carrier-pigeon"}, {"--backend", "carrier-pigeon"}},
      {{"--os-layout", "diagonal"}, {"diagonal"}},
      {{"--mpi-check-calls", "yes"}, {"--mpi-check-calls", "yes"}},
      {{"--plan", "zero9", "--steps", "1"}, {"zero9"}},
      {{"--mesh", "3x", "--steps", "1"}, {"--mesh", "factor.parse"}},
      {{"--width", "64", "--heads", "5", "--steps", "1"}, {"head"}},
      {{"--seed", "99999999999999999999999"}, {"--seed"}},
  };
  rows.insert(rows.end(), table.begin(), table.end());
  check_rows("AMSP_TRAIN", rows);
}

TEST_CASE("amsp-train: bad data, output paths and run settings exit 2 naming the rule") {
  const char* program = std::getenv("AMSP_TRAIN");
  if (program == nullptr || *program == '\0') {
    MESSAGE("AMSP_TRAIN is not set: amsp-train is not built here; its rows are skipped");
    return;
  }
  const BadFiles files;
  const FortuneDirs fortunes(files.dir);
  const std::string log_path = files.empty + "/log.jsonl";  // a path under a regular file: root cannot write it
  const std::string checkpoint = (files.dir / "train_checkpoint").string();
  // A checkpoint after step 1, for --resume with nothing left to train.
  const Outcome saved = run(program, tiny_run(fortunes.good, {"--checkpoint-dir", checkpoint}));
  CAPTURE(saved.output);
  REQUIRE(saved.status == 0);
  std::vector<Row> rows{
      {{"--fortune-dir", files.missing}, {files.missing, "data.missing_file"}},
      {tiny_run(fortunes.empty, {}), {"training text (0 bytes)", "data.too_short"}},
      {tiny_run(fortunes.good, {"--context", "1000"}), {"validation text", "data.too_short"}},
      {tiny_run(fortunes.good, {"--log-json", log_path}), {"--log-json", log_path, "cli.log_json"}},
      {tiny_run(fortunes.good, {"--compute-turns", "3"}), {"--compute-turns 3", "cli.compute_turns"}},
      {tiny_run(fortunes.good, {"--resume", checkpoint}), {checkpoint, "--steps 1", "example.resume"}},
  };
  // --backend mpi where amsp-train was built without MPI (AMSP_TRAIN_MPI, set by CMake).
  const char* mpi = std::getenv("AMSP_TRAIN_MPI");
  if (mpi != nullptr && std::string(mpi) == "0")
    rows.push_back({tiny_run(fortunes.good, {"--backend", "mpi"}), {"--backend mpi", "cli.backend"}});
  else
    MESSAGE("amsp-train has MPI (AMSP_TRAIN_MPI is not 0): the row of --backend mpi without MPI is skipped");
  check_rows("AMSP_TRAIN", rows);
}
