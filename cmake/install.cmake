# `cmake --install build --prefix P`: the attograd program in P/bin, the libraries in
# P/lib, every library header under P/include/attograd/, and a CMake package, so that
#
#   find_package(attograd REQUIRED)
#   target_link_libraries(app PRIVATE attograd::attograd)
#
# builds a program including <attograd/autograd/autograd.h> and <attograd/nn/nn.h>.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ATTOGRAD_LIBRARIES base autograd nn data optim io train report bench cli)
# Headers include one another as "autograd/tensor.h": the installed tree answers both that
# and <attograd/autograd/tensor.h>.
foreach(library autograd base)
  target_include_directories(${library} PUBLIC
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/attograd>)
endforeach()

# The umbrella target; the program already owns the name `attograd`.
add_library(attograd_library INTERFACE)
set_target_properties(attograd_library PROPERTIES EXPORT_NAME attograd)
target_link_libraries(attograd_library INTERFACE ${ATTOGRAD_LIBRARIES})
add_library(attograd::attograd ALIAS attograd_library)

install(TARGETS attograd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${ATTOGRAD_LIBRARIES} attograd_library EXPORT attogradTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(folder base autograd nn data optim io train report bench cli)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attograd
          FILES_MATCHING PATTERN "*.h" PATTERN "test_hooks.h" EXCLUDE)
endforeach()

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/attograd)
install(EXPORT attogradTargets NAMESPACE attograd:: DESTINATION ${config_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/attogradConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/attogradConfig.cmake
                              INSTALL_DESTINATION ${config_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/attogradConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/attogradConfig.cmake
              ${PROJECT_BINARY_DIR}/attogradConfigVersion.cmake
        DESTINATION ${config_dir})
