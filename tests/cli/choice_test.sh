#!/usr/bin/env bash
# `eval --multiple-choice` (docs/finetuning.md), one scenario per ctest entry:
#   choice_test.sh SCENARIO PATH/TO/attograd
# The items are made here from a text of random words (choice_items.awk; no download). A
# model that memorised the text picks the true endings; an untrained one scores near chance.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
source "$here/scenario_lib.sh" "$@"

gen="$here/choice_items.awk"
make_text() { awk -v mode=text -v words=150 -f "$gen" > text.txt; }
make_items() { awk -v mode=items -v words=150 -v n="$1" -v k=4 -f "$gen" > "${2:-items.jsonl}"; }
model=(--context-length 32 --d-model 64 --n-heads 4 --n-layers 2 --batch-size 16 --lr 3e-3
       --threads 1 --sample-tokens 0 --eval-interval 0 --log-interval 1000 --val-fraction 0)
train_model() {  # train_model OUT.h5 STEPS: 600 steps memorise the 150 words (seconds)
  make_text
  "$bin" train "${model[@]}" --data text.txt --steps "$2" --out "$1" > /dev/null
}
# field JSON KEY: the value of KEY in the one-line JSON object
field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" <<< "$1"; }
choices() { "$bin" eval --checkpoint "$1" --multiple-choice "${@:2}" --json | tail -1; }

case "$scenario" in
memorised_and_random)
  train_model memorised.h5 600
  make_items 300
  "$bin" eval --checkpoint memorised.h5 --multiple-choice items.jsonl --json > out.txt
  grep -qE "^acc [0-9.]+ \(stderr [0-9.]+\) \| acc_norm [0-9.]+ \(stderr [0-9.]+\) \| 300 items \(chance 0\.2500\)$" out.txt ||
    fail "not the human line: $(cat out.txt)"
  j=$(tail -1 out.txt)
  memorised=$j  # what choices() prints for it: the same command's last line
  awk -v a="$(field "$j" acc)" -v b="$(field "$j" acc_norm)" 'BEGIN { exit !(a >= 0.95 && b >= 0.95) }' ||
    fail "the memorising model does not pick the true endings: $j"
  train_model random.h5 0
  j=$(choices random.h5 items.jsonl)
  [ "$(field "$j" n)" = 300 ] || fail "not 300 items: $j"
  for key in acc acc_norm; do
    awk -v p="$(field "$j" "$key")" -v s="$(field "$j" "${key}_stderr")" -v c="$(field "$j" chance)" \
      'BEGIN { d = p - c; if (d < 0) d = -d; exit !(d <= 3 * s && s > 0.02) }' ||
      fail "the untrained model's $key is not within 3 standard errors of chance: $j"
  done
  # the same numbers for any thread count
  for threads in 2 3; do
    [ "$(choices memorised.h5 items.jsonl --threads "$threads")" = "$memorised" ] ||
      fail "--threads $threads changed the result"
  done
  ;;
limit_and_json)
  train_model run.h5 100
  make_items 300
  j=$(choices run.h5 items.jsonl)
  for key in acc acc_norm n acc_stderr acc_norm_stderr chance truncated; do
    [ -n "$(field "$j" "$key")" ] || fail "--json has no '$key': $j"
  done
  [ "$("$bin" eval --checkpoint run.h5 --multiple-choice items.jsonl --json | wc -l)" -eq 2 ] ||
    fail "--json is not the human line and one JSON line"
  # --limit 40 scores the first 40 items: the same as a file of those 40 lines
  head -40 items.jsonl > first.jsonl
  a=$(choices run.h5 items.jsonl --limit 40)
  b=$(choices run.h5 first.jsonl)
  [ "$(field "$a" n)" = 40 ] || fail "--limit 40 scored $(field "$a" n) items"
  [ "${a/items.jsonl/first.jsonl}" = "$b" ] || fail "--limit 40: $a against the first 40 lines: $b"
  # the question shape with letters, texts and numbers for answers scores the same
  awk '{ sub(/"ctx"/, "\"question\""); sub(/"endings"/, "\"choices\"")
         match($0, /"label": [0-9]+/); i = substr($0, RSTART + 9, RLENGTH - 9) + 0
         sub(/"label": [0-9]+/, "\"answer\": " (NR % 2 ? "\"" substr("ABCD", i + 1, 1) "\"" : i)); print }' \
    first.jsonl > questions.jsonl
  c=$(choices run.h5 questions.jsonl)
  [ "${b/first.jsonl/questions.jsonl}" = "$c" ] || fail "the question shape scores differently: $c vs $b"
  # a window shorter than contexts and endings: the contexts lose their oldest tokens
  d=$(choices run.h5 items.jsonl --limit 40 --context-length 12)
  [ "$(field "$d" truncated)" -gt 0 ] || fail "--context-length 12 cut no context: $d"
  ;;
