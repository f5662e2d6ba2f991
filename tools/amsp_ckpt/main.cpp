// amsp-ckpt: inspect amsp checkpoints (docs/checkpoints.md).
//   amsp-ckpt info DIR                          plan, mesh, rule, tensors, sizes
//   amsp-ckpt verify DIR                        read every piece and blob, check every checksum
//   amsp-ckpt export DIR OUT [--dtype bf16|fp32] the parameters alone as one safetensors file
//   amsp-ckpt diff DIR_A DIR_B                  max abs / rel difference per tensor and row
// Exit status: 0 success (diff: also when the checkpoints differ), 1 a damaged or mismatched
// checkpoint (the ckpt.* rule is printed), 2 bad usage (the message names the argument and rule).
//
// The argument parsing is minimal and local: the shared helper tools/common/cli_args.hpp was not on
// main when this tool was written.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"
#include "amsp/io/inspect.hpp"
#include "amsp/io/reader.hpp"

namespace {

constexpr const char* usage =
    "usage: amsp-ckpt info DIR\n"
    "       amsp-ckpt verify DIR\n"
    "       amsp-ckpt export DIR OUT.safetensors [--dtype bf16|fp32]\n"
    "       amsp-ckpt diff DIR_A DIR_B\n";

[[noreturn]] void usage_error(const std::string& message, const char* rule) {
  std::fprintf(stderr, "amsp-ckpt: %s [rule %s]\n%s", message.c_str(), rule, usage);
  std::exit(2);
}

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
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf("%s", usage);
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  amsp::dtype type = amsp::dtype::bf16;
  std::vector<std::string> positional;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--dtype") {
      if (command != "export") usage_error("--dtype applies to export only", "cli.unknown_option");
      if (i + 1 >= args.size()) usage_error("--dtype needs a value (bf16 or fp32)", "cli.missing_value");
      const std::string& v = args[++i];
      if (v != "bf16" && v != "fp32") usage_error("--dtype is '" + v + "' but must be bf16 or fp32", "cli.bad_value");
      type = v == "bf16" ? amsp::dtype::bf16 : amsp::dtype::fp32;
    } else if (args[i].starts_with("--")) {
      usage_error("unknown option '" + args[i] + "'", "cli.unknown_option");
    } else {
      positional.push_back(args[i]);
    }
  }
  const auto need = [&](std::size_t n) {
    if (positional.size() != n)
      usage_error(command + " takes " + std::to_string(n) + " path argument(s), got " + std::to_string(positional.size()),
                  "cli.arguments");
  };
  try {
    if (command == "info" || command == "verify") {
      need(1);
      return command == "info" ? info(positional[0]) : verify(positional[0]);
    }
    if (command == "export" || command == "diff") {
      need(2);
      return command == "export" ? export_params(positional[0], positional[1], type) : diff(positional[0], positional[1]);
    }
    usage_error("unknown command '" + command + "' (info, verify, export, diff)", "cli.command");
  } catch (const amsp::error& e) {
    std::fprintf(stderr, "amsp-ckpt %s: %s\n", command.c_str(), e.what());
    return 1;
  }
}
