#pragma once
// How a user's tensor type tells amsp where its elements are. Specialise amsp::tensor_traits<T>
// for your own tensor class (the model is fmt::formatter<T>); amsp ships specialisations for
// std::span<E> and for amsp::RawTensor<E> (a raw pointer plus an element count).
//
//   template <> struct amsp::tensor_traits<my::Tensor> {
//     static void* data(const my::Tensor& t) { return t.ptr(); }
//     static std::size_t numel(const my::Tensor& t) { return t.numel(); }
//     static amsp::dtype dtype(const my::Tensor& t) { return t.is_bf16() ? amsp::dtype::bf16 : amsp::dtype::fp32; }
//     static amsp::memory_kind space(const my::Tensor& t) { return amsp::memory_kind::host; }
//   };

#include <cstddef>
#include <span>
#include <type_traits>

#include "amsp/core/dtype.hpp"
#include "amsp/core/memory_space.hpp"

namespace amsp {

template <class T>
struct tensor_traits;  // no specialisation: the type is not a tensor amsp understands

/// A raw pointer plus element count, for C codebases that keep parameters in plain arrays.
template <element_type E, memory_space Space = HostSpace>
struct RawTensor {
  E* ptr = nullptr;
  std::size_t count = 0;
};

template <element_type E, memory_space Space>
struct tensor_traits<RawTensor<E, Space>> {
  static void* data(const RawTensor<E, Space>& t) { return const_cast<std::remove_const_t<E>*>(t.ptr); }
  static std::size_t numel(const RawTensor<E, Space>& t) { return t.count; }
  static amsp::dtype dtype(const RawTensor<E, Space>&) { return dtype_of_v<E>; }
  static memory_kind space(const RawTensor<E, Space>&) { return Space::kind; }
};

/// A std::span of elements is a host tensor.
template <element_type E, std::size_t Extent>
struct tensor_traits<std::span<E, Extent>> {
  static void* data(const std::span<E, Extent>& t) { return const_cast<std::remove_const_t<E>*>(t.data()); }
  static std::size_t numel(const std::span<E, Extent>& t) { return t.size(); }
  static amsp::dtype dtype(const std::span<E, Extent>&) { return dtype_of_v<E>; }
  static memory_kind space(const std::span<E, Extent>&) { return memory_kind::host; }
};

/// A type amsp can read and write through tensor_traits.
template <class T>
concept tensor_like = requires(const T& t) {
  { tensor_traits<std::remove_cvref_t<T>>::data(t) } -> std::convertible_to<void*>;
  { tensor_traits<std::remove_cvref_t<T>>::numel(t) } -> std::convertible_to<std::size_t>;
  { tensor_traits<std::remove_cvref_t<T>>::dtype(t) } -> std::convertible_to<amsp::dtype>;
  { tensor_traits<std::remove_cvref_t<T>>::space(t) } -> std::convertible_to<memory_kind>;
};

/// A type-erased view of any tensor_like value: what amsp stores once a user's tensor enters.
struct tensor_view {
  void* data = nullptr;
  std::size_t numel = 0;
  amsp::dtype type = amsp::dtype::fp32;
  memory_kind space = memory_kind::host;

  [[nodiscard]] std::size_t size_bytes() const { return numel * size_of(type); }
  /// The view as typed elements; fails if the dtype does not match E.
  template <element_type E>
  [[nodiscard]] std::span<E> as() const {
    check(type == dtype_of_v<E>, "tensor.dtype", "tensor holds ", name_of(type), " but was read as ",
          name_of(dtype_of_v<E>));
    return {static_cast<E*>(data), numel};
  }
};

template <tensor_like T>
[[nodiscard]] tensor_view view_of(const T& t) {
  using traits = tensor_traits<std::remove_cvref_t<T>>;
  return tensor_view{traits::data(t), traits::numel(t), traits::dtype(t), traits::space(t)};
}

}  // namespace amsp
