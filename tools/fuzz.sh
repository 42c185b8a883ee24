#!/usr/bin/env bash
# Bounded fuzzing of every libFuzzer target, all targets at once, each for SECONDS
# (default 60), seeded from fuzz/corpus/<target>/. Builds BUILD_DIR (default build-fuzz)
# with clang-19 if it lacks the targets; .ci/run passes its sanitizer build, which has
# them too. Findings land in BUILD_DIR/findings/<target>/ and make the script exit 1.
# A fixed finding goes into fuzz/regressions/<target>/ so the test suite replays it.
#   tools/fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=${2:-build-fuzz}
targets=(checkpoint tokenizer config prepared_meta tokenizer_file gpt2_files safetensors llmc
         gguf gguf_lora choice_items instruction_data classification_data hf_llama_config
         hf_tokenizer_json serve_request)
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DATTOGRAD_FUZZ=ON -DATTOGRAD_TESTS=OFF > /dev/null
fi
cmake --build "$build" -j2 --target "${targets[@]/%/_fuzz}" > /dev/null

run_target() {
  local target=$1 work=$build/corpus/$1 findings=$build/findings/$1
  mkdir -p "$work" "$findings"
  cp -n fuzz/corpus/"$target"/* "$work"/ 2>/dev/null || true
  # one thread: BLAS and OpenMP would only add noise to the search
  OMP_NUM_THREADS=1 ATTOGRAD_KEEP_BLAS_KERNEL=1 ASAN_OPTIONS=detect_leaks=1 \
    LSAN_OPTIONS=suppressions=fuzz/lsan.supp:print_suppressions=0 \
    "$build/${target}_fuzz" "$work" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 \
    -max_len=200000 -seed=1 -artifact_prefix="$findings/" -print_final_stats=1 \
    > "$build/$target.log" 2>&1
}

echo "fuzzing ${targets[*]} for ${seconds}s each, side by side"
pids=()
for target in "${targets[@]}"; do
  run_target "$target" &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  target=${targets[$i]}
  if wait "${pids[$i]}"; then
    echo "$target: $(grep -E "stat::number_of_executed_units" "$build/$target.log" | tail -1)"
  else
    echo "FINDING in $target: $(ls "$build/findings/$target")"; tail -30 "$build/$target.log"; status=1
  fi
done
exit $status
