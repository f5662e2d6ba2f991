# Driven by ctest (see CMakeLists.txt beside this file): install, configure the consumer, build, run.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package test: ${what} failed (${rc})\n${out}\n${err}")
  endif()
  message(STATUS "package test: ${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/include/amsp/amsp.hpp)
  message(FATAL_ERROR "package test: the install lacks include/amsp/amsp.hpp")
endif()
run_step("configure the consumer"
         ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
         -D CMAKE_PREFIX_PATH=${prefix} -D CMAKE_CXX_COMPILER=${CXX_COMPILER}
         -D EXPECT_MPI=${EXPECT_MPI} -D EXPECT_CUDA=${EXPECT_CUDA} -D EXPECT_NCCL=${EXPECT_NCCL})
run_step("build the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_step("run the consumer" ${WORK_DIR}/build/amsp_consumer)
if(NOT step_output MATCHES "plans on 8x4: 56\n")
  message(FATAL_ERROR "package test: unexpected consumer output:\n${step_output}")
endif()
message(STATUS "package test: consumer printed:\n${step_output}")
