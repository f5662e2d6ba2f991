// The corruption table: each way a checkpoint can be damaged or mismatched is its own named error
// on every rank, never a crash and never a silent load. Then the misuse rules: bad options, a second
// commit(), an export dtype, an operating-system refusal and a wrapped foreign failure.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>

#include "amsp/io/async_save.hpp"
#include "amsp/io/inspect.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/optim/sgd_momentum.hpp"
#include "amsp/sharding.hpp"
#include "io_harness.hpp"

namespace {

namespace fs = std::filesystem;
using amsp::test::Threads;
using AdamEngine = amsp::ShardedOptimizer<Threads, amsp::optim::AdamW>;

const amsp::Mesh corruption_mesh(2, 1);

/// Saves a 3-step checkpoint of the odd model under zero2 on 2x1 into `dir` (each rank a blob).
void save_checkpoint(const std::string& dir, std::vector<amsp::BucketSpec> model = amsp::test::odd_model()) {
  amsp::comm::run_on_threads(2, [&](Threads& comm) {
    AdamEngine opt(comm, corruption_mesh, amsp::parse_plan("zero2", corruption_mesh), amsp::optim::AdamW{}, model);
    amsp::test::set_initial_values(opt);
    if (model.size() == amsp::test::odd_model().size()) amsp::test::train(opt, comm.rank(), {}, 0, 3);
    amsp::io::save(opt, comm, dir, {.values = {}, .blob = {std::byte{1}, std::byte{2}, std::byte{3}}});
  });
}

/// The rule of the amsp::error `action` throws, or `done` when it returns.
template <class F>
std::string rule_or(const char* done, F&& action) {
  try {
    action();
    return done;
  } catch (const amsp::error& e) {
    return e.rule();
  }
}

/// The rule load() fails with; the same on both ranks.
template <class Rule = amsp::optim::AdamW>
std::string load_rule(const std::string& dir) {
  std::string rules[2];
  amsp::comm::run_on_threads(2, [&](Threads& comm) {
    amsp::ShardedOptimizer<Threads, Rule> opt(comm, corruption_mesh, amsp::parse_plan("zero3", corruption_mesh),
                                              Rule{}, amsp::test::odd_model());
    rules[comm.rank()] = rule_or("(loaded)", [&] { (void)amsp::io::load(opt, comm, dir); });
  });
  CHECK(rules[0] == rules[1]);
  return rules[0];
}

void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

struct Case {
  const char* name;
  std::function<void(const std::string& dir, const amsp::io::Index& index)> damage;
  const char* rule;
};

}  // namespace

