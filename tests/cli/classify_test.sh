#!/usr/bin/env bash
# Classification end to end (docs/finetuning.md): train --task classify on a synthetic set
# (classify_set.awk: spam holds the word "prize"), eval --json on a held-out file, classify
# on texts and standard input, --init-from a language model (and with LoRA), and the errors.
#   classify_test.sh SCENARIO PATH/TO/attograd
set -euo pipefail
source "$(dirname "$0")/scenario_lib.sh" "$@"
set_awk="$(dirname "$0")/classify_set.awk"
[ -f "$set_awk" ] || set_awk="$OLDPWD/$(dirname "$0")/classify_set.awk"

# A small classifier that learns the set in seconds (one thread: a model this small gains
# nothing from two, and loses much on a loaded machine).
small=(--task classify --tokenizer char --context-length 48 --d-model 48 --n-heads 4
       --n-layers 2 --batch-size 16 --dropout 0 --lr 3e-3 --warmup-steps 20 --threads 1
       --log-interval 100 --sample-tokens 0)

# json_number KEY FILE: the number after "KEY": in the file's last line
json_number() { tail -1 "$2" | sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p"; }

make_sets() {
  awk -v n=800 -v seed=7 -f "$set_awk" > spam.tsv
  awk -v n=300 -v seed=8 -f "$set_awk" > held.tsv
}

case "$scenario" in
learns_from_scratch)
  make_sets
  "$bin" train "${small[@]}" --data spam.tsv --steps 300 --eval-interval 100 --out cls.h5 > log.txt 2>&1 ||
    fail "train failed: $(tail -3 log.txt)"
  "$bin" inspect cls.h5 > i.txt
  grep -q "classifier.weight" i.txt || fail "no classifier in the checkpoint: $(cat i.txt)"
  grep -q "lm_head" i.txt && fail "a classifier's checkpoint holds an LM head"
  grep -q '"labels"' i.txt && grep -q '"num_classes": 2' i.txt || fail "labels or num_classes not stored"
  "$bin" eval --checkpoint cls.h5 --data held.tsv --json --threads 1 > eval.txt || fail "eval failed"
  acc=$(json_number accuracy eval.txt)
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }' || fail "held-out accuracy $acc < 0.95: $(cat eval.txt)"
  for key in loss examples labels per_label precision recall f1 support confusion; do
    tail -1 eval.txt | grep -q "\"$key\"" || fail "eval --json lacks $key: $(tail -1 eval.txt)"
  done
  [ "$(json_number examples eval.txt)" = 300 ] || fail "eval did not count 300 examples"
  grep -q "^accuracy " eval.txt && grep -q "precision" eval.txt && grep -q "^confusion" eval.txt ||
    fail "eval's table is missing: $(cat eval.txt)"
  "$bin" classify --checkpoint cls.h5 --threads 1 --text "we see a prize at the mat" > c.txt
  grep -q "^spam [01]\.[0-9]*  ham [01]\.[0-9]*$" c.txt || fail "classify did not say spam first: $(cat c.txt)"
  printf 'the cat sat on a mat\n\nit is a big prize\n' |
    "$bin" classify --checkpoint cls.h5 --threads 1 --json > cj.txt
  [ "$(wc -l < cj.txt)" -eq 2 ] || fail "two texts on stdin gave $(wc -l < cj.txt) lines"
  head -1 cj.txt | grep -q '"label":"ham".*"line":1' || fail "line 1 not ham: $(head -1 cj.txt)"
  tail -1 cj.txt | grep -q '"label":"spam".*"line":3' || fail "line 3 not spam: $(tail -1 cj.txt)"
  grep -q '"probabilities":{"ham":[0-9.e-]*,"spam":' cj.txt || fail "probabilities: $(cat cj.txt)"
  ;;
init_from_lm)
  make_sets
  cut -f1 spam.tsv | tail -n +2 > text.txt
  "$bin" train --tokenizer char --context-length 48 --d-model 48 --n-heads 4 --n-layers 2 \
      --batch-size 16 --steps 100 --threads 1 --sample-tokens 0 --eval-interval 0 \
      --data text.txt --out lm.h5 > /dev/null || fail "the language model did not train"
  "$bin" train "${small[@]}" --data spam.tsv --init-from lm.h5 --pool mean --steps 300 \
      --eval-interval 0 --out cls.h5 > log.txt 2>&1 || fail "--init-from an LM failed: $(tail -3 log.txt)"
  "$bin" inspect cls.h5 > i.txt
  grep -q '"pool": "mean"' i.txt || fail "--pool mean not stored"
  "$bin" eval --checkpoint cls.h5 --data held.tsv --json --threads 1 > eval.txt || fail "eval failed"
  acc=$(json_number accuracy eval.txt)
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }' || fail "held-out accuracy $acc < 0.95 after --init-from"
  # with LoRA: the body frozen, its adapters and the fresh head trained
  "$bin" train "${small[@]}" --data spam.tsv --init-from lm.h5 --lora-rank 4 --steps 300 \
      --eval-interval 0 --out lora.h5 > log.txt 2>&1 || fail "--lora-rank failed: $(tail -3 log.txt)"
  "$bin" eval --checkpoint lora.h5 --data held.tsv --json --threads 1 > eval.txt || fail "eval failed"
  acc=$(json_number accuracy eval.txt)
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }' || fail "held-out accuracy $acc < 0.95 with LoRA"
  ;;
