# Sourced by the reference tests that compare with npm packages (gpt2_tokenizer_reference.sh,
# hf_tokenizer_json_reference.sh), with FIXTURE_DIR as its argument: installs or finds the
# packages (tools/npm_fixtures.sh, into $ATTOGRAD_NPM_FIXTURES when set, else FIXTURE_DIR),
# exits 77 (skipped) without node, npm or the registry, and sets
#   modules  the packages' node_modules folder
#   work     a temporary folder, removed on exit, whose texts/ holds the texts and the ids
#            tiktoken and gpt-3-encoder give them (gpt2_encoder.js)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v node > /dev/null 2>&1 || { echo "skipped: node is not installed"; exit 77; }
dir=$(bash "$here/../../tools/npm_fixtures.sh" "${ATTOGRAD_NPM_FIXTURES:-$1}")
[ -n "$dir" ] || { echo "skipped: the npm packages (tools/npm_fixtures.sh) are not available"; exit 77; }
modules="$dir/node_modules"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
node "$here/gpt2_encoder.js" "$modules" "$work/texts"
