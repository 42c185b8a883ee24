#!/usr/bin/env bash
# End-to-end tests of `attograd import` and `attograd export` (docs/interop.md), Hugging Face
# folders and (llmc_gguf_*) llm.c checkpoints and GGUF files:
#   interop_test.sh SCENARIO PATH/TO/attograd
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)  # before scenario_lib.sh moves into a temporary folder
source "$here/scenario_lib.sh" "$@"

# A small GPT-2-shaped model (biases in W_query/W_key/W_value, tied head) on a byte
# tokenizer, exported as a Hugging Face folder and imported back.
small=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 2 --batch-size 8 --dropout 0
       --qkv-bias true --tokenizer byte --threads 2 --sample-tokens 0 --eval-interval 0
       --log-interval 100)
make_text() {
  for i in $(seq 1 200); do printf 'line %d: the cat sat on the mat, and the dog ran home.\n' "$i"; done
}
greedy() { "$bin" sample --checkpoint "$1" --tokens 30 --temperature 0 --prompt "the " 2> /dev/null; }

case "$scenario" in
imported_model_works)
  # The imported checkpoint is an ordinary one: inspect, sample, eval, train --init-from (and
  # resume of that run), report and attention all take it, and it holds the exported
  # model's very weights and tokenizer.
  make_text > text.txt
  "$bin" train "${small[@]}" --data text.txt --steps 30 --out run.h5 > /dev/null
  "$bin" export --checkpoint run.h5 --format hf --out gpt2 > /dev/null
  for f in config.json model.safetensors tokenizer.json vocab.json merges.txt; do
    [ -f "gpt2/$f" ] || fail "export --format hf wrote no $f: $(ls gpt2)"
  done
  "$bin" import gpt2 --out imported.h5 > import.txt
  grep -q "tokenizer: byte" import.txt || fail "the tokenizer was not imported: $(cat import.txt)"
  [ "$(hashes run.h5)" = "$(hashes imported.h5)" ] || fail "the weights changed on the way"
  "$bin" inspect imported.h5 | grep -q "optimizer: none (weights only)" || fail "inspect"
  for ckpt in run.h5 imported.h5; do
    "$bin" sample --checkpoint "$ckpt" --tokens 40 --temperature 0 --prompt "the " > "$ckpt.txt" 2> /dev/null
    "$bin" eval --checkpoint "$ckpt" --data text.txt | head -1 > "$ckpt.eval"
  done
  cmp -s run.h5.txt imported.h5.txt || fail "greedy samples differ: $(cat run.h5.txt) / $(cat imported.h5.txt)"
  cmp -s run.h5.eval imported.h5.eval || fail "eval differs: $(cat run.h5.eval) / $(cat imported.h5.eval)"
  "$bin" train "${small[@]}" --data text.txt --steps 6 --stop-at 3 --init-from imported.h5 \
    --out tuned.h5 > /dev/null
  "$bin" resume --checkpoint tuned.h5 > /dev/null
  "$bin" inspect tuned.h5 | grep -q "^step 6" || fail "the fine-tuning run did not resume to step 6"
  "$bin" report --checkpoint imported.h5 --out page.html --sample-tokens 10 > /dev/null
  [ -s page.html ] || fail "report wrote no page"
  "$bin" attention --checkpoint imported.h5 --prompt "the cat" > attention.txt
  [ -s attention.txt ] || fail "attention printed nothing"
  # exported in bfloat16 (to a path written with a trailing slash): the same names, half the bytes,
  # weights rounded
  "$bin" export --checkpoint run.h5 --format hf --out gpt2_bf16/ --dtype bf16 > /dev/null
  "$bin" import gpt2_bf16 --out bf16.h5 > /dev/null
  f32=$(stat -c %s gpt2/model.safetensors); b16=$(stat -c %s gpt2_bf16/model.safetensors)
  [ "$b16" -lt $((f32 * 6 / 10)) ] || fail "bf16 file $b16 bytes, f32 $f32"
  ;;
