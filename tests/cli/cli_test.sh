#!/usr/bin/env bash
# End-to-end tests of the attograd command line, one scenario per ctest entry:
#   cli_test.sh SCENARIO PATH/TO/attograd
# Each scenario runs in a fresh temporary folder and exits non-zero with a message
# naming what went wrong.
set -euo pipefail
source "$(dirname "$0")/scenario_lib.sh" "$@"

# A tiny model that trains in seconds.
tiny=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 2 --batch-size 8
      --dropout 0.1 --eval-windows 20 --log-interval 50 --threads 2 --sample-tokens 20)

case "$scenario" in
help)
  # the output whole first: `grep -q` in a pipe may exit before the second write, and the
  # writer's SIGPIPE would fail the pipeline (pipefail)
  usage=$("$bin" --help) || fail "--help failed"
  grep -q "train" <<< "$usage" || fail "--help does not list train"
  for c in train resume sample eval inspect gradcheck prepare encode decode report attention; do
    "$bin" "$c" --help >/dev/null || fail "$c --help failed"
  done
  # through a file: grep -q leaves at its match, and a help longer than one write would
  # then meet a closed pipe
  "$bin" train --help > help.txt || fail "train --help failed"
  grep -q -- "--d-model" help.txt || fail "train --help does not list --d-model"
  grep -q -- "--precision" help.txt || fail "train --help does not list --precision"
  grep -q -- "--report-prompt" help.txt || fail "train --help does not list --report-prompt"
  ;;
usage_errors)
  expect_usage_error "unrecognised option" "$bin" train --no-such-option 3
  expect_usage_error "unrecognised option '--stpes' (did you mean '--steps'?)" "$bin" train --stpes 3
  expect_usage_error "(did you mean '--lora-rank'?)" "$bin" train --lora-rnak 2
  expect_usage_error "(did you mean '--tokens'?)" "$bin" sample --tokns 3
  # other tools' names get attograd's (cli/option_aliases.cpp), and '_' for '-' is a near miss
  expect_usage_error "unrecognised option '--max_iters' (did you mean '--steps'? max_iters is nanoGPT's name for it)" \
    "$bin" train --max_iters 3
  expect_usage_error "(did you mean '--lr'? learning_rate is nanoGPT's name for it)" "$bin" train --learning_rate 1e-3
  expect_usage_error "(did you mean '--context-length'? block_size is nanoGPT's" "$bin" train --block_size 8
  expect_usage_error "(did you mean '--d-model'? n_embd is nanoGPT's" "$bin" train --n_embd 8
  expect_usage_error "(did you mean '--batch-size'? per_device_train_batch_size is Hugging Face's" \
    "$bin" train --per_device_train_batch_size 8
  expect_usage_error "(did you mean '--grad-accum-steps'? gradient_accumulation_steps is Hugging Face's" \
    "$bin" train --gradient_accumulation_steps 2
  expect_usage_error "(did you mean '--temperature'? temp is llama.cpp's name for it)" "$bin" sample --temp 0.5
  expect_usage_error "(did you mean '--tokens'? n_predict is llama.cpp's" "$bin" sample --n-predict 5
  expect_usage_error "(did you mean '--context-length'? c is llama.cpp's" "$bin" eval -c 5
  expect_usage_error "(did you mean '--batch-size'?)" "$bin" train --batch_size 8
  printf 'learning_rate = 0.1\n' > hf.cfg
  expect_usage_error "hf.cfg:1: unknown option 'learning-rate' (did you mean '--lr'? learning_rate is nanoGPT's" \
    "$bin" train --config hf.cfg
  expect_usage_error "--steps" "$bin" train --steps abc
  expect_usage_error "dropout" "$bin" train --dropout 1.5
  expect_usage_error "n_heads" "$bin" train --d-model 30 --n-heads 4
  expect_usage_error "missing.txt" "$bin" train --data missing.txt
  expect_usage_error "unknown command" "$bin" fly
  expect_usage_error "unknown command 'trian' (did you mean 'train'?)" "$bin" trian
  expect_usage_error "unknown command 'smaple' (did you mean 'sample'?)" "$bin" smaple
  expect_usage_error "unknown command 'clasify' (did you mean 'classify'?)" "$bin" clasify
  "$bin" zzzzzz 2> none.txt || true
  grep -q "did you mean" none.txt && fail "a suggestion for zzzzzz"
  expect_usage_error "nope.h5" "$bin" sample --checkpoint nope.h5
  expect_usage_error "checkpoint" "$bin" eval --data x.txt
  printf 'steps = 5\nbogus-key = 1\n' > bad.cfg
  expect_usage_error "bad.cfg:2" "$bin" train --config bad.cfg
  printf '# comment\nlr = fast\n' > bad2.cfg
  expect_usage_error "bad2.cfg:2" "$bin" train --config bad2.cfg
  expect_usage_error "missing.cfg" "$bin" train --config missing.cfg
  ;;
train_tiny)
  "$bin" train "${tiny[@]}" --steps 300 --eval-interval 100 --metrics m.jsonl --out run.h5 > log.txt
  [ -f run.h5 ] || fail "no checkpoint written"
  grep -q "^sample:" log.txt || fail "no sample printed"
  unigram=$(sed -n 's/.*unigram \([0-9.]*\).*/\1/p' log.txt)
  val=$(grep '"val_loss"' m.jsonl | tail -1 | sed 's/.*"val_loss":\([0-9.e+-]*\).*/\1/')
  [ -n "$unigram" ] && [ -n "$val" ] || fail "could not read the losses: $(cat log.txt)"
  awk -v v="$val" -v u="$unigram" 'BEGIN { exit !(v < u - 0.5) }' ||
    fail "val loss $val is not well below the unigram baseline $unigram"
  [ "$(grep -c '"step"' m.jsonl)" -ge 7 ] || fail "too few metric lines"
  ;;
resume_exact)
  "$bin" train "${tiny[@]}" --steps 40 --out straight.h5 --sample-tokens 0 > a.txt
  "$bin" train "${tiny[@]}" --steps 40 --stop-at 20 --out split.h5 --sample-tokens 0 > b.txt
  "$bin" inspect split.h5 | grep -q "^step 20" || fail "the split run did not stop at step 20"
  "$bin" resume --checkpoint split.h5 --threads 2 > c.txt
  "$bin" inspect split.h5 | grep -q "^step 40" || fail "the resumed run did not reach step 40"
  diff <(hashes straight.h5) <(hashes split.h5) >/dev/null ||
    fail "20 + resume + 20 steps differ from 40 straight: $(diff <(hashes straight.h5) <(hashes split.h5) | head -4)"
  [ "$(hashes straight.h5 | wc -l)" -gt 10 ] || fail "no parameters compared"
  ;;
bf16_parity)
  # --precision bf16 learns as float32 does (docs/mixed-precision.md: validation loss within
  # 1% at the same step on the built-in corpus; one thread, so a loaded machine cannot stall
  # it), records its precision, resumes exactly in it, and a resume may switch precision
  # (cli.bf16_parity_without_bf16_units holds oneDNN to AVX2: on a CPU without bfloat16
  # units that is the run cli.bf16_parity makes already, bit for bit)
  if [ "${ONEDNN_MAX_CPU_ISA:-}" = AVX2 ] && ! grep -qwE "avx512_bf16|amx_bf16" /proc/cpuinfo; then
    echo "skipped: this CPU has no bfloat16 units, so cli.bf16_parity ran without them"; exit 77
  fi
  small=(--steps 300 --eval-interval 300 --d-model 64 --n-layers 2 --threads 1 --sample-tokens 0)
  "$bin" train "${small[@]}" --precision fp32 --out f32.h5 --metrics f.jsonl > f.txt
  "$bin" train "${small[@]}" --precision bf16 --out b16.h5 --metrics b.jsonl > b.txt
  grep -q "bf16 matmuls:" b.txt || fail "the bf16 run does not name its matmul backend: $(head -3 b.txt)"
  last_val() { grep -o '"val_loss":[0-9.e+-]*' "$1" | tail -1 | cut -d: -f2; }
  vf=$(last_val f.jsonl); vb=$(last_val b.jsonl)
  [ -n "$vf" ] && [ -n "$vb" ] || fail "no final validation loss in the metrics"
  awk -v f="$vf" -v b="$vb" 'BEGIN { d = (b - f) / f; exit !(d < 0.01 && d > -0.01) }' ||
    fail "bf16 validation loss $vb is not within 1% of float32's $vf"
  [ "$vf" != "$vb" ] || fail "bf16 and float32 gave the same loss ($vf): bf16 did not run"
  "$bin" inspect b16.h5 > i.txt  # a file: grep -q may close a pipe before inspect is done
  grep -q '"precision": "bf16"' i.txt || fail "the config does not record bf16"
  # The three runs' kernels from a table of their own. This check failed under load (ctest
  # -j2) and never alone: oneDNN held to AVX2 runs gemm-based matmuls that took their
  # threads when they ran and split K, and the adaptive team changed size between the runs;
  # every oneDNN matmul now runs on one thread (gemm.layouts_onednn_isa_AVX2 holds it)
  export XDG_CACHE_HOME="$PWD/kernel-cache"
  "$bin" train "${tiny[@]}" --precision bf16 --steps 20 --out straight.h5 --sample-tokens 0 > a.txt
  "$bin" train "${tiny[@]}" --precision bf16 --steps 20 --stop-at 10 --out split.h5 > c.txt
  "$bin" resume --checkpoint split.h5 > d.txt
  diff <(hashes straight.h5) <(hashes split.h5) >/dev/null || fail "a bf16 resume is not exact"
  "$bin" resume --checkpoint straight.h5 --steps 24 --precision fp32 > e.txt
  "$bin" inspect straight.h5 > i.txt
  grep -q '"precision": "fp32"' i.txt || fail "resume --precision fp32 not kept"
  expect_usage_error "precision" "$bin" train --precision fp16
  ;;
