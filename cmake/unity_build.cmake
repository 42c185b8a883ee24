# Unity builds: the targets below compile their sources in batches of 8, each batch one
# translation unit, so that the headers every source parses (the standard library's, fmt,
# nlohmann-json, Catch2 for the tests) and the templates they instantiate are compiled once
# a batch rather than once a file: a clean build takes about half the compiler's time in
# these targets (docs/testing.md, "What CI costs"). Sources with their own compile options
# are compiled alone, as CMake does for them. A batch shares one anonymous namespace, so
# tools/check_unity_names.py (run by CI) finds what could change meaning silently there;
# what cannot, the compiler refuses. -DATTOGRAD_UNITY=OFF compiles every file on its own
# (an edit then recompiles one file rather than its batch).
option(ATTOGRAD_UNITY "Compile the listed targets' sources in batches (faster clean builds)" ON)

set(ATTOGRAD_UNITY_TARGETS base nn data optim io train interop report serve cli bench attograd_tests)

if(ATTOGRAD_UNITY)
  foreach(target ${ATTOGRAD_UNITY_TARGETS})
    if(TARGET ${target})  # the tests' only when they are built (ATTOGRAD_TESTS)
      set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    endif()
  endforeach()
endif()
