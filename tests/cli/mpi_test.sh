#!/usr/bin/env bash
# Distributed training under mpirun (docs/distributed.md), one scenario per ctest entry:
#   mpi_test.sh SCENARIO PATH/TO/attograd
# N processes must give the same weights, bit for bit, as one process accumulating the
# same micro-batches; checkpoints resume across world sizes; set-up errors print once; a
# killed rank ends the job and leaves the last checkpoint good. Exit 77 (skipped) without
# mpirun.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
command -v mpirun > /dev/null || { echo "mpirun not installed: skipped"; exit 77; }
source "$here/scenario_lib.sh" "$@"
# CI runs as root in containers: Open MPI must be told that is fine, and a container may
# forbid the cross-process memory copy its shared-memory transport tries first.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
# Under the sanitizers: Open MPI holds allocations of its own until exit; they are not ours.
mpi_leak_checks
# (a function: `mpi ... &` would make $! the subshell's PID, not mpirun's)
mpi() { local np=$1; shift; mpirun --oversubscribe -np "$np" "$bin" "$@"; }

# dropout on: the masks must follow the micro-batch too, not only the data
tiny=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 2 --batch-size 4 --dropout 0.1
      --eval-windows 10 --log-interval 5 --threads 1 --sample-tokens 0)
state() { "$bin" inspect "$1" | grep -E '^(step|micro_batches) '; }
same() {  # same weights, step and micro-batch count
  diff <(hashes "$1") <(hashes "$2") > /dev/null || fail "$3: the weights differ"
  diff <(state "$1") <(state "$2") > /dev/null || fail "$3: $(state "$1" | tr '\n' ' ') vs $(state "$2" | tr '\n' ' ')"
  [ "$(hashes "$1" | wc -l)" -gt 10 ] || fail "$3: no parameters compared"
}
# The medium run the stop scenarios signal, and what each checks after the stop
stop_run=(--context-length 32 --d-model 96 --n-heads 4 --n-layers 3 --batch-size 4 --threads 1
          --sample-tokens 0 --eval-interval 0 --log-interval 100 --steps 3000 --out sig.h5)
wait_for_a_step() {  # until log.txt shows a step (30 s at most)
  for _ in $(seq 1 600); do grep -q "step " log.txt 2>/dev/null && break; sleep 0.05; done
}
# rank_pid RANK PID...: the one of the PIDs whose MPI rank is RANK (empty if none)
rank_pid() {
  local rank=$1 p; shift
  for p in "$@"; do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank" && echo "$p"
  done
  return 0
}
wait_for_saver() {  # wait_for_saver FILE: until FILE's lock file is gone (60 s at most)
  for _ in $(seq 1 600); do [ -e ".$1.lock" ] || break; sleep 0.1; done
}
# stopped_once: one stop message in err.txt and a good sig.h5 (why: what the run said).
# The launcher's stop is saved by a saver that mpirun does not wait for
# (train/launcher_stop.h): when the save outlasts odls_base_sigkill_timeout (a sanitizer
# build on a loaded CI machine: CI's stop 54 found no sig.h5 when mpirun returned), the
# checkpoint comes after mpirun's return, and the lock file's end says it is done.
stopped_once() {
  wait_for_saver sig.h5
  why="$(tail -3 log.txt) | $(cat err.txt) | checkpoint: $(ls sig.h5 2>&1 || true)"
  [ ! -e .sig.h5.lock ] || fail "the lock file is left 60 s after the stop: $why"
  [ "$(grep -c "stopping after step" err.txt)" -eq 1 ] || fail "not one stop message: $why"
  "$bin" inspect sig.h5 --verify | grep -q "all checksums good" || fail "no good checkpoint after the stop: $why"
}
# Under Open MPI's default odls_base_sigkill_timeout (1 s from the ranks' SIGTERM to their
# SIGKILL): a run whose step takes about 2.5 s per rank on the 2-core development VM (and
# whose checkpoint is 157 MB), and Ctrl-C as a terminal sends it, at the start of a step.
slow_step_run=(--context-length 128 --d-model 384 --n-heads 6 --n-layers 6 --batch-size 8 --eval-windows 2
               --threads 1 --sample-tokens 0 --eval-interval 0 --log-interval 1 --steps 1000)
