#!/usr/bin/env bash
# Bounded fuzzing of every libFuzzer target: builds build-fuzz with clang-14 if needed,
# then runs each target for SECONDS (default 60) seeded from fuzz/corpus/<target>/.
# Findings land in build-fuzz/findings/<target>/; the script exits 1 if there are any.
# A fixed finding goes into fuzz/regressions/<target>/ so the test suite replays it.
#   tools/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
if [ ! -x build-fuzz/checkpoint_fuzz ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DATTOGRAD_FUZZ=ON -DATTOGRAD_TESTS=OFF > /dev/null
fi
cmake --build build-fuzz -j2 > /dev/null
status=0
for target in checkpoint tokenizer config; do
  work=build-fuzz/corpus/$target findings=build-fuzz/findings/$target
  mkdir -p "$work" "$findings"
  cp -n fuzz/corpus/$target/* "$work"/ 2>/dev/null || true
  echo "fuzzing $target for ${seconds}s"
  # one thread: BLAS and OpenMP would only add noise to the search
  if ! OMP_NUM_THREADS=1 ATTOGRAD_KEEP_BLAS_KERNEL=1 ASAN_OPTIONS=detect_leaks=1 \
      LSAN_OPTIONS=suppressions=fuzz/lsan.supp:print_suppressions=0 \
      build-fuzz/${target}_fuzz "$work" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 \
      -max_len=200000 -seed=1 -artifact_prefix="$findings/" -print_final_stats=1 > "build-fuzz/$target.log" 2>&1; then
    echo "FINDING in $target: $(ls "$findings")"; tail -30 "build-fuzz/$target.log"; status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "build-fuzz/$target.log" | tail -2
  fi
done
exit $status