grad_accum)
  # --grad-accum-steps 2: the header and the plan say so, tokens count the effective
  # batch, the checkpoint records the micro-batches, and a resume continues exactly
  acc=("${tiny[@]}" --batch-size 4 --grad-accum-steps 2 --sample-tokens 0)
  "$bin" train "${acc[@]}" --steps 12 --out straight.h5 --metrics m.jsonl --log-interval 4 > a.txt
  grep -q "^batch: 4 sequences x 2 micro-batches = 8 sequences of 16 tokens per step" a.txt ||
    fail "no batch line: $(head -5 a.txt)"
  grep -q "gradients .* (2 sets: accumulation's partial sums, exchange buffers)" a.txt || fail "the plan does not count the partial sum"
  "$bin" inspect straight.h5 | grep -q "^micro_batches 24$" || fail "the checkpoint does not hold micro_batches 24"
  "$bin" inspect straight.h5 | grep -q '"grad_accum_steps": 2' || fail "the config does not hold grad_accum_steps"
  "$bin" train "${acc[@]}" --steps 12 --stop-at 6 --out split.h5 > b.txt
  "$bin" resume --checkpoint split.h5 --threads 2 > c.txt
  diff <(hashes straight.h5) <(hashes split.h5) >/dev/null ||
    fail "6 + resume + 6 accumulated steps differ from 12 straight"
  [ "$(hashes straight.h5 | wc -l)" -gt 10 ] || fail "no parameters compared"
  expect_usage_error "grad_accum_steps" "$bin" train --grad-accum-steps 0
  ;;
optimizer_sgd)
  # --optimizer sgd --momentum 0.9: planned, recorded in the config and the checkpoint, and
  # its momentum resumes exactly; a setting of another optimiser or an unknown one is refused
  sgd=("${tiny[@]}" --optimizer sgd --momentum 0.9 --lr 0.05 --sample-tokens 0)
  "$bin" train "${sgd[@]}" --steps 20 --out straight.h5 > a.txt
  grep -q "SGD state" a.txt || fail "the memory plan does not count SGD's state: $(grep plan a.txt)"
  "$bin" inspect straight.h5 > i.txt
  grep -q '"optimizer": "sgd"' i.txt || fail "the config does not record sgd"
  grep -q '"momentum": 0.9' i.txt || fail "the config does not record the momentum"
  "$bin" train "${sgd[@]}" --steps 20 --stop-at 10 --out split.h5 > b.txt
  "$bin" resume --checkpoint split.h5 > c.txt
  diff <(hashes straight.h5) <(hashes split.h5) >/dev/null ||
    fail "10 + resume + 10 SGD steps differ from 20 straight"
  [ "$(hashes straight.h5 | wc -l)" -gt 10 ] || fail "no parameters compared"
  expect_usage_error "--momentum is a setting of sgd" "$bin" train --momentum 0.9
  expect_usage_error "optimizer must be one of" "$bin" train --optimizer lion
  ;;
sample_eval_inspect)
  "$bin" train "${tiny[@]}" --steps 30 --out run.h5 --sample-tokens 0 > /dev/null
  text=$("$bin" sample --checkpoint run.h5 --prompt "the " --tokens 40 --seed 3)
  [ ${#text} -ge 40 ] || fail "sample too short: '$text'"
  [ "$text" = "$("$bin" sample --checkpoint run.h5 --prompt "the " --tokens 40 --seed 3)" ] ||
    fail "the same seed sampled different text"
  "$bin" sample --checkpoint run.h5 --prompt "the " --tokens 10 --temperature 0 --top-k 1 > /dev/null
  printf 'the cat sat on the mat and the dog ran home. the end of the line.\n%.0s' {1..20} > eval.txt
  "$bin" eval --checkpoint run.h5 --data eval.txt --json --dump-grads grads.h5 > e.txt
  grep -q '^loss [0-9]' e.txt || fail "eval printed no 'loss X' line: $(cat e.txt)"
  tail -1 e.txt | grep -q '"loss":' || fail "eval --json last line is not JSON: $(tail -1 e.txt)"
  tail -1 e.txt | grep -q '"tokens":' || fail "eval --json has no tokens"
  [ -f grads.h5 ] || fail "--dump-grads wrote nothing"
  "$bin" inspect grads.h5 | grep -q "blocks.0.attn.W_query.weight" || fail "gradient file lacks parameter names"
  "$bin" inspect run.h5 | grep -q "tok_emb.weight" || fail "inspect shows no parameter table"
  "$bin" inspect run.h5 --verify | grep -q "all checksums good" || fail "verify failed on a good file"
  printf 'not hdf5' > junk.h5
  rc=0; "$bin" inspect junk.h5 2> err.txt || rc=$?
  [ "$rc" -ne 0 ] && grep -q "junk.h5" err.txt || fail "a junk file was not rejected by name"
  printf 'Ω unknown\n' > alien.txt
  rc=0; "$bin" eval --checkpoint run.h5 --data alien.txt 2> err.txt || rc=$?
  [ "$rc" -ne 0 ] && grep -q "U+03A9" err.txt || fail "an unknown character was not named: $(cat err.txt)"
  # where: past the first chunk the reader holds, with the line and column of the character
  { for _ in $(seq 1 40000); do printf 'the cat sat\n'; done; printf 'ok Ω\n'; } > late.txt
  rc=0; "$bin" eval --checkpoint run.h5 --data late.txt 2> err.txt || rc=$?
  [ "$rc" -ne 0 ] && grep -qF "at offset 480003 is not in the vocabulary (line 40001, column 4)" err.txt ||
    fail "the unknown character's place was not named: $(cat err.txt)"
  ;;
sigint_saves)
  "$bin" train "${tiny[@]}" --steps 100000 --out run.h5 > log.txt 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do grep -q "step " log.txt 2>/dev/null && break; sleep 0.1; done
  sleep 1
  kill -INT "$pid"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" -eq 130 ] || fail "SIGINT exit code $rc, not 130 (128 + SIGINT): $(tail -3 log.txt)"
  [ -f run.h5 ] || fail "no checkpoint after SIGINT"
  "$bin" inspect run.h5 --verify | grep -q "all checksums good" || fail "checkpoint after SIGINT is bad"
  ls -a | grep -q tmp && fail "a temporary file was left behind: $(ls -a)"
  ;;
nan_stops)
  # an absurd learning rate blows the weights up within a few steps
  rc=0
  "$bin" train "${tiny[@]}" --steps 200 --lr 1e4 --warmup-steps 0 --checkpoint-interval 2 \
      --log-interval 1 --out run.h5 > log.txt 2> err.txt || rc=$?
  [ "$rc" -eq 1 ] || fail "a non-finite loss exited $rc, not 1"
  grep -qE "(loss|gradient norm) is .* at step [0-9]+" err.txt || fail "no message naming the step: $(cat err.txt)"
  grep -q "last good checkpoint is run.h5 (step" err.txt || fail "the last good checkpoint is not named: $(cat err.txt)"
  saved=$(sed -n 's/.*(step \([0-9]*\)).*/\1/p' err.txt)
  "$bin" inspect run.h5 --verify | grep -q "^step $saved$" || fail "run.h5 does not hold step $saved"
  ;;