ctrl_c_under_default() {  # ctrl_c_under_default [mpirun options] -- [train options]
  local launcher=()
  while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
  shift
  set -m
  mpirun --oversubscribe -np 2 "${launcher[@]}" "$bin" train "$@" > log.txt 2> err.txt &
  pid=$!
  set +m
  wait_for_a_step
  kill -INT -- "-$pid"
  wait "$pid" || true  # mpirun exits 1 after any signal it forwards: Open MPI's rule
}
# saved_whole FILE: once its saver is done (the lock file gone: mpirun does not wait for
# it), FILE verifies and no temporary file or lock file is left beside it
saved_whole() {
  wait_for_saver "$1"
  why="$(tail -2 log.txt) | $(cat err.txt) | files: $(ls -A | tr '\n' ' ')"
  [ ! -e ".$1.lock" ] || fail "the lock file is left 60 s after the stop: $why"
  [ -z "$(ls -A | grep partial)" ] || fail "a temporary file is left: $why"
  "$bin" inspect "$1" --verify | grep -q "all checksums good" || fail "no whole checkpoint: $why"
  grep -q "stopping after step" err.txt || fail "no stop notice: $why"
}
# check_world NP A M [options]: -np NP with accumulation A == one process with accumulation M
check_world() {
  local np=$1 a=$2 m=$3; shift 3
  # (--overwrite: each check starts a new run on the same outputs)
  mpi "$np" train "${tiny[@]}" --steps 12 --grad-accum-steps "$a" "$@" --out np.h5 --overwrite > np.txt 2>&1 ||
    fail "mpirun -np $np failed: $(tail -5 np.txt)"
  "$bin" train "${tiny[@]}" --steps 12 --grad-accum-steps "$m" "$@" --out one.h5 --overwrite > one.txt
  set -- "$np" "$a" "$m"
  same np.h5 one.h5 "-np $1 --grad-accum-steps $2 against --grad-accum-steps $3"
}

case "$scenario" in
same_bits_2)
  check_world 2 1 2
  grep -q "^batch: 4 sequences x 1 micro-batch x 2 processes = 8 sequences" np.txt ||
    fail "the global batch is not printed: $(grep batch np.txt)"
  [ "$(grep -c "^saved checkpoint" np.txt)" -eq 1 ] || fail "not exactly one rank saved: $(cat np.txt)"
  # train --report: rank 0 alone writes the page; the weights are the same bits
  mpi 2 train "${tiny[@]}" --steps 12 --eval-interval 6 --report np.html --out report.h5 > rep.txt 2>&1 ||
    fail "mpirun -np 2 train --report failed: $(tail -5 rep.txt)"
  same report.h5 np.h5 "-np 2 with --report against without"
  grep -q 'at step 12 of 12' np.html && tail -c 8 np.html | grep -q '</html>' ||
    fail "no complete final report page"
  [ -z "$(ls -A | grep partial)" ] || fail "a temporary file was left: $(ls -A)"
  check_world 2 2 4
  check_world 2 3 6   # A not a power of two: the ranks' ranges are not subtrees
  # a model of 1.4 MB in 1 MB buckets: two exchanges overlap backward
  check_world 2 2 4 --d-model 96 --n-layers 3 --bucket-mb 1 --profile
  grep -q "2 buckets of up to 1 MB" np.txt || fail "not two buckets: $(grep profile np.txt)"
  ;;
same_bits_4)
  check_world 4 1 4
  check_world 4 2 8
  # MPI's own all-reduce: agrees to rounding (its order is its algorithm's)
  mpi 4 train "${tiny[@]}" --steps 12 --grad-accum-steps 2 --reduce allreduce --out ar.h5 > ar.txt 2>&1 ||
    fail "--reduce allreduce failed: $(tail -5 ar.txt)"
  a=$(grep -o "val [0-9.]*" ar.txt | tail -1 | cut -d' ' -f2)
  b=$(grep -o "val [0-9.]*" one.txt | tail -1 | cut -d' ' -f2)
  awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d < 1e-3 && d > -1e-3) }' ||
    fail "--reduce allreduce: val $a against $b"
  ;;
lora_same_bits)
  # LoRA adapters with their dropout: the ranks reduce the adapters' gradients only, and
  # the weights are one process's, bit for bit
  check_world 2 1 2 --lora-rank 4 --lora-dropout 0.1
  check_world 2 2 4 --lora-rank 2 --lora-targets attn.qkv,mlp.fc2
  [ "$(hashes np.h5 | grep -c lora_)" -eq 16 ] || fail "no adapters compared"
  ;;
tasks_same_bits)
  # fine-tuning tasks: each rank draws its own examples, the weights are one process's
  awk -v n=200 -v seed=3 -f "$(dirname "$0")/classify_set.awk" > set.tsv
  check_world 2 1 2 --task classify --data set.tsv --pool mean
  check_world 2 2 4 --task classify --data set.tsv --lora-rank 2
  for i in $(seq 1 40); do
    printf '{"instruction": "Repeat %s.", "input": "%s", "output": "%s %s"}\n' $i $((i % 7)) $i $i
  done > records.jsonl
  check_world 2 1 2 --task instruct --data records.jsonl --context-length 192
  ;;