TEST_CASE("corruption table: every damage is its named error on every rank") {
  const amsp::test::ScratchDir scratch;
  const std::string pristine = scratch / "pristine";
  const std::string other = scratch / "other";
  const std::string other_model = scratch / "other-model";
  save_checkpoint(pristine);
  save_checkpoint(other);
  save_checkpoint(other_model, {{"b", {{"w", {4, 4}, amsp::dtype::fp32}}}});
  REQUIRE(load_rule(pristine) == "(loaded)");
  const amsp::io::Index index = amsp::io::CheckpointReader(pristine).index();
  const auto file = [](const std::string& dir, const amsp::io::Index& i, int f) { return dir + "/" + i.files[static_cast<std::size_t>(f)].name; };
  const std::vector<Case> cases = {
      {"truncated shard file", [&](const std::string& d, const amsp::io::Index& i) {
         fs::resize_file(file(d, i, 1), fs::file_size(file(d, i, 1)) - 1); }, "ckpt.truncated"},
      {"shard file cut to its header", [&](const std::string& d, const amsp::io::Index& i) {
         fs::resize_file(file(d, i, 0), i.files[0].header_bytes); }, "ckpt.truncated"},
      {"flipped byte in data", [&](const std::string& d, const amsp::io::Index& i) {
         flip_byte(file(d, i, 0), i.tensors[0].pieces[0].offset + 5); }, "ckpt.checksum"},
      {"flipped byte in the last data byte", [&](const std::string& d, const amsp::io::Index& i) {
         flip_byte(file(d, i, 1), i.files[1].bytes - 1); }, "ckpt.checksum"},
      {"flipped byte in a header", [&](const std::string& d, const amsp::io::Index& i) {
         flip_byte(file(d, i, 1), 20); }, "ckpt.header_checksum"},
      {"flipped byte in the header length", [&](const std::string& d, const amsp::io::Index& i) {
         flip_byte(file(d, i, 0), 1); }, "ckpt.header_checksum"},
      {"flipped byte in a user blob", [&](const std::string& d, const amsp::io::Index& i) {
         flip_byte(d + "/" + i.user_blobs[1].file, 2); }, "ckpt.checksum"},
      {"missing shard file", [&](const std::string& d, const amsp::io::Index& i) { fs::remove(file(d, i, 0)); },
       "ckpt.missing_file"},
      {"missing commit marker", [&](const std::string& d, const amsp::io::Index&) { fs::remove(d + "/COMMIT"); },
       "ckpt.incomplete"},
      {"missing directory", [&](const std::string& d, const amsp::io::Index&) { fs::remove_all(d); }, "ckpt.not_found"},
      {"flipped byte in the index", [&](const std::string& d, const amsp::io::Index&) { flip_byte(d + "/index.json", 40); },
       "ckpt.index_mismatch"},
      {"truncated index", [&](const std::string& d, const amsp::io::Index&) {
         fs::resize_file(d + "/index.json", fs::file_size(d + "/index.json") - 2); }, "ckpt.index_mismatch"},
      {"index of another save (without its marker)", [&](const std::string& d, const amsp::io::Index&) {
         fs::copy_file(other + "/index.json", d + "/index.json", fs::copy_options::overwrite_existing); },
       "ckpt.index_mismatch"},
      {"index and marker of another save", [&](const std::string& d, const amsp::io::Index&) {
         fs::copy_file(other + "/index.json", d + "/index.json", fs::copy_options::overwrite_existing);
         fs::copy_file(other + "/COMMIT", d + "/COMMIT", fs::copy_options::overwrite_existing); },
       "ckpt.index_mismatch"},
      {"index and marker of another model", [&](const std::string& d, const amsp::io::Index&) {
         fs::copy_file(other_model + "/index.json", d + "/index.json", fs::copy_options::overwrite_existing);
         fs::copy_file(other_model + "/COMMIT", d + "/COMMIT", fs::copy_options::overwrite_existing); },
       "ckpt.model_mismatch"},
  };
  int n = 0;
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const std::string dir = scratch / ("case-" + std::to_string(n++));
    fs::copy(pristine, dir, fs::copy_options::recursive);
    c.damage(dir, index);
    CHECK(load_rule(dir) == c.rule);
  }
}

TEST_CASE("mismatches with the loading engine are named errors") {
  const amsp::test::ScratchDir scratch;
  save_checkpoint(scratch / "c");
  CHECK(load_rule<amsp::optim::SgdMomentum>(scratch / "c") == "ckpt.rule_mismatch");
  std::string rules[2];
  amsp::comm::run_on_threads(2, [&](Threads& comm) {
    auto model = amsp::test::odd_model();
    model[1].tensors[0].shape = {11, 5};  // same numel, other shape
    AdamEngine opt(comm, corruption_mesh, amsp::parse_plan("zero3", corruption_mesh), amsp::optim::AdamW{}, model);
    try {
      (void)amsp::io::load(opt, comm, scratch / "c");
    } catch (const amsp::error& e) {
      rules[comm.rank()] = e.rule();
    }
    try {
      amsp::io::save(opt, comm, scratch / "c", {}, {.overwrite = false});
    } catch (const amsp::error& e) {
      rules[comm.rank()] += " " + e.rule();
    }
  });
  CHECK(rules[0] == "ckpt.model_mismatch ckpt.exists");
  CHECK(rules[1] == "ckpt.model_mismatch ckpt.exists");
  amsp::comm::run_on_threads(2, [&](Threads& comm) {
    amsp::EngineOptions options;
    options.param_groups = {{"l0.bias", {.lr_scale = 1.0f, .weight_decay = false}}};
    AdamEngine opt(comm, corruption_mesh, amsp::parse_plan("zero3", corruption_mesh), amsp::optim::AdamW{},
                   amsp::test::odd_model(), options);
    rules[comm.rank()] = rule_or("(loaded)", [&] { (void)amsp::io::load(opt, comm, scratch / "c"); });
  });
  CHECK(rules[0] == "ckpt.param_group_mismatch");
  CHECK(rules[1] == "ckpt.param_group_mismatch");
  CHECK(load_rule(scratch / "c") == "(loaded)");  // the refused save left the checkpoint alone
}

