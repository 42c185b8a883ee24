#!/usr/bin/env bash
# The longest functions of the library and the CLI (tests and fuzz targets excluded),
# measured with Universal Ctags' start and end lines. Lambdas are counted inside the
# function that holds them, not on their own. Fails when a function is over 100 lines or
# more than 5 are over 60: limits that keep a function to about one screen, so that it
# can be read whole.
#   tools/function_lengths.sh [N]     prints the N longest (default 15)
set -euo pipefail
cd "$(dirname "$0")/.."
top=${1:-15}
command -v ctags > /dev/null || { echo "function_lengths.sh: needs universal-ctags" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' | grep -vE '^(tests|fuzz|examples)/')
ctags --c++-kinds=f --fields=+ne -o - "${files[@]}" |
  awk -F'\t' '$1 !~ /^__anon/ {
      line = ""; end = ""
      for (i = 4; i <= NF; i++) {
        if ($i ~ /^line:/) line = substr($i, 6)
        if ($i ~ /^end:/) end = substr($i, 5)
      }
      if (end != "") print end - line + 1, $2 ":" line, $1
    }' | sort -rn > /tmp/function_lengths.$$
head -n "$top" /tmp/function_lengths.$$
over100=$(awk '$1 > 100' /tmp/function_lengths.$$ | wc -l)
over60=$(awk '$1 > 60' /tmp/function_lengths.$$ | wc -l)
total=$(wc -l < /tmp/function_lengths.$$)
rm -f /tmp/function_lengths.$$
echo "$total functions: $over100 over 100 lines, $over60 over 60 (limits: 0 and 5)"
[ "$over100" -eq 0 ] && [ "$over60" -le 5 ]
