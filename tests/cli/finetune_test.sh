#!/usr/bin/env bash
# A run's length and end as fine-tuning needs them (docs/training.md "How long a run is"):
# --epochs instead of --steps, the warm-up against the run, the ETA before the first step,
# --early-stopping and --keep-best end to end.
#   finetune_test.sh SCENARIO PATH/TO/attograd
set -euo pipefail
source "$(dirname "$0")/scenario_lib.sh" "$@"
set_awk="$(dirname "$0")/classify_set.awk"
[ -f "$set_awk" ] || set_awk="$OLDPWD/$(dirname "$0")/classify_set.awk"

tiny=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 1 --batch-size 8 --threads 1
      --sample-tokens 0 --log-interval 1000)
classifier=(--task classify --tokenizer char --context-length 48 --d-model 48 --n-heads 4
            --n-layers 2 --batch-size 16 --dropout 0 --lr 3e-3 --threads 1 --sample-tokens 0
            --log-interval 1000)

# make_plan_base FILE: the 20M-parameter training checkpoint the plan_* scenarios start from
# (its AdamW state in the file: twice the weights, which a run --init-from must not read)
plan_text() {
  for i in $(seq 1 2000); do echo "line $i: the quick brown fox jumps over the lazy dog $((i * 7 % 13))"; done
}
make_plan_base() {
  plan_text > base_text.txt
  "$bin" train --tokenizer byte --context-length 256 --d-model 512 --n-heads 8 --n-layers 6 \
    --batch-size 2 --steps 1 --threads 2 --sample-tokens 0 --eval-interval 0 --data base_text.txt \
    --out "$1" > base.txt || fail "the base run failed: $(tail -3 base.txt)"
}

# plan_holds_peak TASK_OPTIONS...: a run --init-from that checkpoint peaks within 10% of the
# memory plan it prints, whose runtime term is the fixed allowance for the program itself
# (train/memory_plan.h: kRuntimeBytes, 48 MiB). Under ctest the checkpoint is made once, by
# finetune.plan_base, in $PLAN_BASE; run alone, a scenario makes its own. Two evaluations of
# 8 windows: an evaluation's peak is a batch's, whatever the count.
plan_holds_peak() {
  plan_text > text.txt
  local base=${PLAN_BASE:-}
  if [ -z "$base" ] || [ ! -f "$base" ]; then base=base.h5; make_plan_base "$base"; fi
  local kb planned
  kb=$(peak_rss_kb "$bin" train --init-from "$base" --threads 2 --steps 3 --batch-size 4 \
    --log-interval 1000 --eval-interval 2 --eval-windows 8 --sample-tokens 16 --metrics m.jsonl \
    --out run.h5 "$@")
  planned=$(grep -o '"total":[0-9]*' m.jsonl | head -1 | cut -d: -f2)
  [ -n "$planned" ] || fail "no plan in m.jsonl"
  echo "$*: peak RSS $((kb / 1024)) MiB, planned $((planned >> 20)) MiB"
  [ "$kb" -le $((planned / 1024 * 11 / 10)) ] ||
    fail "$*: peak RSS $((kb / 1024)) MiB is over the plan's $((planned >> 20)) MiB by more than 10%"
}

case "$scenario" in
plan_base)
  [ -n "${PLAN_BASE:-}" ] || fail "PLAN_BASE names no file to write"
  rm -f "$PLAN_BASE"
  make_plan_base "$PLAN_BASE"
  ;;
plan_lm) plan_holds_peak --data text.txt ;;
plan_lora) plan_holds_peak --data text.txt --lora-rank 8 ;;
plan_classify)
  awk -v n=400 -v seed=3 -f "$set_awk" > set.tsv
  plan_holds_peak --task classify --data set.tsv
  ;;
plan_classify_lora)
  awk -v n=400 -v seed=3 -f "$set_awk" > set.tsv
  plan_holds_peak --task classify --data set.tsv --lora-rank 8
  ;;
plan_instruct_lora)
  for i in $(seq 1 200); do
    printf '{"instruction": "Repeat %s.", "input": "%s", "output": "%s %s"}\n' $i $((i % 7)) $i $i
  done > records.jsonl
  plan_holds_peak --task instruct --data records.jsonl --lora-rank 8
  ;;
