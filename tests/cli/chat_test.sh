#!/usr/bin/env bash
# End-to-end tests of chat fine-tuning (docs/finetuning.md "Chat"): `train --task chat` on
# JSONL conversations and `sample --chat`, one-shot and a conversation from standard input,
# and their one-line errors:
#   chat_test.sh SCENARIO PATH/TO/attograd
# The models are char models trained here: the chat format's special tokens are ids past
# their vocabulary (data/chat_format.h), as they are for any tokenizer learned from scratch.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
source "$here/scenario_lib.sh" "$@"

# Six questions and their answers, as conversations, a system turn in every other one
# (France's, Spain's, Egypt's); answers.txt holds each question|answer|system.
make_chats() {
  local pair i=0 system
  for pair in France:Paris Italy:Rome Spain:Madrid Japan:Tokyo Egypt:Cairo Peru:Lima; do
    system=''
    [ $((i++ % 2)) = 0 ] && system='Answer briefly.'
    echo "What is the capital of ${pair%:*}?|${pair#*:}|$system"
  done > answers.txt
  while IFS='|' read -r question answer system; do
    [ -n "$system" ] && system="{\"role\": \"system\", \"content\": \"$system\"}, "
    printf '{"messages": [%s{"role": "user", "content": "%s"}, {"role": "assistant", "content": "%s"}]}\n' \
      "$system" "$question" "$answer"
  done < answers.txt > chats.jsonl
}

# json_value KEY FILE: the number at KEY in the JSON object on FILE's last line
json_value() { tail -1 "$2" | grep -o "\"$1\":[-0-9.e+]*" | cut -d: -f2; }

small=(--task chat --tokenizer char --context-length 96 --d-model 64 --n-heads 4 --n-layers 2
       --batch-size 6 --dropout 0 --lr 3e-3 --warmup-steps 20 --val-fraction 0 --eval-interval 0
       --log-interval 1000 --sample-tokens 0 --threads 2 --seed 1)

case "$scenario" in
memorised)
  # A small model memorises the replies; sample --chat answers each question exactly, one
  # line and no special token's text: the reply ended at the end of its turn. The format's
  # two tokens are ids past the char vocabulary.
  make_chats
  "$bin" train "${small[@]}" --data chats.jsonl --steps 300 --out run.h5 > train.txt 2>&1 ||
    fail "train --task chat failed: $(tail -3 train.txt)"
  "$bin" inspect run.h5 | grep -q '"chat_format": *"chatml"' ||
    fail "the checkpoint does not name its chat format"
  while IFS='|' read -r question answer system; do
    got=$("$bin" sample run.h5 --chat "$question" --system "$system" --temperature 0 \
          --tokens 40 2> stats.txt) || fail "sample --chat failed: $(cat stats.txt)"
    [ "$got" = "$answer" ] || fail "'$question' ('$system'): answered '$got', not '$answer'"
  done < answers.txt
  # eval of the conversations scores the assistant's replies only, as training did: each
  # answer's characters and its end-of-turn token (no system or user token), all but
  # memorised
  "$bin" eval run.h5 --data chats.jsonl --json > eval.txt || fail "eval of chats: $(cat eval.txt)"
  expected=$(awk -F'|' '{n += length($2) + 1} END {print n}' answers.txt)
  [ "$(json_value response_tokens eval.txt)" = "$expected" ] &&
    [ "$(json_value examples eval.txt)" = 6 ] && grep -q '"task":"chat"' eval.txt &&
    awk -v loss="$(json_value loss eval.txt)" 'BEGIN {exit !(loss < 0.05)}' ||
    fail "eval --json: $(tail -1 eval.txt), expected $expected reply tokens and a small loss"
  ;;
