# cmake --install puts the headers, the exported targets and amspConfig.cmake in place so that
# a downstream project can find_package(amsp) and link amsp::amsp (and amsp::mpi, amsp::cuda,
# amsp::nccl where they were found).
include(CMakePackageConfigHelpers)
install(DIRECTORY include/amsp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ${AMSP_EXPORTED_TARGETS} EXPORT amspTargets)
install(EXPORT amspTargets NAMESPACE amsp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/amsp)
install(FILES cmake/FindNCCL.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/amsp)
configure_package_config_file(cmake/amspConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/amspConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/amsp)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/amspConfigVersion.cmake COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/amspConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/amspConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/amsp)
