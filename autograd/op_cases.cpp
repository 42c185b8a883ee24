// The op table's machinery: values and inputs for rows, rows expanded into named cases,
// a case's tensors, and a case's gradcheck. The rows themselves are in op_table.cpp.
#include "autograd/op_cases.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

#include "autograd/op_table.h"

namespace ag {

namespace op_table {

namespace {

// The row-major offset of element `flat` of `shape` with its coordinate along `dim` set to k.
int64_t with_coordinate(int64_t flat, const Shape& shape, int64_t dim, int64_t k) {
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > static_cast<size_t>(dim) + 1;) stride *= shape[d];
  int64_t coord = flat / stride % shape[dim];
  return flat + (k - coord) * stride;
}

}  // namespace

Fill normal(double scale, double shift) {
  return [=](const Shape& s, Generator& g) {
    std::vector<double> v(shape_numel(s));
    for (double& x : v) x = shift + scale * g.normal();
    return v;
  };
}

Fill uniform(double low, double high) {
  return [=](const Shape& s, Generator& g) {
    std::vector<double> v(shape_numel(s));
    for (double& x : v) x = low + (high - low) * g.uniform();
    return v;
  };
}

Fill positive() {
  return uniform(0.3, 3.0);
}

Fill away_from_zero(double low) {
  return [low](const Shape& s, Generator& g) {
    std::vector<double> v(shape_numel(s));
    for (double& x : v) {
      double magnitude = low + (2.0 - low) * g.uniform();
      x = g.uniform() < 0.5 ? -magnitude : magnitude;
    }
    return v;
  };
}

Fill distinct() {
  return [](const Shape& s, Generator& g) {
    const int64_t n = shape_numel(s);
    std::vector<double> v(n);
    std::iota(v.begin(), v.end(), 0.0);
    for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates
      std::swap(v[i], v[static_cast<int64_t>(g.uniform() * static_cast<double>(i + 1))]);
    for (double& x : v) x = (x - static_cast<double>(n) / 2) * 0.3 + 0.1 * g.uniform();
    return v;
  };
}

Fill near_100() {
  return [](const Shape& s, Generator& g) {
    std::vector<double> v = normal(2.0)(s, g);
    for (double& x : v) x = 100 + std::round(x * 64) / 64;
    return v;
  };
}

Fill constant(std::vector<double> values) {
  return [values](const Shape& s, Generator&) {
    if (static_cast<int64_t>(values.size()) != shape_numel(s))
      throw std::logic_error(fmt::format("op table: {} constant values for shape [{}]",
                                         values.size(), fmt::join(s, ", ")));
    return values;
  };
}

Fill random_mask(double p) {
  return [p](const Shape& s, Generator& g) {
    std::vector<double> v(shape_numel(s));
    for (double& x : v) x = g.uniform() < p ? 1.0 : 0.0;
    return v;
  };
}

Fill causal() {
  return [](const Shape& s, Generator&) {
    const int64_t rows = s.at(s.size() - 2), cols = s.back();
    std::vector<double> v(shape_numel(s));
    for (size_t k = 0; k < v.size(); ++k)
      v[k] = static_cast<int64_t>(k) % cols > static_cast<int64_t>(k) / cols % rows ? 1.0 : 0.0;
    return v;
  };
}

Fill open_mask(int64_t dim) {
  return [dim](const Shape& s, Generator& g) {
    const int64_t d = dim < 0 ? dim + static_cast<int64_t>(s.size()) : dim;
    std::vector<double> v = random_mask(0.5)(s, g);
    for (int64_t k = 0; k < static_cast<int64_t>(v.size()); ++k) {
      if (k != with_coordinate(k, s, d, 0)) continue;  // once per slice along d
      int64_t open = static_cast<int64_t>(g.uniform() * static_cast<double>(s[d]));
      v[with_coordinate(k, s, d, open)] = 0.0;
    }
    return v;
  };
}

Fill targets(int64_t classes, int64_t ignore_index) {
  return [=](const Shape& s, Generator& g) {
    std::vector<double> v(shape_numel(s));
    bool any_kept = false;
    for (double& x : v) {
      x = std::floor(g.uniform() * static_cast<double>(classes));
      if (g.uniform() < 0.25) x = static_cast<double>(ignore_index);
      any_kept |= x != static_cast<double>(ignore_index);
    }
    // every target ignored: torch gives nan, attograd 0; keep one
    if (!any_kept && !v.empty()) v[0] = ignore_index == 0 ? 1.0 : 0.0;
    return v;
  };
}

Fill ids(int64_t vocab) {
  return [vocab](const Shape& s, Generator& g) {
    std::vector<double> v(shape_numel(s));
    for (double& x : v) x = std::floor(g.uniform() * static_cast<double>(vocab));
    if (v.size() >= 2) v.back() = v.front();  // a repeated id: backward must add
    return v;
  };
}

CaseInput f(Shape shape, Fill fill, Layout layout) {
  // a layout that cannot apply (a transpose below rank 2, a slice of a 0-d tensor) is none
  if ((layout == Layout::transposed && shape.size() < 2) ||
      (layout == Layout::sliced && shape.empty()))
    layout = Layout::contiguous;
  return {InputKind::floating, std::move(shape), std::move(fill), layout};
}
CaseInput ft(Shape shape, Fill fill) {
  return f(std::move(shape), std::move(fill), Layout::transposed);
}
CaseInput fs(Shape shape, Fill fill) {
  return f(std::move(shape), std::move(fill), Layout::sliced);
}
CaseInput ints(Shape shape, Fill fill) {
  return {InputKind::int64, std::move(shape), std::move(fill)};
}
CaseInput mask(Shape shape, Fill fill) {
  return {InputKind::boolean, std::move(shape), std::move(fill)};
}
CaseInput none() {
  return {InputKind::none, {}, nullptr};
}

Sweep in_layouts(const Inputs& inputs) {
  Sweep sweep;
  for (Layout layout : {Layout::contiguous, Layout::transposed, Layout::sliced}) {
    Inputs v = inputs;
    bool changed = layout == Layout::contiguous;
    for (CaseInput& in : v)
      if (in.kind == InputKind::floating) {
        in = f(in.shape, in.fill, layout);
        changed |= in.layout != Layout::contiguous;
      }
    if (changed) sweep.push_back(std::move(v));
  }
  return sweep;
}

Sweep operator+(Sweep a, const Sweep& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string words(const std::vector<int64_t>& v) {
  return fmt::format("{}", fmt::join(v, " "));
}
std::string py_tuple(const std::vector<int64_t>& v) {
  return v.size() == 1 ? fmt::format("({},)", v[0]) : fmt::format("({})", fmt::join(v, ", "));
}
std::string py_bool(bool b) {
  return b ? "True" : "False";
}
std::string py_num(double v) {
  return fmt::format("{}", v);
}

}  // namespace op_table

namespace {

using op_table::Row;

std::string describe(const CaseInput& in) {
  std::string dims = in.shape.empty() ? "scalar" : fmt::format("{}", fmt::join(in.shape, "x"));
  switch (in.kind) {
    case InputKind::int64: return "ints " + dims;
    case InputKind::boolean: return "mask " + dims;
    case InputKind::none: return "none";
    case InputKind::floating: break;
  }
  if (in.layout == Layout::transposed) return dims + ".T";
  if (in.layout == Layout::sliced) return dims + ".sliced";
  return dims;
}

void add_cases(const Row& row, std::vector<OpCase>& cases, std::set<std::string>& names) {
  if (row.torch.find('\n') != std::string::npos)
    throw std::logic_error(
        fmt::format("op table: the torch expression of '{}' spans lines", row.op));
  for (const auto& inputs : row.sweep) {
    std::string name = row.op;
    for (const CaseInput& in : inputs) name.append(" ").append(describe(in));
    if (!names.insert(name).second)
      throw std::logic_error(fmt::format("op table: two cases are named '{}'", name));
    cases.push_back(
        {row.family, row.op, name, inputs, row.fn, row.torch, row.checks, row.tolerance});
  }
}

std::vector<OpCase> build_cases() {
  using namespace op_table;
  std::vector<OpCase> cases;
  std::set<std::string> names;
  for (auto rows : {elementwise_rows, reduce_rows, matmul_rows, view_rows, join_rows, softmax_rows,
                    layer_rows, attention_rows})
    for (const Row& row : rows()) add_cases(row, cases, names);
  return cases;
}

// A tensor holding `values` (row-major) seen through `layout`, of the requested dtype.
Tensor laid_out(const std::vector<double>& values, const Shape& shape, Layout layout, DType dtype) {
  Tensor view;
  if (layout == Layout::transposed) {
    Shape swapped = shape;
    std::swap(swapped[shape.size() - 1], swapped[shape.size() - 2]);
    view = empty(swapped, dtype).transpose(-1, -2);
  } else if (layout == Layout::sliced) {
    Shape padded = shape;
    for (auto& d : padded) d += 2;
    view = zeros(padded, dtype);
    for (size_t d = 0; d < shape.size(); ++d)
      view = view.narrow(static_cast<int64_t>(d), 1, shape[d]);
  } else {
    view = empty(shape, dtype);
  }
  copy_(view, from_vector(values, shape, dtype));
  return view;
}

}  // namespace

GradcheckOptions Tolerance::gradcheck_options() const {
  GradcheckOptions o;
  o.eps = eps;
  o.atol = atol;
  o.rtol = rtol;
  return o;
}

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = build_cases();
  return cases;
}

