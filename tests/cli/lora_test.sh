#!/usr/bin/env bash
# LoRA fine-tuning and frozen weights (docs/finetuning.md), one scenario per ctest entry:
#   lora_test.sh SCENARIO PATH/TO/attograd
# The base weights stay bit for bit what --init-from gave, the merge (and what inference
# and export run) is the adapted model, a LoRA run resumes exactly with dropout,
# accumulation and bf16, and bad LoRA or --freeze options are one-line usage errors.
set -euo pipefail
source "$(dirname "$0")/scenario_lib.sh" "$@"

tiny=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 2 --batch-size 4 --eval-windows 10
      --log-interval 5 --threads 1 --sample-tokens 0)
lora=(--lora-rank 4 --lora-alpha 8 --lora-dropout 0.1)
base_only() { grep -v '\.lora_[AB]\.'; }
count_of() { awk -v k="$1" '$1 == k {print $NF}' "$2"; }

case "$scenario" in
lora_errors)
  "$bin" train "${tiny[@]}" --steps 2 --out base.h5 > /dev/null
  expect_usage_error "'attn.v' matches no Linear" \
    "$bin" train "${tiny[@]}" --steps 1 --lora-rank 2 --lora-targets attn.qkv,attn.v --out x.h5
  expect_usage_error "lora_rank 64 is larger than attn.qkv (32 -> 32)" \
    "$bin" train "${tiny[@]}" --steps 1 --lora-rank 64 --out x.h5
  expect_usage_error "lora_alpha is set but lora_rank is 0" \
    "$bin" train "${tiny[@]}" --steps 1 --lora-alpha 4 --out x.h5
  expect_usage_error "lora_targets is set but lora_rank is 0" \
    "$bin" train --init-from base.h5 --steps 1 --lora-targets mlp.fc1 --out x.h5
  expect_usage_error "--freeze 'blocks.9.*' matches no parameter" \
    "$bin" train "${tiny[@]}" --steps 1 --freeze 'ln_f.*,blocks.9.*' --out x.h5
  expect_usage_error "nothing would train" "$bin" train "${tiny[@]}" --steps 1 --freeze '*' --out x.h5
  expect_usage_error "has no LoRA adapters" "$bin" merge --checkpoint base.h5 --out m.h5
  [ ! -e x.h5 ] && [ ! -e m.h5 ] || fail "a refused command left a file: $(ls)"
  ;;
lora_init_from)
  "$bin" train "${tiny[@]}" --steps 30 --out base.h5 > /dev/null
  "$bin" train --init-from base.h5 "${lora[@]}" --steps 20 --lr 1e-2 --eval-windows 10 \
    --threads 1 --sample-tokens 20 --out lora.h5 > run.txt || fail "LoRA run failed"
  grep -q "^sample:" run.txt || fail "the LoRA run printed no sample"
  diff <(hashes base.h5) <(hashes lora.h5 | base_only) > /dev/null ||
    fail "the base weights changed: $(diff <(hashes base.h5) <(hashes lora.h5 | base_only) | head -3)"
  [ "$(hashes lora.h5 | grep -c lora_)" -eq 24 ] || fail "not 24 adapter matrices: $(hashes lora.h5 | grep -c lora_)"
  "$bin" inspect lora.h5 > i.txt
  t=$(count_of trainable i.txt); f=$(count_of frozen i.txt); total=$(count_of total i.txt)
  [ "$t" -gt 0 ] && [ "$f" -gt "$t" ] && [ $((t + f)) -eq "$total" ] ||
    fail "inspect's counts: trainable $t frozen $f total $total"
  grep -q '"lora_rank": 4' i.txt && grep -q '"lora_alpha": 8' i.txt || fail "the config lacks the adapters"
  "$bin" inspect base.h5 > b.txt
  ! grep -q lora_ b.txt || fail "a checkpoint without adapters mentions them"
  [ "$(count_of frozen b.txt)" -eq 0 ] || fail "a plain run's checkpoint counts frozen parameters"
  # merge: a plain weights-only checkpoint of the adapted model
  "$bin" merge --checkpoint lora.h5 --out merged.h5 > m.txt || fail "merge failed"
  "$bin" inspect merged.h5 > mi.txt
  ! grep -q lora_ mi.txt && grep -q "none (weights only)" mi.txt || fail "merged.h5 is not plain weights"
  ! diff <(hashes base.h5) <(hashes merged.h5) > /dev/null || fail "the merge changed nothing"
  for f in lora.h5 merged.h5; do
    "$bin" sample --checkpoint "$f" --prompt "th" --tokens 40 --temperature 0 > "$f.txt" 2> /dev/null
  done
  cmp lora.h5.txt merged.h5.txt || fail "sampling the LoRA checkpoint differs from the merged one"
  # export merges on the way out: the same files as the merged checkpoint's
  "$bin" export --checkpoint lora.h5 --format hf --out hf_lora > /dev/null
  "$bin" export --checkpoint merged.h5 --format hf --out hf_merged > /dev/null
  cmp hf_lora/model.safetensors hf_merged/model.safetensors || fail "export did not merge the adapters"
  # a LoRA checkpoint continued with other adapters: its own are merged in first
  "$bin" train --init-from lora.h5 --lora-rank 2 --lora-targets mlp.fc1 --steps 2 --threads 1 \
    --sample-tokens 0 --eval-windows 2 --out again.h5 > /dev/null || fail "--init-from a LoRA checkpoint failed"
  diff <(hashes merged.h5) <(hashes again.h5 | base_only) > /dev/null || fail "its adapters were not merged first"
  # plain fine-tuning with --freeze: frozen weights unchanged, stored in the config
  "$bin" train --init-from base.h5 --freeze 'tok_emb.*,blocks.0.*' --steps 5 --threads 1 \
    --sample-tokens 0 --eval-windows 2 --out frozen.h5 > /dev/null
  diff <(hashes base.h5 | grep -E '^(tok_emb|blocks.0)') <(hashes frozen.h5 | grep -E '^(tok_emb|blocks.0)') > /dev/null ||
    fail "--freeze let frozen weights change"
  ! diff <(hashes base.h5 | grep '^blocks.1') <(hashes frozen.h5 | grep '^blocks.1') > /dev/null || fail "nothing trained"
  "$bin" inspect frozen.h5 > fi.txt
  grep -q '"freeze": "tok_emb.\*,blocks.0.\*"' fi.txt && [ "$(count_of frozen fi.txt)" -gt 0 ] ||
    fail "inspect does not show the frozen parameters: $(grep -E 'freeze|^frozen' fi.txt)"
  # --lora-targets name the Linears of --init-from's architecture, read from the checkpoint:
  # down_proj on a SwiGLU base trains, and on this GELU base is refused naming its Linears
  "$bin" train "${tiny[@]}" --mlp swiglu --position rope --steps 2 --out swiglu.h5 > /dev/null
  "$bin" train --init-from swiglu.h5 --lora-rank 2 --lora-targets down_proj --steps 2 \
    --threads 1 --sample-tokens 0 --eval-windows 2 --out down.h5 > down.txt 2>&1 ||
    fail "down_proj on a SwiGLU base was refused: $(tail -1 down.txt)"
  [ "$(hashes down.h5 | grep -c 'mlp.down_proj.lora_')" -eq 4 ] || fail "no down_proj adapters"
  expect_usage_error "this model's MLP is gelu" "$bin" train --init-from base.h5 --lora-rank 2 \
    --lora-targets down_proj --steps 2 --out refused.h5
  ;;
