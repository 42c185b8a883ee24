#!/usr/bin/env bash
# A command line that forgives, one scenario per ctest entry:
#   forgiving_test.sh SCENARIO PATH/TO/attograd
# --version; a checkpoint named without --checkpoint, or attograd.h5 when none is named;
# report telling a checkpoint from a metrics file; eval on the data a checkpoint records;
# gradcheck --threads; --help's numbers as typed; one "error:" per line; the shipped config
# files of examples/configs parse.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
source "$here/scenario_lib.sh" "$@"
source_dir=$(readlink -f "$here/../..")

tiny=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 2 --batch-size 4 --dropout 0
      --eval-windows 4 --log-interval 50 --threads 1 --sample-tokens 0)
text() { printf 'the cat sat on the mat and the dog ran home. the end of the line.\n%.0s' {1..30}; }

case "$scenario" in
version)
  for form in --version -V version; do
    "$bin" $form > v.txt || fail "attograd $form failed"
    for field in "^attograd [0-9]+\.[0-9]+" "^commit: +([0-9a-f]{12}(-modified)?|unknown)$" \
                 "^compiler: +(GCC|Clang) [0-9]" "^BLAS: +OpenBLAS [0-9].*kernel in use: [A-Za-z]" \
                 "^threads: +(the same bits on any thread count|bits differ with the thread count)" \
                 "^oneDNN: +[0-9]+\.[0-9]+\.[0-9]+; bfloat16 matmuls: " "^MPI: +(compiled in, .+|not compiled in)"; do
      grep -Eq "$field" v.txt || fail "attograd $form: no line matching '$field': $(cat v.txt)"
    done
  done
  # the commit the program was built from, when the source tree is a git checkout
  if command -v git > /dev/null && head=$(git -C "$source_dir" rev-parse --short=12 HEAD 2> /dev/null); then
    grep -Eq "^commit: +$head(-modified)?$" v.txt || fail "not the source tree's commit $head: $(grep commit v.txt)"
  fi
  expect_usage_error "takes no arguments" "$bin" version extra
  # a tree without git (a tarball), also when unpacked inside another repository: "unknown"
  mkdir tarball && cmake -DSOURCE_DIR="$work/tarball" -DVERSION=0.1 -DOUT=info.h \
    -P "$source_dir/cmake/build_info.cmake"
  grep -qx '#define ATTOGRAD_COMMIT "unknown"' info.h || fail "a tree without git: $(cat info.h)"
  if command -v git > /dev/null; then
    git init -q outer && mkdir outer/attograd &&
      (cd outer && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m x)
    cmake -DSOURCE_DIR="$work/outer/attograd" -DVERSION=0.1 -DOUT=inner.h -P "$source_dir/cmake/build_info.cmake"
    grep -qx '#define ATTOGRAD_COMMIT "unknown"' inner.h || fail "took the enclosing repository's commit: $(cat inner.h)"
  fi
  ;;
positional_checkpoint)
  text > t.txt
  "$bin" train "${tiny[@]}" --data t.txt --steps 3 --out run.h5 > /dev/null
  "$bin" sample run.h5 --tokens 5 --seed 1 > a.txt 2> /dev/null || fail "sample run.h5 failed"
  "$bin" sample --checkpoint run.h5 --tokens 5 --seed 1 > b.txt 2> /dev/null
  cmp -s a.txt b.txt || fail "sample run.h5 is not sample --checkpoint run.h5"
  "$bin" eval run.h5 --data t.txt > e.txt || fail "eval run.h5 --data t.txt failed"
  grep -q '^loss [0-9]' e.txt || fail "eval run.h5 printed no loss: $(cat e.txt)"
  "$bin" inspect run.h5 | grep -q "tok_emb.weight" || fail "inspect run.h5 showed no parameters"
  "$bin" attention run.h5 --prompt "the cat" --layer 0 --head 0 > /dev/null || fail "attention run.h5 failed"
  "$bin" export run.h5 --format hf --out hf > /dev/null || fail "export run.h5 failed"
  "$bin" resume run.h5 --steps 4 > /dev/null || fail "resume run.h5 failed"
  [ "$("$bin" inspect run.h5 | sed -n 's/^step //p')" = 4 ] || fail "resume run.h5 did not train to step 4"
  expect_usage_error "more than one value without an option name: only the checkpoint" \
    "$bin" sample run.h5 other.h5
  expect_usage_error "a value without an option name" "$bin" train stray
  ;;
