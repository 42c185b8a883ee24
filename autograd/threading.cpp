#include "autograd/threading.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <stdexcept>

namespace ag {

void set_num_threads(int n) {
  if (n < 1)
    throw std::invalid_argument(fmt::format("set_num_threads: need at least 1, got {}", n));
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int num_threads() {
  return omp_get_max_threads();
}

}  // namespace ag