epochs_early_stopping)
  # --epochs counts a step as the whole world's examples, and --early-stopping judges the
  # world's evaluation: 2 processes train as many steps as one accumulating 2 micro-batches,
  # stop after the same step, keep the same best, bit for bit
  awk -v n=200 -v seed=5 -f "$(dirname "$0")/classify_set.awk" > set.tsv
  classify=(--task classify --data set.tsv --pool mean --dropout 0)
  mpi 2 train "${tiny[@]}" "${classify[@]}" --epochs 2 --out np.h5 > np.txt 2>&1 ||
    fail "mpirun -np 2 --epochs failed: $(tail -5 np.txt)"
  "$bin" train "${tiny[@]}" "${classify[@]}" --epochs 2 --grad-accum-steps 2 --out one.h5 > one.txt
  # 200 records, a tenth held out: 2 passes over 180 at 4 x 2 a step = 45 steps
  grep -q "^schedule: 45 steps (2 epochs of 180 training examples, 8 a step)" np.txt ||
    fail "the schedule under 2 processes: $(grep schedule np.txt)"
  diff <(grep "^schedule" np.txt) <(grep "^schedule" one.txt) > /dev/null ||
    fail "the schedules differ: $(grep schedule np.txt one.txt)"
  same np.h5 one.h5 "-np 2 --epochs 2 against --grad-accum-steps 2"
  stopping=("${classify[@]}" --steps 400 --eval-interval 4 --early-stopping 2 --keep-best --lr 3e-3)
  mpi 2 train "${tiny[@]}" "${stopping[@]}" --out np.h5 --overwrite > np.txt 2>&1 ||
    fail "mpirun -np 2 --early-stopping failed: $(tail -5 np.txt)"
  "$bin" train "${tiny[@]}" "${stopping[@]}" --grad-accum-steps 2 --out one.h5 --overwrite > one.txt
  line=$(grep "attograd: early stopping" one.txt) || fail "one process did not stop early: $(tail -3 one.txt)"
  [ "$(grep -c "attograd: early stopping" np.txt)" -eq 1 ] || fail "not one stop line: $(grep stopping np.txt)"
  diff <(grep "attograd: early stopping" np.txt | sed 's/saving np.h5/saving/') \
    <(echo "$line" | sed 's/saving one.h5/saving/') > /dev/null ||
    fail "2 processes stopped otherwise: $(grep "early stopping" np.txt) vs $line"
  same np.h5 one.h5 "-np 2 --early-stopping against --grad-accum-steps 2"
  same np.best.h5 one.best.h5 "the best checkpoints of -np 2 and of one process"
  ;;
resume_across_world_sizes)
  "$bin" train "${tiny[@]}" --steps 12 --grad-accum-steps 2 --out straight.h5 > a.txt
  # 2 processes write it, 1 process with accumulation 2 finishes it
  mpi 2 train "${tiny[@]}" --steps 12 --stop-at 6 --out split.h5 > b.txt 2>&1 || fail "$(tail -5 b.txt)"
  "$bin" resume --checkpoint split.h5 --grad-accum-steps 2 --threads 1 > c.txt
  same straight.h5 split.h5 "2 processes then 1 x accumulation 2"
  # and the other way round
  "$bin" train "${tiny[@]}" --steps 12 --stop-at 6 --grad-accum-steps 2 --out split2.h5 > d.txt
  mpi 2 resume --checkpoint split2.h5 --grad-accum-steps 1 --threads 1 > e.txt 2>&1 || fail "$(tail -5 e.txt)"
  same straight.h5 split2.h5 "1 x accumulation 2 then 2 processes"
  ;;
eval_sharded)
  # validation windows shared out over the ranks give the single process's loss, bit for bit
  check_world 2 1 2
  diff <(grep -o "val [0-9.]* ([0-9.]* bits/byte)" np.txt) <(grep -o "val [0-9.]* ([0-9.]* bits/byte)" one.txt) ||
    fail "the training log's validation loss differs"
  for _ in $(seq 1 400); do echo "the quick brown fox jumps over the lazy dog"; done > text.txt
  "$bin" eval --checkpoint one.h5 --data text.txt --json | tail -1 > one.json
  for np in 2 3; do
    mpi "$np" eval --checkpoint one.h5 --data text.txt --json > np.json 2> err.txt || fail "$(cat err.txt)"
    [ "$(wc -l < np.json)" -eq 2 ] || fail "-np $np printed $(wc -l < np.json) lines, not rank 0's 2"
    diff <(tail -1 np.json) one.json > /dev/null || fail "-np $np: $(tail -1 np.json) vs $(cat one.json)"
  done
  ;;
