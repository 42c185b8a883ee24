#!/usr/bin/env bash
# End-to-end tests of `attograd import` and `attograd export` (docs/interop.md), Hugging Face
# folders and (llmc_gguf_*) llm.c checkpoints and GGUF files:
#   interop_test.sh SCENARIO PATH/TO/attograd
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)  # before scenario_lib.sh moves into a temporary folder
source "$here/scenario_lib.sh" "$@"

# A small GPT-2-shaped model (biases in W_query/W_key/W_value, tied head) on a byte
# tokenizer, exported as a Hugging Face folder and imported back.
shape=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 2 --batch-size 8 --dropout 0
       --qkv-bias true --threads 2 --sample-tokens 0 --eval-interval 0 --log-interval 100)
small=("${shape[@]}" --tokenizer byte)
make_text() {
  for i in $(seq 1 200); do printf 'line %d: the cat sat on the mat, and the dog ran home.\n' "$i"; done
}
greedy() { "$bin" sample --checkpoint "$1" --tokens 30 --temperature 0 --prompt "the " 2> /dev/null; }

# hub_cache FOLDER REPO [COMMIT]: FOLDER's files as the Hugging Face hub caches them:
# REPO/blobs/<sha256> (the files), REPO/snapshots/COMMIT/NAME -> ../../blobs/<sha256>
# (relative links) and REPO/refs/main holding COMMIT.
hub_commit=0123456789abcdef0123456789abcdef01234567
hub_cache() {
  local from=$1 repo=$2 commit=${3:-$hub_commit} f h
  mkdir -p "$repo/blobs" "$repo/snapshots/$commit" "$repo/refs"
  for f in "$from"/*; do
    h=$(sha256sum "$f" | cut -c1-64)
    cp "$f" "$repo/blobs/$h"
    ln -s "../../blobs/$h" "$repo/snapshots/$commit/$(basename "$f")"
  done
  printf '%s' "$commit" > "$repo/refs/main"
}

# no_secret: the planted secret's text never reached stderr (err.txt)
no_secret() { ! grep -q "TOPSECRET" err.txt || fail "the secret's bytes were printed: $(cat err.txt)"; }

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
  printf '{"model_type": "mistral"}' > m/config.json
  printf '\x18\0\0\0\0\0\0\0{"wte.weight":1}        ' > m/model.safetensors
  expect_usage_error "m/config.json: model_type is 'mistral': only GPT-2 (gpt2), Llama (llama)" \
    "$bin" import m --out out.h5
  # a Llama's config (every size its default: 7B) over GPT-2's tensors: refused at the first
  printf '{"model_type": "llama"}' > m/config.json
  expect_usage_error "m/model.safetensors: tensor 'wte.weight' is not part of Llama" \
    "$bin" import m --out out.h5
  printf '{"model_type": "qwen2", "use_sliding_window": true}' > m/config.json
  expect_usage_error "m/config.json: use_sliding_window is true" "$bin" import m --out out.h5
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
  # ggml's quantized blocks (docs/quantization.md): smaller still, imported back dequantized;
  # exporting the import again gives the same file (Q8_0's blocks are a fixed point)
  "$bin" export --checkpoint run.h5 --format gguf --out q8.gguf --dtype q8_0 > /dev/null
  [ "$(stat -c %s q8.gguf)" -lt "$(stat -c %s bf16.gguf)" ] || fail "Q8_0 file not below bf16's"
  "$bin" import q8.gguf --out q8.h5 > /dev/null
  mkdir again && "$bin" export --checkpoint q8.h5 --format gguf --out again/q8.gguf --dtype q8_0 > /dev/null
  cmp -s q8.gguf again/q8.gguf || fail "Q8_0: a second export differs"
  for dtype in q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k; do
    "$bin" export --checkpoint run.h5 --format gguf --out $dtype.gguf --dtype $dtype > /dev/null
    "$bin" import $dtype.gguf --out $dtype.h5 > /dev/null
    "$bin" sample --checkpoint $dtype.h5 --tokens 5 > /dev/null 2>&1 || fail "$dtype: sample"
  done
  expect_usage_error "--dtype must be f32, bf16, f16 or (gguf) one of q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k, got 'q2_k'" \
    "$bin" export --checkpoint run.h5 --format gguf --out q2.gguf --dtype q2_k
  expect_usage_error "hf_q8: --dtype q8_0 (ggml's quantised blocks) is written for --format gguf only" \
    "$bin" export --checkpoint run.h5 --format hf --out hf_q8 --dtype q8_0
  ;;
gguf_llama_family_round_trips)
  # Llama-, Qwen2- and Qwen3-shaped runs (llama.cpp's llama, qwen2, qwen3: interop/gguf_llama.h)
  # through GGUF: the same weights bit for bit, the same greedy text
  make_text > text.txt
  family=(--position rope --mlp swiglu --norm rmsnorm --linear-bias false --n-kv-heads 1)
  for arch in "--rope-scaling llama3 --tie-weights false" "--qkv-bias true" \
    "--qkv-bias false --qk-norm true --head-dim 8"; do
    # shellcheck disable=SC2086
    "$bin" train "${small[@]}" "${family[@]}" $arch --data text.txt --steps 10 --out run.h5 \
      --overwrite > /dev/null
    greedy run.h5 > run.txt
    "$bin" export --checkpoint run.h5 --format gguf --out model.gguf --overwrite > /dev/null
    "$bin" import model.gguf --out back.h5 --overwrite > /dev/null
    [ "$(hashes run.h5)" = "$(hashes back.h5)" ] || fail "GGUF $arch: the weights changed"
    greedy back.h5 | cmp -s - run.txt || fail "GGUF $arch: the greedy sample changed"
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
  # a key the model keeps whose strings pass any tokenizer's (1024 tokens of 1 MiB, a sparse
  # file of 1 GiB): refused once the kept strings reach 128 MiB (it held 1.07 GB)
  rm -f out.h5
  kb=$(peak_rss_kb sh -c "'$bin' import hostile/gguf_long_tokens.gguf --out out.h5 || [ \$? -eq 2 ]")
  [ "$kb" -lt 204800 ] || fail "import of gguf_long_tokens.gguf peaked at $kb kB (bound 200 MB)"
  grep -q "the strings of every key kept" run.err || fail "not refused for its strings: $(cat run.err)"
  [ ! -e out.h5 ] || fail "a refused import left out.h5"
  # a valid model of many tiny tensors (GPT-2 of width 4, 12 tensors a layer): each tensor
  # holds far more than its values (its objects, its dataset's record in the checkpoint);
  # the plan counts interop::kImportBytesPerTensor (2 KiB) for it, so the peak may grow by
  # at most that much a tensor between 512 and 2048 layers
  python3 "$gen" --layers layers512 512
  python3 "$gen" --layers layers2048 2048
  rm -f out.h5
  kb512=$(peak_rss_kb "$bin" import layers512 --out out.h5)
  rm -f out.h5
  kb2048=$(peak_rss_kb "$bin" import layers2048 --out out.h5)
  per_tensor=$(( (kb2048 - kb512) * 1024 / (12 * (2048 - 512)) ))
  echo "many tiny tensors: peak RSS ${kb512} kB for 512 layers, ${kb2048} kB for 2048: $per_tensor bytes a tensor"
  [ "$per_tensor" -le 2048 ] || fail "an import holds $per_tensor bytes a tensor, over the plan's 2048"
  rm -f out.h5
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
llama_family_round_trips)
  # A Llama, a Qwen2 and a Qwen3 trained here on the byte tokenizer: exported as Hugging Face
  # folders in their families' layouts, imported back (Qwen3's through a hub cache repo folder)
  # to the very weights and the same greedy samples, in F32; in BF16 and F16 to the same sizes.
  make_text > text.txt
  rope=(--position rope --mlp swiglu --norm rmsnorm --norm-eps 1e-6 --rope-theta 500000)
  declare -A family=(
    [LlamaForCausalLM]="--n-kv-heads 1 --qkv-bias true --rope-scaling llama3 --rope-original-context 8"
    [Qwen2ForCausalLM]="--n-kv-heads 1 --qkv-bias true --linear-bias false --tie-weights false"
    [Qwen3ForCausalLM]="--n-kv-heads 1 --qk-norm true --head-dim 8 --qkv-bias false --linear-bias false")
  for arch in "${!family[@]}"; do
    read -r -a own <<< "${family[$arch]}"
    "$bin" train "${small[@]}" "${rope[@]}" "${own[@]}" --data text.txt --steps 4 --out "$arch.h5" > /dev/null
    "$bin" export --checkpoint "$arch.h5" --format hf --out "$arch" > /dev/null
    grep -q "\"$arch\"" "$arch/config.json" || fail "$arch: config.json names $(grep -A1 architectures "$arch/config.json")"
    from=$arch
    if [ "$arch" = Qwen3ForCausalLM ]; then hub_cache "$arch" cache/models--org--qwen3 && from=cache/models--org--qwen3; fi
    "$bin" import "$from" --out "$arch.back.h5" > import.txt 2> err.txt || fail "$arch: $(cat err.txt)"
    grep -q "tokenizer: byte" import.txt || fail "$arch: the tokenizer was not imported: $(cat import.txt)"
    [ "$(hashes "$arch.h5")" = "$(hashes "$arch.back.h5")" ] || fail "$arch: the weights changed on the way"
    [ "$(greedy "$arch.h5")" = "$(greedy "$arch.back.h5")" ] || fail "$arch: greedy samples differ"
    for dtype in bf16 f16; do
      "$bin" export --checkpoint "$arch.h5" --format hf --out "$arch.$dtype" --dtype "$dtype" > /dev/null
      "$bin" import "$arch.$dtype" --out "$arch.$dtype.h5" > /dev/null
      "$bin" inspect "$arch.$dtype.h5" > "$dtype.txt"
      grep -q '"head_dim"' "$arch.$dtype/config.json" || fail "$arch $dtype: no head_dim in config.json"
    done
  done
  # what no layout holds is refused with the reason, naming --out
  expect_usage_error "llm.c cannot hold this model: GPT-2 learns its positions" \
    "$bin" export --checkpoint Qwen2ForCausalLM.h5 --format llmc --out q.bin
  "$bin" train "${small[@]}" "${rope[@]}" --qk-norm true --data text.txt --steps 1 --out qk.h5 > /dev/null
  expect_usage_error "qk-hf: Qwen3 (q/k norms) is written without biases" \
    "$bin" export --checkpoint qk.h5 --format hf --out qk-hf
  [ ! -e qk-hf ] || fail "a refused export left qk-hf behind"
  ;;
hub_cache_import)
  # A model as huggingface_hub caches it (from_pretrained's download): the snapshot folder, a
  # file of it and the repo folder itself (through refs/main) import as the files they link
  # to; a refs/main that names no snapshot or is not a commit is refused naming it.
  make_text > text.txt
  "$bin" train "${small[@]}" --data text.txt --steps 2 --out run.h5 > /dev/null
  "$bin" export --checkpoint run.h5 --format hf --out hf > /dev/null
  repo=cache/models--org--tiny
  snap=$repo/snapshots/$hub_commit
  hub_cache hf "$repo"
  for from in "$snap" "$repo" "$repo/" "$snap/model.safetensors"; do
    rm -f in.h5
    "$bin" import "$from" --out in.h5 > import.txt 2> err.txt || fail "import $from: $(cat err.txt)"
    grep -q "tokenizer: byte" import.txt || fail "import $from: no tokenizer: $(cat import.txt)"
    [ "$(hashes run.h5)" = "$(hashes in.h5)" ] || fail "import $from: the weights changed"
  done
  # what the import reads is no output, even under --overwrite: a blob of the repo named
  blob=$repo/blobs/$(basename "$(readlink "$snap/model.safetensors")")
  expect_usage_error "which this command reads; refusing to overwrite an input" \
    "$bin" import "$repo" --out "$blob" --overwrite
  mkdir gguf && "$bin" export --checkpoint run.h5 --format gguf --out gguf/model.gguf > /dev/null
  hub_cache gguf cache/models--org--gguf
  "$bin" import cache/models--org--gguf/snapshots/$hub_commit/model.gguf --out gguf.h5 > /dev/null
  [ "$(hashes run.h5)" = "$(hashes gguf.h5)" ] || fail "GGUF in a hub cache: the weights changed"
  other=fedcba9876543210fedcba9876543210fedcba98
  printf '%s\n' "$other" > "$repo/refs/main"
  expect_usage_error "$repo/refs/main: names commit $other, but $repo/snapshots/$other is not there" \
    "$bin" import "$repo" --out out.h5
  printf '../../../etc' > "$repo/refs/main"
  expect_usage_error "$repo/refs/main: is not a commit hash (40 or 64 hex digits)" \
    "$bin" import "$repo" --out out.h5
  rm "$repo/refs/main"
  expect_usage_error "$repo: a Hugging Face hub cache folder without refs/main" \
    "$bin" import "$repo" --out out.h5
  [ ! -e out.h5 ] || fail "a failed import left out.h5"
  ;;
links_refused)
  # A link in a model folder (or PATH itself) is followed only into its own hub repo's
  # blobs/: any other is refused naming the file, the link and why (exit 2), and no error
  # prints the bytes of what it points to, nor of a file that is not what it claims.
  make_text > text.txt
  "$bin" train "${small[@]}" --data text.txt --steps 1 --out run.h5 > /dev/null
  "$bin" export --checkpoint run.h5 --format hf --out hf > /dev/null
  printf '"TOPSECRET root:x:0:0\n' > secret.txt
  # (GPT-2's files are read where no tokenizer.json is beside them: it comes first)
  gpt2_files() { case $1 in vocab.json | merges.txt) rm -f m/tokenizer.json ;; esac; }
  for name in config.json model.safetensors tokenizer.json vocab.json merges.txt; do
    for target in "$PWD/secret.txt" ../secret.txt; do
      rm -rf m && cp -r hf m && gpt2_files "$name" && rm -f "m/$name" && ln -s "$target" "m/$name"
      expect_usage_error "m/$name: is a symbolic link to '$target'" "$bin" import m --out out.h5
      no_secret
    done
    rm -rf m && cp -r hf m && gpt2_files "$name" && cp secret.txt "m/$name"  # a file that lies
    # (two lines: more merges than the vocabulary's 256 bytes and <|endoftext|> leave room for)
    [ "$name" = merges.txt ] && printf '#version: 0.2\n"TOPSECRET root:x\n"TOPSECRET x\n' > m/merges.txt
    expect_usage_error "m/$name" "$bin" import m --out out.h5
    no_secret
  done
  repo=cache/models--org--tiny
  snap=$repo/snapshots/$hub_commit
  hub_cache hf "$repo"
  blob=$(readlink "$snap/config.json")
  mkdir -p cache/models--org--other/blobs && cp secret.txt cache/models--org--other/blobs/$hub_commit
  mkdir "$repo/blobs/0000000000000000000000000000000000000000"
  for link in ../../../../secret.txt ../../../models--org--other/blobs/$hub_commit \
      ../../blobs/0000000000000000000000000000000000000000 ../../blobs ../../refs/main; do
    ln -sfn "$link" "$snap/config.json"
    expect_usage_error "$snap/config.json: is a symbolic link to '$link'" \
      "$bin" import "$snap" --out out.h5
    no_secret
  done
  # a chain: the blob itself a link out of the repo
  ln -sfn "$blob" "$snap/config.json"
  rm "$repo/$(basename "$blob" | sed 's|^|blobs/|')"
  ln -s "$PWD/secret.txt" "$repo/blobs/$(basename "$blob")"
  expect_usage_error "the blob is itself a symbolic link" "$bin" import "$snap" --out out.h5
  no_secret
  # PATH itself: a link to a file is refused as a folder's links are
  ln -s secret.txt link.gguf
  expect_usage_error "link.gguf: is a symbolic link to 'secret.txt'" "$bin" import link.gguf --out out.h5
  no_secret
  [ ! -e out.h5 ] || fail "a refused import left out.h5"
  ;;
tokenizer_round_trips)
  # export --format hf then import keeps every tokenizer, read back from tokenizer.json (alone,
  # or beside vocab.json + merges.txt): char, byte, bpe with GPT-4's split pattern and with
  # GPT-2's; the imported checkpoint encodes a text to the same ids and inspect shows the
  # same tokenizer.
  make_text > text.txt
  printf 'the dog sat on 12 mats, and ran home.\n' > probe.txt
  "$bin" prepare --data text.txt --tokenizer bpe --vocab-size 300 --out bpe4 > /dev/null
  python3 - "$(cat bpe4/tokenizer.json)" > gpt2_pattern.json <<'PY'
import json, sys
t = json.loads(sys.argv[1])
t["split_pattern"] = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
print(json.dumps(t))
PY
  "$bin" prepare --data text.txt --tokenizer-from gpt2_pattern.json --out bpe2 > /dev/null
  "$bin" train "${shape[@]}" --tokenizer char --data text.txt --steps 2 --out char.h5 > /dev/null
  "$bin" train "${shape[@]}" --tokenizer byte --data text.txt --steps 2 --out byte.h5 > /dev/null
  "$bin" train "${shape[@]}" --data bpe4 --steps 2 --out bpe4.h5 > /dev/null
  "$bin" train "${shape[@]}" --data bpe2 --steps 2 --out bpe2.h5 > /dev/null
  for kind in char byte bpe4 bpe2; do
    "$bin" export --checkpoint $kind.h5 --format hf --out $kind.hf > /dev/null
    "$bin" encode --tokenizer $kind.h5 < probe.txt > $kind.ids
    "$bin" inspect $kind.h5 | grep -A1 '^tokenizer' > $kind.tok
    for files in all json; do
      [ $files = json ] && rm -f $kind.hf/vocab.json $kind.hf/merges.txt
      "$bin" import $kind.hf --out $kind.$files.h5 > import.txt 2> err.txt ||
        fail "$kind ($files): import failed: $(cat err.txt)"
      "$bin" encode --tokenizer $kind.$files.h5 < probe.txt 2> err.txt | cmp -s - $kind.ids ||
        fail "$kind ($files): other ids: $(cat err.txt; cat import.txt)"
      "$bin" inspect $kind.$files.h5 | grep -A1 '^tokenizer' | cmp -s - $kind.tok ||
        fail "$kind ($files): inspect shows $("$bin" inspect $kind.$files.h5 | grep -A1 '^tokenizer'), not $(cat $kind.tok)"
    done
  done
  ;;
adapters_out_and_in)
  # A LoRA run's adapters alone (export --format peft, gguf-lora), attached to the base again
  # (import ADAPTER --base): the same tensors bit for bit and the same greedy text, for a
  # GPT-2- and a Llama-shaped run; what does not fit is one line naming it, exit 2
  make_text > text.txt
  for arch in "" "--position rope --mlp swiglu --norm rmsnorm --linear-bias false --n-kv-heads 1"; do
    # shellcheck disable=SC2086
    "$bin" train "${small[@]}" $arch --data text.txt --steps 5 --out base.h5 --overwrite > /dev/null
    "$bin" train --init-from base.h5 --data text.txt --lora-rank 2 --steps 3 --lr 0.05 \
      --sample-tokens 0 --eval-interval 0 --out lora.h5 --overwrite > /dev/null
    greedy lora.h5 > lora.txt
    "$bin" export lora.h5 --format peft --out adapter --overwrite > /dev/null
    "$bin" export lora.h5 --format gguf-lora --out adapter.gguf --overwrite > /dev/null
    for adapter in adapter adapter.gguf; do
      "$bin" import $adapter --base base.h5 --out back.h5 --overwrite > /dev/null
      [ "$(hashes lora.h5)" = "$(hashes back.h5)" ] || fail "$adapter ($arch): the tensors changed"
      greedy back.h5 | cmp -s - lora.txt || fail "$adapter ($arch): the greedy sample changed"
    done
  done
  expect_usage_error "base.h5: the checkpoint has no LoRA adapters (lora_rank 0)" \
    "$bin" export base.h5 --format peft --out none
  expect_usage_error "'adapter.gguf' is a LoRA adapter, not a model: give the checkpoint it was trained on with --base BASE.h5" \
    "$bin" import adapter.gguf --out out.h5
  expect_usage_error "--dtype q8_0 (ggml's quantised blocks) is written for --format gguf only" \
    "$bin" export lora.h5 --format gguf-lora --dtype q8_0 --out q8.gguf
  expect_usage_error "--tokenizer, --context and --keep-blocks apply to a model, not to an adapter" \
    "$bin" import adapter --base base.h5 --context 8 --out out.h5
  expect_usage_error "lora.h5: the base has LoRA adapters already: merge them first" \
    "$bin" import adapter --base lora.h5 --out out.h5
  "$bin" train "${small[@]}" --data text.txt --steps 1 --out gpt2.h5 > /dev/null
  expect_usage_error "adapter.gguf: key general.architecture is 'qwen2', the base's is 'gpt2'" \
    "$bin" import adapter.gguf --base gpt2.h5 --out out.h5
  expect_usage_error "tensor base_model.model.model.layers.0.mlp.down_proj.lora_A.weight is not the lora_A or lora_B of a module of the base" \
    "$bin" import adapter --base gpt2.h5 --out out.h5
  # a model neither layout holds is refused naming the folder asked for, not its staging name
  "$bin" train "${small[@]}" --position rope --data text.txt --steps 1 --out mixed.h5 > /dev/null
  "$bin" train --init-from mixed.h5 --data text.txt --lora-rank 2 --steps 1 --sample-tokens 0 \
    --eval-interval 0 --out mixed_lora.h5 > /dev/null
  expect_usage_error "mixed_peft: a GPT with LayerNorm is no Llama-family model (RMSNorm)" \
    "$bin" export mixed_lora.h5 --format peft --out mixed_peft
  [ ! -e mixed_peft ] || fail "a refused export left mixed_peft"
  ;;
*) fail "unknown scenario" ;;
esac
