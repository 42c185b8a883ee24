#!/usr/bin/env bash
# End-to-end tests of instruction fine-tuning (docs/finetuning.md): `train --task instruct`,
# `sample --instruction` and `eval` on instruction records, and their one-line errors:
#   instruct_test.sh SCENARIO PATH/TO/attograd
set -euo pipefail
source "$(dirname "$0")/scenario_lib.sh" "$@"

# Twelve records a small char model memorises in a few hundred steps: six words to
# reverse (an input each) and six capitals (no input). The worked example of
# docs/finetuning.md uses this set.
# make_records writes them to set.jsonl, and each one's instruction|input|output to
# records.txt.
make_records() {
  local word country capital
  for word in cat dog bird fish lion wolf; do
    echo "Reverse the word.|$word|$(echo "$word" | rev)"
  done > records.txt
  for country in France:Paris Italy:Rome Spain:Madrid Japan:Tokyo Egypt:Cairo Peru:Lima; do
    echo "What is the capital of ${country%:*}?||${country#*:}"
  done >> records.txt
  while IFS='|' read -r instruction input output; do
    if [ -n "$input" ]; then
      printf '{"instruction": "%s", "input": "%s", "output": "%s"}\n' "$instruction" "$input" "$output"
    else
      printf '{"instruction": "%s", "output": "%s"}\n' "$instruction" "$output"
    fi
  done < records.txt > set.jsonl
}
# json_value KEY FILE: the number at KEY in the JSON object on FILE's last line
json_value() { tail -1 "$2" | grep -o "\"$1\":[-0-9.e+]*" | cut -d: -f2; }

small=(--task instruct --tokenizer char --context-length 192 --d-model 64 --n-heads 4 --n-layers 2
       --batch-size 12 --dropout 0 --lr 3e-3 --warmup-steps 20 --val-fraction 0 --eval-interval 0
       --log-interval 1000 --sample-tokens 0 --threads 2 --seed 1)

# sample_answer CHECKPOINT INSTRUCTION INPUT: the greedy response
sample_answer() {
  local args=(sample --checkpoint "$1" --instruction "$2" --temperature 0 --tokens 40)
  [ -n "$3" ] && args+=(--input "$3")
  "$bin" "${args[@]}" 2> stats.txt
}

# every record answered exactly by greedy sampling
answers_all() {
  local ckpt=$1 instruction input output got
  while IFS='|' read -r instruction input output; do
    got=$(sample_answer "$ckpt" "$instruction" "$input") ||
      fail "sample --instruction failed: $(cat stats.txt)"
    [ "$got" = "$output" ] || fail "'$instruction' '$input': answered '$got', not '$output'"
  done < records.txt
}

case "$scenario" in
memorised)
  # A small model memorises the set; greedy sampling answers every record exactly and
  # ends at the end-of-text token (nothing after the response); eval reports the loss
  # over the response tokens and their count (the outputs' characters plus one
  # end-of-text per record).
  make_records
  "$bin" train "${small[@]}" --data set.jsonl --steps 400 --out run.h5 > train.txt 2>&1 ||
    fail "train --task instruct failed: $(tail -3 train.txt)"
  answers_all run.h5
  [ "$(sample_answer run.h5 "Reverse the word." cat | wc -l)" -eq 1 ] ||
    fail "the response did not end at the end-of-text token"
  "$bin" eval --checkpoint run.h5 --data set.jsonl --json > eval.txt
  expected=$(awk -F'|' '{n += length($3) + 1} END {print n}' records.txt)
  [ "$(json_value response_tokens eval.txt)" = "$expected" ] &&
    [ "$(json_value examples eval.txt)" = 12 ] && [ "$(json_value truncated eval.txt)" = 0 ] &&
    awk -v loss="$(json_value loss eval.txt)" 'BEGIN {exit !(loss < 0.05)}' ||
    fail "eval --json: $(tail -1 eval.txt), expected $expected response tokens and a small loss"
  # exported for transformers: the end-of-text id past the char vocabulary is tokenizer.json's
  # special added token, where config.json and generation_config.json end a response
  "$bin" export run.h5 --format hf --out hf > export.txt 2>&1 || fail "export failed: $(cat export.txt)"
  python3 - hf << 'PY' || fail "the exported files do not name the end-of-text id"
import json, sys
folder = sys.argv[1]
config = json.load(open(folder + "/config.json"))
end = config["vocab_size"] - 1
added = json.load(open(folder + "/tokenizer.json"))["added_tokens"]
assert {"id": end, "content": "<|endoftext|>", "special": True}.items() <= added[-1].items(), added
assert config["eos_token_id"] == end, config
assert json.load(open(folder + "/generation_config.json"))["eos_token_id"] in (end, [end])
PY
  ;;
template)
  # --template: the checkpoint keeps the template and sample formats with it; the same
  # records as a JSON array.
  make_records
  { echo "["; sed '$!s/$/,/' set.jsonl; echo "]"; } > set.json
  cat > qa.json <<'EOF'
{"description": "question and answer",
 "prompt_input": "Q: {instruction} ({input})\nA: ",
 "prompt_no_input": "Q: {instruction}\nA: "}
EOF
  "$bin" train "${small[@]}" --context-length 64 --data set.json --template qa.json --steps 400 \
    --out run.h5 > train.txt 2>&1 || fail "train --template failed: $(tail -3 train.txt)"
  "$bin" inspect run.h5 | grep -qF 'Q: {instruction} ({input})' ||
    fail "the checkpoint does not keep the template"
  answers_all run.h5
  ;;
