#!/usr/bin/env bash
# End-to-end tests of prepared data (docs/data.md): `attograd prepare`, training and eval on a
# prepared folder, bits per byte, memory that does not grow with the corpus, bpe
# checkpoints, and `attograd encode` / `decode`.
#   data_test.sh SCENARIO PATH/TO/attograd
# Exit 77 (ctest: skipped) only when the machine lacks the disk space a scenario needs.
set -euo pipefail
source "$(dirname "$0")/scenario_lib.sh" "$@"

tiny=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 2 --batch-size 8 --dropout 0.1
      --eval-windows 20 --log-interval 50 --threads 2 --sample-tokens 0)

# A text of about 60 kB with accents, combining marks, CJK and emoji (make_text LINES: a
# quarter of it for 100).
make_text() {
  for i in $(seq 1 "${1:-400}"); do
    printf 'line %d: the naïve café serves crème brûlée — 日本語のテキスト 😀 e\xcc\x81 %d\n' "$i" $((i * 7 % 13))
    printf 'we train a small model on text number %d, and it learns which letter follows.\n' "$i"
  done
}

json_field() { tail -1 "$1" | sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p"; }

case "$scenario" in
prepared_equals_text)
  # The same text trains the same weights from a prepared folder as from the file itself.
  make_text > t.txt
  "$bin" prepare --data t.txt --out t.prepared > p.txt
  grep -q "data_identity sha256:" p.txt || fail "prepare printed no identity: $(cat p.txt)"
  for f in meta.json tokenizer.json train.bin val.bin; do
    [ -f "t.prepared/$f" ] || fail "t.prepared has no $f"
  done
  "$bin" train "${tiny[@]}" --steps 30 --data t.txt --out text.h5 > a.txt
  "$bin" train "${tiny[@]}" --steps 30 --data t.prepared --out prepared.h5 > b.txt
  [ "$(hashes text.h5 | wc -l)" -gt 10 ] || fail "no parameters compared"
  diff <(hashes text.h5) <(hashes prepared.h5) > /dev/null ||
    fail "the prepared folder trained other weights than the text: $(diff <(hashes text.h5) <(hashes prepared.h5) | head -4)"
  grep -q "bits/byte" b.txt || fail "the training log has no bits per byte: $(cat b.txt)"
  # resume finds the folder by the identity it recorded, and refuses other data
  "$bin" train "${tiny[@]}" --steps 30 --stop-at 15 --data t.prepared --out split.h5 > /dev/null
  "$bin" resume --checkpoint split.h5 > /dev/null
  diff <(hashes prepared.h5) <(hashes split.h5) > /dev/null || fail "15 + resume 15 differ from 30"
  "$bin" train "${tiny[@]}" --steps 4 --stop-at 2 --data t.prepared --out other.h5 > /dev/null
  rc=0
  "$bin" resume --checkpoint other.h5 --data t.txt > /dev/null 2> err.txt || rc=$?
  [ "$rc" -ne 0 ] && grep -q "data_identity" err.txt || fail "resume on other data was not refused: $(cat err.txt)"
  ;;
