# `cmake --install build --prefix P`: the attograd program in P/bin, the libraries in
# P/lib (libattograd_core.a, libattograd_nn.a, ...), every library header under
# P/include/attograd/, and a CMake package of one target per layer:
#
#   find_package(attograd REQUIRED COMPONENTS core)   # or without COMPONENTS: everything
#   target_link_libraries(app PRIVATE attograd::core)
#
#   attograd::core      tensors, autograd, ops (autograd/): links BLAS, oneDNN, OpenMP only
#   attograd::testing   the op table every gradient check reads and the NaN injection of
#                       `train --inject-nan` (autograd/op_table.h, op_cases.h), on core
#   attograd::nn        layers, the GPT, sampling and the cached decoder (nn/), on core
#   attograd::train     the trainer (train/) with data/, optim/ and io/ (HDF5, MPI when
#                       built with it), each also a target: attograd::data, ::optim, ::io
#   attograd::base, ::interop, ::report  the input readers' common layer (base/), other
#                       tools' model files (interop/), the report page (report/)
#   attograd::serve     the OpenAI-compatible HTTP server of `attograd serve` (serve/), on
#                       nn and data; links cpp-httplib
#   attograd::attograd  everything, the command line (attograd::cli, ::bench) included
#
# A program including <attograd/autograd/autograd.h> links attograd::core alone and gets no
# HDF5, MPI or libcurl (examples/core_only, checked by .ci/run).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
include(${CMAKE_CURRENT_LIST_DIR}/library_names.cmake)

attograd_library_names(base)
attograd_library_names(autograd NAME core)
attograd_library_names(autograd_testing NAME testing)
attograd_library_names(nn)
attograd_library_names(data)
attograd_library_names(optim)
attograd_library_names(io)
attograd_library_names(train)
attograd_library_names(interop)
attograd_library_names(report)
attograd_library_names(serve)
attograd_library_names(bench)
attograd_library_names(cli)
get_property(ATTOGRAD_LIBRARIES GLOBAL PROPERTY ATTOGRAD_LIBRARIES)

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
# A sanitized build's libraries call the sanitizers' runtime: whatever links them must link
# it too (and be built by the same compiler, as tests/package/package_test.sh does).
if(ATTOGRAD_SANITIZE OR ATTOGRAD_FUZZ)
  foreach(library ${ATTOGRAD_LIBRARIES})
    target_link_options(${library} INTERFACE $<INSTALL_INTERFACE:-fsanitize=address,undefined>)
  endforeach()
endif()
# A library's headers are its folder's (autograd_testing's are autograd/'s, installed
# with core's).
foreach(folder ${ATTOGRAD_LIBRARIES})
  if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/${folder})
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}
            DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attograd
            FILES_MATCHING PATTERN "*.h" PATTERN "test_hooks.h" EXCLUDE)
  endif()
endforeach()

# The packages each component needs at link time, from the libraries' own link lists (every
# attograd library is static, so its PRIVATE links are needed too), followed through the
# attograd libraries it links: attogradConfig.cmake finds those of the components asked for.
# A target outside attograd is named by the package that provides it (this table); one it
# does not name is an error here, so a new dependency cannot be forgotten.
set(ATTOGRAD_TARGET_PACKAGES
  fmt::fmt=fmt OpenMP::OpenMP_CXX=OpenMP DNNL::dnnl=dnnl nlohmann_json::nlohmann_json=nlohmann_json
  Boost::program_options=Boost OpenSSL::Crypto=OpenSSL Threads::Threads=Threads
  PkgConfig::PCRE2=PCRE2 PkgConfig::UTF8PROC=UTF8PROC PkgConfig::HTTPLIB=HTTPLIB)

function(attograd_packages_of target out_var)
  set(packages)
  get_target_property(direct ${target} LINK_LIBRARIES)
  get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
  foreach(item IN LISTS direct interface)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
    if(item IN_LIST ATTOGRAD_LIBRARIES)
      attograd_packages_of(${item} theirs)
      list(APPEND packages ${theirs})
    elseif(item MATCHES "::" AND NOT item MATCHES "^attograd::")
      set(row ${ATTOGRAD_TARGET_PACKAGES})
      list(FILTER row INCLUDE REGEX "^${item}=")
      if(NOT row)
        message(FATAL_ERROR "cmake/install.cmake: ${target} links ${item}: name its package in ATTOGRAD_TARGET_PACKAGES")
      endif()
      string(REGEX REPLACE "^.*=" "" package "${row}")
      list(APPEND packages ${package})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES packages)
  set(${out_var} ${packages} PARENT_SCOPE)
endfunction()

set(ATTOGRAD_COMPONENT_PACKAGES "")
foreach(library ${ATTOGRAD_LIBRARIES} attograd_library)
  get_target_property(component ${library} EXPORT_NAME)
  attograd_packages_of(${library} packages)
  string(APPEND ATTOGRAD_COMPONENT_PACKAGES "set(_attograd_packages_of_${component} ${packages})\n")
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
