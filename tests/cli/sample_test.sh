#!/usr/bin/env bash
# End-to-end tests of `attograd sample` with its key/value cache (docs/sampling.md), and of
# `eval` on a long text (docs/data.md):
#   sample_test.sh SCENARIO PATH/TO/attograd
# Every scenario trains (or initialises) a small model in a fresh folder first.
set -euo pipefail
source "$(dirname "$0")/scenario_lib.sh" "$@"

# A model of context 16 trained briefly on a text with accents and emoji, so that its
# greedy continuations are not one repeated character.
small=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 2 --batch-size 8 --dropout 0
       --eval-windows 5 --log-interval 100 --threads 2 --sample-tokens 0 --eval-interval 0)
make_text() {
  for i in $(seq 1 300); do
    printf 'line %d: the naïve café serves crème brûlée — 日本語 😀 and the dog ran home.\n' "$i"
  done
}
train_small() {  # train_small OUT.h5 [options] (150 steps unless --steps is given)
  local out=$1; shift
  make_text > text.txt
  "$bin" train "${small[@]}" --data text.txt --steps 150 --out "$out" "$@" > /dev/null
}

sample() { "$bin" sample --checkpoint "$@" 2> stats.txt; }

case "$scenario" in
cache_equals_no_cache)
  # Greedy and seeded samples, one and several at a time, are the same token for token
  # with and without the cache, well past the context (16) and through window moves.
  train_small run.h5
  for opts in "--temperature 0" "--seed 3" "--seed 4 --top-k 5 --top-p 0.9 --num-samples 3" \
              "--temperature 0 --slide 1" "--seed 5 --slide 3 --prompt naïve" \
              "--temperature 0 --weights bf16" "--seed 6 --num-samples 2 --weights bf16" \
              "--temperature 0 --weights q8_0-f32" "--seed 7 --num-samples 2 --weights q8_0-f32" \
              "--temperature 0 --weights q4_k-f32"; do
    # shellcheck disable=SC2086
    sample run.h5 --tokens 60 $opts > cached.txt
    grep -q "key/value cache" stats.txt || fail "no tokens/s line on stderr: $(cat stats.txt)"
    # shellcheck disable=SC2086
    sample run.h5 --tokens 60 $opts --no-cache > full.txt
    cmp -s cached.txt full.txt ||
      fail "'$opts': the cache changed the text: $(diff cached.txt full.txt | head -4)"
    [ "$(wc -c < cached.txt)" -ge 60 ] || fail "'$opts': a short sample: $(cat cached.txt)"
  done
  # the cache's steps say how fast they read the weights (set against bench --decode's bound);
  # the full window, which takes no steps, says nothing of it
  for weights in fp32 q8_0; do
    sample run.h5 --tokens 60 --weights "$weights" > /dev/null
    grep -q "[0-9] steps reading [0-9.]* [kMG]\?B of weights each: [0-9.]* GB/s" stats.txt ||
      fail "--weights $weights: no rate of the weights read: $(cat stats.txt)"
  done
  sample run.h5 --tokens 60 --no-cache > /dev/null
  ! grep -q "of weights each" stats.txt || fail "--no-cache: a rate of steps never taken: $(cat stats.txt)"
  # Q8_0 weights by Q8_0 activations (llama.cpp's arithmetic; --no-cache would be float32's):
  # the same text on 1 and 2 threads, and not the float32 activations' text for every one of
  # five samples (--num-samples: one process draws them all)
  five=(--tokens 200 --seed 1 --num-samples 5)
  sample run.h5 "${five[@]}" --weights q8_0 --threads 1 > one.txt
  sample run.h5 "${five[@]}" --weights q8_0 --threads 2 > two.txt
  cmp -s one.txt two.txt || fail "--weights q8_0: the thread count changed the text"
  [ "$(wc -c < one.txt)" -ge 1000 ] || fail "--weights q8_0: short samples: $(cat one.txt)"
  sample run.h5 "${five[@]}" --weights q8_0-f32 > f32.txt
  ! cmp -s one.txt f32.txt || fail "--weights q8_0 gave q8_0-f32's 5 samples: activations not rounded?"
  # bfloat16 and Q8_0 weights sample from a (slightly) different model: meaningful only if
  # the text differs somewhere from float32's over a few samples
  sample run.h5 "${five[@]}" > f32.txt
  for weights in bf16 q8_0-f32 q4_k-f32; do
    sample run.h5 "${five[@]}" --weights "$weights" > rounded.txt
    ! cmp -s f32.txt rounded.txt || fail "--weights $weights gave float32's 5 samples: not applied?"
  done
  # rows of 256 weights and more are Q4_K blocks under --weights q4_k(-f32) (the model above
  # has none: all Q8_0): the cache still equals the full window, and the text is not Q8_0's
  train_small wide.h5 --d-model 256 --n-heads 4 --steps 30
  for opts in "--temperature 0" "--seed 8 --num-samples 2"; do
    # shellcheck disable=SC2086
    sample wide.h5 --tokens 40 $opts --weights q4_k-f32 > cached.txt
    # shellcheck disable=SC2086
    sample wide.h5 --tokens 40 $opts --weights q4_k-f32 --no-cache > full.txt
    cmp -s cached.txt full.txt ||
      fail "'$opts --weights q4_k-f32': the cache changed the text: $(diff cached.txt full.txt | head -4)"
  done
  five=(--tokens 100 --seed 1 --num-samples 5)
  sample wide.h5 "${five[@]}" --weights q8_0-f32 > q8.txt
  sample wide.h5 "${five[@]}" --weights q4_k-f32 > q4.txt
  ! cmp -s q8.txt q4.txt || fail "--weights q4_k-f32 gave Q8_0's 5 samples: no Q4_K blocks?"
  # Q4_K by 8-bit activations (llama.cpp's arithmetic): the same text on 1 and 2 threads,
  # and not the float32 activations' text for every sample
  sample wide.h5 "${five[@]}" --weights q4_k --threads 1 > one.txt
  sample wide.h5 "${five[@]}" --weights q4_k --threads 2 > two.txt
  cmp -s one.txt two.txt || fail "--weights q4_k: the thread count changed the text"
  ! cmp -s one.txt q4.txt || fail "--weights q4_k gave q4_k-f32's 5 samples: activations not rounded?"
  ;;