lora_resume_exact)
  # dropout in the model and on the adapters, accumulation, then bf16: a split run resumed
  # is the straight one, bit for bit
  for precision in fp32 bf16; do
    # (--overwrite: the second precision starts new runs on the same outputs)
    opts=("${tiny[@]}" "${lora[@]}" --grad-accum-steps 2 --precision "$precision" --steps 16 --overwrite)
    "$bin" train "${opts[@]}" --out straight.h5 > /dev/null
    "$bin" train "${opts[@]}" --stop-at 7 --out split.h5 > /dev/null
    "$bin" resume --checkpoint split.h5 --threads 2 > /dev/null  # trained on 1: any count, same bits
    diff <(hashes straight.h5) <(hashes split.h5) > /dev/null ||
      fail "$precision: 7 + resume + 9 LoRA steps differ from 16 straight"
    [ "$(hashes split.h5 | grep -c lora_)" -eq 24 ] || fail "no adapters compared"
  done
  ;;
packed_base_resume_exact)
  # a frozen base held as Q8_0 or Q4_K blocks is saved as its blocks and resumed from them:
  # 3 + resume + 3 steps are the 6 straight, bit for bit (Q4_K's blocks are not quantized
  # again), and the file is far smaller than with a float32 base (under half for Q8_0
  # (1.0625 bytes a weight), under a quarter for Q4_K (0.5625), with the adapters beside)
  wide=(--context-length 16 --d-model 256 --n-heads 2 --n-layers 1 --batch-size 2
        --eval-windows 2 --log-interval 5 --threads 1 --sample-tokens 0 --lora-rank 4)
  for base_and_ratio in q8_0:2 q4_k:4; do
    base=${base_and_ratio%:*} ratio=${base_and_ratio#*:}
    opts=("${wide[@]}" --base-precision "$base" --steps 6 --overwrite)
    "$bin" train "${opts[@]}" --out straight.h5 > /dev/null
    "$bin" train "${opts[@]}" --stop-at 3 --out split.h5 > /dev/null
    "$bin" resume --checkpoint split.h5 --threads 1 > /dev/null
    diff <(hashes straight.h5) <(hashes split.h5) > /dev/null ||
      fail "$base: 3 + resume + 3 steps over a packed base differ from 6 straight"
    "$bin" inspect straight.h5 | grep -q "in $base blocks" || fail "$base: inspect shows no blocks"
    # its adapters export with the base left as blocks (never made float32)
    for format in gguf-lora peft; do
      "$bin" export straight.h5 --format "$format" --out "adapter.$format" --overwrite > /dev/null ||
        fail "$base: export --format $format of a packed base's run failed"
    done
    # the same run with its base in float32: the blocks' file is far smaller
    "$bin" train "${wide[@]}" --steps 1 --overwrite --out fp32.h5 > /dev/null
    packed=$(stat -c %s straight.h5) floats=$(stat -c %s fp32.h5)
    [ $((packed * ratio)) -lt "$floats" ] || fail "$base: $packed bytes against $floats in float32"
  done
  ;;
*) fail "unknown scenario" ;;
esac
