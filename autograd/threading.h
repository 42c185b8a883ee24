#pragma once
// One threading policy: attograd's OpenMP loops and the BLAS library share the same
// thread count, so GEMM and the fused kernels never oversubscribe the cores.
namespace ag {

void set_num_threads(int n);  // n >= 1; sets OpenMP and BLAS threads together
int num_threads();

}  // namespace ag
