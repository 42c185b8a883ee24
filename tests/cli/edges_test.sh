#!/usr/bin/env bash
# Small edges of the command line, one scenario per ctest entry:
#   edges_test.sh SCENARIO PATH/TO/attograd
# optimizer_state_refused needs MAKE_HOSTILE_H5 (tests/make_hostile_h5.c) in the environment.
set -euo pipefail
source "$(dirname "$0")/scenario_lib.sh" "$@"

tiny=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 1 --batch-size 4 --eval-windows 4
      --log-interval 50 --threads 2 --sample-tokens 0)

case "$scenario" in
gradient_dump_refused)
  # a gradient dump has a checkpoint's layout: every command that needs a model says what
  # it is, in one line, exit 2
  "$bin" train "${tiny[@]}" --steps 2 --out run.h5 > /dev/null
  "$bin" sample --checkpoint run.h5 --tokens 300 --seed 1 > text.txt
  "$bin" eval --checkpoint run.h5 --data text.txt --dump-grads grads.h5 > /dev/null
  said="'grads.h5' is a gradient dump (eval --dump-grads"
  expect_usage_error "$said" "$bin" sample --checkpoint grads.h5
  expect_usage_error "$said" "$bin" train "${tiny[@]}" --steps 2 --init-from grads.h5 --out new.h5
  expect_usage_error "$said" "$bin" resume --checkpoint grads.h5 --out resumed.h5
  expect_usage_error "$said" "$bin" eval --checkpoint grads.h5 --data text.txt
  # nor is it weights to export, merge, classify with or report on
  expect_usage_error "$said" "$bin" export grads.h5 --format gguf --out grads.gguf
  expect_usage_error "$said" "$bin" merge grads.h5 --out merged.h5
  expect_usage_error "$said" "$bin" classify grads.h5 --text "hello"
  expect_usage_error "$said" "$bin" report --checkpoint grads.h5 --out report.html
  [ ! -e new.h5 ] && [ ! -e resumed.h5 ] || fail "a run from a gradient dump wrote a checkpoint"
  [ ! -e grads.gguf ] && [ ! -e merged.h5 ] && [ ! -e report.html ] ||
    fail "an export, merge or report of a gradient dump wrote a file"
  ;;
stop_at_passed)
  # resume --stop-at at or before the checkpoint's step trains nothing, writes nothing,
  # says so and exits 0
  "$bin" train "${tiny[@]}" --steps 10 --stop-at 4 --out run.h5 > /dev/null
  before=$(sha256sum run.h5)
  for at in 4 2; do
    "$bin" resume --checkpoint run.h5 --stop-at "$at" --metrics m.jsonl > log.txt ||
      fail "resume --stop-at $at failed: $(cat log.txt)"
    grep -qF -- "--stop-at $at is at or before the checkpoint's step 4: no step trained" log.txt ||
      fail "resume --stop-at $at did not say that it trains nothing: $(cat log.txt)"
    "$bin" resume --checkpoint run.h5 --stop-at "$at" --out other.h5 > /dev/null
  done
  [ "$(sha256sum run.h5)" = "$before" ] || fail "the checkpoint changed"
  [ ! -e m.jsonl ] && [ ! -e other.h5 ] || fail "a resume that trains nothing wrote a file"
  "$bin" resume --checkpoint run.h5 --stop-at 5 > log.txt
  "$bin" inspect run.h5 | grep -q "^step 5$" || fail "resume --stop-at 5 did not reach step 5"
  ;;
config_quoted_values)
  # a quoted value keeps '#' and ';'; an unquoted one ends at a comment, as before
  printf '%s\n' '# a run file' 'out = "run#2;b.h5"   # the whole name' 'steps = 2 ; two' \
    'metrics = m#1.jsonl' > quoted.cfg
  "$bin" train "${tiny[@]}" --config quoted.cfg > /dev/null
  [ -f 'run#2;b.h5' ] || fail "the quoted --out was cut: $(ls)"
  [ -f m ] || fail "the unquoted --metrics did not end at its comment: $(ls)"
  "$bin" inspect 'run#2;b.h5' | grep -q "^step 2$" || fail "the unquoted steps was not 2"
  printf '%s\n' 'out = "run#3.h5' > open.cfg
  expect_usage_error "open.cfg:1: the value's opening quote is never closed" \
    "$bin" train --config open.cfg
  ;;