resume_exact)
  # a classifier with dropout, stopped and resumed, is the run that never stopped
  make_sets
  "$bin" train "${small[@]}" --data spam.tsv --dropout 0.1 --steps 12 --eval-interval 0 \
      --out straight.h5 > /dev/null || fail "train failed"
  "$bin" train "${small[@]}" --data spam.tsv --dropout 0.1 --steps 12 --eval-interval 0 \
      --stop-at 5 --out split.h5 > /dev/null || fail "train --stop-at failed"
  "$bin" resume --checkpoint split.h5 --threads 1 > /dev/null || fail "resume failed"
  diff <(hashes straight.h5) <(hashes split.h5) > /dev/null || fail "the resumed classifier differs"
  hashes split.h5 | grep -q "^classifier.weight" || fail "the classifier was not compared"
  ;;
sms_layout)
  # the SMS Spam Collection's own layout, label<TAB>text without a header: detected and said,
  # a 2-class classifier (not one class per message); a quoted CSV with extra columns too
  make_sets
  tail -n +2 spam.tsv | awk -F'\t' '{ print $2 "\t" $1 }' > SMSSpamCollection
  tail -n +2 held.tsv | awk -F'\t' '{ print $2 "\t" $1 }' > held_sms.tsv
  "$bin" train "${small[@]}" --data SMSSpamCollection --steps 300 --eval-interval 0 --out cls.h5 \
    > log.txt 2>&1 || fail "train failed: $(tail -3 log.txt)"
  grep -q "SMSSpamCollection': no header line; column 1 is the label (2 different values in 800 rows), column 2 the text" log.txt ||
    fail "the detected layout is not said: $(head -5 log.txt)"
  grep -q "labels 0 ham, 1 spam" log.txt || fail "the labels are not on the data line: $(head -3 log.txt)"
  "$bin" inspect cls.h5 | grep -q '"num_classes": 2' || fail "not a 2-class classifier"
  "$bin" eval --checkpoint cls.h5 --data held_sms.tsv --json --threads 1 > eval.txt || fail "eval failed"
  acc=$(json_number accuracy eval.txt)
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }' || fail "held-out accuracy $acc < 0.95 in the SMS layout"
  # quoted texts (the char tokenizer learned no comma or quote to put inside them)
  tail -n +2 held.tsv | awk -F'\t' '{ printf "%d,\"%s\",%s,x\n", NR, $1, $2 }' > held.csv
  "$bin" eval --checkpoint cls.h5 --data held.csv --json --threads 1 > csv.txt || fail "eval of a CSV failed"
  grep -q "column 3 is the label .*column 2 the text .*ignored: column 1, column 4" csv.txt ||
    fail "the CSV's layout: $(head -2 csv.txt)"
  [ "$(json_number examples csv.txt)" = 300 ] || fail "the CSV did not give 300 examples"
  ;;
errors)
  make_sets
  printf 'text\tlabel\ngood\tpos\njust text\n' > nolabel.tsv
  expect_error 2 "nolabel.tsv' line 3: no label column" \
    "$bin" train "${small[@]}" --data nolabel.tsv --steps 1 --out x.h5
  awk 'NR == 1 { print; next } { print } END { print "a very long text indeed, longer than forty-eight characters in all\tham" }' \
    spam.tsv > long.tsv
  expect_error 2 "line 802: the text is 66 tokens, longer than the context of 48" \
    "$bin" train "${small[@]}" --data long.tsv --no-truncate --steps 1 --out x.h5
  "$bin" train "${small[@]}" --data spam.tsv --steps 5 --eval-interval 0 --out cls.h5 > /dev/null
  printf 'text\tlabel\nthe cat\tham\nthe dog\tegg\n' > unknown.tsv
  expect_error 2 "unknown.tsv' line 3: unknown label 'egg' (the model's labels: ham, spam)" \
    "$bin" eval --checkpoint cls.h5 --data unknown.tsv
  cut -f1 spam.tsv | tail -n +2 > text.txt
  "$bin" train --tokenizer char --context-length 48 --d-model 48 --n-heads 4 --n-layers 1 \
      --steps 1 --threads 1 --sample-tokens 0 --eval-interval 0 --data text.txt --out lm.h5 > /dev/null
  expect_usage_error "has no classification head" "$bin" classify --checkpoint lm.h5 --text "a cat"
  expect_usage_error "has no classification head" \
    "$bin" eval --checkpoint lm.h5 --data held.tsv --task classify
  expect_usage_error "is a classifier (train --task classify): it gives labels, not tokens" \
    "$bin" sample --checkpoint cls.h5 --tokens 3
  expect_usage_error "is a classifier (train --task classify): it gives labels, not tokens" \
    "$bin" sample --checkpoint cls.h5 --instruction "Say hi."
  expect_usage_error "--text is empty" "$bin" classify --checkpoint cls.h5 --text ""
  # no column with few values: one message per label is refused, with the fix
  awk -F'\t' 'NR > 1 { print $1 "\t" $1 " again" }' spam.tsv > nolabels.tsv
  expect_usage_error "has no header line and no column that looks like a label" \
    "$bin" train "${small[@]}" --data nolabels.tsv --steps 1 --out x.h5
  expect_usage_error "cannot be tokenized" "$bin" classify --checkpoint cls.h5 --text "Zebra"
  ;;
*)
  fail "unknown scenario '$scenario'"
  ;;
esac
