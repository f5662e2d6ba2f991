# The amsp package, from the install tree (cmake --install) and from the build tree (export()):
#   find_package(amsp [COMPONENTS mpi cuda nccl])
# amsp::amsp (host C++20, Threads only) always; each component its own export set, loaded only
# when requested and when both this build had it and the consumer's machine has its dependency
# (amspConfig.cmake.in). Both trees share one config file: it only refers to its own directory.
include(CMakePackageConfigHelpers)

set(_amsp_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/amsp)
install(DIRECTORY include/amsp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# One export set per part: amspTargets (amsp::amsp), amspMpiTargets, amspCudaTargets, amspNcclTargets.
set(_amsp_export_sets amspTargets)
install(TARGETS amsp EXPORT amspTargets)
foreach(part mpi cuda nccl)
  if(TARGET amsp_${part})
    string(SUBSTRING ${part} 0 1 first)
    string(TOUPPER ${first} first)
    string(SUBSTRING ${part} 1 -1 rest)
    set(set_name amsp${first}${rest}Targets)
    install(TARGETS amsp_${part} EXPORT ${set_name})
    list(APPEND _amsp_export_sets ${set_name})
  endif()
endforeach()
foreach(set_name ${_amsp_export_sets})
  install(EXPORT ${set_name} NAMESPACE amsp:: DESTINATION ${_amsp_cmake_dir})
  export(EXPORT ${set_name} NAMESPACE amsp:: FILE ${PROJECT_BINARY_DIR}/${set_name}.cmake)
endforeach()

# The config file, once per tree; FindNCCL.cmake beside it for the nccl component.
configure_package_config_file(cmake/amspConfig.cmake.in ${PROJECT_BINARY_DIR}/install/amspConfig.cmake
                              INSTALL_DESTINATION ${_amsp_cmake_dir})
configure_package_config_file(cmake/amspConfig.cmake.in ${PROJECT_BINARY_DIR}/amspConfig.cmake
                              INSTALL_DESTINATION ${PROJECT_BINARY_DIR} INSTALL_PREFIX ${PROJECT_BINARY_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/amspConfigVersion.cmake COMPATIBILITY SameMinorVersion
                                 ARCH_INDEPENDENT)
configure_file(cmake/FindNCCL.cmake ${PROJECT_BINARY_DIR}/FindNCCL.cmake COPYONLY)
install(FILES ${PROJECT_BINARY_DIR}/install/amspConfig.cmake ${PROJECT_BINARY_DIR}/amspConfigVersion.cmake
              cmake/FindNCCL.cmake
        DESTINATION ${_amsp_cmake_dir})
