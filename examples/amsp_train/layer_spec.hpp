#pragma once
// How the example's model describes its parameters to the engine: a list of layers (one bucket
// each), every layer a list of named tensors stored back to back in one flat fp32 buffer, in the
// order listed. LayerBuffers owns such per-layer buffers for code that has no engine (the local
// trainer, the tests).

#include <cstddef>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace amsp_train {

struct TensorSpec {
  std::string name;                ///< e.g. "fc1.weight"
  std::vector<std::size_t> shape;  ///< row-major, e.g. {in, out}

  [[nodiscard]] std::size_t numel() const {
    return std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>{});
  }
};

struct LayerSpec {
  std::string name;                 ///< e.g. "fc1"
  std::vector<TensorSpec> tensors;  ///< laid out contiguously in this order

  [[nodiscard]] std::size_t numel() const {
    std::size_t n = 0;
    for (const TensorSpec& t : tensors) n += t.numel();
    return n;
  }
};

/// Elements of all layers together.
[[nodiscard]] inline std::size_t parameter_count(std::span<const LayerSpec> layers) {
  std::size_t n = 0;
  for (const LayerSpec& layer : layers) n += layer.numel();
  return n;
}

/// One zero-initialised fp32 buffer per layer, sized from the layer specs.
class LayerBuffers {
public:
  explicit LayerBuffers(std::span<const LayerSpec> layers) {
    storage_.reserve(layers.size());
    for (const LayerSpec& layer : layers) storage_.emplace_back(layer.numel(), 0.0f);
    for (auto& buffer : storage_) {
      pointers_.push_back(buffer.data());
      const_pointers_.push_back(buffer.data());
    }
  }
  // The pointer tables point into storage_: copying would leave them aimed at the original.
  LayerBuffers(const LayerBuffers&) = delete;
  LayerBuffers& operator=(const LayerBuffers&) = delete;
  LayerBuffers(LayerBuffers&&) = default;
  LayerBuffers& operator=(LayerBuffers&&) = default;

  [[nodiscard]] std::size_t layer_count() const noexcept { return storage_.size(); }
  [[nodiscard]] std::span<float> layer(std::size_t l) { return storage_.at(l); }
  [[nodiscard]] std::span<const float> layer(std::size_t l) const { return storage_.at(l); }
  /// One pointer per layer, as CharMlp::forward/backward take them.
  [[nodiscard]] std::span<float* const> pointers() noexcept { return pointers_; }
  [[nodiscard]] std::span<const float* const> const_pointers() const noexcept { return const_pointers_; }

private:
  std::vector<std::vector<float>> storage_;
  std::vector<float*> pointers_;
  std::vector<const float*> const_pointers_;
};

}  // namespace amsp_train
