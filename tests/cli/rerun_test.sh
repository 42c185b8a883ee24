#!/usr/bin/env bash
# Re-running, interrupting, resuming and reporting as a person iterating does
# (docs/training.md), one scenario per ctest entry:
#   rerun_test.sh SCENARIO PATH/TO/attograd
set -euo pipefail
source "$(dirname "$0")/scenario_lib.sh" "$@"

tiny=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 2 --batch-size 8
      --dropout 0.1 --eval-windows 20 --threads 2 --sample-tokens 20)

step_of() { "$bin" inspect "$1" | sed -n 's/^step \([0-9]*\)$/\1/p'; }

case "$scenario" in
out_holds_another_run)
  # train --out FILE where FILE holds another run's checkpoint: refused, exit 2, the file
  # untouched; the message names its step and the two ways on, and both work
  "$bin" train "${tiny[@]}" --steps 6 --out run.h5 --name first > a.txt
  before=$(hashes run.h5)
  expect_usage_error "--out 'run.h5' holds the checkpoint of another run 'first' (step 6 of 6)" \
    "$bin" train "${tiny[@]}" --steps 3 --out run.h5
  grep -qF "continue that run with '$bin resume --checkpoint run.h5', or start this run over it with --overwrite" err.txt ||
    fail "the ways on are not named: $(cat err.txt)"
  [ "$(hashes run.h5)" = "$before" ] || fail "the refused run changed run.h5"
  "$bin" resume --checkpoint run.h5 --steps 8 > r.txt || fail "the resume it names failed"
  [ "$(step_of run.h5)" = 8 ] || fail "the resume did not continue to step 8"
  "$bin" train "${tiny[@]}" --steps 3 --out run.h5 --overwrite > o.txt || fail "--overwrite failed"
  [ "$(step_of run.h5)" = 3 ] || fail "--overwrite did not start a new run"
  # the default attograd.h5 too, and a file that is not a checkpoint
  "$bin" train "${tiny[@]}" --steps 2 > d.txt
  expect_usage_error "--out 'attograd.h5' holds the checkpoint of another run 'attograd' (step 2" \
    "$bin" train "${tiny[@]}" --steps 2
  echo "my notes" > notes.h5
  expect_usage_error "--out 'notes.h5' holds a file that is not a checkpoint" \
    "$bin" train "${tiny[@]}" --steps 2 --out notes.h5
  grep -q "my notes" notes.h5 || fail "the refused run changed notes.h5"
  # an empty file holds no run
  : > empty.h5
  "$bin" train "${tiny[@]}" --steps 2 --out empty.h5 > e.txt || fail "an empty --out was refused"
  ;;
