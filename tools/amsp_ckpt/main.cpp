// amsp-ckpt: inspect amsp checkpoints (docs/checkpoints.md).
//   amsp-ckpt info DIR                          plan, mesh, rule, tensors, sizes
//   amsp-ckpt verify DIR                        read every piece and blob, check every checksum
//   amsp-ckpt export DIR OUT [--dtype bf16|fp32] the parameters alone as one safetensors file
//   amsp-ckpt diff DIR_A DIR_B                  max abs / rel difference per tensor and row
// Exit status: 0 success (diff: also when the checkpoints differ), 1 a damaged or mismatched
// checkpoint (the ckpt.* rule is printed), 2 bad usage (the message names the argument and rule).
// Arguments through the shared helper tools/common/cli_args.hpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"
#include "amsp/io/inspect.hpp"
#include "amsp/io/reader.hpp"
#include "common/cli_args.hpp"

namespace {

constexpr const char* usage =
    "Commands:\n"
    "       amsp-ckpt info DIR\n"
    "       amsp-ckpt verify DIR\n"
    "       amsp-ckpt export DIR OUT.safetensors [--dtype bf16|fp32]\n"
    "       amsp-ckpt diff DIR_A DIR_B\n";

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int info(const std::string& dir) {
  amsp::io::CheckpointReader reader(dir);
  const amsp::io::Index& x = reader.index();
  std::printf("checkpoint   %s (id %s, format version %lld)\n", dir.c_str(), x.checkpoint_id.c_str(),
              static_cast<long long>(amsp::io::checkpoint_format_version));
  std::printf("step         %lld\n", static_cast<long long>(x.step));
  std::printf("saved on     mesh %s (%d ranks), plan %s, OS layout %s, parameters %s\n", x.mesh.c_str(), x.world_size,
              x.plan.c_str(), x.os_layout.c_str(), x.param_dtype.c_str());
  std::printf("rule         %s %s\n", x.rule.c_str(), amsp::to_json_string(x.hyperparameters).c_str());
  std::string rows;
  for (const std::string& r : x.rows) rows += (rows.empty() ? "" : ", ") + r;
  std::printf("rows         %s (F32)\n", rows.c_str());
  std::uint64_t file_bytes = 0;
  for (const amsp::io::IndexFile& f : x.files) file_bytes += f.bytes;
  std::printf("files        %zu shard files, %llu bytes\n", x.files.size(), static_cast<unsigned long long>(file_bytes));
  for (const auto& [k, v] : x.user_values) std::printf("user         %s = %s\n", k.c_str(), v.c_str());
  std::printf("\n%-32s %-16s %12s %7s %14s  %s\n", "tensor", "shape", "elements", "pieces", "bytes", "group");
  std::uint64_t elements = 0;
  for (const amsp::io::IndexTensor& t : x.tensors) {
    const auto n = static_cast<std::uint64_t>(t.numel());
    elements += n;
    std::printf("%-32s %-16s %12llu %7zu %14llu  %s\n", t.name.c_str(), shape_text(t.shape).c_str(),
                static_cast<unsigned long long>(n), t.pieces.size(),
                static_cast<unsigned long long>(n * x.row_set_bytes()), amsp::to_json_string(t.group).c_str());
  }
  std::printf("%-32s %-16s %12llu %7s %14llu\n", "total", "", static_cast<unsigned long long>(elements), "",
              static_cast<unsigned long long>(elements * x.row_set_bytes()));
  return 0;
}

int verify(const std::string& dir) {
  amsp::io::CheckpointReader reader(dir);
  std::size_t pieces = 0;
  for (const amsp::io::IndexTensor& t : reader.index().tensors) pieces += t.pieces.size();
  const std::uint64_t bytes = amsp::io::verify_checkpoint(reader);
  std::printf("OK: %zu pieces in %zu files, %llu bytes, every CRC-32C matches\n", pieces, reader.index().files.size(),
              static_cast<unsigned long long>(bytes));
  return 0;
}

int export_params(const std::string& dir, const std::string& out, amsp::dtype type) {
  amsp::io::CheckpointReader reader(dir);
  amsp::io::export_parameters(reader, out, type);
  std::printf("wrote %zu tensors (%s) to %s\n", reader.index().tensors.size(), std::string(amsp::name_of(type)).c_str(),
              out.c_str());
  return 0;
}

int diff(const std::string& a, const std::string& b) {
  amsp::io::CheckpointReader ra(a), rb(b);
  std::vector<std::string> only;
  const auto differences = amsp::io::diff_checkpoints(ra, rb, &only);
  std::printf("%-32s %-12s %14s %14s\n", "tensor", "row", "max_abs", "max_rel");
  double worst = 0;
  for (const amsp::io::TensorDifference& d : differences) {
    std::printf("%-32s %-12s %14.6g %14.6g\n", d.tensor.c_str(), d.row.c_str(), d.max_abs, d.max_rel);
    worst = std::max(worst, d.max_abs);
  }
  for (const std::string& name : only) std::printf("%-32s only in one checkpoint\n", name.c_str());
  std::printf("steps %lld and %lld; largest absolute difference %g\n", static_cast<long long>(ra.index().step),
              static_cast<long long>(rb.index().step), worst);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return amsp::cli::guarded_main("amsp-ckpt", std::cerr, [&]() -> int {
    amsp::cli::Args args("amsp-ckpt", "amsp-ckpt: inspect, verify, export and compare amsp checkpoints", argc, argv);
    const std::optional<amsp::dtype> type = args.optional_value<amsp::dtype>(
        "--dtype", "bf16|fp32", "export only: dtype of the exported parameters (default bf16)",
        [](std::string_view s) {
          if (s == "bf16") return amsp::dtype::bf16;
          if (s == "fp32") return amsp::dtype::fp32;
          throw amsp::cli::usage_error("expected one of bf16,fp32");
        });
    const std::optional<std::string> command = args.positional("COMMAND", "info | verify | export | diff");
    std::vector<std::string> paths;
    for (const auto& [metavar, help] : {std::pair{"DIR", "checkpoint directory"},
                                        std::pair{"DIR_B|OUT", "diff: second checkpoint; export: output file"}})
      if (const std::optional<std::string> p = args.positional(metavar, help)) paths.push_back(*p);
    args.epilog(usage);
    if (args.finish()) {
      std::cout << args.help();
      return 0;
    }
    const auto need = [&](std::size_t n) {
      if (paths.size() != n)
        throw amsp::cli::usage_error("amsp-ckpt: " + *command + " takes " + std::to_string(n) + " path(s), got " +
                                     std::to_string(paths.size()) + " [rule cli.arguments]");
    };
    if (!command) throw amsp::cli::usage_error("amsp-ckpt: missing COMMAND (info, verify, export, diff)");
    if (type && *command != "export")
      throw amsp::cli::usage_error("amsp-ckpt: --dtype applies to export only, not to " + *command);
    // A damaged or mismatched checkpoint is exit status 1 (the program ran, the data is bad);
    // guarded_main keeps 2 for bad usage.
    try {
      if (*command == "info" || *command == "verify") {
        need(1);
        return *command == "info" ? info(paths[0]) : verify(paths[0]);
      }
      if (*command == "export" || *command == "diff") {
        need(2);
        return *command == "export" ? export_params(paths[0], paths[1], type.value_or(amsp::dtype::bf16))
                                    : diff(paths[0], paths[1]);
      }
    } catch (const amsp::error& e) {
      std::fprintf(stderr, "amsp-ckpt %s: %s\n", command->c_str(), e.what());
      return 1;
    }
    throw amsp::cli::usage_error("amsp-ckpt: unknown command '" + *command + "' (info, verify, export, diff)");
  });
}
