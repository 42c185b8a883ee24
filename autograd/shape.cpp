#include "autograd/shape.h"

#include <fmt/format.h>

#include <stdexcept>

namespace ag {

std::string shape_str(const Shape& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

std::string index_str(const Shape& s, int64_t flat) {
  std::vector<int64_t> at(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    at[d] = s[d] > 0 ? flat % s[d] : 0;
    flat = s[d] > 0 ? flat / s[d] : 0;
  }
  return fmt::format("[{}]", fmt::join(at, ", "));
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* what) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(
          fmt::format("{}: shapes {} and {} cannot be broadcast together (dim {}: {} vs {})", what,
                      shape_str(a), shape_str(b), i, da, db));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& target) {
  Shape out(target.size(), 0);
  size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    out[lead + i] = (shape[i] == 1 && target[lead + i] != 1) ? 0 : strides[i];
  return out;
}

int64_t normalize_dim(int64_t dim, int64_t rank, const char* what) {
  const int64_t r = rank;
  if (dim < -r || dim >= r)
    throw std::out_of_range(
        fmt::format("{}: dim {} is out of range for a tensor of rank {}", what, dim, rank));
  return dim < 0 ? dim + r : dim;
}

}  // namespace ag