std::vector<std::string> op_case_families() {
  std::vector<std::string> families;
  for (const OpCase& c : op_cases())
    if (std::find(families.begin(), families.end(), c.family) == families.end())
      families.push_back(c.family);
  return families;
}

uint64_t case_seed(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ULL;
  return h;
}

std::vector<std::vector<double>> case_input_values(const OpCase& c) {
  Generator gen(case_seed(c.name));
  std::vector<std::vector<double>> values;
  for (const CaseInput& in : c.inputs)
    values.push_back(in.kind == InputKind::none ? std::vector<double>{} : in.fill(in.shape, gen));
  return values;
}

std::vector<Tensor> case_inputs(const OpCase& c, DType float_dtype) {
  std::vector<std::vector<double>> values = case_input_values(c);
  std::vector<Tensor> tensors;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const CaseInput& in = c.inputs[k];
    const std::vector<double>& v = values[k];
    switch (in.kind) {
      case InputKind::floating:
        tensors.push_back(laid_out(v, in.shape, in.layout, float_dtype).requires_grad_());
        break;
      case InputKind::int64:
        tensors.push_back(from_vector(std::vector<int64_t>(v.begin(), v.end()), in.shape));
        break;
      case InputKind::boolean: tensors.push_back(from_vector(v, in.shape, DType::Bool)); break;
      case InputKind::none: tensors.emplace_back(); break;
    }
  }
  return tensors;
}

GradcheckResult gradcheck_case(const OpCase& c, const GradcheckOptions* options) {
  auto joined = [fn = c.fn](const std::vector<Tensor>& x) {
    std::vector<Tensor> outs = fn(x);
    if (outs.size() == 1) return outs[0];
    for (Tensor& o : outs) o = o.reshape({-1});
    return cat(outs, 0);
  };
  return gradcheck(joined, case_inputs(c, DType::Float64),
                   options ? *options : c.tolerance.gradcheck_options());
}

}  // namespace ag