metrics_once)
  # rank 0 alone writes the metrics and the history; the interval's mean loss is the same
  # reduction as one process's; a re-run onto the outputs is refused once
  mpi 2 train "${tiny[@]}" --steps 10 --out np.h5 --metrics np.jsonl > np.txt 2>&1 ||
    fail "mpirun -np 2 --metrics failed: $(tail -5 np.txt)"
  "$bin" train "${tiny[@]}" --steps 10 --grad-accum-steps 2 --out one.h5 --metrics one.jsonl > one.txt
  same np.h5 one.h5 "-np 2 with --metrics against one process"
  [ "$(grep -c '"event":"start"' np.jsonl)" = 1 ] || fail "not one start record: $(grep -c start np.jsonl)"
  diff <(grep -o '"loss":[0-9.e+-]*' np.jsonl) <(grep -o '"loss":[0-9.e+-]*' one.jsonl) > /dev/null ||
    fail "the logged mean losses differ from one process's"
  "$bin" inspect np.h5 | grep -q "^history: 3 rows, steps 1 to 10" ||
    fail "the history: $("$bin" inspect np.h5 | grep history)"
  rc=0; mpi 2 train "${tiny[@]}" --steps 10 --out np.h5 > again.txt 2> again.err || rc=$?
  [ "$rc" -eq 2 ] || fail "a re-run onto np.h5 under mpirun exited $rc, not 2"
  [ "$(grep -c "holds the checkpoint of another run" again.err)" -eq 1 ] ||
    fail "not one refusal: $(cat again.err)"
  ;;
errors_once)
  rc=0; mpi 2 train --data missing.txt > out.txt 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] || fail "a missing --data under mpirun exited $rc, not 2"
  [ "$(grep -c "attograd train: error" err.txt)" -eq 1 ] || fail "not one message: $(cat err.txt)"
  grep -q "missing.txt" err.txt || fail "the message does not name the file: $(cat err.txt)"
  # only rank 1 fails (MPMD: other arguments per rank): rank 0 prints its message
  printf 'hello world, a small corpus of text\n%.0s' $(seq 1 200) > corpus.txt
  rc=0
  mpirun --oversubscribe -np 1 "$bin" train "${tiny[@]}" --data corpus.txt --steps 2 --out x.h5 : \
    -np 1 "$bin" train "${tiny[@]}" --data absent.txt --steps 2 --out x.h5 > out.txt 2> err.txt || rc=$?
  [ "$rc" -ne 0 ] || fail "a failure on rank 1 alone did not fail the job"
  [ "$(grep -c "attograd train: error" err.txt)" -eq 1 ] || fail "not one message: $(cat err.txt)"
  grep -q "absent.txt.*(rank 1)" err.txt || fail "rank 1's failure is not named: $(cat err.txt)"
  [ ! -e x.h5 ] || fail "a failed set-up wrote a checkpoint"
  ;;
damaged_data_one_rank)
  # Damaged data met by one rank only: rank 1 reads its own copy of the prepared
  # folder (the same identity), whose train.bin is filled with ids outside the vocabulary
  # mid-run. No rank waits for another: the job ends within the timeout, exit 1, with one
  # line from rank 0 naming rank 1's file and byte and the step saved.
  for i in $(seq 1 400); do
    printf 'line %d: text that a small model learns to predict, one letter at a time %d\n' "$i" $((i * 7 % 13))
  done > t.txt
  for _ in $(seq 1 450); do cat t.txt; done > big.txt
  "$bin" prepare --data big.txt --out a.prepared > /dev/null
  cp -r a.prepared b.prepared
  [ "$(stat -c %s b.prepared/train.bin)" -gt $((16 << 20)) ] || fail "train.bin is not over 16 MB"
  rc=0
  timeout 120 mpirun --oversubscribe \
    -np 1 "$bin" train "${tiny[@]}" --log-interval 1 --steps 100000 --data a.prepared --out d.h5 : \
    -np 1 "$bin" train "${tiny[@]}" --log-interval 1 --steps 100000 --data b.prepared --out d.h5 \
    > log.txt 2> err.txt &
  pid=$!
  for _ in $(seq 1 600); do grep -Eq "^step +3/" log.txt && break; sleep 0.05; done
  head -c "$(stat -c %s b.prepared/train.bin)" /dev/zero | tr '\000' '\377' |
    dd of=b.prepared/train.bin conv=notrunc status=none
  wait "$pid" || rc=$?
  [ "$rc" -eq 1 ] || fail "damaged data on rank 1 ended the job with $rc, not 1: $(cat err.txt)"
  [ "$(grep -c "attograd: error" err.txt)" -eq 1 ] || fail "not one message: $(cat err.txt)"
  grep -q "b.prepared/train.bin: token [0-9]* (byte [0-9]*) is id 65535.*(rank 1); saved step [0-9]*, the last completed, to d.h5$" err.txt ||
    fail "the message does not name rank 1's file, byte and the save: $(cat err.txt)"
  step=$(sed -n 's/.*saved step \([0-9]*\), the last completed.*/\1/p' err.txt)
  "$bin" inspect d.h5 --verify | grep -q "^step $step$" || fail "d.h5 does not hold step $step"
  ;;
