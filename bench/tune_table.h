#pragma once
// `attograd bench --tune`: the measured GEMM kernel choice (autograd/ops/gemm_tuning.h) as
// a table: this CPU's signature, the cache file and what became of it, and for every size
// class decided so far the kernel kept and the GFLOP/s each candidate reached on one
// output block on one thread. bench.cpp first runs a step of each config and precision
// asked for, so every class a training step meets is decided.
namespace bench {

void print_tune_table(bool json);

}  // namespace bench
