#!/usr/bin/env bash
# reference.llama_cpp_chat: a chat fine-tuning of a byte model (its vocabulary grown by
# ChatML's two tokens, docs/finetuning.md) exported to GGUF, in F32 and F16, and run by
# llama.cpp itself (the npm package node-llama-cpp, tests/reference/llama_cpp_decode.mjs): the
# file names <|im_end|> as eos and eot, node-llama-cpp resolves its chat template to ChatML,
# and from each conversation's prompt llama.cpp's greedy reply is `attograd sample --chat`'s
# and stops where attograd's does, at <|im_end|>. The F16 file is compared with attograd
# sampling from the same F16-rounded weights (the file imported back, its chat template
# with it).
#
#   bash llama_cpp_chat_reference.sh ATTOGRAD FIXTURE_DIR
#
# Skips (77) without node or npm, or when tools/npm_fixtures.sh cannot install the packages
# (node-llama-cpp: Linux x64 only).
source "$(dirname "$0")/llama_cpp_fixture.sh" "$@"

cd "$work"
questions=()
for pair in France:Paris Italy:Rome Spain:Madrid Japan:Tokyo; do
  questions+=("What is the capital of ${pair%:*}?")
  printf '{"messages": [{"role": "user", "content": "What is the capital of %s?"}, {"role": "assistant", "content": "%s"}]}\n' \
    "${pair%:*}" "${pair#*:}"
done > chats.jsonl
sed 's/[{}"]//g' chats.jsonl > plain.txt
small=(--context-length 64 --d-model 64 --n-heads 4 --n-layers 2 --dropout 0 --eval-interval 0
       --sample-tokens 0 --threads 2 --seed 1)
"$attograd" train --tokenizer byte --data plain.txt "${small[@]}" --steps 20 --batch-size 4 \
  --out base.h5 > base.txt 2>&1 || { cat base.txt; exit 1; }
"$attograd" train --task chat --data chats.jsonl --init-from base.h5 --steps 300 --batch-size 4 \
  --lr 3e-3 --warmup-steps 20 --val-fraction 0 --eval-interval 0 --sample-tokens 0 --threads 2 \
  --out chat.h5 > chat.txt 2>&1 || { cat chat.txt; exit 1; }
grep -q 'vocab: 257 -> 259' chat.txt || fail "the chat run did not grow the vocabulary: $(head -5 chat.txt)"
"$attograd" export --checkpoint chat.h5 --format gguf --out chat.gguf > /dev/null
"$attograd" export --checkpoint chat.h5 --format gguf --dtype f16 --out chat16.gguf > /dev/null
"$attograd" import chat16.gguf --out back16.h5 > /dev/null

im_start=257 im_end=258  # after the bytes and the byte tokenizer's <|endoftext|>
for pair in "chat.gguf chat.h5" "chat16.gguf back16.h5"; do
  gguf=${pair% *} model=${pair#* }
  prompts=() paths=(eos eot wrapper)
  assistant=$(printf 'assistant\n' | "$attograd" encode --tokenizer "$model")
  for i in "${!questions[@]}"; do
    # ChatML's prompt as attograd writes it: <|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n
    user=$(printf 'user\n%s' "${questions[$i]}" | "$attograd" encode --tokenizer "$model")
    # shellcheck disable=SC2206
    prompts+=($im_start $user $im_end 10 $im_start $assistant ,)
    paths+=("stops.$i" "generations.$i")
  done
  STOP_AT_EOG=1 node "$here/llama_cpp_decode.mjs" "$llama_dir" "$gguf" 40 - "${prompts[@]}" > got.json ||
    { fail "llama.cpp did not load or run $gguf"; continue; }
  mapfile -t read_back < <(fields got.json "${paths[@]}")
  for i in 0 1; do
    [ "${read_back[$i]}" = $im_end ] || fail "$gguf: llama.cpp's ${paths[$i]} is ${read_back[$i]}, not <|im_end|>"
  done
  [ "${read_back[2]}" = ChatMLChatWrapper ] ||
    fail "$gguf: node-llama-cpp resolved the chat template to ${read_back[2]}"
  for i in "${!questions[@]}"; do
    question=${questions[$i]} stop=${read_back[$((3 + 2 * i))]} generated=${read_back[$((4 + 2 * i))]}
    [ "$stop" = $im_end ] ||
      fail "$gguf: '$question': llama.cpp did not stop at <|im_end|> (stop: $stop)"
    want=$("$attograd" sample "$model" --chat "$question" --temperature 0 --tokens 40 2> /dev/null)
    got=$(printf '%s' "$generated" | "$attograd" decode --tokenizer "$model")
    if [ "$got" = "$want" ]; then
      echo "$gguf: '$question': llama.cpp answers '$got' and stops at <|im_end|>, as attograd does"
    else
      fail "$gguf: '$question': llama.cpp answers '$got', attograd '$want'"
    fi
  done
done
[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "llama.cpp stops a chat model's GGUF reply where attograd does, in F32 and F16"