killed_rank)
  medium=(--context-length 32 --d-model 96 --n-heads 4 --n-layers 3 --batch-size 4 --threads 1
          --sample-tokens 0 --eval-interval 0 --log-interval 1 --checkpoint-interval 10)
  mpi 2 train "${medium[@]}" --steps 100000 --out kill.h5 > log.txt 2> err.txt &
  pid=$!
  for _ in $(seq 1 600); do [ -f kill.h5 ] && break; sleep 0.05; done
  [ -f kill.h5 ] || fail "no periodic checkpoint appeared"
  victim=$(rank_pid 1 $(pgrep -f -- "--out kill.h5" || true))
  [ -n "$victim" ] || fail "rank 1 not found"
  kill -9 "$victim"
  start=$SECONDS; rc=0; wait "$pid" || rc=$?
  [ "$rc" -ne 0 ] || fail "the job exited 0 after a rank was killed"
  [ $((SECONDS - start)) -le 10 ] || fail "the job took $((SECONDS - start)) s to end"
  pgrep -f -- "--out kill.h5" > /dev/null && fail "processes of the job are left"
  "$bin" inspect kill.h5 --verify | grep -q "all checksums good" || fail "the last checkpoint is damaged"
  ;;
sigterm_saves_once)
  # (a background job of a script ignores SIGINT, and mpirun keeps that: TERM it is; mpirun
  # forwards SIGINT and SIGTERM to the ranks as SIGTERM)
  # mpirun sends SIGCONT, waits odls_base_sigkill_timeout s, SIGTERM, waits again, SIGKILL:
  # under a longer timeout than the default, rank 0 waits for its saver and mpirun returns
  # with the checkpoint written (the default: ctrl_c_default_*)
  mpirun --mca odls_base_sigkill_timeout 3 --oversubscribe -np 2 "$bin" train "${stop_run[@]}" \
    > log.txt 2> err.txt &
  pid=$!
  wait_for_a_step
  kill -TERM "$pid"
  wait "$pid" || true  # mpirun's own status after a signal is not ours to set
  stopped_once
  step=$("$bin" inspect sig.h5 | sed -n 's/^step //p')
  [ "$step" -lt 3000 ] || fail "the run was not stopped by SIGTERM"
  ;;
one_rank_signalled)
  # A stop signal that reaches one rank only (here rank 1: mpirun's own forwarding reaches
  # the ranks one after the other, so rank 0 may agree to stop before its own signal comes):
  # every rank stops after the same step, and rank 0 names the signal rank 1 had
  mpirun --oversubscribe -np 2 "$bin" train "${stop_run[@]}" > log.txt 2> err.txt &
  pid=$!
  wait_for_a_step
  rank1=$(rank_pid 1 $(pgrep -P "$pid" || true))
  [ -n "$rank1" ] || fail "rank 1 is not among mpirun's children: $(pgrep -P "$pid" | tr '\n' ' ')"
  kill -TERM "$rank1"
  rc=0; wait "$pid" || rc=$?
  # each rank returns 128 + SIGTERM (docs/exit-codes.md), which mpirun reports as its own
  [ "$rc" -eq 143 ] || fail "mpirun exited $rc after rank 1's stop, not 143: $(cat err.txt)"
  stopped_once
  grep -qF "attograd: SIGTERM: stopping after step" err.txt || fail "rank 0 names no signal: $why"
  ;;