metrics_holds_another_run)
  "$bin" train "${tiny[@]}" --steps 4 --log-interval 2 --out a.h5 --metrics m.jsonl > a.txt
  cp m.jsonl a.jsonl
  expect_usage_error "--metrics 'm.jsonl' already holds the metrics of another run (run 'a', steps 1 to 4)" \
    "$bin" train "${tiny[@]}" --steps 4 --out b.h5 --metrics m.jsonl
  grep -qF -- "--overwrite" err.txt || fail "--overwrite is not named: $(cat err.txt)"
  cmp -s m.jsonl a.jsonl || fail "the refused run changed m.jsonl"
  echo "my notes" > notes.txt
  expect_usage_error "--metrics 'notes.txt' holds lines that are not attograd metrics" \
    "$bin" train "${tiny[@]}" --steps 4 --out c.h5 --metrics notes.txt
  # a checkpoint named as --metrics by mistake is said to be one, not quoted byte by byte
  expect_usage_error "--metrics 'a.h5' holds an HDF5 file (a checkpoint?), not metrics" \
    "$bin" train "${tiny[@]}" --steps 4 --out c.h5 --metrics a.h5
  grep -qF 'x89' err.txt && fail "the checkpoint's first byte was quoted: $(cat err.txt)"
  cp a.h5 x.h5
  expect_usage_error "--metrics 'x.h5' holds an HDF5 file (a checkpoint?), not metrics" \
    "$bin" resume --checkpoint a.h5 --steps 6 --out c.h5 --metrics x.h5
  [ ! -e b.h5 ] || fail "the refused run wrote b.h5"
  "$bin" train "${tiny[@]}" --steps 4 --log-interval 2 --out b.h5 --metrics m.jsonl --overwrite > b.txt
  runs=$(grep -o '"run":"[0-9a-f]*"' m.jsonl | sort -u | wc -l)
  [ "$runs" = 1 ] || fail "--overwrite left $runs runs in m.jsonl"
  grep -qF "$(grep -o '"run":"[0-9a-f]*"' m.jsonl | head -1)" a.jsonl && fail "--overwrite kept a's run"
  # resume appends to its own run's file only
  expect_usage_error "--metrics 'm.jsonl' holds the metrics of another run" \
    "$bin" resume --checkpoint a.h5 --steps 6 --metrics m.jsonl
  "$bin" resume --checkpoint a.h5 --steps 6 --metrics a.jsonl > r.txt || fail "resume on its own metrics failed"
  grep -q '"first_step":4' a.jsonl || fail "the resume's records have no first_step 4"
  grep -q '"resumed":true' a.jsonl || fail "the resume's start record does not say it resumed"
  ;;
history_in_checkpoint)
  # the metrics live in the checkpoint, grow with the run, survive resume, and report
  # --checkpoint alone draws them
  "$bin" train "${tiny[@]}" --steps 40 --log-interval 10 --eval-interval 20 --stop-at 20 \
    --out run.h5 --name mine > a.txt 2> a.err
  "$bin" inspect run.h5 > i1.txt
  grep -q "^history: 3 rows, steps 1 to 20" i1.txt || fail "after 20 steps: $(grep history i1.txt)"
  "$bin" resume --checkpoint run.h5 > b.txt
  "$bin" inspect run.h5 > i2.txt
  grep -q "^history: 5 rows, steps 1 to 40" i2.txt || fail "after the resume: $(grep history i2.txt)"
  grep -q "^run: mine (" i2.txt || fail "the run's name is not kept: $(grep '^run' i2.txt)"
  [ "$(grep '^run:' i1.txt)" = "$(grep '^run:' i2.txt)" ] || fail "resume changed the run's identity"
  "$bin" report --checkpoint run.h5 --out r.html --sample-tokens 0 > rep.txt ||
    fail "report --checkpoint alone failed"
  grep -q 'id="chart-loss"' r.html || fail "no loss chart drawn from the history"
  grep -q 'id="chart-bpb"' r.html || fail "no bits-per-byte chart: the evaluations are missing"
  # the step-40 row's mean loss, as the history keeps it (7 significant digits), is drawn
  loss40=$(sed -n 's/^step    40\/40 | loss \([0-9.]*\) .*/\1/p' b.txt)
  [ -n "$loss40" ] || fail "no step 40 line: $(tail -3 b.txt)"
  grep -q "${loss40%??}" r.html || fail "the loss of step 40 ($loss40) is not on the page"
  ;;