errors)
  # Bad records, templates and options: one line naming file, line and field.
  make_records
  train() { "$bin" train "${small[@]}" --steps 1 --out run.h5 "$@"; }
  printf '{"instruction": "a", "output": "b"}\n{"instruction": "a"}\n' > missing.jsonl
  expect_error 2 "missing.jsonl: line 2: 'output' is missing" train --data missing.jsonl
  printf '[{"instruction": "a", "output": "b"},\n {"instruction": "a", "output": ""}]' > empty.json
  expect_error 2 "empty.json: record 2 (line 2): 'output' is empty" train --data empty.json
  printf '{"instruction": 5, "output": "b"}\n' > kind.jsonl
  expect_error 2 "kind.jsonl: line 1: 'instruction' must be a string, not an unsigned integer" \
    train --data kind.jsonl
  printf '{"instruction": "a", "output": "b"}\n\n["a"]\n' > array.jsonl
  expect_error 2 "array.jsonl: line 3: a record must be a JSON object" train --data array.jsonl
  printf '{"instruction": "a\xff", "output": "b"}\n' > utf8.jsonl
  expect_error 2 "utf8.jsonl: line 1: invalid UTF-8" train --data utf8.jsonl
  printf '[]' > none.json
  expect_error 2 "none.json: no records" train --data none.json
  printf '{"instruction": "a", "output": "%s"}\n' "$(printf 'b%.0s' $(seq 300))" > long.jsonl
  expect_error 2 "long.jsonl: line 1: the prompt and response take" \
    train --data long.jsonl --no-truncate
  expect_error 2 "long.jsonl: line 1: the prompt alone is" train --data long.jsonl --context-length 64
  printf '{"prompt_input": "{instruction} {question} {input}", "prompt_no_input": "{instruction}"}' \
    > bad_template.json
  expect_error 2 "'prompt_input' has the placeholder '{question}'" \
    train --data set.jsonl --template bad_template.json
  printf '{"prompt_input": "{input}", "prompt_no_input": "{instruction}"}' > no_instruction.json
  expect_error 2 "'prompt_input' has no {instruction}" \
    train --data set.jsonl --template no_instruction.json
  # sample's options
  train --data set.jsonl > /dev/null 2>&1 || fail "train --task instruct failed"
  expect_usage_error "--instruction makes its own prompt" \
    "$bin" sample --checkpoint run.h5 --instruction a --prompt b
  expect_usage_error "--input goes with --instruction" "$bin" sample --checkpoint run.h5 --input b
  expect_usage_error "--instruction: character '%' (U+0025)" \
    "$bin" sample --checkpoint run.h5 --instruction "Peru%"
  expect_error 2 "missing.jsonl: line 2: 'output' is missing" \
    "$bin" eval --checkpoint run.h5 --data missing.jsonl
  # A language model (no --task): sample --instruction formats Alpaca's prompt and says so;
  # with a char tokenizer it has no end-of-text, which eval --task instruct needs.
  { printf 'Below is an instruction that describes a task. Write a response that '
    printf 'appropriately completes the request.\n\n### Instruction:\n### Input:\n### Response:\n'
    cat set.jsonl; } > text.txt
  "$bin" train --data text.txt --steps 2 --context-length 16 --d-model 16 --n-heads 2 --n-layers 1 \
    --batch-size 2 --sample-tokens 0 --eval-interval 0 --out lm.h5 > /dev/null 2>&1 ||
    fail "train a language model failed"
  "$bin" sample --checkpoint lm.h5 --instruction "Reverse the word." --input cat --tokens 5 \
    > /dev/null 2> stats.txt || fail "sample --instruction on a language model: $(cat stats.txt)"
  grep -q "not trained with --task instruct; its prompt is Alpaca's" stats.txt ||
    fail "no note that the prompt is Alpaca's: $(cat stats.txt)"
  expect_usage_error "it was not trained with --task instruct" \
    "$bin" eval --checkpoint lm.h5 --data set.jsonl --task instruct
  ;;
truncated)
  # A record longer than the context loses its response's tail: trained and evaluated,
  # counted by eval.
  make_records
  printf '{"instruction": "Say b.", "output": "%s"}\n' "$(printf 'b%.0s' $(seq 300))" >> set.jsonl
  "$bin" train "${small[@]}" --data set.jsonl --steps 2 --out run.h5 > train.txt 2>&1 ||
    fail "train with a long record failed: $(tail -3 train.txt)"
  "$bin" eval --checkpoint run.h5 --data set.jsonl --json > eval.txt
  grep -q "13 examples (1 cut to the context of 192)" eval.txt || fail "eval: $(head -1 eval.txt)"
  [ "$(json_value truncated eval.txt)" = 1 ] && [ "$(json_value examples eval.txt)" = 13 ] ||
    fail "eval --json: $(tail -1 eval.txt)"
  # with LoRA adapters, the closing sample answers through the merged model
  "$bin" train "${small[@]}" --data set.jsonl --steps 2 --lora-rank 2 --sample-tokens 5 \
      --init-from run.h5 --out lora.h5 > lora.txt 2>&1 || fail "LoRA instruct run: $(tail -2 lora.txt)"
  grep -q "^sample (greedy) for the instruction" lora.txt || fail "no closing sample: $(tail -2 lora.txt)"
  ;;
*)
  fail "unknown scenario"
  ;;
esac