anomaly_named)
  # a NaN planted in one backward at step 6: --detect-anomaly names the op and the module,
  # and the checkpoint of step 5 stays the last good one
  rc=0
  "$bin" train "${tiny[@]}" --steps 20 --checkpoint-interval 5 --detect-anomaly \
      --inject-nan backward:blocks.1.mlp.fc2@6 --out run.h5 > log.txt 2> err.txt || rc=$?
  [ "$rc" -eq 1 ] || fail "an anomaly exited $rc, not 1: $(cat err.txt)"
  [ "$(wc -l < err.txt)" -eq 1 ] || fail "more than one line on stderr: $(cat err.txt)"
  grep -q "step 6: anomaly: the backward of linear in module blocks.1.mlp.fc2" err.txt ||
    fail "the anomaly is not named: $(cat err.txt)"
  grep -q "last good checkpoint is run.h5 (step 5)" err.txt || fail "the last good checkpoint is not named"
  "$bin" inspect run.h5 --verify | grep -q "^step 5$" || fail "run.h5 does not hold step 5"
  # a NaN planted in a forward: named with the op's input statistics
  rc=0
  "$bin" train "${tiny[@]}" --steps 5 --detect-anomaly --inject-nan forward:blocks.0.attn.qkv \
      --out run2.h5 > log.txt 2> err.txt || rc=$?
  [ "$rc" -eq 1 ] && grep -q "forward of linear in module blocks.0.attn.qkv produced non-finite values" err.txt &&
    grep -q "input 0: \[8, 16, 32\] float32: min" err.txt || fail "the forward anomaly is not described: $(cat err.txt)"
  # without detection the same NaN is still caught, at the gradient norm
  rc=0
  "$bin" train "${tiny[@]}" --steps 5 --inject-nan backward:blocks.1.mlp.fc2 --out run3.h5 > log.txt 2> err.txt || rc=$?
  [ "$rc" -eq 1 ] && grep -q "gradient norm is NaN at step 1" err.txt || fail "an undetected NaN was not stopped: $(cat err.txt)"
  ;;
kill9_checkpoint)
  # SIGKILL at random moments of a run that checkpoints every step (4 MB files, so some
  # kills land mid-write): the checkpoint under the final name is always whole
  medium=(--context-length 32 --d-model 96 --n-heads 4 --n-layers 3 --batch-size 4
          --threads 2 --sample-tokens 0 --eval-interval 0 --log-interval 1)
  "$bin" train "${medium[@]}" --steps 2 --out run.h5 > /dev/null
  for delay in 0.13 0.21 0.34 0.05 0.55 0.29 0.42 0.17; do
    "$bin" train "${medium[@]}" --steps 100000 --checkpoint-interval 1 --out run.h5 --overwrite > log.txt 2>&1 &
    pid=$!
    sleep 0.3; sleep "$delay"
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    "$bin" inspect run.h5 --verify > v.txt 2>&1 || fail "after SIGKILL (delay $delay) run.h5 is damaged: $(cat v.txt)"
    grep -q "all checksums good" v.txt || fail "after SIGKILL run.h5 did not verify: $(cat v.txt)"
  done
  # the next save removes what killed writers left behind
  "$bin" train "${medium[@]}" --steps 1 --out run.h5 --overwrite > /dev/null
  ls -a | grep -q "partial" && fail "partial files of killed writers were left: $(ls -a)"
  ;;
unwritable_out)
  expect_usage_error "no/such/folder/run.h5" "$bin" train "${tiny[@]}" --steps 5 --out no/such/folder/run.h5
  mkdir taken.h5
  expect_usage_error "it is a folder" "$bin" train "${tiny[@]}" --steps 5 --out taken.h5
  ;;
folder_vanishes)
  # the checkpoint folder disappears mid-run: saves fail with a warning, training goes on
  # with its state in memory, and saves succeed again once the folder is back
  mkdir sub
  "$bin" train "${tiny[@]}" --steps 300 --checkpoint-interval 5 --log-interval 1 --out sub/run.h5 > log.txt 2> err.txt &
  pid=$!
  for _ in $(seq 1 200); do [ -f sub/run.h5 ] && break; sleep 0.05; done
  mv sub gone
  for _ in $(seq 1 200); do grep -q "warning" err.txt && break; sleep 0.05; done
  mkdir sub
  rc=0; wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] || fail "the run exited $rc after its folder came back: $(tail -3 err.txt)"
  # the folder can vanish before a save (cannot write) or in the middle of one (cannot
  # rename the new file onto the old): either way a warning, and training goes on
  grep -Eq "warning: step [0-9]+: cannot [a-z ]*'sub/run.h5'.*training continues" err.txt ||
    fail "no warning about the failed save: $(cat err.txt)"
  "$bin" inspect sub/run.h5 --verify | grep -q "^step 300$" || fail "the final checkpoint was not written"
  ;;
disk_full)
  # a file-size limit makes every write fail part-way, as a full disk does
  rc=0
  mkdir tmp
  (ulimit -f 64; TMPDIR=$PWD/tmp "$bin" train "${tiny[@]}" --steps 10 --out run.h5 > log.txt 2> err.txt) || rc=$?
  [ "$rc" -eq 1 ] || fail "a failed final save exited $rc, not 1: $(cat err.txt)"
  [ "$(wc -l < err.txt)" -eq 1 ] || fail "more than one line on stderr: $(cat err.txt)"
  grep -q "cannot write 'run.h5': File too large" err.txt && grep -q "rescue copy failed too" err.txt ||
    fail "the error does not say what failed: $(cat err.txt)"
  [ ! -f run.h5 ] || fail "a partial run.h5 exists"
  ls -a | grep -q partial && fail "a partial file was left behind"
  [ -z "$(ls -A tmp)" ] || fail "the failed rescue left $(ls -A tmp) in TMPDIR"
  ;;
memory_refused)
  rc=0
  timeout 60 "$bin" train --d-model 16384 --n-heads 16 --n-layers 256 --batch-size 64 > log.txt 2> err.txt || rc=$?
  [ "$rc" -eq 1 ] || fail "an impossible run exited $rc, not 1 (stderr: $(cat err.txt))"
  grep -q "parameters" log.txt && grep -q "memory plan" log.txt || fail "no plan printed: $(cat log.txt)"
  grep -q "needs about .* available" err.txt || fail "the refusal does not say why: $(cat err.txt)"
  ;;
text_reading_planned)
  # The memory plan counts what reading a text costs at its peak (the text and
  # its ids: 3 bytes a byte for a char vocabulary), measured: before, it planned the 2
  # bytes a byte held after and reading took about 5 (a copy when the ids were split).
  # 20 MB of text against 200 kB, the same tiny model, peak RSS (VmHWM); the fixed GEMM
  # kernels, so that neither run measures kernels (scratch) while the other reads the cache
  export ATTOGRAD_TUNE=off
  head -c 15000000 /dev/urandom | base64 -w 99 > big.txt
  head -c 150000 /dev/urandom | base64 -w 99 > small.txt
  run=(train --context-length 8 --d-model 8 --n-heads 1 --n-layers 1 --batch-size 1 --steps 1
       --sample-tokens 0 --eval-windows 1 --threads 1)
  small_kb=$(peak_rss_kb "$bin" "${run[@]}" --data small.txt --out s.h5)
  big_kb=$(peak_rss_kb "$bin" "${run[@]}" --data big.txt --out b.h5 --metrics b.jsonl)
  planned_kb=$(( $(grep -o '"data":[0-9]\+' b.jsonl | head -1 | cut -d: -f2) / 1024 ))
  grew_kb=$(( big_kb - small_kb ))
  echo "$(( $(wc -c < big.txt) / 1024 )) kB of text: peak RSS grew ${grew_kb} kB; planned ${planned_kb} kB"
  [ "$grew_kb" -le $(( planned_kb + 4096 )) ] ||
    fail "reading the text took ${grew_kb} kB more, over the ${planned_kb} kB planned"
  [ "$planned_kb" -le $(( grew_kb * 5 / 4 + 4096 )) ] ||
    fail "the plan's ${planned_kb} kB is far over the ${grew_kb} kB reading took"
  grep -q "data .* (reading the text; .* held after)" run.out ||
    fail "the plan line does not say what reading the text costs: $(grep 'memory plan' run.out)"
  ;;
