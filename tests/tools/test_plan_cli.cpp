#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "amsp/core/json.hpp"
#include "amsp_plan/plan_cli.hpp"

using namespace amsp;
using namespace amsp::planner;
using namespace amsp_plan;

namespace {
struct Run {
  int status;
  std::string out;
  std::string err;
};

Run run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = cli_main(args, out, err);
  return {status, out.str(), err.str()};
}

std::string usage_error(const std::vector<std::string>& args) {
  try {
    (void)parse_cli(args);
  } catch (const cli::usage_error& e) {
    CHECK(std::string(e.what()).starts_with("amsp-plan: "));
    return e.what();
  }
  FAIL("no usage error");
  return {};
}
}  // namespace

TEST_CASE("cli: parses options in both spellings") {
  const CliOptions o = parse_cli({"--model", "13b", "--mesh=8x16", "--gpu-memory", "40", "--seq", "2048",
                                  "--micro-batch=2", "--global-batch", "256", "--recompute", "--top", "3",
                                  "--mode", "paper", "--rank-by=comm", "--os-layout", "whole_tensor", "--bucket-mb", "50",
                                  "--units", "tensor", "--grad-bytes", "4",
                                  "--json"});
  CHECK(o.model == "13b");
  CHECK(o.mesh->ranks_per_node() == 8);
  CHECK(o.mesh->nodes() == 16);
  CHECK(*o.gpu_memory_gb == 40);
  CHECK(o.seq == 2048);
  CHECK(o.micro_batch == 2);
  CHECK(*o.global_batch == 256);
  CHECK(o.recompute);
  CHECK(o.top == 3);
  CHECK(o.mode == CommMode::paper);
  CHECK(o.rank_by == RankBy::comm);
  CHECK(o.schedule.bucket_bytes == 50e6);
  CHECK(o.json);
  const PlannerInputs in = planner_inputs(o);
  CHECK(in.workload.micro_batches == 1);  // 256 / (2 x 128)
  CHECK(in.cluster.gpu_memory_bytes == 40e9);
}

TEST_CASE("cli: usage errors name the option") {
  CHECK(usage_error({"--frobnicate"}).find("--frobnicate") != std::string::npos);
  CHECK(usage_error({"--seq"}).find("needs a value") != std::string::npos);
  CHECK(usage_error({"--seq", "4k"}).find("'4k'") != std::string::npos);
  CHECK(usage_error({"--seq", "0"}) == "amsp-plan: --seq '0': expected an integer >= 1");
  CHECK(usage_error({"--gpu-memory", "-80"}) == "amsp-plan: --gpu-memory '-80': expected a number > 0");
  CHECK(usage_error({"--efficiency", "1.5"}) == "amsp-plan: --efficiency '1.5': expected a number in (0, 1]");
  CHECK(usage_error({"--mode", "fast"}) == "amsp-plan: --mode 'fast': expected one of engine,paper");
  CHECK(usage_error({"--grad-bytes", "3"}).find("2,4") != std::string::npos);
  CHECK(usage_error({"--mesh", "3x"}).starts_with("amsp-plan: --mesh '3x': "));
  CHECK(usage_error({"--mesh", "3x"}).find("[rule factor.parse]") != std::string::npos);
  CHECK(usage_error({"--seq", "1", "--seq", "2"}) == "amsp-plan: --seq: given more than once");
  CHECK(usage_error({"--evaluate", "zero9", "--mesh", "8x4"}).starts_with("amsp-plan: --evaluate 'zero9': "));
  CHECK(usage_error({"--cluster", "dgx"}).find("'dgx'") != std::string::npos);
  CHECK(usage_error({"--json=yes"}).find("takes no value") != std::string::npos);
}

TEST_CASE("cli: bad inputs exit with status 2 and a message, never a crash") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--bogus"}, {"--model", "gpt"}, {"--mesh", "8by2"}, {"--mesh", "0x2"},
        {"--evaluate", "p=3x1,g=3x1,os=3x1"}, {"--evaluate", "zero9"}, {"--global-batch", "1000"},
        {"--profile", "/nonexistent.json"}, {"--efficiency", "2"}, {"--overlap-slowdown", "-1"}}) {
    const Run r = run(args);
    CHECK_MESSAGE(r.status == 2, args.front());
    CHECK(r.out.empty());
    CHECK(r.err.starts_with("amsp-plan: "));
    // The option when one option is wrong; a rule of the planner when options disagree.
    CHECK_MESSAGE((r.err.find(args.front()) != std::string::npos || r.err.find("[rule ") != std::string::npos), r.err);
  }
}

TEST_CASE("cli: --help documents every option") {
  const Run r = run({"--help"});
  CHECK(r.status == 0);
  for (const char* option :
       {"--model", "--mesh", "--gpu-memory", "--reserve", "--profile", "--seq", "--micro-batch", "--global-batch",
        "--recompute", "--no-flash-attention", "--cluster", "--peak-tflops", "--efficiency", "--overlap-slowdown",
        "--mode", "--os-layout", "--units", "--grad-bytes", "--bucket-mb", "--keep-gathered", "--gradient-buffers", "--rules", "--rank-by", "--top", "--evaluate",
        "--list", "--json", "--help", "Examples"})
    CHECK_MESSAGE(r.out.find(option) != std::string::npos, option);
}

