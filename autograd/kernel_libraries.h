#pragma once
// The libraries that compute, as `attograd --version` names them (implemented beside the
// threading policy, threading.cpp, which sets their thread counts).
#include <string>

namespace ag {

// OpenBLAS's build, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64"
// (the kernel in use is blas_kernel_name(), threading.h).
std::string blas_library();

// oneDNN's version, e.g. "3.0.0".
std::string onednn_version();

}  // namespace ag