init_from_and_config)
  "$bin" train "${tiny[@]}" --steps 150 --out first.h5 --sample-tokens 0 > /dev/null
  # a config file, overridden on the command line; fresh optimiser from first.h5's weights
  printf '# a run file\nsteps = 500\nd_model = 32\nn-heads = 2\nn_layers = 2\ncontext-length = 16\nlr = 5e-4\n' > run.cfg
  "$bin" train --config run.cfg --steps 10 --init-from first.h5 --out second.h5 --batch-size 8 \
      --sample-tokens 0 --eval-windows 5 > log.txt
  "$bin" inspect second.h5 > i.txt
  grep -q "^step 10$" i.txt || fail "the command line did not win over the config file: $(grep ^step i.txt)"
  grep -q '"lr": 0.0005' i.txt || fail "the config file's lr was not used"
  "$bin" train --config run.cfg --steps 10 --out fresh.h5 --batch-size 8 --sample-tokens 0 \
      --eval-windows 5 > fresh.txt
  first_loss() { grep -m1 "step     1/" "$1" | sed 's/.*loss \([0-9.]*\).*/\1/'; }
  awk -v a="$(first_loss log.txt)" -v b="$(first_loss fresh.txt)" 'BEGIN { exit !(a < b - 0.3) }' ||
    fail "--init-from did not start from trained weights (first loss $(first_loss log.txt), fresh $(first_loss fresh.txt))"
  # no model option: the model is first.h5's (d_model 32, 2 layers, context 16)
  "$bin" train --init-from first.h5 --steps 1 --out bare.h5 --sample-tokens 0 --eval-windows 2 > /dev/null
  "$bin" inspect bare.h5 > i.txt
  grep -q '"d_model": 32' i.txt && grep -q '"context_length": 16' i.txt ||
    fail "--init-from without model options did not take the checkpoint's model: $(grep -E 'd_model|context' i.txt)"
  expect_usage_error "--d-model 64 disagrees with 'first.h5', whose model has d_model 32" \
    "$bin" train "${tiny[@]}" --d-model 64 --init-from first.h5 --steps 1 --out x.h5
  # the tokenizer too, by the same rule (train::keys_an_init_decides): never ignored
  expect_usage_error "--tokenizer byte disagrees with 'first.h5', whose model has tokenizer char: with --init-from the model is the checkpoint's (leave --tokenizer out)" \
    "$bin" train --init-from first.h5 --tokenizer byte --steps 1 --out x.h5
  printf 'tokenizer = bpe\n' > tok.cfg
  expect_usage_error "--tokenizer bpe disagrees with 'first.h5'" \
    "$bin" train --config tok.cfg --init-from first.h5 --steps 1 --out x.h5
  [ ! -e x.h5 ] || fail "a refused --init-from wrote x.h5"
  "$bin" train --init-from first.h5 --tokenizer char --steps 1 --out same.h5 --sample-tokens 0 \
    --eval-windows 2 > /dev/null || fail "--tokenizer equal to the checkpoint's was refused"
  ;;
gradcheck)
  "$bin" gradcheck > g.txt || fail "gradcheck failed: $(grep FAIL g.txt)"
  grep -q "scaled_dot_product_attention" g.txt || fail "gradcheck table lacks the fused attention"
  ;;
signals_save)
  # every way a run is told to end -- a closed terminal (SIGHUP), kill (SIGTERM), Ctrl-C,
  # and a second signal while it saves -- ends with the checkpoint written and loadable
  medium=(--context-length 32 --d-model 96 --n-heads 4 --n-layers 3 --batch-size 4
          --threads 2 --sample-tokens 0 --eval-interval 0 --log-interval 1)
  for signals in "HUP" "TERM" "INT" "TERM TERM" "HUP INT" "INT INT INT"; do
    rm -f run.h5 log.txt  # the last signal's log would let the signals in before the run began
    "$bin" train "${medium[@]}" --steps 100000 --out run.h5 > log.txt 2> err.txt &
    pid=$!
    for _ in $(seq 1 200); do grep -q "step " log.txt 2>/dev/null && break; sleep 0.05; done
    first=1
    for sig in $signals; do
      # a later signal may find the run already saved and gone: that is a pass too
      if [ -n "$first" ]; then kill -"$sig" "$pid"; else kill -"$sig" "$pid" 2>/dev/null || true; fi
      first=""; sleep 0.02
    done
    rc=0; wait "$pid" || rc=$?
    # ... or, saved, find it on its way out: the signal's default action ends it then
    # (stop_signals.h: a later signal can only cut short what follows the save)
    # a stop exits 128 + the first signal (docs/exit-codes.md)
    stopped=$(( 128 + $(kill -l "${signals%% *}") ))
    late=$(( 128 + $(kill -l "${signals##* }") ))
    if [ "$rc" -ne "$stopped" ] && ! { [ "$rc" -eq "$late" ] && grep -q "saved checkpoint run.h5" log.txt; }; then
      fail "after SIG$signals the run exited $rc: $(tail -3 err.txt)"
    fi
    grep -q "SIG${signals%% *}: stopping after step" err.txt || fail "no stop message for SIG$signals: $(cat err.txt)"
    "$bin" inspect run.h5 --verify | grep -q "all checksums good" || fail "no good checkpoint after SIG$signals"
  done
  # a second SIGTERM while the final save is being written (a 40 MB checkpoint): the save
  # still completes
  big=(--context-length 32 --d-model 256 --n-heads 4 --n-layers 4 --batch-size 2 --threads 2
       --sample-tokens 0 --eval-interval 0 --log-interval 1)
  "$bin" train "${big[@]}" --steps 100000 --out big.h5 > log.txt 2> err.txt &
  pid=$!
  for _ in $(seq 1 400); do grep -q "step " log.txt 2>/dev/null && break; sleep 0.05; done
  kill -TERM "$pid"
  for _ in $(seq 1 400); do grep -q "saving big.h5" err.txt 2>/dev/null && break; sleep 0.01; done
  kill -TERM "$pid" 2>/dev/null || true
  rc=0; wait "$pid" || rc=$?
  if [ "$rc" -ne 143 ]; then
    fail "a second SIGTERM during the save made the run exit $rc: $(cat err.txt)"
  fi
  "$bin" inspect big.h5 --verify | grep -q "all checksums good" || fail "no good checkpoint after a SIGTERM during the save"
  # a reader that goes away (SIGPIPE): the run stops and saves
  set +o pipefail
  "$bin" train "${tiny[@]}" --steps 100000 --log-interval 1 --out pipe.h5 2> err.txt | head -n 6 > /dev/null
  set -o pipefail
  grep -q "SIGPIPE: stopping after step" err.txt || fail "SIGPIPE did not stop the run gracefully: $(cat err.txt)"
  [ "$(grep -c 'cannot write to standard output' err.txt)" -le 1 ] || fail "the broken pipe was reported more than once"
  "$bin" inspect pipe.h5 --verify | grep -q "all checksums good" || fail "no good checkpoint after SIGPIPE"
  ;;
closed_stdout)
  # a closed stdout is reported once; the run goes on and its checkpoint is whole
  rc=0; "$bin" train "${tiny[@]}" --steps 30 --log-interval 1 --out run.h5 >&- 2> err.txt || rc=$?
  [ "$rc" -eq 0 ] || fail "a closed stdout made the run exit $rc: $(cat err.txt)"
  [ "$(grep -c 'cannot write to standard output' err.txt)" -eq 1 ] || fail "not reported exactly once: $(cat err.txt)"
  "$bin" inspect run.h5 --verify | grep -q "^step 30$" || fail "the checkpoint is not step 30"
  ;;
unwritable_stdout)
  # a command whose result is what it prints fails when that cannot be written
  "$bin" train "${tiny[@]}" --steps 2 --out run.h5 > /dev/null
  for cmd in "inspect run.h5" "--version"; do
    rc=0; $bin $cmd > /dev/full 2> err.txt || rc=$?
    [ "$rc" -eq 1 ] || fail "$cmd with stdout on /dev/full exited $rc, not 1"
    grep -q "standard output could not be written" err.txt || fail "$cmd on /dev/full: $(cat err.txt)"
    rc=0; $bin $cmd >&- 2> err.txt || rc=$?
    [ "$rc" -eq 1 ] || fail "$cmd with stdout closed exited $rc, not 1"
  done
  ;;
