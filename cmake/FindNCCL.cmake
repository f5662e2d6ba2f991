# FindNCCL: NCCL ships no CMake package. Tries a config package first, then looks for nccl.h and
# libnccl next to the CUDA toolkit (or under NCCL_ROOT). Defines NCCL::NCCL.
find_package(NCCL CONFIG QUIET)
if(NOT TARGET NCCL::NCCL)
  set(_amsp_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR} /usr/local/cuda)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_amsp_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl HINTS ${_amsp_nccl_hints} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib64 lib)
  include(FindPackageHandleStandardArgs)
  find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR)
  if(NCCL_FOUND)
    add_library(NCCL::NCCL UNKNOWN IMPORTED)
    set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                                INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  endif()
  mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
endif()