bits_per_byte)
  # 15 kB: its ten evaluations score every window of a split (60 kB took 80 of this
  # scenario's 110 s under the sanitizers), and the arithmetic holds at any length
  make_text 100 > t.txt
  "$bin" prepare --data t.txt --val-fraction 0.2 --out t.prepared > /dev/null
  "$bin" train "${tiny[@]}" --steps 20 --data t.prepared --out run.h5 > /dev/null
  "$bin" eval --checkpoint run.h5 --data t.prepared --json > e.txt
  loss=$(json_field e.txt loss); bpb=$(json_field e.txt bits_per_byte)
  tokens=$(json_field e.txt tokens); bytes=$(json_field e.txt bytes)
  [ -n "$bpb" ] && [ -n "$bytes" ] || fail "eval --json lacks bits_per_byte or bytes: $(tail -1 e.txt)"
  # bits per byte = loss * tokens / bytes / ln 2; the text has multi-byte characters, so
  # bytes > tokens and bits per byte < loss / ln 2
  awk -v l="$loss" -v b="$bpb" -v t="$tokens" -v n="$bytes" 'BEGIN {
    want = l * t / n / log(2); exit !(n > t && (b - want) ^ 2 < 1e-8 && b < l / log(2)) }' ||
    fail "bits per byte $bpb does not follow from loss $loss, $tokens tokens, $bytes bytes"
  grep -q '"split":"val"' e.txt || fail "eval of a folder did not say which split"
  "$bin" eval --checkpoint run.h5 --data t.prepared --split train --json > tr.txt
  [ "$(json_field tr.txt tokens)" -gt "$tokens" ] || fail "--split train is not the larger part"
  "$bin" eval --checkpoint run.h5 --data t.txt --json > whole.txt
  [ -n "$(json_field whole.txt bits_per_byte)" ] || fail "eval of a text has no bits_per_byte"
  grep -q '"split":"all"' whole.txt || fail "a text named is not scored whole: $(tail -1 whole.txt)"
  # a text's parts are the folder's, cut by the same rule (the checkpoint's val_fraction of a
  # text, here the folder's 0.2 for both through a run trained with it)
  "$bin" train "${tiny[@]}" --steps 20 --data t.txt --val-fraction 0.2 --out text.h5 > /dev/null
  for split in val train all; do
    "$bin" eval --checkpoint text.h5 --data t.prepared --split "$split" --json | tail -1 > f.txt
    "$bin" eval --checkpoint text.h5 --data t.txt --split "$split" --json | tail -1 > x.txt
    for key in loss tokens windows bytes; do
      [ "$(json_field f.txt $key)" = "$(json_field x.txt $key)" ] ||
        fail "--split $split of the text and of its folder differ: $(cat x.txt) / $(cat f.txt)"
    done
  done
  ;;
prepare_errors)
  make_text > t.txt
  printf 'good text\n' > a.txt
  printf 'abc\xff\xfedef\n' > bad.txt
  rc=0
  "$bin" prepare --data a.txt bad.txt --out o > /dev/null 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] || fail "invalid UTF-8 exited $rc, not 2 (bad input)"
  grep -q "bad.txt" err.txt && grep -q "offset 3" err.txt ||
    fail "invalid UTF-8 not named with its file and offset: $(cat err.txt)"
  rc=0
  "$bin" prepare --data t.txt --tokenizer bpe --out o > /dev/null 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] && grep -q "vocab" err.txt || fail "bpe without a vocabulary size: rc $rc, $(cat err.txt)"
  "$bin" prepare --data t.txt --out t.prepared > /dev/null
  rc=0
  "$bin" train --data t.prepared --tokenizer byte --steps 1 > /dev/null 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] && grep -q "prepared folder" err.txt || fail "--tokenizer with a folder: $(cat err.txt)"
  rc=0
  "$bin" train "${tiny[@]}" --steps 1 --data t.prepared --out t.prepared/train.bin > /dev/null 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] && grep -q "train.bin" err.txt || fail "--out over the folder's train.bin: $(cat err.txt)"
  # a damaged folder is named, not trained on
  printf 'x' >> t.prepared/train.bin
  rc=0
  "$bin" train "${tiny[@]}" --steps 1 --data t.prepared --out x.h5 > /dev/null 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] && grep -q "train.bin" err.txt || fail "a damaged train.bin was not named: $(cat err.txt)"
  ;;