outputs_never_inputs)
  printf 'the cat sat on the mat. the dog ran far away.\n%.0s' {1..40} > corpus.txt
  cp corpus.txt keep.txt
  ln corpus.txt hard.txt
  ln -s corpus.txt soft.txt
  printf 'steps = 3\n' > run.cfg
  expect_usage_error "same file as --data" "$bin" train "${tiny[@]}" --data corpus.txt --out corpus.txt
  expect_usage_error "same file as --data" "$bin" train "${tiny[@]}" --data corpus.txt --out hard.txt
  expect_usage_error "same file as --data" "$bin" train "${tiny[@]}" --data corpus.txt --metrics soft.txt
  expect_usage_error "same file as --config" "$bin" train "${tiny[@]}" --config run.cfg --metrics run.cfg
  expect_usage_error "--metrics" "$bin" train "${tiny[@]}" --out same.h5 --metrics same.h5
  cmp -s corpus.txt keep.txt || fail "an input was modified"
  "$bin" train "${tiny[@]}" --data corpus.txt --steps 3 --out run.h5 > /dev/null
  cp run.h5 keep.h5
  expect_usage_error "same file as --checkpoint" "$bin" eval --checkpoint run.h5 --data corpus.txt --dump-grads run.h5
  expect_usage_error "same file as --data" "$bin" eval --checkpoint run.h5 --data corpus.txt --dump-grads soft.txt
  expect_usage_error "same file as --checkpoint" "$bin" resume --checkpoint run.h5 --metrics run.h5
  # resume: the data the checkpoint records, by path, hard link and symbolic link, and a
  # prepared folder's files
  for output in "--out corpus.txt" "--metrics hard.txt"; do
    # shellcheck disable=SC2086
    expect_usage_error "same file as the run's data" "$bin" resume --checkpoint run.h5 --steps 6 $output
  done
  "$bin" train "${tiny[@]}" --data soft.txt --steps 3 --out linked.h5 > /dev/null
  expect_usage_error "same file as the run's data" "$bin" resume --checkpoint linked.h5 --steps 6 \
    --report corpus.txt
  "$bin" prepare --data corpus.txt --out folder > /dev/null
  "$bin" train "${tiny[@]}" --data folder --steps 3 --out folder.h5 > /dev/null
  expect_usage_error "the run's data's train.bin" "$bin" resume --checkpoint folder.h5 --steps 6 \
    --metrics folder/train.bin
  expect_usage_error "same file as --init-from" "$bin" train "${tiny[@]}" --data corpus.txt --init-from run.h5 --metrics run.h5
  cmp -s run.h5 keep.h5 || fail "the checkpoint read was modified"
  cmp -s corpus.txt keep.txt || fail "the corpus was modified"
  ;;
one_writer)
  # a second run on the same --out is refused, naming the first one's PID
  "$bin" train "${tiny[@]}" --steps 100000 --out run.h5 > log.txt 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do grep -q "step " log.txt 2>/dev/null && break; sleep 0.05; done
  expect_usage_error "PID $pid" "$bin" train "${tiny[@]}" --steps 5 --out run.h5
  kill -TERM "$pid"; rc=0; wait "$pid" || rc=$?
  [ "$rc" -eq 143 ] || fail "the first run exited $rc after SIGTERM, not 143"
  "$bin" train "${tiny[@]}" --steps 3 --out run.h5 --overwrite > /dev/null || fail "the output stayed locked after its run ended"
  ls -a | grep -q "lock" && fail "a lock file was left behind: $(ls -a)"
  true
  ;;
outputs_never_replaced)
  # what is at an output is kept unless --overwrite says otherwise: every writing command,
  # the same one line and exit 2, the file untouched; a page attograd wrote is replaced freely
  "$bin" train "${tiny[@]}" --steps 2 --qkv-bias true --tokenizer byte --out run.h5 > /dev/null
  "$bin" train "${tiny[@]}" --steps 2 --lora-rank 2 --out lora.h5 > /dev/null
  printf 'the cat sat on the mat.\n%.0s' {1..40} > corpus.txt
  echo "precious" > other.h5
  mkdir hf && echo "{}" > hf/config.json
  mkdir prep && echo "mine" > prep/notes.txt
  said="already holds"
  "$bin" export run.h5 --format hf --out hf_new > /dev/null
  expect_usage_error "$said" "$bin" import hf_new --out other.h5
  expect_usage_error "$said" "$bin" export run.h5 --format llmc --out other.h5
  expect_usage_error "$said" "$bin" export run.h5 --format gguf --out other.h5
  expect_usage_error "--out 'other.h5' holds a file that is not a checkpoint" \
    "$bin" train "${tiny[@]}" --steps 2 --out other.h5
  expect_usage_error "$said" "$bin" export run.h5 --format hf --out hf
  expect_usage_error "$said" "$bin" merge lora.h5 --out other.h5
  expect_usage_error "$said" "$bin" eval run.h5 --data corpus.txt --dump-grads other.h5
  expect_usage_error "$said" "$bin" report run.h5 --out other.h5
  expect_usage_error "$said" "$bin" attention run.h5 --prompt "the" --layer 0 --head 0 --svg other.h5
  expect_usage_error "$said" "$bin" prepare --data corpus.txt --out prep
  expect_usage_error "$said" "$bin" resume --checkpoint run.h5 --steps 3 --out other.h5
  expect_usage_error "$said" "$bin" bench --config tiny --steps 1 --warmup 0 --save-checkpoint other.h5
  # an output named after --out says to choose another --out
  cp other.h5 kb.best.h5
  expect_usage_error "'kb.best.h5' already holds a file of 9 bytes; give --overwrite to replace it, or choose another --out" \
    "$bin" train "${tiny[@]}" --steps 4 --eval-interval 2 --out kb.h5 --keep-best
  [ "$(cat other.h5)" = "precious" ] && [ "$(cat hf/config.json)" = "{}" ] ||
    fail "a refused command changed what was there"
  # an input's folder: the index of the model folder imported, even with --overwrite
  echo '{"weight_map": {}}' > hf_new/model.safetensors.index.json
  expect_usage_error "of PATH 'hf_new', which this command reads" \
    "$bin" import hf_new --out hf_new/model.safetensors.index.json --overwrite
  rm hf_new/model.safetensors.index.json
  # --overwrite replaces; a folder only when it holds files alone
  "$bin" export run.h5 --format llmc --out other.h5 --overwrite > /dev/null
  "$bin" export run.h5 --format hf --out hf --overwrite > /dev/null
  [ -f hf/model.safetensors ] && [ "$(cat hf/config.json)" != "{}" ] || fail "hf was not replaced"
  mkdir hf/sub
  expect_usage_error "a folder of files only" "$bin" export run.h5 --format hf --out hf --overwrite
  "$bin" report run.h5 --out page.html > /dev/null
  "$bin" report run.h5 --out page.html > /dev/null || fail "report did not replace its own page"
  "$bin" bench --config tiny --steps 1 --warmup 0 --save-checkpoint other.h5 --overwrite > /dev/null
  # a folder holding only what a writer killed outright left (a prepare the OOM killer
  # ended) holds nothing anyone had: the next prepare writes it, removing them
  sh -c 'exit 0' & gone=$!; wait "$gone"
  mkdir killed && echo half > "killed/.train.bin.partial-$gone-abcdef"
  "$bin" prepare --data corpus.txt --out killed > /dev/null 2> err.txt ||
    fail "a folder of a killed writer's partial files was refused: $(cat err.txt)"
  [ -f killed/meta.json ] || fail "killed/ was not written: $(ls -a killed)"
  [ -z "$(find killed -name '*partial*')" ] || fail "the partial file was kept: $(ls -a killed)"
  ls -a | grep -q "partial\|lock" && fail "left behind: $(ls -a)"
  true
  ;;
one_writer_every_command)
  # a running train's checkpoint is locked against every other writer, and theirs likewise
  "$bin" train "${tiny[@]}" --steps 2 --out base.h5 > /dev/null
  "$bin" train "${tiny[@]}" --steps 2 --lora-rank 2 --out lora.h5 > /dev/null
  "$bin" export base.h5 --format hf --out hf > /dev/null
  "$bin" train "${tiny[@]}" --steps 100000 --out run.h5 > log.txt 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do grep -q "step " log.txt 2>/dev/null && break; sleep 0.05; done
  expect_usage_error "PID $pid" "$bin" import hf --out run.h5 --overwrite
  expect_usage_error "PID $pid" "$bin" resume --checkpoint base.h5 --out run.h5 --overwrite
  expect_usage_error "PID $pid" "$bin" eval base.h5 --data log.txt --dump-grads run.h5 --overwrite
  expect_usage_error "PID $pid" "$bin" export base.h5 --format llmc --out run.h5 --overwrite
  expect_usage_error "PID $pid" "$bin" merge lora.h5 --out run.h5 --overwrite
  expect_usage_error "PID $pid" "$bin" bench --config tiny --steps 1 --warmup 0 \
    --save-checkpoint run.h5 --overwrite
  kill -TERM "$pid"; rc=0; wait "$pid" || rc=$?
  [ "$rc" -eq 143 ] || fail "the run exited $rc after SIGTERM, not 143"
  "$bin" import hf --out run.h5 --overwrite > /dev/null || fail "the lock outlived its run"
  ;;