ctrl_c_named)
  # Ctrl-C at a terminal: SIGINT to mpirun's process group (job control gives the background
  # job a group of its own, and leaves SIGINT to it). Open MPI 4.1 puts each rank in a group
  # of its own and answers with SIGCONT, then SIGTERM to the ranks: rank 0 names what the
  # user did, and the run saves once
  set -m
  mpirun --mca odls_base_sigkill_timeout 3 --oversubscribe -np 2 "$bin" train "${stop_run[@]}" \
    > log.txt 2> err.txt &
  pid=$!
  set +m
  wait_for_a_step
  kill -INT -- "-$pid"
  wait "$pid" || true  # mpirun exits 1 after any signal it forwards: Open MPI's rule
  stopped_once
  grep -qF "attograd: SIGINT (Ctrl-C) or SIGTERM to mpirun, which sends the ranks SIGTERM: stopping after step" err.txt ||
    fail "the stop does not name Ctrl-C: $why"
  ;;
sigterm_slow_save)
  # a save longer than Open MPI's default second between the ranks' SIGTERM and SIGKILL
  # (the fsync of the checkpoint's temporary file waits 3 s here, tests/slow_fsync.c) is
  # written before mpirun returns when the timeout is longer than the save; a line a step
  # fills the output mpirun stops reading while it waits, and must not hold the rank
  # (train/console.cpp)
  medium=(--context-length 32 --d-model 32 --n-heads 4 --n-layers 2 --batch-size 4 --threads 1
          --sample-tokens 0 --eval-interval 0 --log-interval 1)
  [ -f "${SLOW_FSYNC_LIBRARY:-}" ] || fail "SLOW_FSYNC_LIBRARY is not the test helper library"
  # (ASan wants its runtime first among preloaded libraries; the helper needs none of it)
  mpirun --mca odls_base_sigkill_timeout 8 --oversubscribe -np 2 \
    -x LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$SLOW_FSYNC_LIBRARY" -x SLOW_FSYNC_PATH=".slow.h5.partial-" \
    -x SLOW_FSYNC_SECONDS=3 -x SLOW_FSYNC_MARK="$work/slow-fsync-done" \
    -x ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
    "$bin" train "${medium[@]}" --steps 1000000 --out slow.h5 > log.txt 2> err.txt &
  pid=$!
  wait_for_a_step
  sleep 2  # mpirun's pseudo-terminal fills meanwhile
  kill -TERM "$pid"
  wait "$pid" || true  # mpirun's own status after a signal is not ours to set
  why="$(tail -2 log.txt) | $(cat err.txt) | checkpoint: $(ls slow.h5 2>&1 || true)"
  [ -e slow-fsync-done ] || fail "the save was not made slow: $why"
  grep -q "stopping after step" err.txt || fail "no stop notice: $why"
  "$bin" inspect slow.h5 --verify | grep -q "all checksums good" || fail "no whole checkpoint: $why"
  ;;
ctrl_c_default_slow_step)
  # Ctrl-C under Open MPI's default timeout, early in a step of 2.5 s or more: the step would
  # end after the SIGKILL, so rank 0 saves the last completed one at once, from a saver the
  # SIGKILL misses (train/launcher_stop.h); resumed, the run has the bits of one never stopped.
  # The step is made that long on any CPU: as many micro-batches a step as 2.5 s holds of the
  # one a probe run measures (an AMX Xeon ran one in 0.6 s, a Zen 4 in about 2.5)
  mpi 2 train "${slow_step_run[@]}" --steps 1 --out probe.h5 > probe.txt 2>&1 ||
    fail "the probe run failed: $(tail -3 probe.txt)"
  micro=$(sed -n 's/.*from one measured micro-batch (\([0-9.]*\) s,.*/\1/p' probe.txt | head -1)
  [ -n "$micro" ] || fail "the probe measured no micro-batch: $(head -5 probe.txt)"
  accum=$(awk -v s="$micro" 'BEGIN { n = int(2.5 / s); if (n * s < 2.5) n++; print (n < 1 ? 1 : n) }')
  slow_step_run+=(--grad-accum-steps "$accum")
  ctrl_c_under_default -- "${slow_step_run[@]}" --out sig.h5
  saved_whole sig.h5
  grep -q "stopping after step [0-9]* (step [0-9]* abandoned); saving sig.h5 in process" err.txt ||
    fail "the stop does not say the step was abandoned: $why"
  step=$("$bin" inspect sig.h5 | sed -n 's/^step //p')
  mpi 2 resume --checkpoint sig.h5 --threads 1 --stop-at $((step + 1)) > resume.txt 2>&1 ||
    fail "the resume failed: $(tail -3 resume.txt)"
  mpi 2 train "${slow_step_run[@]}" --stop-at $((step + 1)) --out straight.h5 > straight.txt 2>&1 ||
    fail "the straight run failed: $(tail -3 straight.txt)"
  same sig.h5 straight.h5 "stopped mid-step and resumed against never stopped"
  ;;
