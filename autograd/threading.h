#pragma once
// One threading policy: attograd's OpenMP loops and the BLAS library share the same
// thread count, so GEMM and the fused kernels never oversubscribe the cores.
namespace ag {

void set_num_threads(int n);  // n >= 1; sets OpenMP and BLAS threads together
int num_threads();

}  // namespace ag

namespace ag {

// OpenBLAS picks its GEMM kernel from the CPU model when it loads; on CPUs it does not
// recognise (common in VMs, which report a generic "Intel Xeon Processor") it falls
// back to its SSE3 "Prescott" kernel, several times slower than the AVX2/AVX-512 ones
// the CPU supports. When that happened and OPENBLAS_CORETYPE is unset, this sets it
// from the CPU's features and re-executes the program (argv) so the library loads
// again with the right kernel. Call it first thing in main(); it returns normally when
// nothing needs doing or re-executing fails.
void select_blas_kernel(char** argv);

// The kernel OpenBLAS is using, e.g. "SkylakeX".
const char* blas_kernel_name();

}  // namespace ag