TEST_CASE("save never replaces a directory that is not a checkpoint; a trailing slash names the same directory") {
  const amsp::test::ScratchDir scratch;
  fs::create_directories(scratch / "mine");
  std::ofstream(scratch / "mine/notes.txt") << "keep";
  std::string rules[2];
  amsp::comm::run_on_threads(2, [&](Threads& comm) {
    AdamEngine opt(comm, corruption_mesh, amsp::parse_plan("zero2", corruption_mesh), amsp::optim::AdamW{},
                   amsp::test::odd_model());
    rules[comm.rank()] = rule_or("", [&] { amsp::io::save(opt, comm, scratch / "mine"); });
    amsp::io::save(opt, comm, scratch / "slash/");
  });
  CHECK(rules[0] == "ckpt.exists");
  CHECK(rules[1] == "ckpt.exists");
  CHECK(fs::exists(scratch / "mine/notes.txt"));
  CHECK(load_rule(scratch / "slash") == "(loaded)");
  CHECK(!fs::exists(scratch / "slash/.tmp"));
}

TEST_CASE("max_piece_elements = 0 is ckpt.options on every rank, for save and save_async, before anything is written") {
  const amsp::test::ScratchDir scratch;
  std::string rules[2];
  amsp::comm::run_on_threads(2, [&](Threads& comm) {
    AdamEngine opt(comm, corruption_mesh, amsp::parse_plan("zero2", corruption_mesh), amsp::optim::AdamW{},
                   amsp::test::odd_model());
    const amsp::io::SaveOptions options{.max_piece_elements = 0};
    rules[comm.rank()] = rule_or("(saved)", [&] { amsp::io::save(opt, comm, scratch / "c", {}, options); }) + " " +
                         rule_or("(saved)", [&] { amsp::io::save_async(opt, comm, scratch / "c", {}, options).commit(); });
  });
  CHECK(rules[0] == "ckpt.options ckpt.options");
  CHECK(rules[1] == "ckpt.options ckpt.options");
  CHECK(fs::is_empty(scratch.path()));  // no checkpoint, no temporary directory
}

TEST_CASE("a second commit() of an asynchronous save is ckpt.async_commit on every rank") {
  const amsp::test::ScratchDir scratch;
  std::string rules[2];
  amsp::comm::run_on_threads(2, [&](Threads& comm) {
    AdamEngine opt(comm, corruption_mesh, amsp::parse_plan("zero2", corruption_mesh), amsp::optim::AdamW{},
                   amsp::test::odd_model());
    amsp::test::set_initial_values(opt);
    auto pending = amsp::io::save_async(opt, comm, scratch / "c");
    pending.commit();
    rules[comm.rank()] = rule_or("(committed twice)", [&] { pending.commit(); });
  });
  CHECK(rules[0] == "ckpt.async_commit");
  CHECK(rules[1] == "ckpt.async_commit");
  CHECK(load_rule(scratch / "c") == "(loaded)");  // the first commit published it
}