interrupted_prints_resume)
  # --stop-at, --max-time and Ctrl-C each print the exact command that continues the run,
  # shell-quoted, and that command continues it
  "$bin" train "${tiny[@]}" --steps 30 --stop-at 10 --out "my run.h5" --metrics "m 1.jsonl" \
    > a.txt 2> a.err
  expected="attograd: continue this run with: $bin resume --checkpoint 'my run.h5' --metrics 'm 1.jsonl'"
  grep -qxF "$expected" a.err || fail "no exact continue command: $(cat a.err)"
  cmd=$(sed -n 's/^attograd: continue this run with: //p' a.err)
  eval "$cmd" > b.txt 2> b.err || fail "the printed command failed: $(cat b.err)"
  [ "$(step_of "my run.h5")" = 30 ] || fail "the printed command did not continue to step 30"
  grep -q "continue this run" b.err && fail "a finished run prints a continue command"
  "$bin" train "${tiny[@]}" --steps 100000 --max-time 0.5 --out t.h5 > t.txt 2> t.err
  grep -q "stopping after step [0-9]*: --max-time 0.5s reached" t.txt || fail "no --max-time stop: $(tail -2 t.txt)"
  grep -qxF "attograd: continue this run with: $bin resume --checkpoint t.h5" t.err ||
    fail "no continue command after --max-time: $(cat t.err)"
  "$bin" train "${tiny[@]}" --steps 100000 --out s.h5 > s.txt 2> s.err &
  pid=$!
  for _ in $(seq 1 200); do grep -q "step " s.txt 2>/dev/null && break; sleep 0.05; done
  kill -INT "$pid"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" -eq 130 ] || fail "SIGINT: exit $rc, not 130"
  grep -qxF "attograd: continue this run with: $bin resume --checkpoint s.h5" s.err ||
    fail "no continue command after SIGINT: $(cat s.err)"
  # a stop on a NaN names the command that continues from the last good checkpoint, on
  # its one line
  rc=0
  "$bin" train "${tiny[@]}" --steps 200 --lr 1e4 --warmup-steps 0 --checkpoint-interval 2 \
    --log-interval 1 --out nan.h5 > n.txt 2> n.err || rc=$?
  [ "$rc" -eq 1 ] || fail "a NaN exited $rc"
  [ "$(wc -l < n.err)" -eq 1 ] || fail "not one line: $(cat n.err)"
  grep -q "; continue from it with: $bin resume --checkpoint nan.h5$" n.err ||
    fail "no continue command after a NaN: $(cat n.err)"
  ;;
