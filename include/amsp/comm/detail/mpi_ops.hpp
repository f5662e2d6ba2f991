#pragma once
// The MPI backend's conversions (amsp/comm/mpi.hpp): MPI error codes to amsp::error (rule comm.mpi),
// element counts to MPI's int counts, amsp's element types to MPI datatypes, the sum and avg
// reductions for them (bf16 and fp16 move as 16-bit words and are summed by a custom MPI_Op in
// fp32, freed at MPI_Finalize).

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"

namespace amsp::comm::detail {

inline void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) [[likely]] return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("comm.mpi", call, " failed: ", std::string(text, static_cast<std::size_t>(length)));
}

[[nodiscard]] inline int mpi_count(std::size_t count, std::string_view what) {
  check(count <= static_cast<std::size_t>(INT_MAX), "comm.count_range", what, " of ", count,
        " elements exceeds MPI's int counts (", INT_MAX, ")");
  return static_cast<int>(count);
}

template <class T>
[[nodiscard]] MPI_Datatype mpi_datatype() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else return MPI_UINT16_T;  // bf16, fp16: moved as 16-bit words, reduced by half_sum_op<T>()
}

// inout[i] = in[i] + inout[i], added in fp32 and rounded once to T.
template <class T>
void half_sum(void* in, void* inout, int* length, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *length; ++i) b[i] = T::from_float(a[i].to_float() + b[i].to_float());
}

// Frees an MPI_Op when MPI_Finalize deletes the attribute holding it (MPI_COMM_SELF's attributes
// are deleted first thing in MPI_Finalize, while freeing is still allowed).
inline int free_op_attribute(MPI_Comm, int, void* op, void*) {
  MPI_Op handle = *static_cast<MPI_Op*>(op);
  return MPI_Op_free(&handle);
}

template <class T>
[[nodiscard]] MPI_Op mpi_sum_op() {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return MPI_SUM;
  } else {
    static MPI_Op op = [] {
      MPI_Op created{};
      check_mpi(MPI_Op_create(&half_sum<T>, /*commute=*/1, &created), "MPI_Op_create");
      return created;
    }();
    static const bool freed_at_finalize = [] {
      int key = MPI_KEYVAL_INVALID;
      check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &free_op_attribute, &key, nullptr),
                "MPI_Comm_create_keyval");
      check_mpi(MPI_Comm_set_attr(MPI_COMM_SELF, key, &op), "MPI_Comm_set_attr");
      return true;
    }();
    (void)freed_at_finalize;
    return op;
  }
}

// The division by n that turns MPI_SUM into avg, in the accumulation type, rounded once.
template <class T>
void divide_by(T* data, std::size_t count, int n) {
  for (std::size_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) data[i] /= static_cast<T>(n);
    else data[i] = T::from_float(data[i].to_float() / static_cast<float>(n));
  }
}

}  // namespace amsp::comm::detail
