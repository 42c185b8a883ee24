#!/usr/bin/env bash
# structure.own_math_copies: no kernel helper of the libraries with a float or double
# parameter (a function of ag::detail:: or nn::detail::) is emitted as a shared inline copy
# by both a test object and a library. The linker keeps one copy of an inline function for
# the whole program, and the tests compile at -O1, where GCC fuses no multiply-add: a test's
# copy would run inside the library's kernels and change their float32 bits
# (autograd/vec_math.h: its helpers are each unit's own for this).
# usage: own_math_copies_test.sh "TEST_OBJECTS" LIBRARY... (TEST_OBJECTS ;-separated)
set -euo pipefail
command -v nm > /dev/null || { echo "skipped: no nm"; exit 77; }
IFS=';' read -r -a objects <<< "$1"
shift
weak() { nm -C --defined-only "$@" 2>/dev/null | awk '$2 == "W" { $1 = $2 = ""; print substr($0, 3) }' |
  grep -E '^(ag|nn)::detail::[^(]*\([^)]*\b(float|double)\b' | sort -u; }
shared=$(comm -12 <(weak "${objects[@]}") <(weak "$@"))
if [ -n "$shared" ]; then
  echo "FAIL: kernel helpers emitted by a test object and a library (one copy will run both):"
  echo "$shared"
  exit 1
fi
echo "no kernel helper shared between ${#objects[@]} test objects and $# libraries"
