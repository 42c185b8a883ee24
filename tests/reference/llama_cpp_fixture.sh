# Sourced by the reference tests that run llama.cpp (llama_cpp_reference.sh,
# llama_cpp_chat_reference.sh) with ATTOGRAD FIXTURE_DIR as their arguments: sets attograd,
# here, modules and work (npm_texts.sh), llama_dir (node-llama-cpp's folder), fail (a
# failure said and counted in failures) and fields (what llama_cpp_decode.mjs wrote); exits
# 77 (skipped) without node-llama-cpp.
set -euo pipefail
attograd=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/npm_texts.sh" "$2"
llama_dir="$(dirname "$modules")/llama-cpp"
[ -f "$llama_dir/node_modules/node-llama-cpp/package.json" ] ||
  { echo "skipped: node-llama-cpp is not installed (tools/npm_fixtures.sh)"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# fields FILE.json PATH...: each PATH's value in FILE.json (keys and array indices joined by
# dots), one a line, an array's items joined by spaces: one node process for them all
fields() {
  node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    for (const p of process.argv.slice(2)) {
      const v = p.split(".").reduce((o, k) => (o == null ? o : o[k]), r);
      console.log(Array.isArray(v) ? v.join(" ") : v);
    }' "$@"
}