partial_outputs_removed)
  # an export, import or merge stopped by a signal while it writes leaves nothing beside its
  # output (the fsync of its temporary files waits, tests/slow_fsync.c); one killed outright
  # leaves its partial files to the next writer of that output, which removes them
  [ -n "${SLOW_FSYNC_LIBRARY:-}" ] || { echo "skipped: no SLOW_FSYNC_LIBRARY"; exit 77; }
  "$bin" train "${tiny[@]}" --steps 2 --out run.h5 > /dev/null
  "$bin" export run.h5 --format hf --out hf > /dev/null
  slow() {
    # a background job starts with SIGINT ignored: given back its default, as a terminal has it
    env --default-signal=INT LD_PRELOAD="$SLOW_FSYNC_LIBRARY" SLOW_FSYNC_PATH=.partial- \
      SLOW_FSYNC_SECONDS=20 ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
      "$bin" "$@" > /dev/null 2>&1 &
    pid=$!
    # the writer's own partial output, seen twice 50 ms apart: the probe of whether the
    # folder takes files (base::check_can_write's "..attograd-probe.partial-...", made and
    # removed within 0.2 ms, 40 ms before the output's) seen once failed a CI run here
    local seen="" now=""
    for _ in $(seq 1 400); do
      now=$(ls -a | grep "partial" || true)
      [ -n "$now" ] && [ "$now" = "$seen" ] && break
      seen=$now
      sleep 0.05
    done
    [ -n "$now" ] && [ "$now" = "$seen" ] || fail "'$*' made no partial output that stayed"
  }
  for sig in INT TERM HUP; do
    slow export run.h5 --format hf --out "hf_$sig"
    kill -"$sig" "$pid"; wait "$pid" && fail "export went on after SIG$sig"
    slow import hf --out "imported_$sig.h5"
    kill -"$sig" "$pid"; wait "$pid" && fail "import went on after SIG$sig"
    left=$(ls -a | grep -E "partial|lock" || true)
    [ -z "$left" ] || fail "SIG$sig left behind: $left"
  done
  slow export run.h5 --format hf --out hf_killed
  kill -KILL "$pid"; wait "$pid" || true
  ls -a | grep -q "^.hf_killed.partial-" || fail "SIGKILL left nothing to clean up (is the test right?)"
  "$bin" export run.h5 --format hf --out hf_killed > /dev/null
  left=$(ls -a | grep -E "partial|lock" || true)
  [ -z "$left" ] || fail "the next export did not remove what the killed one left: $left"
  ;;
lock_hard_link)
  # a hard link planted as the lock file is refused, and the file it names is untouched
  echo "precious" > victim.txt
  ln victim.txt .run.h5.lock
  expect_usage_error "has 2 names (hard links)" "$bin" train "${tiny[@]}" --steps 3 --out run.h5
  [ "$(cat victim.txt)" = "precious" ] || fail "the lock wrote into a planted hard link"
  [ -e run.h5 ] && fail "a run went ahead without its lock"
  true
  ;;
escapes_never_raw)
  # a checkpoint's config carries the data path it trained on: escapes in it (a hostile
  # file, or a strange name) are shown escaped, never sent raw to the terminal
  name=$'d\e]0;pwned\a\e[2J.txt'
  for i in $(seq 1 200); do echo "the quick brown fox jumps over the lazy dog $i"; done > "$name"
  "$bin" train "${tiny[@]}" --steps 2 --data "$name" --out run.h5 > /dev/null 2>&1 ||
    fail "training on a strange file name failed"
  rm "$name"
  "$bin" resume --checkpoint run.h5 --steps 4 > /dev/null 2> err.txt && fail "resumed without its data"
  grep -q $'\e' err.txt && fail "an escape reached stderr raw: $(cat -v err.txt)"
  grep -qF '\x1b]0;pwned\x07\x1b[2J' err.txt || fail "the path is not shown escaped: $(cat -v err.txt)"
  "$bin" train "${tiny[@]}" --steps 2 --data "$name" 2> err.txt && fail "a missing file trained"
  grep -q $'\e' err.txt && fail "an escape reached stderr raw: $(cat -v err.txt)"
  true
  ;;
hostile_folder)
  # links and stray files planted in the output folder never redirect or block a save
  echo "precious" > victim.txt
  for pid in $(seq 1 40) 99999; do ln -s victim.txt ".run.h5.partial-$pid"; done
  mkdir ".run.h5.partial-77-XXXXXX"
  "$bin" train "${tiny[@]}" --steps 3 --checkpoint-interval 1 --out run.h5 > log.txt 2> err.txt ||
    fail "planted files blocked the save: $(cat err.txt)"
  [ "$(cat victim.txt)" = "precious" ] || fail "a planted link redirected a write"
  "$bin" inspect run.h5 --verify | grep -q "all checksums good" || fail "the checkpoint is not good"
  # an --out that is a link, a folder or a FIFO is refused; permission bits survive a save
  ln -s victim.txt link.h5
  expect_usage_error "link.h5" "$bin" train "${tiny[@]}" --steps 3 --out link.h5
  mkfifo pipe.h5
  expect_usage_error "pipe.h5" "$bin" train "${tiny[@]}" --steps 3 --out pipe.h5
  chmod 640 run.h5
  "$bin" train "${tiny[@]}" --steps 3 --out run.h5 --overwrite > /dev/null
  [ "$(stat -c %a run.h5)" = "640" ] || fail "saving over run.h5 changed its mode to $(stat -c %a run.h5)"
  [ "$(cat victim.txt)" = "precious" ] || fail "the victim was changed"
  # an output name at the file-name limit still saves (its temporary name is shortened)
  long=$(printf 'x%.0s' $(seq 1 252)).h5
  "$bin" train "${tiny[@]}" --steps 2 --out "$long" > /dev/null || fail "a 255-byte output name failed"
  [ -f "$long" ] || fail "the long-named checkpoint is missing"
  ;;
resume_moved_data)
  printf 'the cat sat on the mat. the dog ran far away from home.\n%.0s' {1..40} > corpus.txt
  "$bin" train "${tiny[@]}" --data corpus.txt --steps 20 --stop-at 10 --out run.h5 > /dev/null
  mkdir moved && mv corpus.txt moved/
  expect_usage_error "--data" "$bin" resume --checkpoint run.h5
  "$bin" resume --checkpoint run.h5 --data moved/corpus.txt > log.txt || fail "resume with the moved corpus failed"
  "$bin" inspect run.h5 | grep -q "^step 20$" || fail "the resumed run did not reach step 20"
  printf 'other text entirely, not the one trained on.\n%.0s' {1..40} > other.txt
  rc=0; "$bin" resume --checkpoint run.h5 --data other.txt --steps 30 > /dev/null 2> err.txt || rc=$?
  [ "$rc" -ne 0 ] && grep -q "is not the text this run trained on" err.txt || fail "other text was accepted: $(cat err.txt)"
  # a resume with nothing to train says so, or writes the --out it was given
  "$bin" resume --checkpoint run.h5 --data moved/corpus.txt > log.txt
  grep -q "no step was trained" log.txt && grep -q "run.h5 is unchanged" log.txt || fail "a resume at its last step did not say so: $(cat log.txt)"
  "$bin" resume --checkpoint run.h5 --data moved/corpus.txt --out copy.h5 > log.txt
  "$bin" inspect copy.h5 | grep -q "^step 20$" || fail "resume to a reached step did not write its --out"
  ;;
bad_values)
  expect_usage_error "--seed must be >= 0" "$bin" train --seed -1
  expect_usage_error "min_lr must be finite" "$bin" train --min-lr nan
  expect_usage_error "weight_decay must be >= 0 and finite" "$bin" train --weight-decay inf
  expect_usage_error "grad_clip must be >= 0 and finite" "$bin" train --grad-clip inf
  expect_usage_error "'/dev/zero' is not a regular file" "$bin" train --data /dev/zero
  mkdir folder
  expect_usage_error "folder" "$bin" train --data folder
  mkfifo fifo.cfg
  expect_usage_error "fifo.cfg" timeout 20 "$bin" train --config fifo.cfg
  printf '\xef\xbb\xbfsteps = 2\n' > bom.cfg
  "$bin" train "${tiny[@]}" --config bom.cfg --out bom.h5 > /dev/null || fail "a config with a byte-order mark was refused"
  printf 'steps = 2\nlr = 0.1\nsteps = 3\n' > twice.cfg
  expect_usage_error "twice.cfg:3: 'steps' is already set on line 1" "$bin" train --config twice.cfg
  expect_usage_error "no module 'blocks.7.mlp'" "$bin" train "${tiny[@]}" --steps 2 --inject-nan backward:blocks.7.mlp
  expect_usage_error "--temperature must be >= 0 and finite" "$bin" sample --checkpoint bom.h5 --temperature inf
  expect_usage_error "--prompt: " "$bin" sample --checkpoint bom.h5 --prompt "Ω"
  ;;
