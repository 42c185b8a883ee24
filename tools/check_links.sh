#!/usr/bin/env bash
# Every relative link in README.md, ARCHITECTURE.md and docs/*.md must name a file of the
# repository, and a #fragment of a Markdown file one of its headings (GitHub's anchors:
# lower case, punctuation dropped, spaces as hyphens). Fenced code blocks are skipped, and so
# are links to other sites. Prints each broken link as FILE: link to 'TARGET': why; exits 1
# when there is one.
#   tools/check_links.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

outside_code() { awk '/^[[:space:]]*```/ { code = !code; next } !code' "$1"; }
anchors_of() {
  outside_code "$1" | sed -nE 's/^#+[[:space:]]+//p' | tr 'A-Z' 'a-z' |
    sed -E 's/[^a-z0-9 _-]//g; s/ /-/g'
}

status=0
for file in README.md ARCHITECTURE.md docs/*.md; do
  dir=$(dirname "$file")
  while IFS= read -r target; do
    case $target in http://* | https://* | mailto:*) continue ;; esac
    path=${target%%#*}
    fragment=""
    [[ $target == *"#"* ]] && fragment=${target#*#}
    resolved=$file
    [ -n "$path" ] && resolved="$dir/$path"
    if [ ! -e "$resolved" ]; then
      echo "$file: link to '$target': no such file"
      status=1
    elif [ -n "$fragment" ] && [[ $resolved == *.md ]] &&
      ! anchors_of "$resolved" | grep -qxF -- "$fragment"; then
      echo "$file: link to '$target': no heading with that anchor in $resolved"
      status=1
    fi
  done < <(outside_code "$file" | grep -oE '\]\([^)[:space:]]+\)' | sed -E 's/^\]\((.*)\)$/\1/')
done
[ "$status" -eq 0 ] && echo "links: every relative link resolves"
exit "$status"
