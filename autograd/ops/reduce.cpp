// Reductions: sum, mean, max/argmax over dims with keepdim, and sum_to (the reverse of
// broadcasting, used by every broadcasting backward).
#include <fmt/format.h>

#include <cmath>
#include <numeric>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/profile.h"
#include "autograd/strided_loop.h"

namespace ag {

namespace {

// Which dims are reduced, as a mask; an empty list means all.
std::vector<bool> reduced_mask(const Tensor& a, const std::vector<int64_t>& dims,
                               const char* what) {
  std::vector<bool> mask(a.dim(), dims.empty());
  for (int64_t d : dims) {
    int64_t n = normalize_dim(d, a.dim(), what);
    if (mask[n])
      throw std::invalid_argument(
          fmt::format("{}: dim {} appears twice in [{}]", what, n, fmt::join(dims, ", ")));
    mask[n] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& s, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < s.size(); ++d) {
    if (!mask[d])
      out.push_back(s[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

}  // namespace

// sum: out[j] = sum over reduced positions of a; d sum / d a = 1, so the gradient is the
// output gradient broadcast back over the reduced dims.
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const profile::Timer timer("sum");
  auto mask = reduced_mask(a, dims, "sum");
  Shape kept = reduced_shape(a.shape(), mask, true);
  Tensor out = empty(kept, a.dtype());
  // leading dims of a contiguous tensor summed away (every bias gradient): rows in fixed
  // chunks, in parallel, partial sums added in chunk order
  int64_t lead = 0;
  while (lead < a.dim() && mask[lead]) ++lead;
  const bool rows_only = lead > 0 && a.is_contiguous() &&
                         std::none_of(mask.begin() + lead, mask.end(), [](bool m) { return m; });
  if (rows_only && a.dtype() == DType::Float32) {
    const int64_t N = shape_numel(Shape(a.shape().begin() + lead, a.shape().end()));
    const int64_t R = N ? a.numel() / N : 0;
    constexpr int64_t kRows = 64;
    const int64_t chunks = std::max<int64_t>((R + kRows - 1) / kRows, 1);
    std::vector<double> part(chunks * N, 0.0);
    const float* p = a.const_data<float>();
    detail::parallel_for_items(R, kRows, N, [&](int64_t r0, int64_t r1) {
      double* acc = part.data() + (r0 / kRows) * N;
      for (int64_t r = r0; r < r1; ++r) {
        AG_SIMD
        for (int64_t j = 0; j < N; ++j) acc[j] += p[r * N + j];
      }
    });
    float* o = out.data<float>();
    detail::add_chunk_partials(part.data(), chunks, N,
                               [&](int64_t j, double total) { o[j] = static_cast<float>(total); });
  } else
    AG_DISPATCH_FLOAT(a.dtype(), "sum", [&] {
      // accumulate in double: float32 sums over thousands of terms lose digits otherwise
      std::vector<double> acc(out.numel(), 0.0);
      Shape ost = contiguous_strides(kept);
      for (size_t d = 0; d < ost.size(); ++d)
        if (mask[d]) ost[d] = 0;
      const scalar_t* p = a.const_data<scalar_t>();
      detail::for_each_run<2>(a.shape(), {a.strides(), ost}, [&](auto off, int64_t n, auto st) {
        const scalar_t* ap = p + off[0];
        if (st[1] == 0) {
          double s = 0;
          for (int64_t i = 0; i < n; ++i) s += ap[i * st[0]];
          acc[off[1]] += s;
        } else {
          for (int64_t i = 0; i < n; ++i) acc[off[1] + i * st[1]] += ap[i * st[0]];
        }
      });
      scalar_t* o = out.data<scalar_t>();
      for (size_t i = 0; i < acc.size(); ++i) o[i] = static_cast<scalar_t>(acc[i]);
    });
  if (!keepdim) out = out.view(reduced_shape(a.shape(), mask, false));
  if (needs_recording({a}))
    attach_backward(out, "SumBackward", {a},
                    [kept, in_shape = a.shape()](const Tensor& g) -> std::vector<Tensor> {
                      return {g.reshape(kept).expand(in_shape).contiguous()};
                    });
  return out;
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  auto mask = reduced_mask(a, dims, "mean");
  int64_t count = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (mask[d]) count *= a.shape()[d];
  return mul(sum(a, dims, keepdim), 1.0 / static_cast<double>(count));
}

namespace {

// Moves `dim` last and returns a contiguous [rows, n] reading of it.
Tensor dim_last(const Tensor& a, int64_t dim) {
  std::vector<int64_t> order(a.dim());
  std::iota(order.begin(), order.end(), 0);
  order.erase(order.begin() + dim);
  order.push_back(dim);
  return make_view(a, a.shape(), a.strides(), a.offset()).permute(order).contiguous();
}

// Values and first-occurrence argmax along `dim`, keepdim shape. NaN wins, as in PyTorch.
std::pair<Tensor, Tensor> max_along(const Tensor& a, int64_t dim) {
  if (a.shape()[dim] == 0)
    throw std::invalid_argument(
        fmt::format("max: dim {} of shape {} is empty", dim, shape_str(a.shape())));
  Tensor rows = dim_last(a, dim);
  const int64_t n = a.shape()[dim];
  const int64_t r = a.numel() / n;
  Shape kept = a.shape();
  kept[dim] = 1;
  Tensor values = empty(kept, a.dtype());
  Tensor indices = empty(kept, DType::Int64);
  // kept has size 1 at dim, so its contiguous layout matches the rows' order
  AG_DISPATCH_FLOAT(a.dtype(), "max", [&] {
    const scalar_t* p = rows.const_data<scalar_t>();
    scalar_t* v = values.data<scalar_t>();
    int64_t* idx = indices.data<int64_t>();
    for (int64_t i = 0; i < r; ++i) {
      const scalar_t* row = p + i * n;
      int64_t best = 0;
      for (int64_t j = 1; j < n && !std::isnan(row[best]); ++j)
        if (!(row[j] <= row[best])) best = j;
      v[i] = row[best];
      idx[i] = best;
    }
  });
  return {values, indices};
}

}  // namespace

// max: the gradient flows to the (first) position that won; ties take the first.
Tensor max(const Tensor& a, int64_t dim, bool keepdim) {
  dim = normalize_dim(dim, a.dim(), "max");
  auto [values, indices] = max_along(a, dim);
  Tensor out = values;
  if (!keepdim) out = out.squeeze(dim);
  if (needs_recording({a}))
    attach_backward(
        out, "MaxBackward", {a},
        [indices = indices, dim, in_shape = a.shape()](const Tensor& g) -> std::vector<Tensor> {
          // scatter in the dim-last layout, then move the dim back
          Tensor gk = g.reshape(indices.shape());
          const int64_t n = in_shape[dim];
          Shape perm_shape = in_shape;
          perm_shape.erase(perm_shape.begin() + dim);
          perm_shape.push_back(n);
          Tensor grad = zeros(perm_shape, g.dtype());
          Tensor gc = gk.contiguous();
          const int64_t* idx = indices.const_data<int64_t>();
          AG_DISPATCH_FLOAT(g.dtype(), "max backward", [&] {
            scalar_t* dst = grad.data<scalar_t>();
            const scalar_t* src = gc.const_data<scalar_t>();
            for (int64_t i = 0, count = indices.numel(); i < count; ++i)
              dst[i * n + idx[i]] = src[i];
          });
          std::vector<int64_t> back(in_shape.size());
          for (int64_t d = 0, k = 0; d < static_cast<int64_t>(in_shape.size()); ++d)
            back[d] = d == dim ? static_cast<int64_t>(in_shape.size()) - 1 : k++;
          return {grad.permute(back).contiguous()};
        });
  return out;
}

Tensor max(const Tensor& a) {
  if (a.numel() == 0) throw std::invalid_argument("max: the tensor is empty");
  return max(a.reshape({-1}), 0, false);
}

Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  dim = normalize_dim(dim, a.dim(), "argmax");
  Tensor idx = max_along(a, dim).second;
  return keepdim ? idx : idx.squeeze(dim);
}

Tensor sum_to(const Tensor& a, const Shape& shape) {
  const profile::Timer timer("sum_to");
  if (a.shape() == shape) return a;
  if (shape.size() > a.shape().size())
    throw std::invalid_argument(fmt::format("sum_to: cannot reduce shape {} to {}",
                                            shape_str(a.shape()), shape_str(shape)));
  size_t lead = a.shape().size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t d = 0; d < a.shape().size(); ++d) {
    if (d < lead) {
      dims.push_back(static_cast<int64_t>(d));
    } else if (shape[d - lead] != a.shape()[d]) {
      if (shape[d - lead] != 1)
        throw std::invalid_argument(fmt::format("sum_to: cannot reduce shape {} to {}",
                                                shape_str(a.shape()), shape_str(shape)));
      dims.push_back(static_cast<int64_t>(d));
    }
  }
  if (dims.empty()) return a.reshape(shape);
  return sum(a, dims, true).reshape(shape);
}

}  // namespace ag
