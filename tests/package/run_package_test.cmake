# Driven by ctest (tests/package/CMakeLists.txt). MODE:
#   build_tree    configure the consumer against this build directory (amsp_DIR), once per
#                 component set in COMPONENT_SETS ("none", "mpi", "cuda", "nccl"), build it, run the core program
#   install_tree  cmake --install this build into a fresh prefix, then the same against the prefix
#   missing       a REQUIRED component whose dependency is hidden (CMAKE_DISABLE_FIND_PACKAGE_*) must
#                 fail find_package with a message naming it; the same component OPTIONAL must not
#   subdirectory  a parent project add_subdirectory()s amsp's source: no CUDA probe, amsp::amsp works
file(REMOVE_RECURSE ${WORK_DIR})

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package test: ${what} failed (${rc})\n${out}\n${err}")
  endif()
  message(STATUS "package test: ${what}: ok")
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

# configure_consumer(<build dir> <components> <extra cmake args...>): result in `rc`, `output`.
function(configure_consumer dir components)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${dir} -G ${GENERATOR}
                          -D CMAKE_CXX_COMPILER=${CXX_COMPILER} "-DAMSP_COMPONENTS=${components}" ${ARGN}
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(rc ${result} PARENT_SCOPE)
  set(output "${out}${err}" PARENT_SCOPE)
endfunction()

function(check_consumers locate)
  string(REPLACE "," ";" sets "${COMPONENT_SETS}")
  foreach(set_name ${sets})
    set(components "")
    if(NOT set_name STREQUAL "none")
      set(components ${set_name})
    endif()
    set(dir ${WORK_DIR}/consumer_${set_name})
    configure_consumer(${dir} "${components}" ${locate})
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "package test: configuring the consumer with components '${set_name}' failed\n${output}")
    endif()
    if(set_name STREQUAL "none")
      run_step("build the consumer (no component)" ${CMAKE_COMMAND} --build ${dir})
      run_step("run the consumer" ${dir}/amsp_consumer)
      if(NOT step_output MATCHES "plans on 8x4: 56\n")
        message(FATAL_ERROR "package test: unexpected consumer output:\n${step_output}")
      endif()
    else()  # only the component's own program: the core one is the same as above
      run_step("build the ${set_name} consumer" ${CMAKE_COMMAND} --build ${dir} --target amsp_consumer_${set_name})
    endif()
  endforeach()
endfunction()

if(MODE STREQUAL "build_tree")
  check_consumers(-Damsp_DIR=${BUILD_DIR})
elseif(MODE STREQUAL "install_tree")
  set(prefix ${WORK_DIR}/prefix)
  run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
  if(NOT EXISTS ${prefix}/include/amsp/amsp.hpp)
    message(FATAL_ERROR "package test: the install lacks include/amsp/amsp.hpp")
  endif()
  check_consumers(-DCMAKE_PREFIX_PATH=${prefix})
elseif(MODE STREQUAL "missing")
  configure_consumer(${WORK_DIR}/required cuda -D amsp_DIR=${BUILD_DIR} -D CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON)
  if(rc EQUAL 0 OR NOT output MATCHES "amsp: component cuda is missing: no CUDA toolkit found")
    message(FATAL_ERROR "package test: a missing required component was not reported (${rc}):\n${output}")
  endif()
  message(STATUS "package test: a missing required component fails find_package and names it: ok")
  # Optional: find_package succeeds and says what is missing.
  file(MAKE_DIRECTORY ${WORK_DIR}/optional)
  file(WRITE ${WORK_DIR}/optional/CMakeLists.txt
       "cmake_minimum_required(VERSION 3.25)\nproject(optional_consumer LANGUAGES CXX)\n"
       "find_package(amsp REQUIRED OPTIONAL_COMPONENTS cuda)\n"
       "if(amsp_cuda_FOUND OR TARGET amsp::cuda OR NOT TARGET amsp::amsp)\n  message(FATAL_ERROR \"wrong targets\")\nendif()\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK_DIR}/optional -B ${WORK_DIR}/optional/build -G ${GENERATOR}
                          -D CMAKE_CXX_COMPILER=${CXX_COMPILER} -D amsp_DIR=${BUILD_DIR}
                          -D CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT "${out}${err}" MATCHES "optional component cuda not available")
    message(FATAL_ERROR "package test: a missing optional component broke find_package (${rc}):\n${out}${err}")
  endif()
  message(STATUS "package test: a missing optional component is reported and amsp::amsp still found: ok")
elseif(MODE STREQUAL "subdirectory")
  file(MAKE_DIRECTORY ${WORK_DIR}/parent)
  file(WRITE ${WORK_DIR}/parent/CMakeLists.txt
       "cmake_minimum_required(VERSION 3.25)\nproject(parent LANGUAGES CXX)\n"
       "add_subdirectory(\"${SOURCE_DIR}\" amsp)\n"
       "get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)\n"
       "if(\"CUDA\" IN_LIST languages OR TARGET amsp::cuda OR DEFINED CMAKE_CUDA_COMPILER)\n"
       "  message(FATAL_ERROR \"add_subdirectory(amsp) probed CUDA\")\nendif()\n"
       "add_executable(parent_app \"${CONSUMER_DIR}/main.cpp\")\n"
       "target_link_libraries(parent_app PRIVATE amsp::amsp)\n")
  run_step("configure a parent project that adds amsp as a subdirectory"
           ${CMAKE_COMMAND} -S ${WORK_DIR}/parent -B ${WORK_DIR}/parent/build -G ${GENERATOR}
           -D CMAKE_CXX_COMPILER=${CXX_COMPILER})
  if(step_output MATCHES "amsp: CUDA ON")
    message(FATAL_ERROR "package test: add_subdirectory(amsp) probed CUDA:\n${step_output}")
  endif()
  run_step("build it" ${CMAKE_COMMAND} --build ${WORK_DIR}/parent/build)
else()
  message(FATAL_ERROR "package test: unknown MODE '${MODE}'")
endif()