bpe_checkpoint)
  # A model trained with --tokenizer bpe keeps its merges: eval, sample, inspect and an
  # exact resume all work from the checkpoint alone.
  make_text > t.txt
  "$bin" train "${tiny[@]}" --steps 10 --tokenizer bpe --vocab-size 300 --data t.txt --out run.h5 > /dev/null
  "$bin" inspect run.h5 --verify > i.txt || fail "inspect --verify failed: $(tail -3 i.txt)"
  grep -q "^tokenizer bpe (300 ids: 256 bytes + 43 merges + <|endoftext|>)$" i.txt || fail "inspect shows no bpe merges: $(grep tokenizer i.txt)"
  grep -q "all checksums good" i.txt || fail "the merges are not checksummed: $(tail -1 i.txt)"
  "$bin" eval --checkpoint run.h5 --data t.txt --json > e.txt || fail "eval of a bpe checkpoint failed"
  [ -n "$(json_field e.txt bits_per_byte)" ] || fail "eval has no bits_per_byte: $(tail -1 e.txt)"
  a=$("$bin" sample --checkpoint run.h5 --prompt "the naïve café " --tokens 30 --seed 4 | od -An -tx1)
  b=$("$bin" sample --checkpoint run.h5 --prompt "the naïve café " --tokens 30 --seed 4 | od -An -tx1)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "sample of a bpe checkpoint failed or differed"
  "$bin" train "${tiny[@]}" --steps 10 --stop-at 5 --tokenizer bpe --vocab-size 300 --data t.txt --out split.h5 > /dev/null
  "$bin" resume --checkpoint split.h5 > /dev/null
  diff <(hashes run.h5) <(hashes split.h5) > /dev/null || fail "5 + resume 5 differ from 10 with bpe"
  ;;
bpe_checkpoint_h5py)
  # Any HDF5 reader sees docs/checkpoint.md's layout: merges [M, 2] uint32, Fletcher32,
  # split_pattern, special_tokens (the reserved <|endoftext|>, id 256 + M).
  py=/usr/bin/python3
  [ -x "$py" ] || py=python3
  "$py" -c 'import h5py' 2> /dev/null || { echo "SKIP: no h5py"; exit 77; }
  make_text > t.txt
  "$bin" train "${tiny[@]}" --steps 2 --tokenizer bpe --vocab-size 300 --data t.txt --out run.h5 > /dev/null
  "$py" - run.h5 <<'PY' || fail "h5py does not read the bpe tokenizer as docs/checkpoint.md says"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    t = f["tokenizer"]
    m = t["merges"]
    assert t.attrs["type"] == "bpe", t.attrs["type"]
    assert m.dtype == "uint32" and m.shape == (43, 2) and m.fletcher32, (m.dtype, m.shape)
    assert t.attrs["special_tokens"] == '["<|endoftext|>"]', t.attrs["special_tokens"]
    assert all(int(a) < 256 + i and int(b) < 256 + i for i, (a, b) in enumerate(m[()]))
    assert isinstance(t.attrs["split_pattern"], str) and t.attrs["split_pattern"].startswith("'(?i:")
PY
  ;;