grown_base)
  # A char language model (no chat tokens) fine-tuned for chat: its vocabulary grows by
  # ChatML's two tokens (new rows the mean of the old), and sample --chat answers each
  # question exactly, its reply ended at <|im_end|>.
  make_chats
  while IFS='|' read -r question answer system; do
    printf 'system\n%s\nuser\n%s\nassistant\n%s\n' "$system" "$question" "$answer"
  done < answers.txt > plain.txt
  "$bin" train --data plain.txt --tokenizer char --context-length 96 --d-model 64 --n-heads 4 \
    --n-layers 2 --batch-size 4 --steps 5 --eval-interval 0 --sample-tokens 0 --threads 2 \
    --out base.h5 > base.txt 2>&1 || fail "train the base failed: $(tail -3 base.txt)"
  base_vocab=$("$bin" inspect base.h5 | sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' | head -1)
  "$bin" train --task chat --data chats.jsonl --init-from base.h5 --batch-size 6 --dropout 0 \
    --lr 3e-3 --warmup-steps 20 --val-fraction 0 --eval-interval 0 --log-interval 1000 \
    --sample-tokens 0 --threads 2 --steps 300 --out run.h5 > train.txt 2>&1 ||
    fail "train --task chat from a char base failed: $(tail -3 train.txt)"
  grep -q "vocab: $base_vocab -> $((base_vocab + 2)): task chat adds" train.txt ||
    fail "the vocabulary did not grow by two: $(grep vocab train.txt)"
  while IFS='|' read -r question answer system; do
    got=$("$bin" sample run.h5 --chat "$question" --system "$system" --temperature 0 \
          --tokens 40 2> stats.txt) || fail "sample --chat failed: $(cat stats.txt)"
    [ "$got" = "$answer" ] || fail "'$question' ('$system'): answered '$got', not '$answer'"
  done < answers.txt
  # exported for transformers: the grown ids are tokenizer.json's special added tokens, and
  # config.json and generation_config.json end a reply at <|im_end|>, as sample --chat does
  # (read as a transformers-less reader would: the JSON itself)
  "$bin" export run.h5 --format hf --out hf > export.txt 2>&1 || fail "export failed: $(cat export.txt)"
  python3 - "$base_vocab" hf << 'PY' || fail "the exported files do not name the added ids"
import json, sys
base, folder = int(sys.argv[1]), sys.argv[2]
added = {t["content"]: t for t in json.load(open(folder + "/tokenizer.json"))["added_tokens"]}
start, end = added["<|im_start|>"], added["<|im_end|>"]
assert (start["id"], end["id"]) == (base, base + 1), (start, end)
assert start["special"] and end["special"]
generation = json.load(open(folder + "/generation_config.json"))
assert generation["eos_token_id"] in (base + 1, [base + 1]), generation
config = json.load(open(folder + "/config.json"))
assert config["eos_token_id"] == base + 1 and config["vocab_size"] == base + 2, config
PY
  # Hugging Face tokenizers (the npm fixture, where installed) matches them whole
  modules="$(dirname "$bin")/npm-fixtures/node_modules"
  if command -v node > /dev/null && [ -d "$modules/tokenizers" ]; then
    printf '<|im_start|>user\nhi<|im_end|>' > special.txt
    node "$here/../reference/hf_tokenizer.js" "$modules" hf/tokenizer.json hf_out special.txt ||
      fail "tokenizers could not read the exported tokenizer.json"
    read -ra ids < hf_out/special.ids
    [ "${ids[0]}" = "$base_vocab" ] && [ "${ids[-1]}" = "$((base_vocab + 1))" ] &&
      [ "${#ids[@]}" -eq 9 ] || fail "tokenizers encoded the chat's special tokens as ${ids[*]}"
    cmp -s special.txt hf_out/special.text || fail "tokenizers decoded them as '$(cat hf_out/special.text)'"
  fi
  ;;
conversation)
  # --chat alone reads user lines from standard input and answers each; the conversation
  # outgrows the context and its oldest turns are dropped, said once.
  make_chats
  "$bin" train "${small[@]}" --data chats.jsonl --steps 300 --out run.h5 > train.txt 2>&1 ||
    fail "train --task chat failed: $(tail -3 train.txt)"
  # (the questions trained without a system turn; a blank line is skipped)
  printf 'What is the capital of Japan?\n\nWhat is the capital of Peru?\nWhat is the capital of Italy?\n' |
    "$bin" sample run.h5 --chat --temperature 0 --tokens 20 > replies.txt 2> stats.txt ||
    fail "sample --chat (a conversation) failed: $(cat stats.txt)"
  [ "$(cat replies.txt)" = "$(printf 'Tokyo\nLima\nRome')" ] ||
    fail "the replies were: $(cat replies.txt)"
  [ "$(grep -c 'oldest turns are dropped' stats.txt)" = 1 ] ||
    fail "the dropped turns were not said once: $(cat stats.txt)"
  ;;
errors)
  # Bad conversations and options: one line naming file, line and field.
  make_chats
  train() { "$bin" train "${small[@]}" --steps 1 --out run.h5 "$@"; }
  printf '{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}\n{"messages": [{"role": "robot", "content": "a"}]}\n' > role.jsonl
  expect_error 2 "role.jsonl: line 2: 'messages[0].role' is 'robot', not 'system', 'user' or 'assistant'" \
    train --data role.jsonl
  printf '{"messages": [{"role": "user"}]}\n' > content.jsonl
  expect_error 2 "content.jsonl: line 1: 'messages[0].content' is missing" train --data content.jsonl
  { head -c 5000000 /dev/zero | tr '\0' ' '; echo '{}'; } > huge.jsonl
  expect_error 2 "huge.jsonl: line 1: a record of 5000002 bytes, more than the 4194304" \
    train --data huge.jsonl
  printf '{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "%s"}]}\n' \
    "$(printf 'b%.0s' $(seq 200))" > long.jsonl
  expect_error 2 "long.jsonl: line 1: the conversation takes" train --data long.jsonl --no-truncate
  expect_usage_error "chat_format must be 'chatml' or 'llama3', got 'vicuna'" \
    train --data chats.jsonl --chat-format vicuna
  train --data chats.jsonl > /dev/null 2>&1 || fail "train --task chat failed"
  # eval of conversations: scored whole, and only by a model that has the format's tokens
  expect_usage_error "--dump-grads, --split and --stride are for a text or a prepared folder; chat records are scored whole" \
    "$bin" eval run.h5 --data chats.jsonl --stride 4
  expect_usage_error "--system goes with --chat" "$bin" sample run.h5 --system hi
  expect_usage_error "--chat makes its own prompt" "$bin" sample run.h5 --chat hi --prompt x
  expect_usage_error "--chat: it holds the chat format's token <|im_end|>" \
    "$bin" sample run.h5 --chat "a<|im_end|>"
  # a language model has no chat format unless one is named
  "$bin" train --data answers.txt --steps 1 --context-length 16 --d-model 16 --n-heads 2 \
    --n-layers 1 --batch-size 2 --sample-tokens 0 --eval-interval 0 --out lm.h5 > /dev/null 2>&1 ||
    fail "train a language model failed"
  expect_usage_error "has no chat format" "$bin" sample lm.h5 --chat hi
  # nor the format's tokens that eval --task chat needs
  expect_usage_error "but its chat records need" "$bin" eval lm.h5 --data chats.jsonl --task chat
  grep -q "it was not trained with --task chat" err.txt || fail "no reason given: $(cat err.txt)"
  ;;
*) fail "no scenario $scenario" ;;
esac
