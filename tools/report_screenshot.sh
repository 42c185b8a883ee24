#!/usr/bin/env bash
# A PNG of a report page as headless chromium draws it (the pictures of docs/report.md):
#   tools/report_screenshot.sh REPORT.html OUT.png [WIDTHxHEIGHT] [#SECTION or #VIEW]
# e.g. tools/report_screenshot.sh report.html docs/report.png 1280x800 '#smoothing=0.6'
#      tools/report_screenshot.sh report.html docs/report_attention.png 1280x800 '#attention'
# The page is opened from disk with the flags of tests/cli/report_test.sh (no network, a
# fresh profile); with a section, the picture starts there; with a view (docs/report.md:
# #smoothing=0.6&axis=tokens&zoom=100000,500000), the charts are drawn so.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,8p' "$0"; exit 2; }
page=$(readlink -f "$1")
out=$2
size=${3:-1280x800}
section=${4:-}
chromium=$(command -v chromium || command -v chromium-browser) ||
  { echo "report_screenshot.sh: needs chromium" >&2; exit 2; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
  --user-data-dir="$profile" --window-size="${size/x/,}" --screenshot="$(readlink -f "$(dirname "$out")")/$(basename "$out")" \
  "file://$page$section" 2> /dev/null
echo "wrote $out ($(wc -c < "$out") bytes)"
