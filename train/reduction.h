#pragma once
// How a data-parallel run sums its gradients (grad_reduction.h): `tree`, the same bits on
// any number of processes, or `allreduce`, MPI's own, which agrees to rounding only.
#include <array>
#include <utility>

#include "base/choice.h"

namespace train {

enum class Reduction { tree, mpi_allreduce };

}  // namespace train

template <>
struct base::ChoiceNames<train::Reduction> {
  static constexpr const char* key = "reduce";
  static constexpr std::array<std::pair<train::Reduction, const char*>, 2> rows = {
      {{train::Reduction::tree, "tree"}, {train::Reduction::mpi_allreduce, "allreduce"}}};
};