errors)
  train_model run.h5 0
  make_items 5
  ev=("$bin" eval --checkpoint run.h5)
  expect_usage_error "give one of them" "${ev[@]}" --data text.txt --multiple-choice items.jsonl
  # (without either, eval takes the data run.h5 trained on: here it is gone)
  mv text.txt text.away
  expect_usage_error "'--data' (or '--multiple-choice') is required" "${ev[@]}"
  mv text.away text.txt
  expect_usage_error "--limit is for --multiple-choice" "${ev[@]}" --data text.txt --limit 3
  expect_usage_error "--limit must be >= 0" "${ev[@]}" --multiple-choice items.jsonl --limit -1
  expect_usage_error "--dump-grads is for --data" "${ev[@]}" --multiple-choice items.jsonl --dump-grads g.h5
  expect_usage_error "--split is for --data" "${ev[@]}" --multiple-choice items.jsonl --split train
  expect_usage_error "--task is for --data" "${ev[@]}" --multiple-choice items.jsonl --task classify
  for _ in $(seq 1 10); do printf 'ant bee\tyes\ncat dog\tno\n'; done > labels.tsv
  "$bin" train --task classify --data labels.tsv --context-length 16 --d-model 16 --n-heads 2 \
    --n-layers 1 --steps 1 --sample-tokens 0 --threads 1 --out classifier.h5 > /dev/null
  expect_usage_error "this checkpoint is a classifier" \
    "$bin" eval --checkpoint classifier.h5 --multiple-choice items.jsonl
  expect_usage_error "absent.jsonl" "${ev[@]}" --multiple-choice absent.jsonl
  expect_usage_error "not a regular file" "${ev[@]}" --multiple-choice .
  # a bad line anywhere fails before any scoring, naming file, line and field
  { head -2 items.jsonl; echo; echo '{"ctx": "ant bee", "endings": ["cat", "dog"], "label": 2}'; } > bad.jsonl
  expect_error 2 "bad.jsonl: line 4: 'label' is 2, outside 0 to 1 (2 endings)" "${ev[@]}" --multiple-choice bad.jsonl
  [ ! -s out.txt ] || fail "a bad file printed a result: $(cat out.txt)"
  # " " + 9 words: 36 characters, a window of 32
  echo '{"ctx": "ant", "endings": ["bee", "ant bee cat dog elk fox gnu hen jay"], "label": 0}' > long.jsonl
  expect_error 2 "long.jsonl: line 1: 'endings[1]' is 36 tokens" "${ev[@]}" --multiple-choice long.jsonl
  echo '{"question": "ant", "choices": ["bee", "CAT"], "answer": "B"}' > chars.jsonl
  expect_error 2 "chars.jsonl: line 1: 'choices[1]': character 'C'" "${ev[@]}" --multiple-choice chars.jsonl
  printf '\n\n' > empty.jsonl
  expect_error 2 "empty.jsonl: no items" "${ev[@]}" --multiple-choice empty.jsonl
  # with --limit, what follows the items scored is not read
  "${ev[@]}" --multiple-choice bad.jsonl --limit 2 > /dev/null || fail "--limit 2 read past its items"
  ;;
bounded_memory)
  # items are read a line at a time: 10 times the items in the same memory
  make_text
  "$bin" train --context-length 32 --d-model 8 --n-heads 1 --n-layers 1 --steps 0 \
    --sample-tokens 0 --data text.txt --out tiny.h5 > /dev/null
  make_items 2000 small.jsonl
  make_items 20000 big.jsonl
  small_kb=$(peak_rss_kb "$bin" eval --checkpoint tiny.h5 --multiple-choice small.jsonl --threads 1)
  big_kb=$(peak_rss_kb "$bin" eval --checkpoint tiny.h5 --multiple-choice big.jsonl --threads 1)
  echo "eval --multiple-choice: peak RSS ${small_kb} kB on 2000 items, ${big_kb} kB on 20000"
  grep -q "20000 items" run.out || fail "no result: $(cat run.out)"
  [ "$((big_kb - small_kb))" -lt 2048 ] || fail "memory grew from ${small_kb} kB to ${big_kb} kB"
  ;;
mpi_shared)
  # items shared out over the ranks give the single process's numbers, printed once
  command -v mpirun > /dev/null || { echo "mpirun not installed: skipped"; exit 77; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
  mpi_leak_checks
  train_model run.h5 100
  make_items 101
  one=$(choices run.h5 items.jsonl --threads 1)
  for np in 2 3; do
    mpirun --oversubscribe -np "$np" "$bin" eval --checkpoint run.h5 --multiple-choice items.jsonl \
      --json --threads 1 > np.txt 2> err.txt || fail "-np $np: $(cat err.txt)"
    [ "$(wc -l < np.txt)" -eq 2 ] || fail "-np $np printed $(wc -l < np.txt) lines, not rank 0's 2"
    [ "$(tail -1 np.txt)" = "$one" ] || fail "-np $np: $(tail -1 np.txt) against one process: $one"
  done
  # a bad line: one message, from rank 0, before any scoring
  { cat items.jsonl; echo '{"ctx": "ant"}'; } > bad.jsonl
  rc=0
  mpirun --oversubscribe -np 2 "$bin" eval --checkpoint run.h5 --multiple-choice bad.jsonl > out.txt 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] || fail "a bad line under mpirun exited $rc, not 2: $(cat err.txt)"
  [ "$(grep -c "attograd eval: error" err.txt)" -eq 1 ] || fail "not one message: $(cat err.txt)"
  grep -q "bad.jsonl: line 102: 'endings' is missing" err.txt || fail "$(cat err.txt)"
  ;;
*) fail "unknown scenario" ;;
esac
echo "ok ($scenario)"