repeated_options)
  # an option that collects values repeats, in a config file and on the command line
  "$bin" train "${tiny[@]}" --steps 2 --out run.h5 --metrics a.jsonl > /dev/null
  "$bin" train "${tiny[@]}" --steps 3 --out run2.h5 --metrics b.jsonl > /dev/null
  printf '%s\n' 'metrics = a.jsonl' 'metrics = b.jsonl' 'out = page.html' > report.cfg
  "$bin" report --config report.cfg > /dev/null || fail "report refused --metrics twice in a file"
  grep -q "b.jsonl" page.html && grep -q "a.jsonl" page.html || fail "the page lacks a run"
  head -c 2000 /dev/zero | tr '\0' 'a' > one.txt
  head -c 2000 /dev/zero | tr '\0' 'b' > two.txt
  "$bin" prepare --data one.txt --data two.txt --out both > /dev/null
  "$bin" prepare --data one.txt two.txt --out together > /dev/null
  cmp both/meta.json together/meta.json > /dev/null ||
    fail "--data twice is not --data with two files: $(cat both/meta.json)"
  printf '%s\n' 'data = one.txt' 'data = two.txt' 'out = from_file' > prepare.cfg
  "$bin" prepare --config prepare.cfg > /dev/null
  cmp both/meta.json from_file/meta.json > /dev/null || fail "a config's two data lines differ"
  printf '%s\n' 'stop = e' 'stop = "t;"' 'tokens = 40' 'seed = 3' > stops.cfg
  "$bin" sample --checkpoint run.h5 --config stops.cfg --stop a > s.txt ||
    fail "sample refused --stop twice in a file"
  printf '%s\n' 'tokens = 1' 'seed = 1' 'seed = 2' > twice.cfg
  expect_usage_error "twice.cfg:3: 'seed' is already set on line 2" \
    "$bin" sample --checkpoint run.h5 --config twice.cfg
  ;;
optimizer_state_refused)
  # a checkpoint whose AdamW second moments an edit made negative: one line naming the file
  # and the tensor, exit 1, for every command that reads the optimizer state
  [ -n "${MAKE_HOSTILE_H5:-}" ] || { echo "SKIP: MAKE_HOSTILE_H5 is not set"; exit 77; }
  echo "not a secret" > secret.txt
  "$MAKE_HOSTILE_H5" . secret.txt negative_moments.h5 negative_step.h5
  expect_error 2 "'negative_moments.h5': /optimizer/v/w holds 2 negative values (first at [1, 0]: -0.25)" \
    "$bin" resume --checkpoint negative_moments.h5 --out out.h5
  expect_error 2 "'negative_step.h5': /optimizer attribute 'step': the step count is -3" \
    "$bin" resume --checkpoint negative_step.h5 --out out.h5
  expect_error 2 "/optimizer/v/w holds 2 negative values" "$bin" inspect negative_moments.h5
  ;;
packed_blocks_refused)
  # a frozen weight's blocks that do not add up, or that the file's own config trains: one
  # line naming the file and the tensor, exit 2, for every command that reads weights
  [ -n "${MAKE_HOSTILE_H5:-}" ] || { echo "SKIP: MAKE_HOSTILE_H5 is not set"; exit 77; }
  echo "not a secret" > secret.txt
  "$MAKE_HOSTILE_H5" . secret.txt packed_wrong_bytes.h5 packed_unknown_format.h5 \
    packed_partial_block.h5 packed_format_mismatch.h5 packed_trained.h5
  for command in "sample --checkpoint" "inspect" "eval --data secret.txt --checkpoint" \
                 "export --format gguf --out x.gguf"; do
    # shellcheck disable=SC2086  # the command's words
    expect_error 2 "'packed_wrong_bytes.h5': /model/w holds [2, 33] of 1-byte words" \
      "$bin" $command packed_wrong_bytes.h5
    # shellcheck disable=SC2086
    expect_error 2 "'packed_unknown_format.h5': /model/w has format 'q3_k'" \
      "$bin" $command packed_unknown_format.h5
    # shellcheck disable=SC2086
    expect_error 2 "'packed_partial_block.h5': /model/w has rows of 48 weights" \
      "$bin" $command packed_partial_block.h5
    # shellcheck disable=SC2086
    expect_error 2 "'packed_format_mismatch.h5': /model/w holds [2, 144] of 1-byte words, but a [2, 256] weight in q6_k blocks" \
      "$bin" $command packed_format_mismatch.h5
  done
  said="'packed_trained.h5': /model/tok_emb.weight is held as q8_0 blocks, but the file's config trains it"
  expect_error 2 "$said" "$bin" sample --checkpoint packed_trained.h5
  expect_error 2 "$said" "$bin" eval --data secret.txt --checkpoint packed_trained.h5
  expect_error 2 "$said" "$bin" export packed_trained.h5 --format gguf --out x.gguf
  [ ! -e x.gguf ] || fail "a refused file was exported"

  ;;
*)
  fail "unknown scenario"
  ;;
esac
echo "ok ($scenario)"
