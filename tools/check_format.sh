#!/usr/bin/env bash
# Every tracked C/C++ source follows the checked-in .clang-format (clang-format-14).
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files -z '*.cpp' '*.h' '*.c' | xargs -0 clang-format-14 --dry-run -Werror
echo "clang-format-14: every source is formatted"
