# attograd_library_names(TARGET [NAME name]): the names one of attograd's libraries has
# outside this build. NAME (default: TARGET) gives the file, libattograd_NAME.a (a bare
# libio.a or libnn.a would collide with other projects' in a shared prefix), the
# exported target attograd::NAME, and the same alias inside this build. The library is
# added to the ATTOGRAD_LIBRARIES global property, which install.cmake installs.
function(attograd_library_names target)
  cmake_parse_arguments(arg "" "NAME" "" ${ARGN})
  set(name ${target})
  if(arg_NAME)
    set(name ${arg_NAME})
  endif()
  set_target_properties(${target} PROPERTIES OUTPUT_NAME attograd_${name} EXPORT_NAME ${name})
  add_library(attograd::${name} ALIAS ${target})
  set_property(GLOBAL APPEND PROPERTY ATTOGRAD_LIBRARIES ${target})
endfunction()