what_a_run_records)
  # the mean loss over the log interval, the val windows, tokens/s and ETA, run identity
  # and first_step in every record, a sample at each evaluation
  # (the same warm-up for both: the default depends on the run's length)
  "$bin" train "${tiny[@]}" --steps 40 --warmup-steps 10 --log-interval 10 --eval-interval 20 \
    --out r.h5 --metrics m.jsonl > log.txt
  "$bin" train "${tiny[@]}" --steps 10 --warmup-steps 10 --log-interval 1 --eval-interval 0 \
    --out one.h5 --metrics one.jsonl --sample-tokens 0 > one.txt
  loss_at() { grep "\"step\":$2," "$1" | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/'; }
  mean=$(for s in 2 3 4 5 6 7 8 9 10; do loss_at one.jsonl "$s"; done | awk '{ t += $1 } END { printf "%.17g", t / NR }')
  awk -v a="$mean" -v b="$(loss_at m.jsonl 10)" 'BEGIN { d = a - b; exit !(d < 1e-12 && d > -1e-12) }' ||
    fail "the loss at step 10 ($(loss_at m.jsonl 10)) is not the mean of steps 2-10 ($mean)"
  grep -q "step    20/40 | loss [0-9.]* | val [0-9.]* ([0-9.]* bits/byte) over 20 windows |" log.txt ||
    fail "the val line does not say over how many windows: $(grep 'step    20' log.txt)"
  grep -q "step     1/40 | .* tok/s | ETA ?$" log.txt || fail "an ETA at step 1: $(grep 'step     1/' log.txt)"
  # a resumed run's first line is a mean over the steps since the resume, and says so
  "$bin" train "${tiny[@]}" --steps 30 --log-interval 10 --eval-interval 0 --stop-at 15 \
    --out part.h5 --metrics part.jsonl > /dev/null
  "$bin" resume --checkpoint part.h5 --metrics part.jsonl > resumed.txt
  grep -q "step    20/30 | loss [0-9.]* (mean of 5 steps) | lr" resumed.txt ||
    fail "the resumed run's first loss does not say its 5 steps: $(grep 'step    20' resumed.txt)"
  grep -q "step    30/30 | loss [0-9.]* | val" resumed.txt || fail "a whole interval is annotated"
  grep '"step":20,' part.jsonl | grep -q '"loss_steps":5' || fail "no loss_steps 5 in --metrics"
  grep -q "step    40/40 | .* [0-9]* tok/s | ETA 0:00$" log.txt || fail "no ETA at the end: $(tail -3 log.txt)"
  [ "$(grep -vc '"run":"[0-9a-f]\{16\}"' m.jsonl)" = 0 ] || fail "a record without its run"
  [ "$(grep -vc '"first_step":0' m.jsonl)" = 0 ] || fail "a record without first_step"
  head -1 m.jsonl | grep -q '"name":"r"' || fail "the start record has no name from --out"
  head -1 m.jsonl | grep -q '"resumed":false' || fail "the start record does not say fresh"
  [ "$(grep -c '"event":"sample"' m.jsonl)" = 2 ] || fail "not a sample at step 20 and at the end"
  grep '"event":"sample"' m.jsonl | head -1 | grep -q '"step":20' || fail "the first sample is not at step 20"
  # the samples cost nothing to the run: the same bits without --metrics
  "$bin" train "${tiny[@]}" --steps 40 --warmup-steps 10 --log-interval 10 --eval-interval 20 \
    --out quiet.h5 > q.txt
  [ "$(hashes quiet.h5)" = "$(hashes r.h5)" ] || fail "recording samples changed the run"
  # on a terminal the progress bar shows tokens/s and the ETA
  python3 - "$bin" "${tiny[@]}" --steps 30 --log-interval 100 --out tty.h5 <<'PY' > bar.txt || fail "no terminal run"
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "train"] + sys.argv[2:])
out = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
sys.stdout.write(out.decode("utf-8", "replace"))
PY
  grep -aqE "step 2[0-9]/30 loss [0-9.]+ \| [0-9]+ tok/s \| ETA [0-9]+:[0-9]{2}" bar.txt || fail "the bar has no tokens/s or ETA: $(grep -a 'step 2' bar.txt | head -c 300)"
  ;;
report_every_run)
  # a file holding several runs (older attograds appended a fresh run to it) draws each
  "$bin" train "${tiny[@]}" --steps 4 --log-interval 2 --out a.h5 --metrics a.jsonl --name first > a.txt
  "$bin" train "${tiny[@]}" --steps 4 --log-interval 2 --out b.h5 --metrics b.jsonl --name second > b.txt
  cat a.jsonl b.jsonl > both.jsonl
  "$bin" report --metrics both.jsonl --out r.html > r.txt || fail "report on two runs failed"
  # each named as it recorded itself (train --name), its file beside it in the summary
  grep -q '</svg>first<div class="run-file">both.jsonl</div>' r.html || fail "the first run is not drawn"
  grep -q '</svg>second<div class="run-file">both.jsonl</div>' r.html || fail "the second run is not drawn"
  # older records without identities: a fresh start (first_step 0) is another run
  sed 's/"run":"[0-9a-f]*",\?//; s/,"run":"[0-9a-f]*"//; s/"name":"[a-z]*",\?//' both.jsonl > old.jsonl
  "$bin" report --metrics old.jsonl --out o.html > o.txt || fail "report on an old file failed"
  grep -q "old.jsonl (run 2 of 2)" o.html || fail "the old file's second run is not drawn"
  for i in $(seq 1 65); do echo '{"event": "start", "first_step": 0}'; done > many.jsonl
  expect_error 2 "many.jsonl:65: more than 64 runs in one file" "$bin" report --metrics many.jsonl --out m.html
  ;;
*)
  fail "unknown scenario"
  ;;
esac
echo "ok ($scenario)"