TEST_CASE("export to a dtype other than fp32 or bf16 is ckpt.export_dtype and writes nothing") {
  const amsp::test::ScratchDir scratch;
  save_checkpoint(scratch / "c");
  amsp::io::CheckpointReader reader(scratch / "c");
  const std::string out = scratch / "params.safetensors";
  const auto export_rule = [&](amsp::dtype type) -> std::string {
    return rule_or("(exported)", [&] { amsp::io::export_parameters(reader, out, type); });
  };
  CHECK(export_rule(amsp::dtype::fp16) == "ckpt.export_dtype");
  CHECK(export_rule(amsp::dtype::fp64) == "ckpt.export_dtype");
  CHECK(!fs::exists(out));
  CHECK(!fs::exists(out + ".tmp"));
  CHECK(export_rule(amsp::dtype::bf16) == "(exported)");
  CHECK(fs::exists(out));
}

TEST_CASE("an operating-system refusal is ckpt.io naming the path; so is a checkpoint path that names no directory") {
  const amsp::test::ScratchDir scratch;
  save_checkpoint(scratch / "c");
  std::ofstream(scratch / "plain") << "a regular file, not a directory";
  amsp::io::CheckpointReader reader(scratch / "c");
  const std::string out = scratch / "plain/params.safetensors";  // open() fails with ENOTDIR (also as root)
  std::string rule, message;
  try {
    amsp::io::export_parameters(reader, out, amsp::dtype::fp32);
    rule = "(exported)";
  } catch (const amsp::error& e) {
    rule = e.rule();
    message = e.what();
  }
  CHECK(rule == "ckpt.io");
  CHECK(message.find(out + ".tmp") != std::string::npos);
  std::string rules[2];
  amsp::comm::run_on_threads(2, [&](Threads& comm) {
    AdamEngine opt(comm, corruption_mesh, amsp::parse_plan("zero2", corruption_mesh), amsp::optim::AdamW{},
                   amsp::test::odd_model());
    for (const char* dir : {".", ""}) {
      rules[comm.rank()] += " " + rule_or("(saved)", [&] { amsp::io::save(opt, comm, dir); });
    }
  });
  CHECK(rules[0] == " ckpt.io ckpt.io");
  CHECK(rules[1] == " ckpt.io ckpt.io");
}

TEST_CASE("a directory the operating system cannot create is ckpt.io on every rank, naming the path") {
  const amsp::test::ScratchDir scratch;
  std::ofstream(scratch / "plain") << "a regular file, not a directory";
  const std::string dir = scratch / "plain/ckpt";  // rank 0's std::filesystem::create_directories fails
  std::string rules[2], messages[2];
  amsp::comm::run_on_threads(2, [&](Threads& comm) {
    AdamEngine opt(comm, corruption_mesh, amsp::parse_plan("zero2", corruption_mesh), amsp::optim::AdamW{},
                   amsp::test::odd_model());
    try {
      amsp::io::save(opt, comm, dir);
      rules[comm.rank()] = "(saved)";
    } catch (const amsp::error& e) {
      rules[comm.rank()] = e.rule();
      messages[comm.rank()] = e.what();
    }
    rules[comm.rank()] += " " + rule_or("(saved)", [&] { amsp::io::save_async(opt, comm, dir).commit(); });
  });
  CHECK(rules[0] == "ckpt.io ckpt.io");
  CHECK(rules[1] == "ckpt.io ckpt.io");
  CHECK(messages[0].find(scratch / "plain") != std::string::npos);  // rank 0: the system's reason and path
  CHECK(messages[1].find("rank 0") != std::string::npos);           // rank 1: names the rank that failed
}

TEST_CASE("a failure that is not an amsp::error is ckpt.failed on every rank") {
  std::string rules[2], messages[2];
  amsp::comm::run_on_threads(2, [&](Threads& comm) {
    try {
      amsp::io::agree(comm, [&] {
        if (comm.rank() == 1) throw std::runtime_error("out of something");
      });
      rules[comm.rank()] = "(agreed)";
    } catch (const amsp::error& e) {
      rules[comm.rank()] = e.rule();
      messages[comm.rank()] = e.what();
    }
  });
  CHECK(rules[0] == "ckpt.failed");
  CHECK(rules[1] == "ckpt.failed");
  CHECK(messages[1].find("out of something") != std::string::npos);  // rank 1: its own reason, wrapped
  CHECK(messages[0].find("rank 1") != std::string::npos);            // rank 0: names the rank that failed
}