encode_decode)
  # encode | decode gives back the exact bytes with a prepared folder's, a tokenizer file's
  # and a checkpoint's tokenizer; bad input is named with its position.
  make_text > t.txt
  "$bin" prepare --data t.txt --tokenizer bpe --vocab-size 300 --out bpe.prepared > /dev/null
  "$bin" prepare --data t.txt --out char.prepared > /dev/null
  "$bin" train "${tiny[@]}" --steps 2 --data bpe.prepared --out run.h5 > /dev/null
  # combining marks, ZWJ emoji, a flag, CJK, Hangul, Hebrew, Arabic, a zero-width space,
  # NUL, tab, CRLF, and no newline at the end
  printf 'cafe\xcc\x81 Z\xcc\x88\xcc\x81\xcc\xa3 \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 \xf0\x9f\x87\xaf\xf0\x9f\x87\xb5 日本語 한국어 שלום مرحبا \xe2\x80\x8b\x00\ttab\r\nend' > hostile.txt
  for tok in bpe.prepared bpe.prepared/tokenizer.json run.h5; do
    "$bin" encode --tokenizer "$tok" < hostile.txt > ids.txt || fail "encode with $tok failed"
    grep -qE '^[0-9]+( [0-9]+)*$' ids.txt && [ "$(wc -l < ids.txt)" -eq 1 ] ||
      fail "encode with $tok did not print one line of ids: $(head -c 200 ids.txt)"
    "$bin" decode --tokenizer "$tok" < ids.txt > back.txt || fail "decode with $tok failed"
    cmp -s hostile.txt back.txt || fail "encode | decode with $tok changed the text"
  done
  diff <("$bin" encode --tokenizer bpe.prepared < t.txt) <("$bin" encode --tokenizer run.h5 < t.txt) > /dev/null ||
    fail "the checkpoint's tokenizer encodes otherwise than its folder's"
  [ "$("$bin" encode --tokenizer bpe.prepared < t.txt | wc -w)" -lt "$(wc -c < t.txt)" ] ||
    fail "bpe gives no fewer ids than bytes"
  "$bin" encode --tokenizer char.prepared < t.txt | "$bin" decode --tokenizer char.prepared | cmp -s - t.txt ||
    fail "a char folder does not round-trip its own text"
  [ "$(printf '72\n101\t108  108 \n' | "$bin" decode --tokenizer run.h5)" = "Hell" ] ||
    fail "decode does not take ids separated by any whitespace"
  rc=0; echo "72 101 99999" | "$bin" decode --tokenizer run.h5 > /dev/null 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] && grep -q "id 99999 at position 2" err.txt || fail "a bad id: rc $rc, $(cat err.txt)"
  rc=0; echo "72 1o1" | "$bin" decode --tokenizer run.h5 > /dev/null 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] && grep -q "'1o1' at position 1" err.txt || fail "a non-number: rc $rc, $(cat err.txt)"
  rc=0; printf 'abc\xffdef' | "$bin" encode --tokenizer run.h5 > /dev/null 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] && grep -q "invalid UTF-8.*offset 3" err.txt || fail "invalid UTF-8: rc $rc, $(cat err.txt)"
  rc=0; printf 'the snow\xe2\x98\x83man' | "$bin" encode --tokenizer char.prepared > /dev/null 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] && grep -q "U+2603.*byte offset 8" err.txt ||
    fail "an unknown character: rc $rc, $(cat err.txt)"
  rc=0; "$bin" encode --tokenizer . < t.txt > /dev/null 2> err.txt || rc=$?
  [ "$rc" -eq 2 ] && grep -q "not a prepared folder" err.txt || fail "a plain folder: rc $rc, $(cat err.txt)"
  ;;
encode_streams)
  # About 75 MB through encode and decode in bounded memory, back byte for byte.
  make_text > unit.txt
  for _ in $(seq 1 16); do cat unit.txt; done > block.txt
  for _ in $(seq 1 70); do cat block.txt; done > big.txt
  rm block.txt
  "$bin" prepare --data unit.txt --tokenizer bpe --vocab-size 400 --out bpe.prepared > /dev/null
  rss=$(peak_rss_kb bash -c "exec '$bin' encode --tokenizer bpe.prepared < big.txt > big.ids")
  echo "encode $(stat -c %s big.txt) bytes: peak RSS ${rss} kB"
  [ "$rss" -lt 100000 ] || fail "encode's peak RSS ${rss} kB grew with its input"
  rss=$(peak_rss_kb bash -c "exec '$bin' decode --tokenizer bpe.prepared < big.ids > big.back")
  echo "decode: peak RSS ${rss} kB"
  [ "$rss" -lt 100000 ] || fail "decode's peak RSS ${rss} kB grew with its input"
  cmp -s big.txt big.back || fail "75 MB did not round-trip"
  ;;
