#!/usr/bin/env bash
# structure.unity_names: tools/check_unity_names.py on a made-up tree of one unity target,
# each case a pair of sources: what a batch would change silently is found, naming the file,
# and what it would not is passed. Skips (77) without universal-ctags.
set -euo pipefail
script=$1
command -v ctags > /dev/null || { echo "skipped: no ctags"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# check CASE EXPECTED_RC A_SOURCE B_SOURCE [GREP]: the tree's target `lib` holds a.cpp and b.cpp
check() {
  local name=$1 want=$2 a=$3 b=$4 grep_for=${5:-}
  local tree=$work/$name
  mkdir -p "$tree/tools" "$tree/cmake" "$tree/lib"
  cp "$script" "$tree/tools/"
  echo "set(ATTOGRAD_UNITY_TARGETS lib)" > "$tree/cmake/unity_build.cmake"
  echo "add_library(lib a.cpp b.cpp)" > "$tree/lib/CMakeLists.txt"
  printf '%s\n' "$a" > "$tree/lib/a.cpp"
  printf '%s\n' "$b" > "$tree/lib/b.cpp"
  local rc=0
  python3 "$tree/tools/check_unity_names.py" > "$tree/out.txt" 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] || fail "$name: exit $rc, not $want: $(cat "$tree/out.txt")"
  [ -z "$grep_for" ] || grep -q -- "$grep_for" "$tree/out.txt" ||
    fail "$name: the finding does not say '$grep_for': $(cat "$tree/out.txt")"
}

exported='namespace lib {
int helper(double x) { return static_cast<int>(x); }
}  // namespace lib'
check apart 0 'namespace lib {
namespace {
int other(int x) { return x; }
}  // namespace
}  // namespace lib' "$exported"
check local_overloads_exported 1 'namespace lib {
namespace {
int helper(int x) { return x; }
}  // namespace
}  // namespace lib' "$exported" "lib/a.cpp: 'helper', local to it, is also a function of, or brought in by, lib/b.cpp"
check static_overloads_local 1 'static int helper(int x) { return x; }' \
  'namespace {
long helper(long x) { return x; }
}  // namespace' "'helper', local to it"
check using_declaration 1 'namespace {
bool same(float a, float b) { return a == b; }
}  // namespace' 'using support::same;
bool b() { return same(1, 2); }' "'same', local to it, is also a function of, or brought in by, lib/b.cpp"
check directive 1 'namespace lib {
using namespace std;
}  // namespace lib' 'int b() { return 0; }' "lib/a.cpp:2: a using-directive"
check directive_in_own_namespace 0 'namespace a_test {
using namespace std;
}  // namespace a_test' 'int b() { return 0; }'
check literals 0 'using namespace std::chrono_literals;' 'int b() { return 0; }'
check macro_used_after 1 '#define WIDTH 8
int a() { return WIDTH; }' 'int b() { return WIDTH; }' "macro WIDTH, defined here, is used by lib/b.cpp"
check macro_undefined 0 '#define WIDTH 8
int a() { return WIDTH; }
#undef WIDTH' 'int b() { return 0; }'
echo "every case as expected"