TEST_CASE("cli: --list prints every valid plan once") {
  const Run r = run({"--list", "--mesh", "4x2"});
  CHECK(r.status == 0);
  std::istringstream lines(r.out);
  std::set<std::string> seen;
  for (std::string line; std::getline(lines, line);) {
    CHECK(is_valid(parse_plan(line, Mesh(4, 2)), Mesh(4, 2)));
    CHECK(seen.insert(line).second);
  }
  CHECK(seen.size() == enumerate_plans(Mesh(4, 2)).size());
}

TEST_CASE("cli: --json is an array, best first, with the documented fields") {
  const Run r = run({"--model", "7b", "--mesh", "8x4", "--top", "5", "--json"});
  REQUIRE(r.status == 0);
  const Json doc = parse_json(r.out);
  REQUIRE(doc.as_array().size() == 5);
  double previous = 0;
  for (const Json& e : doc.as_array()) {
    CHECK(is_valid(parse_plan(e.at("plan").as_string(), Mesh(8, 4)), Mesh(8, 4)));
    CHECK(e.at("memory_bytes").as_int() <= 80000000000LL);
    // The parts, named as the engine's MemoryReport names them, add up to the total.
    const Json& m = e.at("memory");
    double parts = 0;
    for (const char* key : {"params", "grads", "optimizer_states", "activations", "fp32_os_gradients", "gathered_params",
                            "gradient_staging", "reduction_buffers", "reserved"})
      parts += m.at(key).as_number();
    CHECK(m.at("buffers").as_number() == doctest::Approx(m.at("gathered_params").as_number() +
                                                         m.at("gradient_staging").as_number() +
                                                         m.at("reduction_buffers").as_number()));
    CHECK(static_cast<double>(e.at("memory_bytes").as_int()) == doctest::Approx(parts).epsilon(1e-9));
    CHECK(m.at("fp32_os_gradients").as_number() > 0);  // bf16 gradients by default
    CHECK(e.at("comm_seconds").is_object());
    CHECK(e.at("step_seconds").as_number() >= previous);
    previous = e.at("step_seconds").as_number();
    CHECK(e.at("mfu").as_number() > 0);
    CHECK(e.at("mfu").as_number() < 1);
  }
}

TEST_CASE("cli: --evaluate prices one plan; the table has aligned columns") {
  Run r = run({"--model", "7b", "--mesh", "8x4", "--evaluate", "zero3", "--json"});
  REQUIRE(r.status == 0);
  const Json doc = parse_json(r.out);
  REQUIRE(doc.as_array().size() == 1);
  CHECK(doc.as_array()[0].at("plan").as_string() == "p=8x4,g=8x4,os=8x4");
  CHECK(doc.as_array()[0].at("comm_seconds").contains("param_gather"));

  r = run({"--model", "7b", "--mesh", "8x4", "--evaluate", "amsp-7b"});
  CHECK(r.status == 0);
  CHECK(r.out.find("grad_replicas") != std::string::npos);
  CHECK(r.out.find("predicted MFU") != std::string::npos);

  r = run({"--model", "7b", "--mesh", "8x4", "--top", "3"});
  REQUIRE(r.status == 0);
  std::istringstream lines(r.out);
  std::vector<std::string> table;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && (line[0] == '#' || std::isdigit(static_cast<unsigned char>(line[0])))) table.push_back(line);
  REQUIRE(table.size() == 4);
  const auto column = table[0].find("memory GB");
  for (const std::string& row : table) {
    CHECK(row.size() > column);
    CHECK(row[column - 1] == ' ');
    CHECK(row[column] != ' ');
  }
}

TEST_CASE("cli: no plan fits -> status 1 and a message") {
  const Run r = run({"--model", "65b", "--mesh", "8x1", "--gpu-memory", "20"});
  CHECK(r.status == 1);
  CHECK(r.out.find("no valid plan fits") != std::string::npos);
}

TEST_CASE("cli: a profile times the shapes it has; the others are marked analytic") {
  const std::string path = "test_cli_profile.json";
  {
    std::ofstream out(path);
    out << R"({"format": "amsp-bandwidth-profile/1", "entries": [
      {"op": "reduce_scatter", "group": "4x1", "bytes": 1000, "seconds": 1e-6},
      {"op": "reduce_scatter", "group": "4x1", "bytes": 1000000000, "seconds": 1.0},
      {"op": "all_gather", "group": "4x1", "bytes": 1000, "seconds": 1e-6},
      {"op": "all_gather", "group": "4x1", "bytes": 1000000000, "seconds": 1.0}]})";
  }
  // amsp-7b on 4 x 2: RS and AG inside the node (profiled), AllReduce across nodes (analytic)
  const Run r = run({"--model", "h=256,layers=2,heads=4,ffn=512,vocab=1000", "--mesh", "4x2", "--profile", path,
                     "--evaluate", "amsp-7b", "--json"});
  std::remove(path.c_str());
  REQUIRE(r.status == 0);
  const Json e = parse_json(r.out).as_array().at(0);
  CHECK(e.at("comm_measured").at("grad_reduce_os").as_bool());
  CHECK(e.at("comm_measured").at("param_spread").as_bool());
  CHECK(!e.at("comm_measured").at("grad_replicas").as_bool());
  // 1 GB/s from the profile: a unit's buffer of 2Φ_i bytes takes 2Φ_i ns, except the 512-byte final
  // norm, below the smallest measured size, which takes that size's 1 µs. Units: embedding and head
  // 512000 bytes each, two layers of 1311744 bytes.
  CHECK(e.at("comm_seconds").at("grad_reduce_os").as_number() ==
        doctest::Approx((2 * 512000.0 + 2 * 1311744.0) / 1e9 + 1e-6));
}