big_corpus_bounded)
  # Over a gigabyte of text prepared and trained on; neither the prepare's nor the
  # training's resident memory grows with it, and training runs under an address-space
  # limit smaller than the corpus.
  free_kb=$(df -Pk . | awk 'NR == 2 {print $4}')
  if [ "$free_kb" -lt 4500000 ]; then echo "SKIP: needs 4.5 GB free here, has ${free_kb} kB"; exit 77; fi
  make_text > unit.txt
  unit=$(stat -c %s unit.txt)
  reps=$(( (1100 * 1000 * 1000) / unit + 1 ))
  for _ in $(seq 1 64); do cat unit.txt; done > block.txt
  for _ in $(seq 1 $(( reps / 64 + 1 ))); do cat block.txt; done > big.txt
  size=$(stat -c %s big.txt)
  [ "$size" -gt 1000000000 ] || fail "the corpus is only $size bytes"
  start=$(date +%s.%N)
  rss=$(peak_rss_kb "$bin" prepare --data big.txt --tokenizer byte --no-sync --out big.prepared)
  secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {print e - s}')
  echo "prepare: $size bytes in ${secs}s, peak RSS ${rss} kB"
  [ "$rss" -lt 300000 ] || fail "prepare's peak RSS ${rss} kB is over 300 MB"
  rm big.txt
  rss=$(peak_rss_kb bash -c "ulimit -v 900000; exec '$bin' train ${tiny[*]} --threads 1 --steps 20 \
      --eval-windows 50 --data big.prepared --out big.h5")
  echo "train on the prepared gigabyte: peak RSS ${rss} kB"; head -2 run.out; tail -2 run.out
  [ "$rss" -lt 200000 ] || fail "training's peak RSS ${rss} kB grew with the corpus"
  grep -q "data .* kB\|data [0-9.]* MB" run.out || fail "the memory plan does not count the data: $(head -3 run.out)"
  ;;
address_space_refused)
  # OpenBLAS spins forever when it cannot map its buffers: a run that cannot fit under
  # ulimit -v is refused up front instead (killed after 60 s if it hangs).
  rc=0
  (ulimit -v 500000; timeout -s KILL 60 "$bin" train --threads 2 --steps 2 --out x.h5) \
    > out.txt 2> err.txt || rc=$?
  [ "$rc" -eq 1 ] || fail "exited $rc, not 1 (stderr: $(cat err.txt))"
  grep -q "ulimit -v" err.txt || fail "the refusal does not name the limit: $(cat err.txt)"
  ;;
damaged_data_saves)
  # Token files damaged under a running train: ids outside the vocabulary written
  # in place, the file cut short, and the same with --out gone: each run stops with one line
  # naming the file and the byte, saves its last completed step (or a rescue copy) and exits
  # 1; the saved step resumes as if nothing happened, and resume refuses the edited file.
  # A train.bin over 16 MB is read a window at a time (token_store.h), so changes reach the run.
  # The kernels are the fixed rule's: runs compared bit for bit must not pick theirs from a
  # table that other processes on a loaded machine may be measuring meanwhile.
  export ATTOGRAD_TUNE=off
  make_text > t.txt
  for _ in $(seq 1 200); do cat t.txt; done > big.txt
  "$bin" prepare --data big.txt --out big.prepared > /dev/null
  [ "$(stat -c %s big.prepared/train.bin)" -gt $((16 << 20)) ] || fail "train.bin is not over 16 MB"
  cp -r big.prepared pristine
  run=("$bin" train "${tiny[@]}" --steps 100000 --log-interval 1 --data big.prepared)
  oov() { head -c "$(stat -c %s big.prepared/train.bin)" /dev/zero | tr '\000' '\377' |
    dd of=big.prepared/train.bin conv=notrunc status=none; }
  # damaged_run DAMAGE OUT: trains to OUT until step 3 is logged, runs DAMAGE, waits for the
  # run; prints the step it saved
  damaged_run() {
    # the last run's log goes first: read before this run's shell truncates it, its step 3
    # would damage the data before the run has opened it
    rm -f log.txt err.txt
    "${run[@]}" --out "$2" > log.txt 2> err.txt &
    local pid=$! rc=0
    for _ in $(seq 1 600); do grep -Eq "^step +3/" log.txt 2> /dev/null && break; sleep 0.05; done
    "$1"
    wait "$pid" || rc=$?
    [ "$rc" -eq 1 ] || fail "a run on damaged data exited $rc, not 1: $(cat err.txt)"
    [ "$(wc -l < err.txt)" -eq 1 ] || fail "not one line on stderr: $(cat err.txt)"
    grep -q "big.prepared/train.bin: .* at byte [0-9]\|big.prepared/train.bin: token [0-9]* (byte [0-9]*)" err.txt ||
      fail "the error does not name the file and the byte: $(cat err.txt)"
    sed -n 's/.*saved step \([0-9]*\), the last completed.*/\1/p' err.txt
  }
  step=$(damaged_run oov damaged.h5)
  grep -q "outside the vocabulary.*; saved step $step, the last completed, to damaged.h5$" err.txt ||
    fail "the error does not say what was saved where: $(cat err.txt)"
  "$bin" inspect damaged.h5 --verify | grep -q "^step $step$" || fail "damaged.h5 does not hold step $step"
  # resume notices the edited token file by its hash
  expect_error 2 "big.prepared/train.bin: its SHA-256" "$bin" resume --checkpoint damaged.h5
  rm -r big.prepared && cp -r pristine big.prepared
  # the saved step is the last completed one: resumed, it trains what one run trains
  "${run[@]}" --stop-at $((step + 2)) --out whole.h5 > /dev/null
  "$bin" resume --checkpoint damaged.h5 --stop-at $((step + 2)) --out resumed.h5 > /dev/null
  diff <(hashes whole.h5) <(hashes resumed.h5) > /dev/null ||
    fail "the saved step does not resume into the uninterrupted run's weights"
  cut_short() { truncate -s 1000 big.prepared/train.bin; }
  step=$(damaged_run cut_short cut.h5)
  grep -q "shorter than when it was opened.*; saved step $step, the last completed, to cut.h5$" err.txt ||
    fail "a truncated token file is not named so: $(cat err.txt)"
  rm -r big.prepared && cp -r pristine big.prepared
  # --out cannot be written when the run stops: the rescue folder holds the step
  mkdir sub
  gone() { mv sub gone; oov; }
  step=$(damaged_run gone sub/damaged-out.h5)
  rescue=$(sed -n 's/.*to \(.*attograd-rescue-[^ ]*\) instead$/\1/p' err.txt)
  [ -n "$rescue" ] && [ -f "$rescue" ] || fail "no rescue copy named: $(cat err.txt)"
  "$bin" inspect "$rescue" --verify | grep -q "^step $step$" || fail "the rescue copy is not step $step"
  rm -rf "$(dirname "$rescue")"
  ;;