streams)
  # Tokens reach stdout as they are made: the file grows while the sampler runs.
  train_small run.h5 --steps 20
  "$bin" sample --checkpoint run.h5 --tokens 100000000 --max-time 3 --threads 1 > live.txt \
    2> stats.txt &
  pid=$!
  seen=0
  for _ in $(seq 1 100); do
    if [ -s live.txt ] && kill -0 "$pid" 2>/dev/null; then seen=1; break; fi
    sleep 0.05
  done
  wait "$pid" || fail "sample --max-time failed: $(cat stats.txt)"
  [ "$seen" -eq 1 ] || fail "nothing was written before the sampler ended"
  grep -q "stopped by --max-time" stats.txt || fail "--max-time did not stop it: $(cat stats.txt)"
  grep -Eq "sampled [0-9]+ tokens in [0-9.]+ s: [0-9]+ tokens/s" stats.txt ||
    fail "no tokens/s on stderr: $(cat stats.txt)"
  ;;
options)
  train_small run.h5 --steps 5
  expect_usage_error "--top-p must be in (0, 1], got 0" "$bin" sample --checkpoint run.h5 --top-p 0
  expect_usage_error "--top-p must be in (0, 1], got 1.5" "$bin" sample --checkpoint run.h5 --top-p 1.5
  expect_usage_error "--top-p must be in (0, 1], got nan" "$bin" sample --checkpoint run.h5 --top-p nan
  expect_usage_error "--num-samples must be >= 1, got 0" "$bin" sample --checkpoint run.h5 --num-samples 0
  expect_usage_error "--max-time must be >= 0 and finite, got -1" "$bin" sample --checkpoint run.h5 --max-time -1
  expect_usage_error "--max-time must be >= 0 and finite, got inf" "$bin" sample --checkpoint run.h5 --max-time inf
  expect_usage_error "--stop must not be empty" "$bin" sample --checkpoint run.h5 --stop ""
  expect_usage_error "--slide must be >= 0, got -1" "$bin" sample --checkpoint run.h5 --slide -1
  expect_usage_error "--slide must be at most the context length 16, got 17" "$bin" sample --checkpoint run.h5 --slide 17
  expect_usage_error "--no-cache runs float32 activations, and --weights q8_0 rounds them" "$bin" sample --checkpoint run.h5 --weights q8_0 --no-cache
  expect_usage_error "and --weights q4_k rounds them to 8 bits: give --weights q4_k-f32" "$bin" sample --checkpoint run.h5 --weights q4_k --no-cache
  expect_usage_error "--num-samples 100000000 needs" "$bin" sample --checkpoint run.h5 --num-samples 100000000
  # counts whose sizes overflow 64 bits: usage errors, not a vector's length_error
  expect_usage_error "--num-samples 4611686018427387904 needs" "$bin" sample --checkpoint run.h5 --num-samples 4611686018427387904
  expect_usage_error "--num-samples 9223372036854775807 needs" "$bin" sample --checkpoint run.h5 --num-samples 9223372036854775807
  expect_usage_error "--threads must be between 1 and 256, got 100000" "$bin" sample --checkpoint run.h5 --threads 100000
  expect_usage_error "--threads must be between 1 and 256, got 100000" "$bin" eval --checkpoint run.h5 --data text.txt --threads 100000
  sample run.h5 --tokens 9223372036854775807 --max-time 0.5 > /dev/null ||
    fail "--tokens 9223372036854775807 failed: $(cat stats.txt)"
  expect_usage_error "--prompt: character 'Ω' (U+03A9)" "$bin" sample --checkpoint run.h5 --prompt "aΩ"
  expect_usage_error "--weights must be 'fp32', 'bf16', 'q8_0', 'q8_0-f32', 'q4_k' or 'q4_k-f32', got 'fp16'" "$bin" sample --checkpoint run.h5 --weights fp16
  ;;
