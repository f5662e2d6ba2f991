#pragma once
// Model descriptions for the planner: decoder-only LLaMA-style transformers, their parameter
// count per module (the unit the engine gathers and reduces), the built-in LLaMA-7B/13B/30B/65B,
// and the parser of `--model` strings.
//
// A layer holds attention q, k, v, o (h × h each; LLaMA-1 has as many key/value heads as query
// heads), the SwiGLU MLP gate, up (h × ffn) and down (ffn × h), and two RMSNorm weights (h). Around
// the layers: the token embedding (vocab × h), a final RMSNorm (h) and an untied lm head (vocab × h).
// No biases. LLaMA-7B comes out at 6,738,415,616 parameters, the published figure.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/sharding/mesh.hpp"

namespace amsp::planner {

/// One weight tensor of the model: the unit gathered and reduced by the engine schedule.
struct Module {
  std::string name;      ///< "layers.3.mlp.down", "embed", "lm_head", ...
  int layer = -1;        ///< its transformer layer, or -1 for the embedding, final norm and head
  std::int64_t params = 0;
};

/// The unit the engine gathers, reduces and spreads at once (one bucket of the engine).
enum class Granularity {
  layer,   ///< one unit per transformer layer, plus embedding, final norm and lm head (FSDP-style wrapping)
  tensor,  ///< one unit per weight tensor (the paper's "modules")
};

struct ModelSpec {
  std::string name;
  std::int64_t hidden = 0;  ///< h
  int layers = 0;           ///< L
  int heads = 0;            ///< a (attention heads; h must be a multiple)
  std::int64_t ffn = 0;     ///< MLP inner size
  std::int64_t vocab = 0;   ///< V

  /// The weights of one transformer layer, in forward order.
  [[nodiscard]] std::vector<Module> layer_modules(int layer) const {
    const std::string prefix = "layers." + std::to_string(layer) + ".";
    const std::int64_t h = hidden;
    return {{prefix + "input_norm", layer, h},   {prefix + "attn.q", layer, h * h},
            {prefix + "attn.k", layer, h * h},   {prefix + "attn.v", layer, h * h},
            {prefix + "attn.o", layer, h * h},   {prefix + "post_attn_norm", layer, h},
            {prefix + "mlp.gate", layer, h * ffn}, {prefix + "mlp.up", layer, h * ffn},
            {prefix + "mlp.down", layer, ffn * h}};
  }
  /// Every weight of the model in forward order: embedding, layers, final norm, lm head.
  [[nodiscard]] std::vector<Module> modules() const {
    std::vector<Module> all{{"embed", -1, vocab * hidden}};
    for (int l = 0; l < layers; ++l) {
      const auto layer = layer_modules(l);
      all.insert(all.end(), layer.begin(), layer.end());
    }
    all.push_back({"final_norm", -1, hidden});
    all.push_back({"lm_head", -1, vocab * hidden});
    return all;
  }
  /// The model cut into engine units, in forward order.
  [[nodiscard]] std::vector<Module> units(Granularity g) const {
    if (g == Granularity::tensor) return modules();
    std::vector<Module> all{{"embed", -1, embedding_params()}};
    for (int l = 0; l < layers; ++l) all.push_back({"layers." + std::to_string(l), l, params_per_layer()});
    all.push_back({"final_norm", -1, hidden});
    all.push_back({"lm_head", -1, embedding_params()});
    return all;
  }
  [[nodiscard]] std::int64_t params_per_layer() const { return 4 * hidden * hidden + 3 * hidden * ffn + 2 * hidden; }
  [[nodiscard]] std::int64_t embedding_params() const { return vocab * hidden; }
  /// Φ: every parameter (embedding and lm head counted separately: LLaMA does not tie them).
  [[nodiscard]] std::int64_t params() const {
    return layers * params_per_layer() + 2 * embedding_params() + hidden;
  }
};

/// Fails with rule planner.model unless every dimension is positive and h is a multiple of heads.
inline void validate(const ModelSpec& m) {
  check(m.hidden >= 1 && m.layers >= 1 && m.heads >= 1 && m.ffn >= 1 && m.vocab >= 1, "planner.model", "model '",
        m.name, "' needs positive h, layers, heads, ffn and vocab, got h=", m.hidden, ", layers=", m.layers,
        ", heads=", m.heads, ", ffn=", m.ffn, ", vocab=", m.vocab);
  check(m.hidden % m.heads == 0, "planner.model", "model '", m.name, "': hidden size ", m.hidden,
        " is not a multiple of the ", m.heads, " heads");
}

/// The LLaMA-1 models (Touvron et al. 2023, Table 2; ffn as in the released configs).
[[nodiscard]] inline const std::vector<ModelSpec>& llama_models() {
  static const std::vector<ModelSpec> models{{"llama-7b", 4096, 32, 32, 11008, 32000},
                                             {"llama-13b", 5120, 40, 40, 13824, 32000},
                                             {"llama-30b", 6656, 60, 52, 17920, 32000},
                                             {"llama-65b", 8192, 80, 64, 22016, 32000}};
  return models;
}

/// A model by name ("llama-7b", or just "7b"), or by its dimensions:
/// "h=4096,layers=32,heads=32,ffn=11008,vocab=32000" (keys in any order, each exactly once).
/// Errors use rule planner.model.
[[nodiscard]] inline ModelSpec parse_model(std::string_view text) {
  if (text.find('=') == std::string_view::npos) {
    for (const ModelSpec& m : llama_models())
      if (text == m.name || text == std::string_view(m.name).substr(6)) return m;
    fail("planner.model", "unknown model '", text,
         "': expected llama-7b, llama-13b, llama-30b, llama-65b or h=..,layers=..,heads=..,ffn=..,vocab=..");
  }
  ModelSpec m{std::string(text), 0, 0, 0, 0, 0};
  struct Field {
    std::string_view key;
    bool seen = false;
    int value = 0;
  };
  Field fields[] = {{"h"}, {"layers"}, {"heads"}, {"ffn"}, {"vocab"}};
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    start = end + 1;
    const std::size_t eq = item.find('=');
    check(eq != std::string_view::npos, "planner.model", "model '", text, "': item '", item, "' must read key=value");
    Field* field = nullptr;
    for (Field& f : fields)
      if (f.key == item.substr(0, eq)) field = &f;
    check(field != nullptr, "planner.model", "model '", text, "': unknown key '", item.substr(0, eq),
          "' (expected h, layers, heads, ffn, vocab)");
    check(!field->seen, "planner.model", "model '", text, "': key '", field->key, "' appears twice");
    field->seen = true;
    field->value = detail::parse_positive_int(item.substr(eq + 1), "planner.model", field->key);
  }
  for (const Field& f : fields) check(f.seen, "planner.model", "model '", text, "' lacks '", f.key, "='");
  m.hidden = fields[0].value;
  m.layers = fields[1].value;
  m.heads = fields[2].value;
  m.ffn = fields[3].value;
  m.vocab = fields[4].value;
  validate(m);
  return m;
}

}  // namespace amsp::planner
