#!/usr/bin/env bash
# attograd as a CMake package: installed to a temporary prefix, then a consumer program
# (tests/package/consumer.cpp) asks for each component alone with find_package(attograd
# COMPONENTS X), links attograd::X, builds and runs; each component must bring every
# package its libraries need (cmake/install.cmake, cmake/attogradConfig.cmake.in).
#   package_test.sh BUILD_DIR [COMPONENT ...]   (default: every component)
set -euo pipefail
build=$1
shift
components=("$@")
[ ${#components[@]} -gt 0 ] ||
  components=(core testing nn base data optim io train interop report serve bench cli attograd)
here=$(cd "$(dirname "$0")" && pwd)
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix/install" > /dev/null
# the consumer is built by the compiler that built the libraries (a sanitized clang build's
# runtime is clang's)
compiler=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
for component in "${components[@]}"; do
  log="$prefix/$component.log"
  if ! { cmake -S "$here" -B "$prefix/$component" -DCMAKE_PREFIX_PATH="$prefix/install" \
           -DCOMPONENT="$component" -DCMAKE_BUILD_TYPE=Release \
           ${compiler:+-DCMAKE_CXX_COMPILER="$compiler"} &&
         cmake --build "$prefix/$component" -j2 &&
         "$prefix/$component/consumer"; } > "$log" 2>&1; then
    echo "find_package(attograd COMPONENTS $component) + attograd::$component failed:"
    tail -30 "$log"
    exit 1
  fi
  echo "attograd::$component: found, linked and ran alone"
done