stop_and_samples)
  train_small run.h5
  sample run.h5 --tokens 80 --temperature 0 --prompt "line" > all.txt
  # --stop: the sample ends where the text first reaches it, which is not printed
  sample run.h5 --tokens 80 --temperature 0 --prompt "line" --stop "ran" > stopped.txt
  all=$(cat all.txt)
  rest=${all#line}
  expected="line${rest%%ran*}"
  [ "$expected" != "$all" ] || fail "the greedy sample has no 'ran' to stop at: $all"
  [ "$(cat stopped.txt)" = "$expected" ] || fail "--stop ran gave '$(cat stopped.txt)', expected '$expected'"
  sample run.h5 --tokens 80 --temperature 0 --prompt "line" --stop "zzzz" > nostop.txt
  cmp -s all.txt nostop.txt || fail "a stop text that never occurs changed the sample"
  # --num-samples: a header per sample; the first is the single sample of the same seed
  sample run.h5 --tokens 30 --seed 9 > one.txt
  sample run.h5 --tokens 30 --seed 9 --num-samples 3 > three.txt
  [ "$(grep -c '^--- sample [123] of 3 ---$' three.txt)" -eq 3 ] || fail "no 3 headers: $(cat three.txt)"
  first=$(awk '/^--- sample 1 of 3 ---$/ {on=1; next} /^--- sample 2 of 3 ---$/ {on=0} on' three.txt)
  [ "$first" = "$(cat one.txt)" ] || fail "sample 1 of 3 '$first' is not the single sample '$(cat one.txt)'"
  grep -q "90 tokens" stats.txt || fail "3 samples of 30 are not 90 tokens: $(cat stats.txt)"
  ;;
tokenizers)
  # byte and BPE models: multi-byte characters split over tokens come out whole, and the
  # cache changes nothing
  train_small byte.h5 --tokenizer byte --steps 60
  train_small bpe.h5 --tokenizer bpe --vocab-size 300 --steps 60
  for name in byte bpe; do
    sample "$name.h5" --tokens 80 --seed 1 --prompt "café 😀" > cached.txt
    sample "$name.h5" --tokens 80 --seed 1 --prompt "café 😀" --no-cache > full.txt
    cmp -s cached.txt full.txt || fail "$name: the cache changed the text"
    head -c 11 cached.txt | grep -q "café 😀" || fail "$name: the prompt is not printed first"
  done
  ;;