default_checkpoint)
  # none here: the message says how to name one
  expect_usage_error "no checkpoint given, and no attograd.h5 (train's default output) here" "$bin" sample
  expect_usage_error "no checkpoint given, and no attograd.h5" "$bin" eval --data x.txt
  expect_usage_error "(there is no attograd.h5 here, train's default output)" "$bin" report --out r.html
  text > t.txt
  "$bin" train "${tiny[@]}" --data t.txt --steps 3 > /dev/null
  "$bin" sample --tokens 5 > s.txt 2> err.txt || fail "sample without a checkpoint failed: $(cat err.txt)"
  grep -q "attograd sample: using attograd.h5 (no checkpoint given" err.txt || fail "sample did not say which file: $(cat err.txt)"
  "$bin" eval --data t.txt > e.txt 2> err.txt || fail "eval without a checkpoint failed: $(cat err.txt)"
  grep -q "attograd eval: using attograd.h5" err.txt || fail "eval did not say which file: $(cat err.txt)"
  "$bin" report --sample-tokens 0 --out r.html > /dev/null 2> err.txt || fail "report without a checkpoint failed: $(cat err.txt)"
  grep -q "attograd report: using attograd.h5" err.txt || fail "report did not say which file: $(cat err.txt)"
  [ -s r.html ] || fail "report wrote no page"
  ;;
report_file_kinds)
  text > t.txt
  "$bin" train "${tiny[@]}" --data t.txt --steps 3 --out run.h5 --metrics m.jsonl > /dev/null
  expect_usage_error "--checkpoint 'm.jsonl' is not a checkpoint (not HDF5); it reads as a metrics file (JSON lines): give a metrics file as --metrics m.jsonl" \
    "$bin" report --checkpoint m.jsonl --out r.html
  expect_usage_error "--metrics 'run.h5' is a checkpoint (HDF5), not a metrics file (train --metrics writes JSON lines): give it as --checkpoint run.h5" \
    "$bin" report --metrics run.h5 --out r.html
  cp run.h5 run2.h5
  expect_usage_error "'run.h5' and 'run2.h5' are both checkpoints" "$bin" report run.h5 run2.h5 --out r.html
  # bare files are sorted by what they hold
  "$bin" report m.jsonl run.h5 --sample-tokens 0 --out r.html > /dev/null || fail "report m.jsonl run.h5 failed"
  [ -s r.html ] || fail "no page"
  ;;
eval_recorded_data)
  text > t.txt
  "$bin" train "${tiny[@]}" --data t.txt --steps 3 --out run.h5 > /dev/null
  "$bin" eval run.h5 > a.txt 2> err.txt || fail "eval without --data failed: $(cat err.txt)"
  grep -q "no --data given: evaluating on 't.txt', the data 'run.h5' trained on (unchanged since)" err.txt ||
    fail "eval did not say which data: $(cat err.txt)"
  grep -q "its validation part, cut as training cut it (--split all: the whole text)" err.txt ||
    fail "eval did not say which part: $(cat err.txt)"
  "$bin" eval run.h5 --data t.txt --split val > b.txt
  cmp -s a.txt b.txt || fail "eval on the recorded data differs from --data t.txt --split val: $(cat a.txt) / $(cat b.txt)"
  # edited since: refused, saying how to evaluate on it anyway
  echo "one more line" >> t.txt
  expect_usage_error "'t.txt', the data 'run.h5' trained on, has changed since" "$bin" eval run.h5
  grep -qF "give --data 't.txt' to evaluate on it as it is now" err.txt || fail "no way on: $(cat err.txt)"
  rm t.txt
  expect_usage_error "'t.txt', the data 'run.h5' trained on, cannot be read now" "$bin" eval run.h5
  grep -qF "the option '--data' (or '--multiple-choice') is required (if it moved, name its new place)" err.txt ||
    fail "no way on: $(cat err.txt)"
  # the built-in corpus is no file to evaluate on
  "$bin" train "${tiny[@]}" --steps 2 --out corpus.h5 > /dev/null
  expect_usage_error "'corpus.h5' trained on the built-in corpus, no file to evaluate on: the option '--data' (or '--multiple-choice') is required" "$bin" eval corpus.h5
  # a prepared folder: its validation part, as with --data
  text > t.txt
  "$bin" prepare --data t.txt --out t.prepared > /dev/null
  "$bin" train "${tiny[@]}" --data t.prepared --steps 3 --out folder.h5 > /dev/null
  "$bin" eval folder.h5 > a.txt 2> err.txt || fail "eval of a folder's run failed: $(cat err.txt)"
  grep -q "evaluating on 't.prepared'" err.txt || fail "the folder was not named: $(cat err.txt)"
  "$bin" eval folder.h5 --data t.prepared > b.txt
  cmp -s a.txt b.txt || fail "eval on the recorded folder differs from --data t.prepared"
  ;;