import_errors)
  # Hostile or foreign files: one line naming the file and the field, exit 2, nothing written.
  mkdir m
  printf '{"model_type": "llama"}' > m/config.json
  printf '\x18\0\0\0\0\0\0\0{"wte.weight":1}        ' > m/model.safetensors
  expect_usage_error "m/config.json: model_type is 'llama': only GPT-2 (gpt2) is read" \
    "$bin" import m --out out.h5
  printf '{}' > m/config.json
  expect_usage_error "m/model.safetensors: tensor 'wte.weight': is an unsigned integer, not an object" \
    "$bin" import m --out out.h5
  printf '\xff\0\0\0\0\0\0\0{}' > m/model.safetensors
  expect_usage_error "m/model.safetensors: header length 255 is past the end of the file" \
    "$bin" import m --out out.h5
  expect_usage_error "model.safetensors.index.json: not valid JSON" sh -c "rm m/model.safetensors; touch m/model.safetensors.index.json; exec '$bin' import m --out out.h5"
  expect_usage_error "not a model file attograd reads" "$bin" import m/config.json --out out.h5
  [ ! -e out.h5 ] || fail "a failed import left out.h5"
  ls -A | grep -q partial && fail "a failed import left a temporary file: $(ls -A)"
  make_text > text.txt
  "$bin" train "${small[@]}" --data text.txt --steps 1 --out run.h5 --norm rmsnorm > /dev/null
  expect_usage_error "cannot be GPT-2, which has LayerNorm" \
    "$bin" export --checkpoint run.h5 --format hf --out rms
  [ ! -e rms ] || fail "a failed export left its folder"
  ls -A | grep -q partial && fail "a failed export left a temporary folder: $(ls -A)"
  true
  ;;
llmc_gguf_round_trips)
  # llm.c and GGUF (interop/llmc.h, interop/gguf.h): export, then import: the same weights bit for bit, the same tokenizer, the same greedy
  # text; in bfloat16 the files are about half the size and still import
  make_text > text.txt
  "$bin" train "${small[@]}" --data text.txt --steps 20 --out run.h5 > /dev/null
  greedy run.h5 > run.txt
  "$bin" export --checkpoint run.h5 --format gguf --out model.gguf > /dev/null
  "$bin" import model.gguf --out from_gguf.h5 > import.txt
  grep -q "tokenizer: byte" import.txt || fail "the GGUF file's tokenizer was not imported: $(cat import.txt)"
  [ "$(hashes run.h5)" = "$(hashes from_gguf.h5)" ] || fail "GGUF: the weights changed on the way"
  greedy from_gguf.h5 | cmp -s - run.txt || fail "GGUF: the greedy sample changed"
  # llm.c keeps no tokenizer: GPT-2's files come from a Hugging Face export of the same run
  "$bin" export --checkpoint run.h5 --format hf --out hf > /dev/null
  "$bin" export --checkpoint run.h5 --format llmc --out gpt2_run.bin > /dev/null
  [ "$(head -c 4 gpt2_run.bin | od -An -tu4 | tr -d ' ')" = 20240326 ] || fail "not llm.c's magic"
  "$bin" import gpt2_run.bin --tokenizer hf --out from_llmc.h5 > /dev/null
  [ "$(hashes run.h5)" = "$(hashes from_llmc.h5)" ] || fail "llm.c: the weights changed on the way"
  greedy from_llmc.h5 | cmp -s - run.txt || fail "llm.c: the greedy sample changed"
  for format in gguf llmc; do
    "$bin" export --checkpoint run.h5 --format $format --out bf16.$format --dtype bf16 > /dev/null
    f32=$(stat -c %s $( [ $format = gguf ] && echo model.gguf || echo gpt2_run.bin ))
    b16=$(stat -c %s bf16.$format)
    [ "$b16" -lt $((f32 * 6 / 10)) ] || fail "$format: bf16 file $b16 bytes, f32 $f32"
    "$bin" import bf16.$format --tokenizer hf --out bf16_$format.h5 > /dev/null
    "$bin" sample --checkpoint bf16_$format.h5 --tokens 5 > /dev/null 2>&1 || fail "$format bf16: sample"
  done
  ;;
