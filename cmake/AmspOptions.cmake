# Warning and sanitizer flags for amsp's own targets (never forced on consumers: the installed
# amsp::amsp target carries none of them).
add_library(amsp_project_options INTERFACE)
if(AMSP_WERROR)
  target_compile_options(amsp_project_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Werror>)
else()
  target_compile_options(amsp_project_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
endif()

if(AMSP_SANITIZE)
  if(NOT AMSP_SANITIZE MATCHES "^(address|undefined|address,undefined|undefined,address|thread)$")
    message(FATAL_ERROR "amsp: AMSP_SANITIZE='${AMSP_SANITIZE}' is not one of '', 'address,undefined', 'thread'")
  endif()
  # Host C++ only: nvcc does not forward -fsanitize to its host compiler, and the link step of a
  # CUDA executable is not driven by g++.
  target_compile_options(amsp_project_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${AMSP_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all>)
  target_link_options(amsp_project_options INTERFACE $<$<LINK_LANGUAGE:CXX>:-fsanitize=${AMSP_SANITIZE}>)
  # GCC's flow-based warnings misfire on sanitizer-instrumented code (GCC documents that
  # -fsanitize may cause false positives in them; g++ 12 flags std::map's move assignment in
  # std::optional): keep them as warnings there, the plain -Werror build still rejects real ones.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(amsp_project_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-error=maybe-uninitialized>)
  endif()
  message(STATUS "amsp: sanitizers ON for amsp's own targets: ${AMSP_SANITIZE}")
endif()
