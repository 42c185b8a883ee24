# Precompiled headers: the standard, fmt, nlohmann-json and Catch2 headers that nearly every
# source of a library parses again otherwise (a test's Catch2 and nlohmann-json cost more
# than its own code). Each library precompiles its own set once; its sources compile as
# before, so every header still includes what it uses (the install's consumers in
# examples/ compile them without these).
option(ATTOGRAD_PCH "Precompile the standard and third-party headers (faster builds)" ON)

set(ATTOGRAD_PCH_STANDARD <algorithm> <cmath> <cstdint> <cstring> <functional> <map>
    <memory> <optional> <stdexcept> <string> <string_view> <unordered_map> <utility> <vector>
    <fmt/format.h>)

# attograd_precompile(TARGET [HEADER...]): the standard set and the headers named.
function(attograd_precompile target)
  if(ATTOGRAD_PCH)
    target_precompile_headers(${target} PRIVATE ${ATTOGRAD_PCH_STANDARD} ${ARGN})
  endif()
endfunction()
