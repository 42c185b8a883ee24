#!/usr/bin/env bash
# reference.llama_cpp_gguf: llama.cpp itself (the npm package node-llama-cpp's prebuilt CPU
# build, tests/reference/llama_cpp_decode.mjs) runs the GGUF files attograd exports of Llama-,
# Qwen2- and Qwen3-shaped models (trained here on the built-in corpus for 150 steps, enough
# that greedy continuations wander instead of repeating a token, with a byte-level BPE
# tokenizer): on every text of npm_texts.sh it tokenizes to attograd's ids (`attograd
# encode`), and from each prompt's ids its greedy continuation is attograd's (`sample
# --temperature 0`) token for token; the files also import back.
#
#   bash llama_cpp_reference.sh ATTOGRAD FIXTURE_DIR
#
# Skips (77) without node or npm, or when tools/npm_fixtures.sh cannot install the packages
# (node-llama-cpp: Linux x64 only).
source "$(dirname "$0")/llama_cpp_fixture.sh" "$@"

common=(--tokenizer bpe --vocab-size 400 --context-length 64 --d-model 64 --n-heads 4
  --n-layers 2 --d-ff 96 --batch-size 8 --steps 150 --lr 0.01 --dropout 0
  --eval-interval 0 --sample-tokens 0 --position rope --mlp swiglu --norm rmsnorm
  --linear-bias false --n-kv-heads 2)
declare -A options=(
  [llama]="--rope-theta 500000 --rope-scaling llama3 --rope-factor 8 --rope-original-context 16 --tie-weights false"
  [qwen2]="--qkv-bias true --rope-theta 1000000 --norm-eps 1e-6"
  [qwen3]="--qk-norm true --head-dim 32 --rope-theta 1000000 --norm-eps 1e-6"
)
tokens=40  # each prompt's continuation, all decoded by one llama.cpp process
prompts=("The tokenizer don't" "café 42" "#include (a+b)" "code")

names=()
for text in "$work"/texts/*.txt; do names+=("$(basename "$text" .txt)"); done
for arch in llama qwen2 qwen3; do
  model="$work/$arch.h5" gguf="$work/$arch.gguf"
  # shellcheck disable=SC2086
  "$attograd" train "${common[@]}" ${options[$arch]} --out "$model" > /dev/null
  "$attograd" export --checkpoint "$model" --format gguf --out "$gguf" > /dev/null
  prompt_ids=() decode_ids=()
  for prompt in "${prompts[@]}"; do
    prompt_ids+=("$(printf '%s' "$prompt" | "$attograd" encode --tokenizer "$model")")
    # shellcheck disable=SC2206
    decode_ids+=(${prompt_ids[-1]} ,)
  done
  node "$here/llama_cpp_decode.mjs" "$llama_dir" "$gguf" "$tokens" "$work/texts" \
    "${decode_ids[@]}" > "$work/$arch.json" || { fail "$arch: llama.cpp did not load or run $gguf"; continue; }
  paths=(architecture)
  for i in "${!prompts[@]}"; do paths+=("generations.$i"); done
  for name in "${names[@]}"; do paths+=("tokenized.$name"); done
  mapfile -t read_back < <(fields "$work/$arch.json" "${paths[@]}")
  [ "${read_back[0]}" = "$arch" ] || fail "$arch: llama.cpp read general.architecture '${read_back[0]}'"
  for i in "${!prompts[@]}"; do
    prompt=${prompts[$i]}
    want=$("$attograd" sample --checkpoint "$model" --prompt "$prompt" --temperature 0 \
      --tokens "$tokens" 2> /dev/null)
    got=$(printf '%s' "${prompt_ids[$i]} ${read_back[$((1 + i))]}" | "$attograd" decode --tokenizer "$model")
    if [ "$got" = "$want" ]; then
      echo "$arch: after '$prompt' llama.cpp's $tokens greedy tokens are attograd's:" \
        "$(printf '%s' "$want" | tr '\n' '|' | cut -c 1-80)"
    else
      fail "$arch: llama.cpp's greedy continuation [$got] is not attograd's [$want]"
    fi
  done
  same=0
  for j in "${!names[@]}"; do
    name=${names[$j]}
    ours=$("$attograd" encode --tokenizer "$model" < "$work/texts/$name.txt" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//')
    theirs=${read_back[$((1 + ${#prompts[@]} + j))]}
    if [ "$ours" = "$theirs" ]; then
      same=$((same + 1))
    else
      fail "$arch: llama.cpp tokenizes $name.txt to [${theirs:0:200}], attograd to [${ours:0:200}]"
    fi
  done
  [ "$same" -gt 0 ] || fail "$arch: no text was tokenized"
  echo "$arch: llama.cpp tokenizes $same texts to attograd's ids"
  "$attograd" import "$gguf" --out "$work/$arch.back.h5" > /dev/null
done
[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "llama.cpp runs attograd's llama, qwen2 and qwen3 GGUF files as attograd does"
