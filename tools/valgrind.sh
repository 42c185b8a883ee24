#!/usr/bin/env bash
# valgrind memcheck over a short training run, a resume, sampling and evaluation. Valgrind
# 3.19 cannot decode AVX-512, so this builds build-vg without -march=native and keeps
# OpenBLAS on its AVX2 (Haswell) kernel. Exits non-zero on any memcheck error or definite
# leak.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-vg -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTOGRAD_NATIVE=OFF -DATTOGRAD_TESTS=OFF > /dev/null
cmake --build build-vg -j2 --target attograd > /dev/null
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export OPENBLAS_CORETYPE=Haswell ATTOGRAD_KEEP_BLAS_KERNEL=1
vg=(valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=9 -q)
bin=$PWD/build-vg/attograd
tiny=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 2 --batch-size 4 --eval-windows 4 --threads 1)
cd "$work"
printf 'the cat sat on the mat and the dog ran home.\n%.0s' {1..20} > text.txt
"${vg[@]}" "$bin" train "${tiny[@]}" --steps 6 --stop-at 3 --checkpoint-interval 2 --out run.h5 --sample-tokens 0 > /dev/null
"${vg[@]}" "$bin" resume --checkpoint run.h5 --threads 1 > /dev/null
"${vg[@]}" "$bin" sample --checkpoint run.h5 --prompt "the " --tokens 20 --top-k 5 --threads 1 > /dev/null
"${vg[@]}" "$bin" eval --checkpoint run.h5 --data text.txt --dump-grads grads.h5 --threads 1 > /dev/null
"${vg[@]}" "$bin" inspect run.h5 --verify > /dev/null
echo "valgrind memcheck: no errors, no definite leaks (train, resume, sample, eval, inspect)"