verify_on_request)
  # `inspect DIR` shows a prepared folder's identity and token-file hashes; opening checks a
  # token file over 64 MB by its sample only (fast at any size), so an id changed between the
  # sampled blocks opens, and `inspect DIR --verify` hashes every byte and names the file.
  make_text > t.txt
  for _ in $(seq 1 700); do cat t.txt; done > big.txt
  "$bin" prepare --data big.txt --out big.prepared > p.txt
  size=$(stat -c %s big.prepared/train.bin)
  [ "$size" -gt $((64 << 20)) ] || fail "train.bin is not over 64 MB"
  "$bin" inspect big.prepared > i.txt
  grep -q "^$(grep -o 'data_identity sha256:[0-9a-f]*' p.txt)$" i.txt || fail "inspect shows another identity: $(cat i.txt)"
  grep -q "^train.bin: .*its sample checked" i.txt && grep -q "^val.bin: .*(checked)" i.txt ||
    fail "inspect does not say how each token file was checked: $(cat i.txt)"
  "$bin" inspect big.prepared --verify | grep -q "every token file verified" || fail "--verify did not verify"
  # block 10 of 64 starts at 10 (size - 64 KiB) / 63; 100 bytes past its end is in no block
  at=$(( (size - 65536) * 10 / 63 + 65536 + 100 )); at=$(( at - at % 2 ))
  old=$(od -An -tu2 -j "$at" -N 2 big.prepared/train.bin | tr -d ' ')
  if [ "$old" -eq 1 ]; then id='\002'; else id='\001'; fi
  printf "$id\\000" | dd of=big.prepared/train.bin bs=1 seek="$at" conv=notrunc status=none
  "$bin" inspect big.prepared > /dev/null || fail "the sampled check saw a change outside its blocks"
  expect_error 2 "big.prepared/train.bin: its SHA-256 is" "$bin" inspect big.prepared --verify
  ;;
*)
  fail "unknown scenario '$scenario'"
  ;;
esac