ctrl_c_default_slow_save)
  # Ctrl-C under Open MPI's default timeout, with a save of over 3 s (tests/slow_fsync.c):
  # the saver finishes after mpirun has killed rank 0 and returned; the run then resumes
  medium=(--context-length 32 --d-model 32 --n-heads 4 --n-layers 2 --batch-size 4 --threads 1
          --sample-tokens 0 --eval-interval 0 --log-interval 1 --steps 1000000)
  [ -f "${SLOW_FSYNC_LIBRARY:-}" ] || fail "SLOW_FSYNC_LIBRARY is not the test helper library"
  ctrl_c_under_default -x LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$SLOW_FSYNC_LIBRARY" -x SLOW_FSYNC_PATH=".slow.h5.partial-" \
    -x SLOW_FSYNC_SECONDS=3 -x SLOW_FSYNC_MARK="$work/slow-fsync-done" \
    -x ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
    -- "${medium[@]}" --out slow.h5
  saved_whole slow.h5
  [ -e slow-fsync-done ] || fail "the save was not made slow: $why"
  step=$("$bin" inspect slow.h5 | sed -n 's/^step //p')
  mpi 2 resume --checkpoint slow.h5 --threads 1 --stop-at $((step + 3)) > resume.txt 2>&1 ||
    fail "the resume failed: $(tail -3 resume.txt)"
  "$bin" inspect slow.h5 --verify | grep -q "^step $((step + 3))$" || fail "the resume did not continue"
  ;;
ctrl_c_default_during_save)
  # Ctrl-C under Open MPI's default timeout while a periodic save of over 3 s is being
  # written (tests/slow_fsync.c): the save is made by a process of its own session, which
  # mpirun's kill of rank 0 misses; it completes, and removes the locks rank 0 left
  medium=(--context-length 32 --d-model 32 --n-heads 4 --n-layers 2 --batch-size 4 --threads 1
          --sample-tokens 0 --eval-interval 0 --log-interval 1 --steps 1000000)
  [ -f "${SLOW_FSYNC_LIBRARY:-}" ] || fail "SLOW_FSYNC_LIBRARY is not the test helper library"
  set -m
  mpirun --oversubscribe -np 2 -x LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$SLOW_FSYNC_LIBRARY" \
    -x SLOW_FSYNC_PATH=".per.h5.partial-" -x SLOW_FSYNC_SECONDS=3 \
    -x ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
    "$bin" train "${medium[@]}" --checkpoint-interval 3 --out per.h5 > log.txt 2> err.txt &
  pid=$!
  set +m
  # after a step: before the first, the start's probe of the folder (check_can_write) makes
  # and removes a file of the same name within microseconds, which a look may catch
  wait_for_a_step
  for _ in $(seq 1 600); do ls -A | grep -q "^.per.h5.partial-" && break; sleep 0.05; done
  ls -A | grep -q "^.per.h5.partial-" || fail "no periodic save began: $(tail -3 err.txt)"
  kill -INT -- "-$pid"
  wait "$pid" || true
  for _ in $(seq 1 600); do [ -e .per.h5.lock ] || break; sleep 0.1; done
  why="$(tail -2 log.txt) | $(tail -3 err.txt) | files: $(ls -A | tr '\n' ' ')"
  [ ! -e .per.h5.lock ] || fail "the lock file is left 60 s after the stop: $why"
  [ -z "$(ls -A | grep partial)" ] || fail "a temporary file is left: $why"
  "$bin" inspect per.h5 --verify | grep -q "all checksums good" || fail "no whole checkpoint: $why"
  ;;
