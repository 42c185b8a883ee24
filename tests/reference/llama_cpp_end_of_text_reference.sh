#!/usr/bin/env bash
# reference.llama_cpp_end_of_text: a byte model trained on a prepared folder of short
# documents (each followed by the byte tokenizer's reserved <|endoftext|>, id 256: docs/data.md)
# learns to end a document; exported to GGUF, llama.cpp itself (the npm package
# node-llama-cpp, tests/reference/llama_cpp_decode.mjs) takes 256 as bos, eos and eot, and
# from each document's start its greedy continuation is `attograd sample`'s and stops where
# attograd's does, at <|endoftext|> (before the byte tokenizer reserved it, llama.cpp fell
# back to id 11, a vertical tab, and stopped there).
#
#   bash llama_cpp_end_of_text_reference.sh ATTOGRAD FIXTURE_DIR
#
# Skips (77) without node or npm, or when tools/npm_fixtures.sh cannot install the packages
# (node-llama-cpp: Linux x64 only).
source "$(dirname "$0")/llama_cpp_fixture.sh" "$@"

cd "$work"
mkdir docs
prompts=()
for pair in France:Paris Italy:Rome Spain:Madrid Japan:Tokyo; do
  prompts+=("The capital of ${pair%:*} is")
  printf 'The capital of %s is %s.' "${pair%:*}" "${pair#*:}" > "docs/${pair%:*}.txt"
done
"$attograd" prepare --data docs --tokenizer byte --val-fraction 0 --out docs.prepared > /dev/null
grep -q '"end_of_text": 256' docs.prepared/meta.json || fail "the folder records no end_of_text"
"$attograd" train --data docs.prepared --context-length 64 --d-model 64 --n-heads 4 --n-layers 2 \
  --dropout 0 --eval-interval 0 --sample-tokens 0 --threads 2 --seed 1 --steps 300 \
  --batch-size 4 --lr 3e-3 --warmup-steps 20 --out docs.h5 > train.txt 2>&1 ||
  { cat train.txt; exit 1; }
"$attograd" export --checkpoint docs.h5 --format gguf --out docs.gguf > /dev/null

decode_ids=() paths=(bos eos eot)
for i in "${!prompts[@]}"; do
  # shellcheck disable=SC2206
  decode_ids+=($(printf '%s' "${prompts[$i]}" | "$attograd" encode --tokenizer docs.h5) ,)
  paths+=("stops.$i" "generations.$i")
done
STOP_AT_EOG=1 node "$here/llama_cpp_decode.mjs" "$llama_dir" docs.gguf 40 - "${decode_ids[@]}" > got.json ||
  { echo "FAIL: llama.cpp did not load or run docs.gguf"; exit 1; }
mapfile -t read_back < <(fields got.json "${paths[@]}")
for i in 0 1 2; do
  [ "${read_back[$i]}" = 256 ] || fail "llama.cpp's ${paths[$i]} is ${read_back[$i]}, not <|endoftext|> (256)"
done
for i in "${!prompts[@]}"; do
  prompt=${prompts[$i]} stop=${read_back[$((3 + 2 * i))]} generated=${read_back[$((4 + 2 * i))]}
  [ "$stop" = 256 ] || fail "'$prompt': llama.cpp did not stop at <|endoftext|> (stop: $stop)"
  # attograd's sample prints the prompt, then the continuation up to <|endoftext|>
  want=$("$attograd" sample docs.h5 --prompt "$prompt" --temperature 0 --tokens 40 2> /dev/null)
  got=$prompt$(printf '%s' "$generated" | "$attograd" decode --tokenizer docs.h5)
  if [ "$got" = "$want" ]; then
    echo "'$prompt': llama.cpp continues '$got' and stops at <|endoftext|>, as attograd does"
  else
    fail "'$prompt': llama.cpp gives '$got', attograd '$want'"
  fi
done
[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "llama.cpp stops a byte model's GGUF generation at its <|endoftext|>, where attograd does"
