// The format's building blocks against independent references: CRC-32C against the RFC 3720
// test vectors and its portable path; the safetensors header against the format's rules; the
// index reader's validation; the rule field lists (every field round-trips, a missing or extra
// one is a named error).
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "amsp/io/crc32c.hpp"
#include "amsp/io/index.hpp"
#include "amsp/io/rule_fields.hpp"
#include "amsp/io/safetensors.hpp"

namespace {

template <class F>
std::string rule_of(F&& f) {
  try {
    f();
  } catch (const amsp::error& e) {
    return e.rule();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("CRC-32C: RFC 3720 test vectors, the check value, and hardware == portable") {
  CHECK(amsp::io::crc32c(std::string_view("123456789")) == 0xE3069283u);
  std::vector<unsigned char> bytes(32, 0);
  CHECK(amsp::io::crc32c(bytes.data(), 32) == 0x8A9136AAu);
  std::fill(bytes.begin(), bytes.end(), 0xFF);
  CHECK(amsp::io::crc32c(bytes.data(), 32) == 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<unsigned char>(i);
  CHECK(amsp::io::crc32c(bytes.data(), 32) == 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<unsigned char>(31 - i);
  CHECK(amsp::io::crc32c(bytes.data(), 32) == 0x113FDB5Cu);
  std::mt19937 gen(5);
  std::vector<unsigned char> data(1000);
  for (auto& b : data) b = static_cast<unsigned char>(gen());
  for (std::size_t offset : {0, 1, 3, 7})
    for (std::size_t n : {0, 1, 7, 8, 9, 63, 500, 993}) {
      CAPTURE(offset);
      CAPTURE(n);
      CHECK(amsp::io::crc32c(data.data() + offset, n) == amsp::io::crc32c_portable(data.data() + offset, n));
      // incremental == one shot
      amsp::io::Crc32c c;
      c.update(data.data() + offset, n / 3).update(data.data() + offset + n / 3, n - n / 3);
      CHECK(c.value() == amsp::io::crc32c(data.data() + offset, n));
    }
}

TEST_CASE("safetensors header: length prefix, 8-byte alignment, offsets that tile the data") {
  std::vector<amsp::io::SafetensorsEntry> entries{{"a/0", "F32", {3, 5}, 0, 0}, {"b/0", "BF16", {7}, 0, 0}};
  const std::string header = amsp::io::encode_safetensors_header(entries, {{"format", "x"}});
  CHECK(header.size() % 8 == 0);
  std::uint64_t n = 0;
  std::memcpy(&n, header.data(), 8);  // little-endian host
  CHECK(n + 8 == header.size());
  CHECK(header[8] == '{');
  CHECK(entries[0].begin == 0);
  CHECK(entries[0].end == 60);
  CHECK(entries[1].begin == 60);
  CHECK(entries[1].end == 74);
  const auto parsed = amsp::io::parse_safetensors_header(std::string_view(header).substr(8), 74);
  REQUIRE(parsed.entries.size() == 2);
  CHECK(parsed.entries[1].name == "b/0");
  CHECK(parsed.entries[1].shape == std::vector<std::int64_t>{7});
  CHECK(*parsed.metadata_value("format") == "x");
  CHECK(parsed.data_start == header.size());
  // Violations, each ckpt.header.
  const auto bad = [](const std::string& json, std::uint64_t data) {
    return rule_of([&] { (void)amsp::io::parse_safetensors_header(json, data); });
  };
  CHECK(bad(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8) == "(no error)");
  CHECK(bad(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 12) == "ckpt.header");  // data not covered
  CHECK(bad(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8) == "ckpt.header");   // size != shape
  CHECK(bad(R"({"a":{"dtype":"X9","shape":[2],"data_offsets":[0,8]}})", 8) == "ckpt.header");    // dtype
  CHECK(bad(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12) == "ckpt.header"); // hole
  CHECK(bad(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8) == "ckpt.header");
  CHECK(bad(R"({"a":{"dtype":"F32","shape":[2]}})", 8) == "ckpt.header");
  CHECK(bad(R"([1,2])", 8) == "ckpt.header");
  CHECK(bad(R"({"a":)", 8) == "ckpt.header");
  CHECK(bad(R"({"__metadata__":{"k":1}})", 0) == "ckpt.header");
  CHECK(bad(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", 8) == "ckpt.header");
  CHECK(rule_of([] { (void)amsp::io::safetensors_header_length(std::string(8, '\xff'), 100); }) == "ckpt.header");
  CHECK(rule_of([] { (void)amsp::io::safetensors_header_length(std::string("\x10\0\0\0\0\0\0\0", 8), 20); }) ==
        "ckpt.header");
}

namespace {
amsp::io::Index small_index() {
  amsp::io::Index index;
  index.checkpoint_id = "abc";
  index.step = 3;
  index.mesh = "2x1";
  index.world_size = 2;
  index.plan = "p=1x1,g=1x1,os=2x1";
  index.os_layout = "even_split";
  index.param_dtype = "fp32";
  index.rule = "sgd";
  index.rows = {"master", "momentum_buffer"};
  index.files = {{"rank-00000.safetensors", 8 + 64 + 80, 72, 1234u}};
  index.tensors = {{"w", "b0", {2, 5}, amsp::io::rule_fields_to_json(amsp::ParamGroup{}),
                    {{0, 4, 0, 72, 1u}, {4, 6, 0, 72 + 32, 2u}}}};
  index.user_blobs = {{"", 0, 0}, {"user-rank-00001.bin", 3, 7u}};
  return index;
}
std::string index_text(const amsp::io::Index& index) { return amsp::to_json_string(amsp::io::to_json(index)); }
}  // namespace

TEST_CASE("index: round trip and every validation a corrupt index meets") {
  const amsp::io::Index index = small_index();
  const amsp::io::Index back = amsp::io::parse_index(index_text(index));
  CHECK(index_text(back) == index_text(index));
  const auto parse_rule = [](const amsp::io::Index& i) { return rule_of([&] { (void)amsp::io::parse_index(index_text(i)); }); };
  amsp::io::Index i = index;
  i.tensors[0].pieces[1].begin = 5;  // a hole
  CHECK(parse_rule(i) == "ckpt.index");
  i = index;
  i.tensors[0].pieces[1].count = 7;  // past numel
  CHECK(parse_rule(i) == "ckpt.index");
  i = index;
  i.tensors[0].pieces.pop_back();  // incomplete
  CHECK(parse_rule(i) == "ckpt.index");
  i = index;
  i.tensors[0].pieces[1].file = 1;  // no such file
  CHECK(parse_rule(i) == "ckpt.index");
  i = index;
  i.tensors[0].pieces[1].offset = 8 + 64 + 80 - 8;  // runs past the file
  CHECK(parse_rule(i) == "ckpt.index");
  i = index;
  i.files[0].name = "../escape";
  CHECK(parse_rule(i) == "ckpt.index");
  i = index;
  i.user_blobs.pop_back();
  CHECK(parse_rule(i) == "ckpt.index");
  i = index;
  i.tensors.push_back(i.tensors[0]);  // a tensor twice
  CHECK(parse_rule(i) == "ckpt.index");
  std::string text = index_text(index);
  text.replace(text.find("\"version\":1"), 11, "\"version\":2");
  CHECK(rule_of([&] { (void)amsp::io::parse_index(text); }) == "ckpt.version");
  CHECK(rule_of([] { (void)amsp::io::parse_index("{\"format\": 1}"); }) == "ckpt.index");
  CHECK(rule_of([] { (void)amsp::io::parse_index("not json"); }) == "ckpt.index");
  CHECK(rule_of([] { (void)amsp::io::parse_commit_marker("{}"); }) == "ckpt.incomplete");
}

TEST_CASE("rule fields: every hyperparameter round-trips; missing, extra or mistyped ones are named errors") {
  const auto round_trip = [](const auto& rule) {
    using Rule = std::remove_cvref_t<decltype(rule)>;
    const amsp::Json j = amsp::parse_json(amsp::to_json_string(amsp::io::rule_fields_to_json(rule)));
    return amsp::to_json_string(amsp::io::rule_fields_to_json(amsp::io::rule_from_json<Rule>(j))) ==
           amsp::to_json_string(amsp::io::rule_fields_to_json(rule));
  };
  const amsp::optim::AdamW adamw{.lr = 3.3e-4f, .beta1 = 0.85f, .beta2 = 0.97f, .eps = 1.5e-7f, .weight_decay = 0.1f};
  CHECK(round_trip(adamw));
  CHECK(round_trip(amsp::optim::Adam{.lr = 1e-3f, .weight_decay = 0.02f}));
  CHECK(round_trip(amsp::optim::SgdMomentum{.lr = 0.1f, .momentum = 0.8f, .dampening = 0.0f, .weight_decay = 1e-4f, .nesterov = true}));
  CHECK(round_trip(amsp::optim::Lion{.lr = 1e-4f, .beta1 = 0.95f, .beta2 = 0.98f, .weight_decay = 0.3f}));
  const amsp::optim::AdamW back = amsp::io::rule_from_json<amsp::optim::AdamW>(amsp::io::rule_fields_to_json(adamw));
  CHECK(back.lr == adamw.lr);
  CHECK(back.beta1 == adamw.beta1);
  CHECK(back.beta2 == adamw.beta2);
  CHECK(back.eps == adamw.eps);
  CHECK(back.weight_decay == adamw.weight_decay);
  amsp::Json j = amsp::io::rule_fields_to_json(adamw);
  j["extra"] = 1.0;
  CHECK(rule_of([&] { (void)amsp::io::rule_from_json<amsp::optim::AdamW>(j); }) == "ckpt.rule_mismatch");
  CHECK(rule_of([] { (void)amsp::io::rule_from_json<amsp::optim::AdamW>(amsp::Json::object()); }) == "ckpt.rule_mismatch");
  amsp::Json s = amsp::io::rule_fields_to_json(amsp::optim::SgdMomentum{});
  s["nesterov"] = 1.0;
  CHECK(rule_of([&] { (void)amsp::io::rule_from_json<amsp::optim::SgdMomentum>(s); }) == "ckpt.rule_mismatch");
  amsp::Json lr = amsp::io::rule_fields_to_json(adamw);
  lr["lr"] = -1.0;
  CHECK(rule_of([&] { (void)amsp::io::rule_from_json<amsp::optim::AdamW>(lr); }) == "optim.hyperparameter");
}