llmc_gguf_errors)
  # what cannot be written or read: one line naming the file and the reason, exit 2, nothing left
  make_text > text.txt
  "$bin" train "${small[@]}" --data text.txt --steps 1 --out run.h5 > /dev/null
  "$bin" export --checkpoint run.h5 --format llmc --out gpt2_run.bin > /dev/null
  expect_usage_error "gpt2_run.bin: an llm.c checkpoint holds no tokenizer: give GPT-2's tokenizer files with --tokenizer DIR" \
    "$bin" import gpt2_run.bin --out out.h5
  head -c 5000 gpt2_run.bin > cut.bin
  "$bin" export --checkpoint run.h5 --format hf --out hf > /dev/null
  expect_usage_error "cut.bin: the file is 5000 bytes; its header" \
    "$bin" import cut.bin --tokenizer hf --out out.h5
  "$bin" export --checkpoint run.h5 --format gguf --out model.gguf > /dev/null
  head -c 3000 model.gguf > cut.gguf
  expect_usage_error "cut.gguf: " "$bin" import cut.gguf --out out.h5
  [ ! -e out.h5 ] || fail "a failed import left out.h5"
  "$bin" train "${small[@]}" --data text.txt --steps 1 --out nobias.h5 --qkv-bias false > /dev/null
  expect_usage_error "nobias.bin: llm.c cannot hold this model: llm.c's GPT-2 has biases in W_query/W_key/W_value" \
    "$bin" export --checkpoint nobias.h5 --format llmc --out nobias.bin
  "$bin" train --data text.txt --steps 1 --out chars.h5 --context-length 8 --d-model 16 \
    --n-heads 2 --n-layers 1 --sample-tokens 0 --eval-interval 0 > /dev/null
  expect_usage_error "chars.gguf: a GGUF file cannot hold this tokenizer" \
    "$bin" export --checkpoint chars.h5 --format gguf --out chars.gguf
  [ ! -e nobias.bin ] && [ ! -e chars.gguf ] || fail "a failed export left its file"
  ls -A | grep -q partial && fail "a failed export left a temporary file: $(ls -A)"
  true
  ;;
hostile_memory)
  # Hostile files within the readers' limits (tests/interop/hostile_imports.py, 20 MB each):
  # an import keeps only what the model holds, so each peaks near a tiny model's import
  # (about 25 MB) whatever the file says; before, 4 to 20 times the file.
  gen="$here/../interop/hostile_imports.py"
  python3 "$gen" hostile 20
  for x in st_tensors st_metadata st_index config_tree gguf_bytes.gguf gguf_keys.gguf \
    gguf_strings.gguf gguf_tensors.gguf; do
    rm -f out.h5
    kb=$(peak_rss_kb sh -c "'$bin' import hostile/$x --out out.h5 || [ \$? -eq 2 ]")
    [ "$kb" -lt 61440 ] || fail "import of $x peaked at $kb kB (bound 60 MB): $(cat run.err)"
  done
  # a model larger than any memory (a sparse file of 556 GB, no disk): refused before any
  # tensor is allocated, with the figures (it was std::bad_alloc, exit 1)
  python3 "$gen" --huge huge 16777216 16384
  expect_usage_error "huge/model.safetensors: importing it needs about 1" \
    "$bin" import huge --out out.h5
  grep -q "the weights as float32 1112.40 GB" err.txt || fail "no figures: $(cat err.txt)"
  # one that memory holds, under an address-space limit that cannot (ulimit -v)
  python3 "$gen" --huge mid 65536 1024
  expect_usage_error "mid/model.safetensors: importing it needs about" \
    sh -c "ulimit -v 700000; exec '$bin' import mid --out out.h5"
  grep -q "address-space limit (ulimit -v)" err.txt || fail "not the ulimit: $(cat err.txt)"
  [ ! -e out.h5 ] || fail "a refused import left out.h5"
  ;;
*) fail "unknown scenario" ;;
esac