options_disagree)
  # ranks started with different options, data or kernel-forcing environment: a usage error
  # on every rank naming the first setting that differs, within seconds, never a deadlock
  # or a silent divergence
  printf 'one text for the first rank, long enough to train on. %.0s' {1..60} > a.txt
  printf 'another text for the second rank, long enough to train. %.0s' {1..60} > b.txt
  # each named as the option that gives it
  for pair in "--steps 8|--steps 9|'--steps'" "--batch-size 4|--batch-size 8|'--batch-size'" \
              "--data a.txt|--data b.txt|'data identity'" "--bucket-mb 1|--bucket-mb 2|'--bucket-mb'" \
              "--d-model 48|--d-model 64|'--d-model'"; do
    IFS='|' read -r first second name <<< "$pair"
    start=$SECONDS rc=0
    # shellcheck disable=SC2086
    timeout 60 mpirun --oversubscribe -np 1 "$bin" train "${tiny[@]}" --steps 6 $first --out d.h5 : \
      -np 1 "$bin" train "${tiny[@]}" --steps 6 $second --out d.h5 > out.txt 2> err.txt || rc=$?
    [ "$rc" -eq 2 ] || fail "$first against $second: exit $rc, not 2: $(tail -3 err.txt)"
    [ $((SECONDS - start)) -le 30 ] || fail "$first against $second took $((SECONDS - start)) s"
    [ "$(grep -c "attograd train: error" err.txt)" -eq 1 ] || fail "not one message: $(cat err.txt)"
    grep -qF "$name is" err.txt || fail "$first against $second: the message does not name $name: $(cat err.txt)"
  done
  # the environment that forces kernels, set on one rank only (train/gemm_agreement.h)
  rc=0
  timeout 60 mpirun --oversubscribe -np 1 "$bin" train "${tiny[@]}" --steps 6 --out d.h5 : \
    -np 1 -x ATTOGRAD_BF16_GEMM=openblas "$bin" train "${tiny[@]}" --steps 6 --out d.h5 \
    > out.txt 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] || fail "ATTOGRAD_BF16_GEMM on one rank: exit $rc, not 2: $(tail -3 err.txt)"
  grep -qF "'ATTOGRAD_BF16_GEMM' is '(unset)' on rank 0 and differs on rank 1" err.txt ||
    fail "the message does not name ATTOGRAD_BF16_GEMM: $(cat err.txt)"
  [ ! -e d.h5 ] || fail "a checkpoint was written"
  ;;
kernels_agree)
  # Ranks whose kernel caches disagree (two nodes, two home folders) still compute as one
  # process: every rank takes rank 0's table (train/gemm_agreement.h), and with it where
  # bf16 falls back to float32, and rank 0's ATTOGRAD_BF16_FALLBACK (rank 1's says off).
  export ATTOGRAD_BF16_FALLBACK=on
  for precision in fp32 bf16; do
    rm -rf a b && mkdir -p b/attograd
    XDG_CACHE_HOME="$work/a" "$bin" train "${tiny[@]}" --precision "$precision" --steps 2 \
      --out warm.h5 --overwrite > /dev/null
    table=$(ls a/attograd/gemm-*.txt)
    [ "$(wc -l < "$table")" -gt 2 ] || fail "no class measured into $table"
    # a: bf16 pays for no GEMM (every bf16 class kept a widened kernel): float32 runs them
    awk 'NR > 2 && $1 == "bf16" && $2 !~ /^A/ { $6 = "widened_onednn" } { print }' "$table" \
      > planted && cp planted "$table"
    # b: the same classes, every answer another kernel
    awk 'NR > 2 { m["onednn_f32"] = "openblas_f32"; m["openblas_f32"] = "onednn_f32";
                  m["onednn_bf16"] = "widened_openblas"; m["widened_openblas"] = "onednn_bf16";
                  m["widened_onednn"] = "onednn_bf16"; m["attention_fma"] = "attention_bf16";
                  m["attention_bf16"] = "attention_fma"; m["attention_onednn"] = "attention_fma";
                  m["attention_f32"] = "attention_f32"; m["onednn_f32_large"] = "onednn_f32";
                  m["onednn_f32_packed"] = "onednn_f32"; m["onednn_bf16_large"] = "onednn_bf16";
                  m["onednn_f32_large_packed"] = "onednn_f32"; m["onednn_bf16_packed"] = "onednn_bf16";
                  m["onednn_bf16_large_packed"] = "onednn_bf16"; $6 = m[$6] } { print }' "$table" \
      > "b/attograd/$(basename "$table")"
    cmp -s "$table" "b/attograd/$(basename "$table")" && fail "the planted table is the same"
    run=(train "${tiny[@]}" --precision "$precision" --steps 12 --overwrite)
    mpirun --oversubscribe -np 1 -x XDG_CACHE_HOME="$work/a" "$bin" "${run[@]}" --out np.h5 : \
      -np 1 -x XDG_CACHE_HOME="$work/b" -x ATTOGRAD_BF16_FALLBACK=off "$bin" "${run[@]}" \
      --out np.h5 > np.txt 2>&1 ||
      fail "mpirun failed: $(tail -5 np.txt)"
    XDG_CACHE_HOME="$work/a" "$bin" "${run[@]}" --grad-accum-steps 2 --out one.h5 > one.txt
    same np.h5 one.h5 "$precision: ranks with different kernel caches against one process"
  done
  ;;
*) fail "unknown scenario" ;;
esac
echo "ok ($scenario)"