rss_bounded)
  # A base-sized model (T 256, d 256, 6 layers, 8 heads): peak RSS of sample at most twice
  # the weights plus 64 MB.
  "$bin" train --context-length 256 --d-model 256 --n-heads 8 --n-layers 6 --steps 0 \
    --sample-tokens 0 --out base.h5 > /dev/null
  params=$("$bin" inspect base.h5 | awk '/^(tok_emb|pos_emb|blocks|ln_f|lm_head)/ {n += $NF} END {print n}')
  bound_kb=$(( params * 4 * 2 / 1024 + 64 * 1024 ))
  kb=$(peak_rss_kb "$bin" sample --checkpoint base.h5 --tokens 300 --threads 2)
  echo "sample on $params parameters: peak RSS $((kb / 1024)) MB, bound $((bound_kb / 1024)) MB"
  [ "$kb" -le "$bound_kb" ] || fail "peak RSS ${kb} kB over the bound ${bound_kb} kB"
  ;;
huge_context)
  # A 4k-parameter model of context 32768 once took 8.4 GB to sample 3 tokens (two
  # threads' 32768 x 32768 float scores). The decoder now holds the window it uses and
  # scores a long prefill a block of rows at a time; under a 2 GB address-space limit, so
  # that the old behaviour fails at once instead of taking the machine's memory.
  "$bin" train --context-length 32768 --d-model 8 --n-heads 1 --n-layers 1 --steps 0 \
    --batch-size 1 --eval-windows 1 --sample-tokens 0 --out huge.h5 > /dev/null
  # bash execs the command: the process peak_rss_kb watches is attograd itself
  limited=(bash -c 'ulimit -v 2000000; exec "$@"' limited)
  kb=$(peak_rss_kb "${limited[@]}" "$bin" sample --checkpoint huge.h5 --tokens 3 --threads 2)
  echo "3 tokens from a context of 32768: peak RSS $((kb / 1024)) MB"
  [ "$kb" -le 65536 ] || fail "peak RSS ${kb} kB sampling 3 tokens, over 64 MB"
  [ "$(wc -c < run.out)" -ge 3 ] || fail "no sample: $(cat run.out)"
  # one sample whose need the limit cannot hold is refused by name before anything is
  # allocated (it was std::bad_alloc, or OpenBLAS retrying forever)
  expect_usage_error "the address-space limit (ulimit -v)" "${limited[@]}" "$bin" sample \
    --checkpoint huge.h5 --tokens 3 --threads 8
  # attention's maps are quadratic in the prompt: 12000 tokens would take 3.5 GB here
  long=$(head -c 12000 < /dev/zero | tr '\0' 'e')
  expect_usage_error "the address-space limit (ulimit -v)" "${limited[@]}" "$bin" attention \
    --checkpoint huge.h5 --prompt "$long" --threads 1
  ;;
eval_bounded)
  # eval reads a text a chunk at a time: 1.5 MB and 9 MB of text evaluate in the same
  # memory (before, the text and its ids were held whole: over 200 MB for 24 MB; holding
  # only the 9 MB text, without its ids, would already grow by 7.5 MB)
  make_text > block.txt
  "$bin" train --context-length 256 --d-model 8 --n-heads 1 --n-layers 1 --steps 0 \
    --sample-tokens 0 --data block.txt --out tiny.h5 > /dev/null
  for _ in $(seq 1 55); do cat block.txt; done > small.txt
  for _ in $(seq 1 6); do cat small.txt; done > text.txt
  small_kb=$(peak_rss_kb "$bin" eval --checkpoint tiny.h5 --data small.txt --threads 1)
  big_kb=$(peak_rss_kb "$bin" eval --checkpoint tiny.h5 --data text.txt --threads 1)
  text_kb=$(( $(wc -c < text.txt) / 1024 ))
  echo "eval: peak RSS ${small_kb} kB on $(( $(wc -c < small.txt) / 1024 )) kB, ${big_kb} kB on ${text_kb} kB of text"
  grep -q "tokens" run.out || fail "eval printed no result: $(cat run.out)"
  [ "$((big_kb - small_kb))" -lt 4096 ] || fail "eval grew from ${small_kb} kB to ${big_kb} kB"
  [ "$big_kb" -lt "$((small_kb + text_kb / 2))" ] || fail "eval held ${big_kb} kB for ${text_kb} kB of text"
  ;;
*)
  fail "unknown scenario"
  ;;
esac
