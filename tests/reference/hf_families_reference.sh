#!/usr/bin/env bash
# reference.hf_families: the tokenizer.json layouts of Llama 3 (a Split pattern, ignore_merges,
# several merges making one token, added tokens after the vocabulary, a template adding
# <|begin_of_text|>), Qwen2/Qwen3 (NFC, its pattern, special and non-special added tokens) and
# SmolLM2 (special tokens first in the vocabulary, Digits then ByteLevel), built around GPT-2's
# real vocabulary by hf_families.js, read by attograd and by Hugging Face tokenizers (the npm
# package `tokenizers`, its Rust core): on texts that stress each layout,
#   - `attograd encode` gives tokenizers' encode(text) ids (its default: with the template's);
#   - `attograd decode` of those ids gives what tokenizers' decode gives;
#   - the tokenizer.json attograd writes back (export's writer) gives tokenizers the same ids;
#   - a folder prepared with the tokenizer (the text streamed in small chunks, and kept in the
#     folder's tokenizer file) gives the ids encode gives without the template.
#
#   bash hf_families_reference.sh ATTOGRAD TOKENIZER_FILES_DRIVER FIXTURE_DIR
#
# Skipped (77) without node, npm or the registry (npm_texts.sh).
set -euo pipefail
attograd=$1
driver=$2
source "$(dirname "$0")/npm_texts.sh" "$3"
node "$here/hf_families.js" make "$modules" "$work/fam"

failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
for family in llama3 qwen2 smollm2; do
  tok="$work/fam/$family/tokenizer.json"
  "$driver" "$tok" "$work/out-$family" > /dev/null
  node "$here/hf_families.js" encode-all "$modules" "$tok" "$work/hf-$family" "$work"/fam/texts/*.txt
  node "$here/hf_families.js" encode-all "$modules" "$work/out-$family/tokenizer.json" \
    "$work/back-$family" "$work"/fam/texts/*.txt
  for text in "$work"/fam/texts/*.txt; do
    name="$family $(basename "$text" .txt)"
    hf="$work/hf-$family/$(basename "$text" .txt)"
    "$attograd" encode --tokenizer "$tok" < "$text" > "$work/ids"
    if ! cmp -s "$work/ids" "$hf.ids"; then
      fail "$name: tokenizers gives other ids than attograd"
      diff <(tr ' ' '\n' < "$work/ids") <(tr ' ' '\n' < "$hf.ids") | head -6 || true
    fi
    "$attograd" decode --tokenizer "$tok" < "$hf.ids" > "$work/text"
    cmp -s "$work/text" "$hf.text" || fail "$name: decode differs from tokenizers' decode"
    cmp -s "$work/back-$family/$(basename "$text" .txt).ids" "$hf.ids" ||
      fail "$name: the tokenizer.json written back differs"
  done
  "$attograd" prepare --data "$work"/fam/texts/mixed.txt --tokenizer-from "$tok" \
    --out "$work/prep-$family" > /dev/null
  "$attograd" encode --tokenizer "$work/prep-$family" --no-special-tokens \
    < "$work/fam/texts/mixed.txt" > "$work/prep_ids"
  "$attograd" encode --tokenizer "$tok" --no-special-tokens < "$work/fam/texts/mixed.txt" > "$work/ids"
  cmp -s "$work/prep_ids" "$work/ids" || fail "$family: the prepared folder's tokenizer differs"
  echo "ok $family"
done
[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "Llama 3's, Qwen2's and SmolLM2's tokenizer.json layouts: tokenizers' ids, id for id"