gradcheck_threads)
  "$bin" gradcheck --threads 1 --filter relu > g.txt || fail "gradcheck --threads 1 failed: $(cat g.txt)"
  grep -q "passed, 0 failed" g.txt || fail "gradcheck --threads 1: $(tail -1 g.txt)"
  expect_usage_error "--threads must be >= 1, got 0" "$bin" gradcheck --threads 0
  ;;
help_numbers)
  # every default as it would be typed: 0.1, never 0.10000000000000001
  commands=$("$bin" --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
  [ "$(wc -w <<< "$commands")" -gt 10 ] || fail "no commands listed: $commands"
  for c in $commands; do
    "$bin" "$c" --help > h.txt 2>&1 || fail "$c --help failed"
    if grep -Eq '[0-9]\.[0-9]*(0000|9999)[0-9]' h.txt; then
      fail "$c --help prints a number not as typed: $(grep -E '[0-9]\.[0-9]*(0000|9999)[0-9]' h.txt)"
    fi
  done
  "$bin" prepare --help | grep -q -- "--val-fraction arg (=0.1)" || fail "prepare --help: $(grep val-fraction <("$bin" prepare --help))"
  ;;
one_error_prefix)
  text > t.txt
  "$bin" train "${tiny[@]}" --data t.txt --steps 2 --out run.h5 > /dev/null
  touch afile
  # each way a command fails, through each reporter (usage, failure, a library's own
  # "filesystem error:" or "error:" text, the last-resort handler): one "error:" per line
  rc=0
  { "$bin" export run.h5 --format hf --out afile/sub 2>&1 || true
    "$bin" train --steps x 2>&1 || true
    "$bin" sample --checkpoint missing.h5 2>&1 || true
    "$bin" gradcheck --eps -1 2>&1 || true
    "$bin" demo --steps x 2>&1 || true
    "$bin" bench --no-such 2>&1 || true
    "$bin" inspect t.txt 2>&1 || true
    "$bin" fly 2>&1 || true; } > all.txt
  [ "$(grep -c "error:" all.txt)" -ge 8 ] || fail "not every command failed with an error line: $(cat all.txt)"
  if grep -E "error:.*error:" all.txt; then fail "a line says error twice"; fi
  grep -q "afile" all.txt || fail "the export's failure does not name the path: $(cat all.txt)"
  ;;
shipped_configs)
  # every config file shipped in examples/configs parses and validates (no file is read:
  # --dry-run stops before the data and the outputs)
  n=0
  for cfg in "$source_dir"/examples/configs/*.cfg; do
    "$bin" train --config "$cfg" --dry-run > c.json 2> err.txt ||
      fail "$(basename "$cfg") does not parse: $(cat err.txt)"
    grep -q '"steps"' c.json || fail "$(basename "$cfg"): --dry-run printed no config: $(cat c.json)"
    n=$((n + 1))
  done
  [ "$n" -ge 3 ] || fail "only $n config files in examples/configs"
  # --dry-run checks what a real run checks first
  printf 'steps = many\n' > bad.cfg
  expect_usage_error "bad.cfg:1" "$bin" train --config bad.cfg --dry-run
  expect_usage_error "n_heads" "$bin" train --d-model 30 --n-heads 4 --dry-run
  [ ! -e attograd.h5 ] || fail "--dry-run wrote a checkpoint"
  ;;
*) fail "unknown scenario" ;;
esac
echo "ok ($scenario)"
