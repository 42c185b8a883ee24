#!/usr/bin/env bash
# reference.llama_cpp_quant: llama.cpp itself (node-llama-cpp's prebuilt CPU build,
# llama_cpp_decode.mjs) loads the quantized GGUF files `attograd export --dtype` writes, in
# every block format, of a GPT-2-shaped and a Llama-shaped model (widths of 256, so the K
# formats hold every matrix; trained here for 150 steps), greedily continues a prompt, and
# gives its raw logits for every row of that continuation (llama_cpp_decode.mjs, LOGITS=1).
# attograd imports each file back (dequantized: the weights llama.cpp holds) and runs the
# same ids forward (the interop driver); every logit must be within TOLERANCE of llama.cpp's
# (llama_cpp_logits.js). llama.cpp multiplies quantized weights by activations it rounds to
# 8 bits (Q8_0 / Q8_K: its vec_dot), attograd by float32 activations, so the logits differ by
# that rounding: at most 0.06 on an AMD EPYC Zen 3 (2026-12-07), where logits spread over 14
# to 17; a wrong layout or scale differs by whole units. How many of llama.cpp's greedy ids
# are attograd's greedy choice too is printed, not required: a greedy continuation may part
# from attograd's at a near tie within that rounding, where depends on the CPU (the model is
# trained here, its kernels chosen by measurement), and a tolerance of 0.05 on the gap where
# they parted failed on one CPU (CI, 2026-12-07). For the Q8_0 files, attograd's cached
# decoder of `sample --weights q8_0`, which rounds the activations as llama.cpp does, must
# come within half that distance (check_q8_0_decoder).
#
#   bash llama_cpp_quant_reference.sh ATTOGRAD FIXTURE_DIR INTEROP_DRIVER
#
# Skips (77) without node-llama-cpp.
source "$(dirname "$0")/llama_cpp_fixture.sh" "$@"

# 401: 144 merges and <|endoftext|>
common=(--tokenizer bpe --vocab-size 401 --context-length 64 --d-model 256 --n-heads 4
  --n-layers 2 --d-ff 512 --batch-size 8 --steps 150 --lr 0.003 --dropout 0
  --eval-interval 0 --sample-tokens 0)
declare -A options=(
  [gpt2]=""
  [llama]="--position rope --mlp swiglu --norm rmsnorm --linear-bias false --n-kv-heads 2 --tie-weights false"
)
driver=$3
tokens=24 tolerance=${TOLERANCE:-0.25}
prompt="The tokenizer"
formats=(q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k)

# attograd's own decoder of `sample --weights q8_0` rounds the activations to Q8_0 as
# llama.cpp's vec_dot does for a Q8_0 file, whose every matrix (the head too) is Q8_0: along
# llama.cpp's continuation (a step a row), its logits must be within half the largest
# difference of the float32 activations' above (the verdict given). What is left is
# llama.cpp's float16 key/value cache and its float sums' order: on an AMD EPYC Zen 3
# (2026-12-07) 0.011 (GPT-2's shape; llama.cpp's GELU is a float16 table) and 0.0023 against
# 0.034 and 0.032 by float32 activations. Rounding the activations otherwise than llama.cpp
# does would leave the decoder as far from it as the float32 activations are.
check_q8_0_decoder() {
  local arch=$1 back=$2 prompt_ids=$3 generated=$4 float_verdict=$5 status=0 verdict bound
  bound=$(sed -n 's/^logits within \([0-9.]*\) .*/\1/p' <<< "$float_verdict" |
    awk '{ print $1 / 2 }')
  [ -n "$bound" ] || { fail "$arch q8_0: no largest difference in [$float_verdict]"; return; }
  # shellcheck disable=SC2086
  "$driver" "$back" "$work/decoder.safetensors" 0 --decoder q8_0 $prompt_ids $generated > /dev/null ||
    { fail "$arch q8_0: the decoder did not run"; return; }
  verdict=$(node "$here/llama_cpp_logits.js" "$work/theirs.json" "$work/decoder.safetensors" \
    "$(wc -w <<< "$prompt_ids")" "$bound") || status=$?
  echo "$arch q8_0, attograd's decoder by 8-bit activations: $verdict (bound $bound)"
  [ "$status" -eq 0 ] ||
    fail "$arch q8_0: a logit of llama.cpp's is over $bound from attograd's decoder's"
}

for arch in gpt2 llama; do
  model="$work/$arch.h5"
  # shellcheck disable=SC2086
  "$attograd" train "${common[@]}" ${options[$arch]} --out "$model" > /dev/null
  prompt_ids=$(printf '%s' "$prompt" | "$attograd" encode --tokenizer "$model")
  : > "$work/$arch.list"
  for format in "${formats[@]}"; do
    gguf="$work/$arch.$format.gguf"
    "$attograd" export --checkpoint "$model" --format gguf --dtype "$format" --out "$gguf" > /dev/null
    "$attograd" import "$gguf" --out "$work/$arch.$format.h5" > /dev/null
    echo "$gguf" >> "$work/$arch.list"
  done
  # one llama.cpp process loads the 8 files in turn (its start is most of a file's time)
  # shellcheck disable=SC2086
  LOGITS=1 node "$here/llama_cpp_decode.mjs" "$llama_dir" "$work/$arch.list" "$tokens" - \
    $prompt_ids > "$work/$arch.jsonl" ||
    fail "$arch: llama.cpp did not load or run every file: $(tail -c 300 "$work/$arch.jsonl")"
  for format in "${formats[@]}"; do
    gguf="$work/$arch.$format.gguf" back="$work/$arch.$format.h5"
    grep -F "\"file\":\"$gguf\"" "$work/$arch.jsonl" > "$work/theirs.json" ||
      { fail "$arch $format: llama.cpp did not load or run $gguf"; continue; }
    generated=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(0, "utf8")).generated.join(" "))' \
      < "$work/theirs.json")
    [ "$(wc -w <<< "$generated")" -eq "$tokens" ] ||
      { fail "$arch $format: llama.cpp gave [$generated], not $tokens tokens"; continue; }
    # shellcheck disable=SC2086
    "$driver" "$back" "$work/ours.safetensors" 0 $prompt_ids $generated > /dev/null
    status=0
    verdict=$(node "$here/llama_cpp_logits.js" "$work/theirs.json" "$work/ours.safetensors" \
      "$(wc -w <<< "$prompt_ids")" "$tolerance") || status=$?
    echo "$arch $format ($(stat -c %s "$gguf") bytes): $verdict"
    [ "$status" -eq 0 ] || fail "$arch $format: a logit of llama.cpp's is over $tolerance from attograd's"
    if [ "$format" = q8_0 ]; then
      check_q8_0_decoder "$arch" "$back" "$prompt_ids" "$generated" "$verdict"
    fi
  done
done
[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "llama.cpp runs attograd's quantized GGUF files as attograd runs them imported"
