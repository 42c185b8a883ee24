# Run at every build (cli/CMakeLists.txt): writes OUT, a header defining ATTOGRAD_VERSION
# (VERSION, the project's) and ATTOGRAD_COMMIT, the source tree's git commit
# ("d81b681c2e4f", with "-modified" appended when tracked files differ from it), or
# "unknown" for a tree without git (a tarball). The file is rewritten only when its text
# changes, so an unchanged tree recompiles nothing.
set(commit "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE head RESULT_VARIABLE failed OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET)
  # a tarball unpacked inside another repository must not take that one's commit
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" rev-parse --show-toplevel
                  OUTPUT_VARIABLE top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT failed AND head AND top)
    file(REAL_PATH "${top}" top)
    file(REAL_PATH "${SOURCE_DIR}" source)
    if(top STREQUAL source)
      set(commit "${head}")
      execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" status --porcelain
                              --untracked-files=no
                      OUTPUT_VARIABLE changes ERROR_QUIET)
      if(changes)
        string(APPEND commit "-modified")
      endif()
    endif()
  endif()
endif()
set(text "#define ATTOGRAD_VERSION \"${VERSION}\"\n#define ATTOGRAD_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