process_name)
  # the re-execution that picks the BLAS kernel keeps the process name; the header names
  # the kernel
  "$bin" train "${tiny[@]}" --steps 100000 --out run.h5 > log.txt 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do grep -q "step " log.txt 2>/dev/null && break; sleep 0.05; done
  comm=$(cat /proc/$pid/comm)
  kill -TERM "$pid"; wait "$pid" || true
  [ "$comm" = "$(basename "$bin")" ] || fail "the process is named '$comm', not $(basename "$bin")"
  grep -q "BLAS OpenBLAS" log.txt || fail "the run header does not name the BLAS kernel: $(head -2 log.txt)"
  ;;
stop_whatever_stderr)
  # A stop saves whatever became of stderr: a closed pseudo-terminal (SIGHUP),
  # Ctrl-C with stderr piped into a reader that died (`2>&1 | tee`), a reader gone during
  # set-up (`|& head -1`), stderr on a full device; and a usage error there exits 2
  medium=(--context-length 32 --d-model 96 --n-heads 4 --n-layers 3 --batch-size 4
          --threads 2 --sample-tokens 0 --eval-interval 0 --log-interval 1 --steps 100000)
  saved() { "$bin" inspect "$1" --verify | grep -q "all checksums good" || fail "$2: no good checkpoint"; }
  if command -v python3 > /dev/null; then
    python3 - "$bin" "${medium[@]}" --out pty.h5 <<'PY' || fail "closed terminal: $(cat pty.txt)"
import os, pty, signal, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "train"] + sys.argv[2:])
seen, start = b"", time.time()
while b"step " not in seen and time.time() - start < 60:
    seen += os.read(fd, 4096)
os.close(fd)  # the terminal goes away: the kernel sends the run SIGHUP
_, status = os.waitpid(pid, 0)
open("pty.txt", "w").write(f"exit status {status:#x} after {seen[-200:]!r}")
# saved, then ended by the SIGHUP it caught (docs/exit-codes.md)
sys.exit(0 if os.waitstatus_to_exitcode(status) == -signal.SIGHUP else 1)
PY
    saved pty.h5 "a closed terminal"
  fi
  ( set +e +o pipefail
    "$bin" train "${medium[@]}" --out tee.h5 2>&1 | tee tee.txt > /dev/null
    echo "${PIPESTATUS[0]}" > tee.rc ) &
  for _ in $(seq 1 400); do grep -q "step " tee.txt 2>/dev/null && break; sleep 0.05; done
  pkill -f "^tee tee.txt" || fail "no tee to stop"
  pkill -INT -f -- "--out tee.h5"
  wait
  # the first stop signal names the code: Ctrl-C's, or the broken pipe's when a write to the
  # dead tee came first
  case "$(cat tee.rc)" in 130 | 141) ;; *) fail "Ctrl-C after tee died: exit $(cat tee.rc), not 130 or 141" ;; esac
  saved tee.h5 "Ctrl-C after tee died"
  set +o pipefail
  "$bin" train "${medium[@]}" --out head.h5 2>&1 | head -n 1 > /dev/null
  rc=${PIPESTATUS[0]}
  set -o pipefail
  [ "$rc" -eq 141 ] || fail "a reader gone during set-up: exit $rc, not 141 (128 + SIGPIPE)"
  saved head.h5 "a reader gone during set-up"
  "$bin" train "${medium[@]}" --out full.h5 > full.txt 2> /dev/full &
  pid=$!
  for _ in $(seq 1 400); do grep -q "step " full.txt 2>/dev/null && break; sleep 0.05; done
  kill -INT "$pid"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" -eq 130 ] || fail "Ctrl-C with stderr on /dev/full: exit $rc, not 130"
  saved full.h5 "Ctrl-C with stderr on /dev/full"
  rc=0; "$bin" train --stepz 3 2> /dev/full || rc=$?
  [ "$rc" -eq 2 ] || fail "a usage error with stderr on /dev/full exited $rc, not 2"
  ;;
kernel_cache)
  # GEMM kernels measured once into the user's cache folder and reused; never a change of
  # results with the thread count; off, unusable and misspelt settings (gemm_tuning.h)
  export XDG_CACHE_HOME="$work/cache"
  run=(train "${tiny[@]}" --steps 4 --sample-tokens 0)
  "$bin" "${run[@]}" --threads 2 --out two.h5 > /dev/null
  table=$(ls "$work"/cache/attograd/gemm-*.txt 2>/dev/null) || fail "no table under $work/cache"
  grep -q "^f32 " "$table" || fail "no class measured: $(cat "$table")"
  before=$(md5sum < "$table")
  "$bin" "${run[@]}" --threads 1 --out one.h5 > /dev/null
  [ "$(md5sum < "$table")" = "$before" ] || fail "a second run measured again"
  diff <(hashes one.h5) <(hashes two.h5) > /dev/null || fail "--threads 1 and 2 differ"
  "$bin" bench --tune --config tiny > tune.txt
  grep -q "^bf16 .* \(onednn_bf16[a-z_]*\|widened_o[a-z]*\)\( (bf16 does not pay: runs in float32)\)\?$" tune.txt ||
    fail "no bf16 row: $(cat tune.txt)"
  grep -qF "$table: used" tune.txt || fail "the table does not name its file: $(head -3 tune.txt)"
  # bench --decode: a token reads tiny's matrices once (2 blocks' 49152 weights, the tied
  # head's 65 x 64): 102464 of them, 4 bytes each in fp32, 2 in bf16 and 34 per 32 in q8_0
  # (and q8_0-f32); q4_k (and q4_k-f32) hold the MLP's second matrices (rows of 256) as
  # Q4_K, 144 bytes per 256: 32768 weights, 16384 bytes fewer
  "$bin" bench --decode --config tiny --steps 4 --json > decode.jsonl
  grep -qF '"weight_bytes_per_token":409856.0,"weights":"fp32"' decode.jsonl &&
    grep -qF '"weight_bytes_per_token":204928.0,"weights":"bf16"' decode.jsonl &&
    grep -qF '"weight_bytes_per_token":108868.0,"weights":"q8_0"' decode.jsonl &&
    grep -qF '"weight_bytes_per_token":108868.0,"weights":"q8_0-f32"' decode.jsonl &&
    grep -qF '"weight_bytes_per_token":92484.0,"weights":"q4_k"' decode.jsonl &&
    grep -qF '"weight_bytes_per_token":92484.0,"weights":"q4_k-f32"' decode.jsonl &&
    [ "$(grep -c '"rounds":3,' decode.jsonl)" = 6 ] &&
    grep -q '"against":"bf16","config":"tiny","mode":"decode_ratio",.*"weights":"q8_0"' decode.jsonl ||
    fail "bench --decode: $(cat decode.jsonl)"
  XDG_CACHE_HOME="$work/none" ATTOGRAD_TUNE=off "$bin" "${run[@]}" --out off.h5 > /dev/null
  [ ! -e "$work/none" ] || fail "ATTOGRAD_TUNE=off made a cache folder"
  echo "a file, not a folder" > blocked
  XDG_CACHE_HOME="$work/blocked" "$bin" "${run[@]}" --out blocked.h5 > /dev/null ||
    fail "a cache folder that cannot be made stopped the run"
  expect_usage_error "ATTOGRAD_TUNE must be on, off or fresh, got 'bogus'" \
    env ATTOGRAD_TUNE=bogus "$bin" "${run[@]}" --out bogus.h5
  ;;
