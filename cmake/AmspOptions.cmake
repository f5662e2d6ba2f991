# Warning and sanitizer flags for amsp's own targets (never forced on consumers).
add_library(amsp_project_options INTERFACE)
if(AMSP_WERROR)
  target_compile_options(amsp_project_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Werror>)
else()
  target_compile_options(amsp_project_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
endif()
if(AMSP_SANITIZE)
  target_compile_options(amsp_project_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${AMSP_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all>)
  target_link_options(amsp_project_options INTERFACE -fsanitize=${AMSP_SANITIZE})
endif()
