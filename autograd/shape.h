#pragma once
// Shapes and strides: row-major, in elements. Errors name the shapes involved.
#include <cstdint>
#include <string>
#include <vector>

namespace ag {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);  // "[2, 3]"
// "[0, 2]": where element `flat` of a row-major tensor of shape s sits (messages that
// name a value by its position)
std::string index_str(const Shape& s, int64_t flat);
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);

// NumPy/PyTorch broadcasting: align from the right, sizes equal or one of them 1.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* what);

// Strides that read `shape` as if broadcast to `target` (0 on broadcast dims).
Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& target);

// Maps a possibly negative dim into [0, rank); throws naming the op when out of range.
int64_t normalize_dim(int64_t dim, int64_t rank, const char* what);

}  // namespace ag