bf16_fallback)
  # --precision bf16 runs a shape in float32 where float32 was measured faster (so that bf16
  # is never slower than fp32: docs/mixed-precision.md): with a table that says so of every
  # class, a bf16 run has fp32's bits; ATTOGRAD_BF16_FALLBACK=off keeps bf16 (other bits); a
  # misspelt setting is a usage error
  export XDG_CACHE_HOME="$work/cache" ATTOGRAD_BF16_FALLBACK=on
  run=(train "${tiny[@]}" --steps 6 --sample-tokens 0)
  "$bin" "${run[@]}" --precision bf16 --out warm.h5 > /dev/null
  table=$(ls "$work"/cache/attograd/gemm-*.txt 2>/dev/null) || fail "no table under $work/cache"
  grep -q "^f32 AC " "$table" || fail "the attention was not weighed against float32: $(cat "$table")"
  # every bf16 GEMM class kept a widened kernel; the attention in float32 ran at 10^6 GFLOP/s
  awk 'NR > 2 && $1 == "bf16" && $2 !~ /^A/ { $6 = "widened_onednn" }
       NR > 2 && $1 == "f32" && $2 ~ /^A/ { $7 = "attention_f32=1000000.0" } { print }' \
    "$table" > planted && cp planted "$table"
  "$bin" "${run[@]}" --precision fp32 --out f32.h5 > /dev/null
  "$bin" "${run[@]}" --precision bf16 --out b16.h5 > /dev/null
  [ "$(hashes f32.h5 | wc -l)" -gt 10 ] || fail "no parameters compared"
  diff <(hashes f32.h5) <(hashes b16.h5) > /dev/null ||
    fail "bf16 where it pays nowhere differs from fp32: $(diff <(hashes f32.h5) <(hashes b16.h5) | head -4)"
  ATTOGRAD_BF16_FALLBACK=off "$bin" "${run[@]}" --precision bf16 --out strict.h5 > /dev/null
  diff <(hashes f32.h5) <(hashes strict.h5) > /dev/null &&
    fail "ATTOGRAD_BF16_FALLBACK=off still ran float32"
  expect_usage_error "ATTOGRAD_BF16_FALLBACK must be on or off, got 'maybe'" \
    env ATTOGRAD_BF16_FALLBACK=maybe "$bin" "${run[@]}" --precision bf16 --out maybe.h5
  ;;
bench_save_checkpoint)
  # bench --save-checkpoint saves the model and optimizer it stepped, as a run saves them
  # (a checkpoint that verifies), and reports the memory around the save in a row of its own
  "$bin" bench --config tiny --steps 1 --warmup 0 --json --save-checkpoint b.h5 > rows.jsonl ||
    fail "bench --save-checkpoint failed"
  [ "$(wc -l < rows.jsonl)" = 2 ] || fail "not a step row and a save row: $(cat rows.jsonl)"
  head -1 rows.jsonl | grep -q '"plan_activations_mb":' || fail "no memory plan in the step row"
  tail -1 rows.jsonl | grep -q '"measure":"save"' || fail "no save row: $(cat rows.jsonl)"
  for key in save_peak_rss_mb rss_before_save_mb save_added_mb state_mb; do
    tail -1 rows.jsonl | grep -q "\"$key\":" || fail "the save row has no $key"
  done
  "$bin" inspect --verify b.h5 > verify.txt || fail "the saved checkpoint does not verify"
  grep -q "^step 1$" verify.txt || fail "the checkpoint is not at step 1: $(head -3 verify.txt)"
  ;;
bench_breakdown)
  # bench --breakdown: the timed steps' time by kernel class, each GEMM with its kernel and
  # GFLOP/s, the attention's halves, the optimiser; the rows cover nearly all of the step
  "$bin" bench --config tiny --steps 3 --breakdown --json > breakdown.json ||
    fail "bench --breakdown failed"
  for row in '"kernel":"[a-z_0-9]+","ms_per_step":[0-9.e-]+,"name":"GEMM f32 ' \
    '"name":"attention forward"' '"name":"attention backward"' '"name":"optimizer step"' \
    '"name":"LayerNormBackward"'; do
    grep -Eq "$row" breakdown.json || fail "no $row row: $(head -c 300 breakdown.json)"
  done
  awk -v RS=, -F: '$1 == "\"step_ms\"" { step = $2 + 0 } $1 == "\"timed_ms\"" { timed = $2 + 0 }
    END { exit !(timed > 0.8 * step && timed <= step) }' breakdown.json ||
    fail "the timers do not cover the step: $(grep -o '"step_ms".*' breakdown.json)"
  "$bin" bench --config tiny --steps 2 --breakdown > breakdown.txt
  grep -q "^the timers cover [0-9.]*% of the measured step$" breakdown.txt ||
    fail "no coverage line: $(tail -2 breakdown.txt)"
  grep -q "^oneDNN matmuls: [0-9]* looked up a step, 0 made in the timed steps$" breakdown.txt ||
    fail "no primitive cache line, or primitives made in the timed steps: $(tail -2 breakdown.txt)"
  # after the warm-up every oneDNN primitive of a step is found in the cache, none made; the
  # GEMMs are put on oneDNN, since where OpenBLAS wins every class (the tuner's measurements,
  # or the rule on a CPU without BF16 units) a step looks nothing up
  ATTOGRAD_F32_GEMM=onednn "$bin" bench --config tiny --steps 2 --breakdown > onednn.txt
  grep -q "^oneDNN matmuls: [1-9][0-9]* looked up a step, 0 made in the timed steps$" onednn.txt ||
    fail "oneDNN's GEMMs: primitives not looked up, or made in the timed steps: $(tail -2 onednn.txt)"
  ;;
exit_codes)
  # one rule for every command (docs/exit-codes.md): the content of an input file that its
  # reader refuses exits 2, whatever is wrong with it; a failure of the machine exits 1
  "$bin" train "${tiny[@]}" --steps 2 --out run.h5 --sample-tokens 0 > /dev/null
  printf 'the cat sat on the mat\n' > text.txt
  head -c 3000 run.h5 > cut.h5
  bad_input() {  # bad_input WHAT CMD...: exit 2, one line naming WHAT
    local what=$1; shift
    local rc=0
    "$@" > out.txt 2> err.txt < /dev/null || rc=$?
    [ "$rc" -eq 2 ] || fail "'$*' exited $rc, not 2: $(cat err.txt)"
    [ "$(wc -l < err.txt)" -eq 1 ] && grep -qF -- "$what" err.txt || fail "'$*' said: $(cat err.txt)"
  }
  bad_input cut.h5 "$bin" sample cut.h5 --tokens 2
  bad_input cut.h5 "$bin" eval cut.h5 --data text.txt
  bad_input cut.h5 "$bin" inspect cut.h5
  bad_input cut.h5 "$bin" export cut.h5 --format hf --out hf
  bad_input cut.h5 "$bin" merge cut.h5 --out merged.h5
  bad_input cut.h5 "$bin" attention cut.h5 --prompt "ab"
  bad_input cut.h5 "$bin" report --checkpoint cut.h5 --out r.html
  bad_input cut.h5 "$bin" resume cut.h5
  bad_input cut.h5 "$bin" train --init-from cut.h5 --steps 1 --out t.h5
  bad_input cut.h5 "$bin" encode --tokenizer cut.h5
  printf '{"step": "one"}\n' > bad.jsonl
  bad_input bad.jsonl "$bin" report --metrics bad.jsonl --out r.html
  "$bin" prepare --data text.txt --out p.prepared > /dev/null
  printf '{"format": 1' > p.prepared/meta.json
  bad_input p.prepared "$bin" train --data p.prepared --steps 1 --out t.h5
  [ ! -e t.h5 ] && [ ! -e r.html ] && [ ! -e hf ] || fail "a refused command left an output"
  # the machine's failures: a write past the file-size limit, stdout on a full device
  rc=0; ( ulimit -f 8; "$bin" export run.h5 --format hf --out hf ) > /dev/null 2> err.txt || rc=$?
  [ "$rc" -eq 1 ] || fail "an export past the file-size limit exited $rc, not 1: $(cat err.txt)"
  rc=0; "$bin" inspect run.h5 > /dev/full 2> err.txt || rc=$?
  [ "$rc" -eq 1 ] || fail "inspect onto a full device exited $rc, not 1: $(cat err.txt)"
  ;;
consistent_defaults)
  # report writes the checkpoint's page beside it when --out is not given, as train's --out
  # has a default; resume takes every option that can change mid-run
  "$bin" train "${tiny[@]}" --steps 4 --out run.h5 --metrics m.jsonl --sample-tokens 0 > /dev/null
  "$bin" report run.h5 > r.txt || fail "report without --out failed"
  [ -s run.html ] && grep -q "wrote run.html" r.txt || fail "report did not write run.html: $(cat r.txt)"
  "$bin" report --metrics m.jsonl > r.txt || fail "report of metrics without --out failed"
  [ -s report.html ] || fail "report of metrics alone did not write report.html"
  "$bin" resume run.h5 --steps 6 --log-interval 1 --eval-windows 1 --sample-tokens 5 > log.txt ||
    fail "resume refused --log-interval, --eval-windows or --sample-tokens"
  grep -q "^step     5/" log.txt && grep -q "^sample:" log.txt ||
    fail "resume's --log-interval 1 or --sample-tokens 5 did not apply: $(cat log.txt)"
  ;;
*)
  fail "unknown scenario"
  ;;
esac
echo "ok ($scenario)"