plan_chat)
  for i in $(seq 1 100); do
    printf '{"messages": [{"role": "user", "content": "what is %s plus 1?"}, {"role": "assistant", "content": "%s"}]}\n' $i $((i + 1))
  done > chat.jsonl
  plan_holds_peak --task chat --data chat.jsonl
  ;;
epochs)
  expect_usage_error "--steps and --epochs both say how long to train" \
    "$bin" train "${tiny[@]}" --steps 5 --epochs 2 --out a.h5
  printf 'steps = 5\n' > run.cfg
  expect_usage_error "--steps and --epochs" "$bin" train --config run.cfg --epochs 2 --out a.h5
  awk -v n=200 -v seed=7 -f "$set_awk" > set.tsv
  "$bin" train "${classifier[@]}" --data set.tsv --epochs 2 --eval-interval 0 --out e.h5 > log.txt ||
    fail "train --epochs failed: $(tail -3 log.txt)"
  # 200 records, a tenth held out: 180 examples, 2 passes at 16 a step = 23 steps
  grep -q "^schedule: 23 steps (2 epochs of 180 training examples, 16 a step) | warm-up 2 steps" log.txt ||
    fail "the schedule line: $(grep schedule log.txt)"
  "$bin" inspect e.h5 | grep -q '"epochs": 2' || fail "the checkpoint does not record epochs"
  "$bin" inspect e.h5 | grep -q "^step 23$" || fail "the run did not end at step 23"
  ;;
warmup_warned)
  "$bin" train "${tiny[@]}" --steps 5 --warmup-steps 30 --out w.h5 > log.txt 2> err.txt ||
    fail "train failed: $(cat err.txt)"
  [ "$(wc -l < err.txt)" -eq 1 ] || fail "expected one line on stderr: $(cat err.txt)"
  grep -q "warning: --warmup-steps 30 is longer than the run's 5 steps" err.txt ||
    fail "no warning: $(cat err.txt)"
  "$bin" train "${tiny[@]}" --steps 5 --out d.h5 > log.txt 2> err.txt || fail "train failed"
  [ ! -s err.txt ] || fail "the default warm-up was warned of: $(cat err.txt)"
  grep -q "warm-up 0 steps" log.txt || fail "the default warm-up of 5 steps: $(grep schedule log.txt)"
  ;;
eta_first)
  "$bin" train "${tiny[@]}" --steps 3 --log-interval 1 --out t.h5 > log.txt || fail "train failed"
  eta=$(grep -n "^ETA [0-9:]* for 3 steps, from one measured micro-batch" log.txt | cut -d: -f1)
  first=$(grep -n "^step *1/3" log.txt | cut -d: -f1)
  [ -n "$eta" ] && [ -n "$first" ] && [ "$eta" -lt "$first" ] ||
    fail "no ETA before the first step: $(cat log.txt)"
  ;;
early_stopping)
  # a classifier reaches accuracy 1 on this set and cannot improve on it: patience 2 stops it
  awk -v n=400 -v seed=7 -f "$set_awk" > set.tsv
  "$bin" train "${classifier[@]}" --data set.tsv --steps 1000 --eval-interval 20 \
      --early-stopping 2 --keep-best --metrics m.jsonl --out c.h5 > log.txt 2> err.txt ||
    fail "train failed: $(cat err.txt)"
  line=$(grep "attograd: early stopping: val_accuracy has not improved on" log.txt) ||
    fail "no early stop: $(tail -5 log.txt)"
  at=$(echo "$line" | sed -n 's/.*stopping after step \([0-9]*\) of 1000.*/\1/p')
  best=$(echo "$line" | sed -n 's/.*(step \([0-9]*\)) for 2 evaluations.*/\1/p')
  [ -n "$at" ] && [ "$at" -eq $((best + 40)) ] || fail "stopped at '$at', best at '$best': $line"
  grep -q '"event":"stop".*"reason":"early stopping: val_accuracy' m.jsonl ||
    fail "--metrics does not record the stop"
  "$bin" inspect c.h5 | grep -q "^step $at$" || fail "c.h5 is not at step $at"
  [ -f c.best.h5 ] || fail "no c.best.h5"
  "$bin" inspect c.best.h5 | grep -q "^step $best$" || fail "c.best.h5 is not at step $best"
  # a fresh run may not replace another's best checkpoint
  expect_usage_error "--keep-best 'c.best.h5' already holds" \
    "$bin" train "${classifier[@]}" --data set.tsv --steps 5 --keep-best --out c.h5
  ;;
*) fail "unknown scenario" ;;
esac
