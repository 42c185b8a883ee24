// The op table's rows, by family: each op (with its arguments) once, beside its PyTorch
// twin and the inputs it is checked on. op_table.h has the words, op_cases.h the readers.
// Inputs are chosen for the finite differences as much as for PyTorch: away from kinks
// and poles, without ties in max, and masks that leave every softmax row something to see.
#include "autograd/op_table.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <tuple>

#include "autograd/checkpoint.h"

namespace ag::op_table {

namespace {

using Shapes = std::vector<std::pair<Shape, Shape>>;

std::vector<Row> concat(std::initializer_list<std::vector<Row>> parts) {
  std::vector<Row> rows;
  for (const auto& part : parts) rows.insert(rows.end(), part.begin(), part.end());
  return rows;
}

// Broadcasting (0-d, size-1 dims, missing leading dims, a row past the SIMD width), then
// every layout, then one operand strided and the other not.
Sweep binary_sweep(const Fill& a, const Fill& b) {
  Sweep s;
  for (const auto& [sa, sb] : Shapes{{{4}, {2, 1, 4}},
                                     {{}, {2, 3}},
                                     {{3, 2}, {}},
                                     {{}, {}},
                                     {{2, 1, 3}, {1, 4, 1}},
                                     {{5}, {5}},
                                     {{1}, {3, 1, 2}},
                                     {{4, 33}, {33}},
                                     {{3, 1, 19}, {5, 1}},
                                     {{2, 3, 1, 2}, {3, 4, 1}},
                                     {{1, 4, 3}, {2, 1, 1, 3}}})
    s.push_back({f(sa, a), f(sb, b)});
  for (const auto& [sa, sb] : Shapes{{{3, 4}, {3, 4}},
                                     {{2, 3, 4}, {3, 1}},
                                     {{3, 4}, {}},
                                     {{4, 1}, {1, 5}},
                                     {{2, 3, 4}, {3, 4}},
                                     {{3, 4}, {2, 3, 4}},
                                     {{2, 3, 4}, {1, 4}},
                                     {{3, 4}, {3, 1}},
                                     {{3, 4}, {4}}})
    s = s + in_layouts({f(sa, a), f(sb, b)});
  return s + Sweep{{ft({3, 4}, a), f({3, 4}, b)},
                   {f({2, 3, 4}, a), ft({3, 4}, b)},
                   {fs({3, 4}, a), f({2, 3, 4}, b)},
                   {f({3, 1}, a), fs({3, 5}, b)}};
}

Sweep unary_sweep(const Fill& v) {
  return Sweep{{f({}, v)},        {f({5}, v)},     {f({2, 3, 4}, v)}, {f({2, 1, 3, 2}, v)},
               {f({4, 1, 3}, v)}, {f({3, 37}, v)}, {ft({3, 5}, v)},   {fs({2, 3, 5}, v)}} +
         in_layouts({f({3, 4}, v)});
}

std::vector<Row> arithmetic_rows() {
  const char* fam = "elementwise";
  return {
      {fam, "add", "x[0] + x[1]", one([](In x) { return x[0] + x[1]; }),
       binary_sweep(normal(), normal())},
      {fam, "sub", "x[0] - x[1]", one([](In x) { return x[0] - x[1]; }),
       binary_sweep(normal(), normal())},
      {fam, "mul", "x[0] * x[1]", one([](In x) { return x[0] * x[1]; }),
       binary_sweep(normal(), normal())},
      {fam, "div", "x[0] / x[1]", one([](In x) { return x[0] / x[1]; }),
       binary_sweep(normal(), away_from_zero(0.5))},
      {fam, "pow", "torch.pow(x[0], x[1])", one([](In x) { return ag::pow(x[0], x[1]); }),
       binary_sweep(positive(), normal())},
      {fam, "neg", "-x[0]", one([](In x) { return -x[0]; }), unary_sweep(normal())},
      {fam, "exp", "torch.exp(x[0])", one([](In x) { return ag::exp(x[0]); }),
       unary_sweep(normal())},
      {fam, "log", "torch.log(x[0])", one([](In x) { return ag::log(x[0]); }),
       unary_sweep(positive())},
      {fam, "sqrt", "torch.sqrt(x[0])", one([](In x) { return ag::sqrt(x[0]); }),
       unary_sweep(positive())},
      {fam, "tanh", "torch.tanh(x[0])", one([](In x) { return ag::tanh(x[0]); }),
       unary_sweep(normal(2))},
      // |x| >= 0.1: relu has a kink at 0, where no finite difference is meaningful
      {fam, "relu", "torch.relu(x[0])", one([](In x) { return ag::relu(x[0]); }),
       unary_sweep(away_from_zero(0.1))},
      {fam, "gelu", "F.gelu(x[0], approximate='tanh')", one([](In x) { return ag::gelu(x[0]); }),
       unary_sweep(normal(3))},
      {fam, "silu", "F.silu(x[0])", one([](In x) { return ag::silu(x[0]); }),
       unary_sweep(normal(3))},
      {fam, "swiglu", "F.silu(x[0]) * x[1]", one([](In x) { return ag::swiglu(x[0], x[1]); }),
       Sweep{{f({2, 3, 4}, normal(3)), f({2, 3, 4})}, {ft({3, 4}, normal(3)), fs({3, 4})}}},
      {fam, "affine x * 2.5 + 1.5", "x[0] * 2.5 + 1.5", one([](In x) { return x[0] * 2.5 + 1.5; }),
       in_layouts({f({3, 4})})},
      {fam, "affine (x - 0.5) / 4", "(x[0] - 0.5) / 4.0",
       one([](In x) { return (x[0] - 0.5) / 4.0; }), in_layouts({f({3, 4})})},
  };
}

std::vector<Row> scalar_rows() {
  const char* fam = "elementwise";
  const Sweep sweep = in_layouts({f({3, 4})}) + Sweep{{f({})}, {fs({3, 37})}};
  std::vector<Row> rows;
  for (double v : {1.5, -0.25, 0.0, 3.0}) {
    rows.push_back({fam, "add_scalar " + py_num(v), "x[0] + " + py_num(v),
                    one([v](In x) { return ag::add(x[0], v); }), sweep});
    rows.push_back({fam, "sub_scalar " + py_num(v), "x[0] - " + py_num(v),
                    one([v](In x) { return x[0] - v; }), sweep});
  }
  for (double v : {2.0, -0.5, 0.0, 1e3})
    rows.push_back({fam, "mul_scalar " + py_num(v), "x[0] * " + py_num(v),
                    one([v](In x) { return ag::mul(x[0], v); }), sweep});
  for (double v : {2.0, -0.5, 0.1, 3.0})
    rows.push_back({fam, "rmul_scalar " + py_num(v), py_num(v) + " * x[0]",
                    one([v](In x) { return v * x[0]; }), sweep});
  for (double v : {2.0, -0.5, 4.0, 1e-2})
    rows.push_back({fam, "div_scalar " + py_num(v), "x[0] / " + py_num(v),
                    one([v](In x) { return x[0] / v; }), sweep});
  // bases kept where the power is smooth: positive for fractional exponents, away from 0
  // for negative ones
  for (const auto& [e, fill] : std::vector<std::pair<double, Fill>>{{2, normal()},
                                                                    {3, normal()},
                                                                    {1, normal()},
                                                                    {-2, away_from_zero(0.1)},
                                                                    {0.5, positive()},
                                                                    {-1.5, positive()},
                                                                    {1.7, positive()},
                                                                    {0, positive()}})
    rows.push_back({fam, "pow_scalar " + py_num(e), "torch.pow(x[0], " + py_num(e) + ")",
                    one([exponent = e](In x) { return ag::pow(x[0], exponent); }),
                    in_layouts({f({3, 4}, fill)}) + Sweep{{f({2, 1, 3, 2}, fill)}}});
  return rows;
}

Row reduce_row(const std::string& op, const std::vector<int64_t>& dims, bool keepdim, Sweep sweep) {
  std::string label =
      op + (dims.empty() ? " all dims" : " dims " + words(dims)) + (keepdim ? " keepdim" : "");
  // attograd reads no dims as every dim; torch needs them named (and none for 0-d)
  std::string torch =
      !dims.empty()
          ? fmt::format("x[0].{}(dim={}, keepdim={})", op, py_tuple(dims), py_bool(keepdim))
      : keepdim ? fmt::format(
                      "x[0].{0}(dim=tuple(range(x[0].dim())), keepdim=True) if x[0].dim() "
                      "else x[0].{0}()",
                      op)
                : fmt::format("x[0].{}()", op);
  const bool is_sum = op == "sum";
  CaseFn fn = one(
      [=](In x) { return is_sum ? ag::sum(x[0], dims, keepdim) : ag::mean(x[0], dims, keepdim); });
  return {"reduce", label, torch, fn, std::move(sweep)};
}

std::vector<Row> sum_mean_rows() {
  const Sweep cube = in_layouts({f({2, 3, 4})});
  const std::vector<std::pair<std::vector<int64_t>, Sweep>> plans = {
      {{}, cube + Sweep{{f({})}, {f({5})}, {f({2, 3, 1, 4})}, {f({7, 45})}}},
      {{0}, cube + Sweep{{f({5})}, {fs({4, 3})}}},
      {{1}, cube + Sweep{{ft({3, 4})}, {f({7, 45})}}},
      {{-1}, cube + Sweep{{ft({3, 4})}, {f({7, 45})}}},
      {{0, 2}, cube + Sweep{{f({2, 3, 1, 4})}}},
      {{0, -1}, cube + Sweep{{fs({3, 4})}}},
      {{0, 1, 2}, cube},
  };
  std::vector<Row> rows;
  for (const char* op : {"sum", "mean"})
    for (const auto& [dims, sweep] : plans)
      for (bool keepdim : {false, true}) rows.push_back(reduce_row(op, dims, keepdim, sweep));
  return rows;
}

// Values at least 0.2 apart: every max has one winner, in float32 too.
std::vector<Row> max_rows() {
  const Fill d = distinct();
  const Sweep cube = in_layouts({f({3, 4, 5}, d)});
  std::vector<Row> rows = {{"reduce", "max all", "x[0].max()",
                            one([](In x) { return ag::max(x[0]); }),
                            cube + Sweep{{f({}, d)},
                                         {f({5}, d)},
                                         {f({3, 4}, d)},
                                         {f({2, 3, 4}, d)},
                                         {f({1, 1}, d)},
                                         {ft({4, 3}, d)},
                                         {fs({3, 4}, d)}}}};
  const std::vector<std::pair<int64_t, Sweep>> plans = {
      {0, {{f({5}, d)}, {f({4, 1}, d)}}},
      {1, {{ft({3, 4}, d)}, {f({2, 1, 3, 4}, d)}}},
      {-1, {{fs({3, 4}, d)}, {f({2, 3, 4}, d)}}}};
  for (const auto& [dim, extra] : plans)
    for (bool keepdim : {false, true}) {
      std::string args = fmt::format("dim={}, keepdim={}", dim, py_bool(keepdim));
      std::string label = fmt::format(" dim {}{}", dim, keepdim ? " keepdim" : "");
      rows.push_back({"reduce", "max" + label, "x[0].max(" + args + ").values",
                      one([d = dim, keepdim](In x) { return ag::max(x[0], d, keepdim); }),
                      cube + extra});
      // int64 indices have no gradient: PyTorch only
      rows.push_back({"reduce", "argmax" + label, "x[0].argmax(" + args + ")",
                      one([d = dim, keepdim](In x) { return ag::argmax(x[0], d, keepdim); }),
                      cube + extra, Checks::torch_only});
    }
  return rows;
}

std::vector<Row> sum_to_rows() {
  std::vector<Row> rows;
  for (const auto& [from, to] : Shapes{{{2, 3, 4}, {3, 1}},
                                       {{2, 3, 4}, {4}},
                                       {{2, 3, 4}, {1, 3, 4}},
                                       {{2, 3, 4}, {}},
                                       {{3, 4}, {3, 4}},
                                       {{2, 3, 4}, {2, 1, 1}},
                                       {{5, 1, 3}, {1, 3}},
                                       {{4}, {1}}})
    rows.push_back({"reduce",
                    "sum_to " + (to.empty() ? "scalar" : fmt::format("{}", fmt::join(to, "x"))),
                    "x[0].sum_to_size(" + py_tuple(to) + ")",
                    one([to = to](In x) { return ag::sum_to(x[0], to); }), in_layouts({f(from)})});
  return rows;
}

std::vector<Row> matmul_only_rows() {
  Sweep s;
  for (const auto& [a, b] : Shapes{{{4}, {4}},
                                   {{3, 4}, {4, 5}},
                                   {{4}, {4, 5}},
                                   {{3, 4}, {4}},
                                   {{2, 3, 4, 5}, {5, 6}},
                                   {{2, 1, 3, 4}, {5, 4, 2}},
                                   {{2, 3, 4}, {4}},
                                   {{4}, {2, 4, 3}},
                                   {{1, 4}, {4, 1}},
                                   {{3, 1}, {1, 5}},
                                   {{4}, {4, 3}},
                                   {{2, 4}, {4}}})
    s.push_back({f(a), f(b)});
  for (const auto& [a, b] : Shapes{{{2, 3, 4}, {2, 4, 2}},
                                   {{2, 1, 3, 4}, {3, 4, 2}},
                                   {{2, 3, 4}, {4, 5}},
                                   {{3, 4}, {2, 4, 2}}})
    s = s + in_layouts({f(a), f(b)});
  // transposed operands reach BLAS as flags, sliced ones as leading dims wider than rows
  s = s + Sweep{{ft({3, 4}), f({4, 5})},
                {f({3, 4}), ft({4, 5})},
                {ft({3, 4}), ft({4, 5})},
                {fs({3, 4}), ft({4, 5})},
                {ft({2, 3, 4}), ft({2, 4, 5})},
                {f({2, 3, 4, 5}), ft({5, 6})},
                {ft({2, 1, 3, 4}), ft({5, 4, 2})},
                {f({4}), ft({4, 5})},
                {ft({3, 4}), f({4})},
                {ft({2, 33, 17}), f({17, 29})},
                {f({33, 17}), ft({2, 17, 29})},
                {fs({3, 4}), f({4, 5})},
                {f({3, 4}), fs({4, 5})},
                {fs({2, 3, 4}), ft({4, 5})},
                {fs({4}), fs({2, 4, 3})},
                {ft({3, 2, 5}), f({1, 5, 4})},
                {ft({2, 6}), ft({6, 7})}};
  return {{"matmul", "matmul", "x[0] @ x[1]", one([](In x) { return ag::matmul(x[0], x[1]); }), s},
          {"matmul", "matmul q k.T", "x[0] @ x[1].transpose(-1, -2)",
           one([](In x) { return ag::matmul(x[0], x[1].transpose(-1, -2)); }),
           Sweep{{f({2, 5, 3}), f({2, 5, 3})}}}};
}

std::vector<Row> linear_rows() {
  std::vector<Row> rows;
  for (bool bias : {true, false})
    for (Activation act : {Activation::None, Activation::Gelu}) {
      const bool gelu = act == Activation::Gelu;
      std::string lin = bias ? "F.linear(x[0], x[1], x[2])" : "F.linear(x[0], x[1])";
      Inputs in{f({2, 3, 4}), f({5, 4})}, flat{f({7, 6}), ft({4, 6})};
      if (bias) {
        in.push_back(f({5}));
        flat.push_back(f({4}));
      }
      rows.push_back(
          {"matmul", std::string("linear") + (bias ? "" : " without bias") + (gelu ? " gelu" : ""),
           gelu ? "F.gelu(" + lin + ", approximate='tanh')" : lin,
           one([bias, act](In x) { return ag::linear(x[0], x[1], bias ? x[2] : Tensor(), act); }),
           in_layouts(in) + Sweep{flat}});
    }
  rows.push_back({"matmul", "lora_add", "x[0] + 2.5 * F.linear(F.linear(x[1], x[2]), x[3])",
                  one([](In x) {
                    return ag::lora_add(x[0], x[1], {{x[2], x[3], 2.5}});
                  }),
                  Sweep{{f({2, 3, 5}), f({2, 3, 4}), f({2, 4}), f({5, 2})},
                        {f({7, 5}), ft({7, 4}), ft({2, 4}), ft({5, 2})},
                        {f({37, 18}), f({37, 20}), f({5, 20}), f({18, 5})}}});
  // two terms sharing x, a column between them that neither adds to
  rows.push_back(
      {"matmul", "lora_add two terms",
       "x[0] + torch.cat([2.5 * F.linear(F.linear(x[1], x[2]), x[3]), "
       "torch.zeros_like(x[0][..., 3:4]), -0.5 * F.linear(F.linear(x[1], x[4]), x[5])], -1)",
       one([](In x) {
         return ag::lora_add(x[0], x[1], {{x[2], x[3], 2.5, 0}, {x[4], x[5], -0.5, 4}});
       }),
       Sweep{{f({9, 6}), f({9, 4}), f({2, 4}), f({3, 2}), f({3, 4}), f({2, 3})}}});
  return rows;
}

// One view op with its arguments: the label and Python call from the same numbers.
Row view_row(const std::string& op, const std::vector<int64_t>& args, CaseFn fn, Sweep sweep) {
  return {"views", op + " " + words(args), fmt::format("x[0].{}({})", op, fmt::join(args, ", ")),
          std::move(fn), std::move(sweep)};
}

using ArgRows = std::vector<std::pair<std::vector<int64_t>, Sweep>>;

std::vector<Row> transpose_like_rows() {
  std::vector<Row> rows;
  for (const auto& [a, sweep] : ArgRows{{{0, 1}, {{ft({3, 4})}}},
                                        {{0, 2}, {{f({2, 3, 4})}}},
                                        {{-1, 0}, {{f({2, 3, 4, 2})}}},
                                        {{1, -1}, {{f({3, 1, 4})}}},
                                        {{1, 1}, {{f({2, 3})}}},
                                        {{-2, -1}, {{f({4, 5})}}},
                                        {{0, 3}, {{fs({2, 1, 3, 2})}}}})
    rows.push_back(
        view_row("transpose", a, one([a = a](In x) { return x[0].transpose(a[0], a[1]); }), sweep));
  for (const auto& [a, sweep] : ArgRows{{{1, 0}, {{ft({3, 4})}}},
                                        {{2, 0, 1}, {{ft({2, 3, 4})}}},
                                        {{0}, {{f({5})}}},
                                        {{3, 1, 0, 2}, {{f({2, 3, 1, 4})}}},
                                        {{0, 1, 2}, {{fs({2, 3, 4})}}},
                                        {{1, 2, 0}, {{f({4, 1, 3})}}}})
    rows.push_back(view_row("permute", a, one([a = a](In x) { return x[0].permute(a); }), sweep));
  for (const auto& [a, sweep] : ArgRows{{{0, 1, 2}, {{ft({4, 3})}}},
                                        {{-1, 0, 2}, {{ft({2, 3, 4})}}},
                                        {{1, 1, 2}, {{fs({3, 5})}}},
                                        {{0, 0, 1}, {{f({1})}}},
                                        {{2, 3, 2}, {{f({2, 3, 6})}}},
                                        {{-2, 1, 1}, {{f({2, 3, 4})}}},
                                        {{3, 2, 3}, {{f({2, 1, 3, 5})}}},
                                        {{1, 0, 4}, {{f({3, 4})}}}})
    rows.push_back(
        view_row("narrow", a, one([a = a](In x) { return x[0].narrow(a[0], a[1], a[2]); }), sweep));
  for (const auto& [a, sweep] : ArgRows{{{0, 1}, {{ft({3, 4})}}},
                                        {{1, 2}, {{ft({2, 3, 4})}}},
                                        {{0, 0}, {{f({5})}}},
                                        {{-1, 3}, {{f({2, 3, 4})}}},
                                        {{2, 0}, {{f({2, 3, 1, 4})}}},
                                        {{1, 1}, {{fs({4, 2})}}}})
    rows.push_back(
        view_row("select", a, one([a = a](In x) { return x[0].select(a[0], a[1]); }), sweep));
  return rows;
}

std::vector<Row> reshape_like_rows() {
  std::vector<Row> rows;
  // reshape copies what view cannot see through (the transposed inputs)
  for (const auto& [shape, sweep] : ArgRows{{{2, 3}, {{f({6})}}},
                                            {{3, -1}, {{ft({2, 6})}}},
                                            {{12}, {{f({3, 4})}}},
                                            {{4, -1, 3}, {{ft({2, 3, 4})}}},
                                            {{3, 1, 4}, {{f({2, 1, 6})}}},
                                            {{1, 12, 1}, {{f({12})}}},
                                            {{1, 1}, {{f({})}}},
                                            {{-1}, {{ft({5, 2})}}},
                                            {{2, 6}, {{fs({3, 4})}}}})
    rows.push_back(
        view_row("reshape", shape, one([s = shape](In x) { return x[0].reshape(s); }), sweep));
  for (const auto& [shape, sweep] : ArgRows{{{2, 3}, {{f({6})}}},
                                            {{3, -1}, {{f({2, 6})}}},
                                            {{12}, {{f({3, 4})}}},
                                            {{4, -1, 3}, {{f({2, 3, 4})}}},
                                            {{3, 1, 4}, {{f({2, 1, 6})}}},
                                            {{1, 12, 1}, {{f({12})}}},
                                            {{1, 1}, {{f({})}}},
                                            {{-1}, {{f({5, 2})}}},
                                            {{2, 3, 4}, {{f({6, 4})}}}})
    rows.push_back(view_row("view", shape, one([s = shape](In x) { return x[0].view(s); }), sweep));
  for (const auto& [shape, sweep] : ArgRows{{{3, 4}, {{f({3, 1})}, {fs({3, 1})}}},
                                            {{5}, {{f({1})}}},
                                            {{2, 3, 4}, {{f({3, 1})}, {ft({3, 1})}}},
                                            {{2, 3}, {{f({})}}},
                                            {{-1, 3, -1}, {{f({2, 1, 4})}}},
                                            {{2, 2, 3}, {{f({1, 1})}}},
                                            {{3, 2, 4}, {{f({4})}}},
                                            {{2, 3}, {{f({2, 3})}}}})
    rows.push_back(
        view_row("expand", shape, one([s = shape](In x) { return x[0].expand(s); }), sweep));
  return rows;
}

std::vector<Row> squeeze_like_rows() {
  std::vector<Row> rows;
  for (const auto& [d, sweep] : ArgRows{{{0}, {{ft({3, 4})}, {f({})}}},
                                        {{-1}, {{f({5})}}},
                                        {{1}, {{f({2, 3})}}},
                                        {{-3}, {{fs({2, 3})}}},
                                        {{2}, {{f({4, 1, 3})}}}})
    rows.push_back(
        view_row("unsqueeze", d, one([d = d[0]](In x) { return x[0].unsqueeze(d); }), sweep));
  for (const auto& [d, sweep] : ArgRows{{{1}, {{f({3, 1, 4})}, {f({1, 1})}, {ft({1, 4})}}},
                                        {{-2}, {{f({3, 1, 4})}}},
                                        {{0}, {{f({1})}, {f({3, 4})}}},
                                        {{-1}, {{f({2, 3, 1})}}}})
    rows.push_back(
        view_row("squeeze", d, one([d = d[0]](In x) { return x[0].squeeze(d); }), sweep));
  const Sweep strided{{ft({3, 4})}, {fs({2, 3, 4})},    {f({5})},
                      {f({})},      {ft({2, 3, 4, 2})}, {fs({3, 4})}};
  rows.push_back({"views", "contiguous", "x[0].contiguous()",
                  one([](In x) { return x[0].contiguous(); }), strided});
  rows.push_back(
      {"views", "clone", "x[0].clone()", one([](In x) { return x[0].clone(); }), strided});
  // the float32 round trip rounds the values, which float64 central differences with
  // eps 1e-6 would see as noise; with eps 1e-3 the slope (exactly 1) shows through
  rows.push_back({"views", "to float32 and back", "x[0].float().double()",
                  one([](In x) { return x[0].to(DType::Float32).to(DType::Float64); }),
                  in_layouts({f({3, 2})}), Checks::both, Tolerance{.eps = 1e-3, .atol = 1e-4}});
  return rows;
}

// Views composed, each weighted so that every element of the input has its own gradient.
std::vector<Row> composed_view_rows() {
  const Sweep a_w = in_layouts({f({2, 3, 4}), f({4, 3, 2})});
  const char* fam = "views";
  return {
      {fam, "permute 2 1 0 times weight", "x[0].permute(2, 1, 0) * x[1]", one([](In x) {
         return x[0].permute({2, 1, 0}) * x[1];
       }),
       a_w},
      {fam, "transpose 0 2 times weight", "x[0].transpose(0, 2) * x[1]",
       one([](In x) { return x[0].transpose(0, 2) * x[1]; }), a_w},
      {fam, "reshape 4 3 2 times weight", "x[0].reshape(4, 3, 2) * x[1]", one([](In x) {
         return x[0].reshape({4, 3, 2}) * x[1];
       }),
       a_w},
      {fam, "flattened then narrow 0 5 11", "x[0].reshape(-1).narrow(0, 5, 11) * 2.0",
       one([](In x) { return x[0].reshape({-1}).narrow(0, 5, 11) * 2.0; }), a_w},
      {fam, "narrow times a narrowed permuted weight",
       "x[0].narrow(2, 1, 2) * x[1].narrow(0, 0, 2).permute(2, 1, 0)", one([](In x) {
         return x[0].narrow(2, 1, 2) * x[1].narrow(0, 0, 2).permute({2, 1, 0});
       }),
       a_w},
      {fam, "select 1 2 times 3", "x[0].select(1, 2) * 3.0",
       one([](In x) { return x[0].select(1, 2) * 3.0; }), a_w},
      {fam, "unsqueeze squeeze contiguous times itself",
       "x[0].unsqueeze(1).squeeze(1).contiguous() * x[0]",
       one([](In x) { return x[0].unsqueeze(1).squeeze(1).contiguous() * x[0]; }), a_w},
      {fam, "clone times itself", "x[0].clone() * x[0]",
       one([](In x) { return x[0].clone() * x[0]; }), a_w},
      {fam, "reshape 3 8 then narrow 1 2 4", "x[0].reshape(3, 8).narrow(1, 2, 4) * 3.0",
       one([](In x) {
         return x[0].reshape({3, 8}).narrow(1, 2, 4) * 3.0;
       }),
       in_layouts({f({4, 6})})},
  };
}

using DimRows = std::vector<std::pair<int64_t, Sweep>>;

std::vector<Row> cat_stack_rows() {
  std::vector<Row> rows;
  for (const auto& [d, sweep] : DimRows{
           {0, {{f({2, 3}), f({1, 3})}, {f({1, 4}), ft({3, 4}), fs({2, 4})}, {f({5})}}},
           {1, {{f({2, 1}), ft({2, 3})}, {f({2, 2, 3}), f({2, 1, 3}), fs({2, 3, 3})}, {f({3, 4})}}},
           {-1, {{f({3, 2}), f({3, 1})}, {f({2, 2, 1}), ft({2, 2, 3}), fs({2, 2, 2})}}},
           {-3, {{f({1, 2, 3}), f({2, 2, 3})}}}})
    rows.push_back({"join", fmt::format("cat dim {}", d), fmt::format("torch.cat(x, {})", d),
                    one([d = d](In x) { return ag::cat(x, d); }), sweep});
  for (const auto& [d, sweep] : DimRows{{0, {{f({2, 3}), f({2, 3})}, {f({4}), f({4}), fs({4})}}},
                                        {1, {{f({2, 3, 1}), ft({2, 3, 1})}}},
                                        {2, {{f({2, 3}), ft({2, 3})}}},
                                        {-1, {{f({3, 2}), fs({3, 2}), f({3, 2})}}},
                                        {-3, {{f({2, 3}), f({2, 3})}}}})
    rows.push_back({"join", fmt::format("stack dim {}", d), fmt::format("torch.stack(x, {})", d),
                    one([d = d](In x) { return ag::stack(x, d); }), sweep});
  for (int64_t d : {0, 1, -1}) {
    Shape b{2, 3, 4}, w{2, 3, 4};
    b[d < 0 ? 2 : d] = 2;
    w[d < 0 ? 2 : d] += 2;
    rows.push_back({"join", fmt::format("cat dim {} times weight", d),
                    fmt::format("torch.cat([x[0], x[1]], {}) * x[2]", d), one([d](In x) {
                      return ag::cat({x[0], x[1]}, d) * x[2];
                    }),
                    in_layouts({f({2, 3, 4}), f(b), f(w)})});
  }
  rows.push_back({"join", "stack dim 1 times weight", "torch.stack([x[0], x[1]], 1) * x[2]",
                  one([](In x) {
                    return ag::stack({x[0], x[1]}, 1) * x[2];
                  }),
                  Sweep{{f({2, 3}), ft({2, 3}), f({2, 2, 3})}}});
  return rows;
}

std::vector<Row> split_rows() {
  std::vector<Row> rows;
  for (const auto& [a, sweep] : ArgRows{{{2, 0}, in_layouts({f({5, 3})})},
                                        {{1, -1}, {{ft({2, 3})}}},
                                        {{3, 1}, {{f({2, 7})}}},
                                        {{4, 0}, {{f({4, 2})}}},
                                        {{5, 0}, {{f({3, 2})}}},
                                        {{2, -2}, {{ft({2, 5, 3})}}},
                                        {{1, 2}, {{fs({2, 2, 3})}}}})
    rows.push_back({"join", fmt::format("split {} dim {}", a[0], a[1]),
                    fmt::format("list(torch.split(x[0], {}, {}))", a[0], a[1]),
                    [a = a](In x) { return ag::split(x[0], a[0], a[1]); }, sweep});
  for (const auto& [sizes, d, sweep] :
       std::vector<std::tuple<std::vector<int64_t>, int64_t, Sweep>>{
           {{1, 2}, 1, in_layouts({f({5, 3})})},
           {{0, 3}, 0, {{f({3, 2})}}},
           {{2, 2, 1}, -1, {{ft({2, 5})}}},
           {{4}, 0, {{f({4, 3})}}},
           {{1, 1, 1}, 2, {{fs({2, 2, 3})}}},
           {{3, 0, 2}, -2, {{f({2, 5, 3})}}}})
    rows.push_back({"join", fmt::format("split sizes {} dim {}", words(sizes), d),
                    fmt::format("list(torch.split(x[0], [{}], {}))", fmt::join(sizes, ", "), d),
                    [s = sizes, d = d](In x) { return ag::split(x[0], s, d); }, sweep});
  // parts used together, so that their gradients meet again in the input
  rows.push_back({"join", "split 2 dim 0 then combined",
                  "(lambda p: p[0] * p[1] + p[2].sum())(torch.split(x[0], 2, 0))", one([](In x) {
                    auto p = ag::split(x[0], 2, 0);  // sizes 2, 2, 1
                    return p[0] * p[1] + ag::sum(p[2]);
                  }),
                  in_layouts({f({5, 3})})});
  rows.push_back({"join", "split sizes 1 2 dim 1 then combined",
                  "(lambda p: p[0].sum(dim=(1,), keepdim=True) * p[1] * 2.0)"
                  "(torch.split(x[0], [1, 2], 1))",
                  one([](In x) {
                    auto p = ag::split(x[0], std::vector<int64_t>{1, 2}, 1);
                    return ag::sum(p[0], {1}, true) * p[1] * 2.0;
                  }),
                  in_layouts({f({5, 3})})});
  rows.push_back({"join", "split 2 dim 0 then stacked",
                  "(lambda p: torch.stack([p[0], p[1] * p[1]], 0))(torch.split(x[0], 2, 0))",
                  one([](In x) {
                    auto p = ag::split(x[0], 2, 0);
                    return ag::stack({p[0], p[1] * p[1]}, 0);
                  }),
                  Sweep{{f({4, 3})}}});
  return rows;
}

// Fill values from 0 to infinities. Outputs stay within the full Jacobian (64 elements):
// a random projection would add 1e9 or inf to every entry and drown the differences.
std::vector<Row> masked_fill_rows() {
  const Fill some = random_mask(0.4);
  std::vector<Row> rows;
  for (const auto& [v, sweep] : std::vector<std::pair<double, Sweep>>{
           {0.0, {{ft({3, 4}), mask({4}, some)}, {f({2, 3, 4}), mask({3, 1}, some)}}},
           {-1e9, {{fs({2, 3, 4}), mask({2, 3, 4}, some)}, {f({3, 5}), mask({1, 5}, some)}}},
           {2.5, {{f({4, 1, 3}), mask({3}, some)}, {f({5}), mask({5}, some)}}},
           {-kInf, {{f({2, 3}), mask({2, 3}, some)}, {f({2, 2, 4, 4}), mask({4, 4}, causal())}}},
           {kInf, {{f({3, 1, 2}), mask({1, 1, 2}, some)}}},
           {-1e4, {{f({3, 3}), mask({3, 3}, causal())}}}})
    rows.push_back({"softmax", "masked_fill " + py_num(v),
                    "x[0].masked_fill(x[1], " + py_num(v) + ")",
                    one([v = v](In x) { return ag::masked_fill(x[0], x[1], v); }), sweep});
  rows.push_back({"softmax", "masked_fill 7 times itself", "x[0].masked_fill(x[1], 7.0) * x[0]",
                  one([](In x) { return ag::masked_fill(x[0], x[1], 7.0) * x[0]; }),
                  in_layouts({f({2, 4, 4}), mask({4, 4}, causal())})});
  return rows;
}

std::vector<Row> plain_softmax_rows() {
  const Sweep cube = in_layouts({f({3, 4, 5}, normal(3))});
  // logits near 100: exp overflows float32 unless the max is subtracted first
  const DimRows plans = {
      {0, cube + Sweep{{f({5}, normal(3))}, {f({2, 3, 4}, normal(3))}, {f({4, 3}, near_100())}}},
      {1,
       cube + Sweep{{f({3, 4}, normal(3))}, {f({1, 6}, normal(3))}, {f({2, 2, 3, 5}, normal(3))}}},
      {-1, cube + Sweep{{ft({3, 4}, normal(3))},
                        {f({2, 3, 4}, normal(3))},
                        {fs({3, 70}, normal(3))},
                        {fs({2, 4, 3}, normal(3))},
                        {f({3, 5}, near_100())}}}};
  std::vector<Row> rows;
  for (const auto& [d, sweep] : plans) {
    rows.push_back({"softmax", fmt::format("softmax dim {}", d),
                    fmt::format("F.softmax(x[0], {})", d),
                    one([d = d](In x) { return ag::softmax(x[0], d); }), sweep});
    rows.push_back({"softmax", fmt::format("log_softmax dim {}", d),
                    fmt::format("F.log_softmax(x[0], {})", d),
                    one([d = d](In x) { return ag::log_softmax(x[0], d); }), sweep});
  }
  return rows;
}

// Masked entries become -inf before the softmax. Every row keeps one entry open (a fully
// masked row has its own row below).
std::vector<Row> masked_softmax_rows() {
  const DimRows plans = {{-1, in_layouts({f({2, 5, 5}), mask({5, 5}, causal())}) +
                                  Sweep{{f({4, 4}), mask({4, 4}, causal())},
                                        {f({2, 2, 5, 5}), mask({5, 5}, causal())},
                                        {f({1, 6, 6}), mask({6, 6}, causal())},
                                        {f({3, 5}), mask({3, 5}, open_mask(-1))},
                                        {f({2, 3, 4}), mask({2, 3, 4}, open_mask(-1))}}},
                         {-2, {{fs({2, 3, 3}), mask({3, 3}, causal())}}},
                         {0, {{f({3, 5}), mask({3, 5}, open_mask(0))}}},
                         {1, {{f({2, 4, 3}), mask({2, 4, 3}, open_mask(1))}}}};
  std::vector<Row> rows;
  for (const auto& [d, sweep] : plans) {
    const std::string masked = "x[0].masked_fill(x[1], -inf)";
    rows.push_back(
        {"softmax", fmt::format("masked softmax dim {}", d),
         fmt::format("F.softmax({}, {})", masked, d),
         one([d = d](In x) { return ag::softmax(ag::masked_fill(x[0], x[1], -kInf), d); }), sweep});
    // -inf outputs: finite differences see no slope in an output pinned at -inf, while
    // backward passes gradient through it (as PyTorch's does), so only PyTorch checks this;
    // the row after it zeroes the masked outputs, as any loss over them must, for gradcheck
    rows.push_back({"softmax", fmt::format("masked log_softmax dim {}", d),
                    fmt::format("F.log_softmax({}, {})", masked, d), one([d = d](In x) {
                      return ag::log_softmax(ag::masked_fill(x[0], x[1], -kInf), d);
                    }),
                    sweep, Checks::torch_only});
    rows.push_back({"softmax", fmt::format("masked log_softmax dim {} refilled with 0", d),
                    fmt::format("F.log_softmax({}, {}).masked_fill(x[1], 0.0)", masked, d),
                    one([d = d](In x) {
                      return ag::masked_fill(ag::log_softmax(ag::masked_fill(x[0], x[1], -kInf), d),
                                             x[1], 0.0);
                    }),
                    sweep});
  }
  // PyTorch gives NaN for a row with nothing to see; attograd gives zeros with zero
  // gradient by design (ops.h), so only gradcheck checks it
  rows.push_back({"softmax", "masked softmax dim -1 with a fully masked row", "",
                  one([](In x) { return ag::softmax(ag::masked_fill(x[0], x[1], -kInf), -1); }),
                  Sweep{{f({3, 4}), mask({3, 4}, constant({0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1}))}},
                  Checks::gradcheck_only});
  return rows;
}

std::vector<Row> cross_entropy_rows() {
  auto logits = [](Shape s, int64_t ignore, Layout layout = Layout::contiguous) {
    Shape t(s.begin(), s.end() - 1);
    return Inputs{f(s, normal(2), layout), ints(t, targets(s.back(), ignore))};
  };
  const DimRows plans = {
      {-100, Sweep{logits({4, 5}, -100), logits({6, 3}, -100), logits({1, 7}, -100),
                   logits({2, 3, 4}, -100), logits({4, 5}, -100, Layout::transposed),
                   logits({16, 50}, -100)} +
                 in_layouts({f({2, 3, 5}), ints({2, 3}, constant({0, 4, -100, 2, 2, 1}))})},
      {-1, {logits({3, 4, 6}, -1)}},
      {0, {logits({5, 4}, 0)}},
      {2, {logits({2, 5, 3}, 2)}},
      {7, {{f({4, 3}), ints({4}, constant({2, 0, 1, 7}))}}}};
  std::vector<Row> rows;
  for (const auto& [ignore, sweep] : plans)
    rows.push_back({"softmax", fmt::format("cross_entropy ignore {}", ignore),
                    fmt::format("F.cross_entropy(x[0].reshape(-1, x[0].shape[-1]), "
                                "x[1].reshape(-1), ignore_index={})",
                                ignore),
                    one([i = ignore](In x) { return ag::cross_entropy(x[0], x[1], i); }), sweep});
  return rows;
}

// The head's loss without its logits: x [..., K], W [V, K], targets; chunks of 0 (one
// chunk: all rows), 2 and 1 rows, and ignored targets among them.
std::vector<Row> linear_cross_entropy_rows() {
  auto head = [](Shape x, int64_t V, int64_t ignore) {
    Shape t(x.begin(), x.end() - 1);
    return Inputs{f(x), f({V, x.back()}), ints(t, targets(V, ignore))};
  };
  const std::string twin =
      "F.cross_entropy(F.linear(x[0], x[1]).reshape(-1, x[1].shape[0]), x[2].reshape(-1), "
      "ignore_index={})";
  std::vector<Row> rows;
  for (const int64_t chunk : {0, 2, 1})
    for (const int64_t ignore : {-100, 2})
      rows.push_back(
          {"softmax", fmt::format("linear_cross_entropy chunk {} ignore {}", chunk, ignore),
           fmt::format(fmt::runtime(twin), ignore), one([chunk, ignore](In x) {
             return ag::linear_cross_entropy(x[0], x[1], x[2], ignore, chunk);
           }),
           Sweep{head({2, 3, 4}, 5, ignore), head({5, 3}, 7, ignore), head({1, 6}, 3, ignore)} +
               in_layouts({f({3, 4}), f({6, 4}),
                           ints({3}, constant({5, static_cast<double>(ignore), 1}))})});
  return rows;
}

std::vector<Row> embedding_rows() {
  auto table = [](int64_t vocab, int64_t dim, Shape id_shape, Layout layout = Layout::contiguous) {
    return Inputs{f({vocab, dim}, normal(), layout), ints(id_shape, ids(vocab))};
  };
  Sweep sweep = Sweep{table(5, 3, {6}),
                      table(4, 2, {2, 5}),
                      table(7, 4, {}),
                      table(3, 1, {3, 4}),
                      table(8, 5, {2, 2, 3}),
                      table(6, 3, {5}, Layout::transposed),
                      {f({5, 3}), ints({4}, constant({1, 3, 1, 0}))}} +
                in_layouts({f({5, 3}), ints({2, 3}, constant({1, 3, 1, 0, 1, 4}))});
  return {{"layers", "embedding", "F.embedding(x[1], x[0])",
           one([](In x) { return ag::embedding(x[0], x[1]); }), sweep}};
}

std::vector<Row> layer_norm_rows() {
  struct Plan {
    bool weight, bias;
    double eps;
    std::vector<std::pair<Shape, Layout>> shapes;
  };
  const auto c = Layout::contiguous, t = Layout::transposed, s = Layout::sliced;
  const std::vector<Plan> plans = {
      {true,
       true,
       1e-5,
       {{{5}, c}, {{2, 2, 3}, c}, {{2, 3, 6}, c}, {{2, 3, 6}, t}, {{2, 3, 6}, s}}},
      {true, true, 1e-3, {{{2, 3, 4}, s}}},
      {false, true, 1e-5, {{{3, 4}, c}, {{3, 1}, c}}},
      {false, true, 1e-3, {{{3, 64}, c}}},
      {true, false, 1e-5, {{{2, 3, 6}, c}}},
      {true, false, 1e-3, {{{6, 2}, c}, {{2, 3, 6}, c}, {{2, 3, 6}, t}, {{2, 3, 6}, s}}},
      {false, false, 1e-5, {{{4, 8}, c}, {{2, 3, 6}, c}, {{2, 3, 6}, t}, {{2, 3, 6}, s}}},
      {false, false, 1e-3, {{{2, 5}, t}}}};
  std::vector<Row> rows;
  for (const Plan& p : plans) {
    Sweep sweep;
    for (const auto& [shape, layout] : p.shapes) {
      Shape channels{shape.back()};
      sweep.push_back({f(shape, normal(2, 0.5), layout),
                       p.weight ? f(channels, normal(), layout) : none(),
                       p.bias ? f(channels, normal(), layout) : none()});
    }
    std::string affine = p.weight && p.bias ? ""
                         : p.weight         ? " weight only"
                         : p.bias           ? " bias only"
                                            : " without affine";
    rows.push_back(
        {"layers", "layer_norm" + affine + (p.eps != 1e-5 ? " eps " + py_num(p.eps) : ""),
         fmt::format("F.layer_norm(x[0], x[0].shape[-1:], x[1], x[2], {})", py_num(p.eps)),
         one([eps = p.eps](In x) { return ag::layer_norm(x[0], x[1], x[2], eps); }), sweep});
  }
  return rows;
}

// LLaMA's RMSNorm, written out in PyTorch (torch 1.13 has no F.rms_norm).
std::vector<Row> rms_norm_rows() {
  struct Plan {
    bool weight;
    double eps;
    std::vector<std::pair<Shape, Layout>> shapes;
  };
  const auto c = Layout::contiguous, t = Layout::transposed, s = Layout::sliced;
  const std::vector<Plan> plans = {
      {true,
       1e-5,
       {{{5}, c}, {{2, 2, 3}, c}, {{2, 3, 6}, c}, {{2, 3, 6}, t}, {{2, 3, 6}, s}, {{3, 1}, c}}},
      {true, 1e-3, {{{2, 3, 4}, s}, {{6, 2}, c}, {{3, 64}, c}}},
      {false, 1e-5, {{{4, 8}, c}, {{2, 3, 6}, c}, {{2, 3, 6}, t}, {{2, 3, 6}, s}}},
      {false, 1e-3, {{{2, 5}, t}, {{3, 1}, c}}}};
  std::vector<Row> rows;
  for (const Plan& p : plans) {
    Sweep sweep;
    for (const auto& [shape, layout] : p.shapes) {
      // one channel: y = x / sqrt(x^2 + eps), steep at 0, so x is kept away from it
      Fill x = shape.back() == 1 ? away_from_zero() : normal(2, 0.5);
      sweep.push_back(
          {f(shape, x, layout), p.weight ? f({shape.back()}, normal(), layout) : none()});
    }
    rows.push_back({"layers",
                    fmt::format("rms_norm{}{}", p.weight ? "" : " without weight",
                                p.eps != 1e-5 ? " eps " + py_num(p.eps) : ""),
                    fmt::format("x[0] * torch.rsqrt(x[0].pow(2).mean(-1, keepdim=True) + {}){}",
                                py_num(p.eps), p.weight ? " * x[1]" : ""),
                    one([eps = p.eps](In x) { return ag::rms_norm(x[0], x[1], eps); }), sweep});
  }
  return rows;
}

// A fresh generator with a fixed seed inside the function draws the same mask at every
// evaluation, so the finite differences see the function that backward differentiates.
// PyTorch cannot draw attograd's masks: gradcheck only.
std::vector<Row> dropout_rows() {
  std::vector<Row> rows;
  for (double p : {0.0, 0.3, 0.5, 1.0})
    rows.push_back({"layers", "dropout " + py_num(p) + " times itself", "", one([p](In x) {
                      Generator g(99);
                      return ag::dropout(x[0], p, true, g) * x[0];
                    }),
                    in_layouts({f({4, 5})}), Checks::gradcheck_only});
  return rows;
}

// ag::checkpoint (autograd/checkpoint.h) over a few ops: its backward recomputes them, with a
// dropout drawing its mask again from the state it had; the values are the ops' own, so
// PyTorch's twin is the ops without checkpointing.
std::vector<Row> checkpoint_rows() {
  std::vector<Row> rows;
  // (the function is kept by the graph until backward: it holds what it reads by value)
  rows.push_back(
      {"layers", "checkpoint of tanh(linear) times its input",
       "torch.tanh(F.linear(x[0], x[1], x[2])) * x[0]", one([](In x) {
         return ag::checkpoint(
             [w = x[1], b = x[2]](const Tensor& a) { return ag::tanh(ag::linear(a, w, b)) * a; },
             x[0], {x[1], x[2]});
       }),
       Sweep{{f({3, 4}), f({4, 4}), f({4})}, {f({2, 3, 5}), f({5, 5}), f({5})}}});
  rows.push_back(
      {"layers", "checkpoint of a dropout 0.3 and gelu", "", one([](In x) {
         auto g = std::make_shared<Generator>(99);
         return ag::checkpoint(
             [g, w = x[1]](const Tensor& a) { return ag::gelu(ag::dropout(a, 0.3, true, *g) * w); },
             x[0], {x[1]}, {g.get()});
       }),
       in_layouts({f({4, 5}), f({4, 5})}), Checks::gradcheck_only});
  return rows;
}

// softmax(q k^T / sqrt(D), keys after the query hidden) v, in PyTorch, over q, k, v.
const char* const kTorchCausalAttention =
    "torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill("
    "torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1), -inf), -1) @ v";

std::vector<Row> attention_only_rows() {
  const char* fam = "attention";
  const Sweep heads = in_layouts({f({1, 2, 4, 3}), f({1, 2, 4, 3}), f({1, 2, 4, 2})}) +
                      Sweep{{ft({2, 5, 4}), fs({2, 5, 4}), ft({2, 5, 3})}};
  auto sdpa = [](bool causal, double p) {
    return one([causal, p](In x) {
      Generator g(5);  // the same mask at every evaluation
      return ag::scaled_dot_product_attention(x[0], x[1], x[2], causal, p, &g);
    });
  };
  auto packed = [](double p) {
    return one([p](In x) {
      Generator g(5);
      return ag::causal_self_attention(x[0], 2, p, &g);
    });
  };
  return {
      {fam, "scaled_dot_product_attention causal",
       fmt::format("(lambda q, k, v: {})(x[0], x[1], x[2])", kTorchCausalAttention), sdpa(true, 0),
       heads},
      {fam, "scaled_dot_product_attention",
       "torch.softmax(x[0] @ x[1].transpose(-1, -2) / math.sqrt(x[0].shape[-1]), -1) @ x[2]",
       sdpa(false, 0), heads + Sweep{{f({2, 3, 4}), f({2, 5, 4}), f({2, 5, 2})}}},
      // attograd's dropout masks are its own: gradcheck only
      {fam, "scaled_dot_product_attention causal dropout 0.3", "", sdpa(true, 0.3), heads,
       Checks::gradcheck_only},
      {fam, "scaled_dot_product_attention dropout 0.3", "", sdpa(false, 0.3),
       Sweep{{f({1, 2, 4, 3}), f({1, 2, 5, 3}), f({1, 2, 5, 2})}}, Checks::gradcheck_only},
      // qkv [B, T, 3C] of 2 heads, split into q, k, v and each into heads [B, 2, T, C / 2]
      {fam, "causal_self_attention 2 heads",
       fmt::format("(lambda q, k, v: ({}).transpose(1, 2).flatten(2))(*[p.unflatten(-1, (2, -1))"
                   ".transpose(1, 2) for p in x[0].chunk(3, -1)])",
                   kTorchCausalAttention),
       packed(0), Sweep{{f({2, 4, 12})}, {f({1, 5, 6})}}},
      {fam, "causal_self_attention 2 heads dropout 0.3", "", packed(0.3), Sweep{{f({2, 4, 12})}},
       Checks::gradcheck_only},
  };
}

// Grouped-query attention over the packed projection, against Hugging Face's repeat_kv.
std::vector<Row> grouped_attention_rows() {
  const char* fam = "attention";
  auto grouped = [](int64_t kv_heads, double p) {
    return one([kv_heads, p](In x) {
      Generator g(5);
      return ag::causal_self_attention(x[0], 4, kv_heads, p, &g);
    });
  };
  auto grouped_torch = [](int64_t heads, int64_t kv_heads) {
    return fmt::format(
        "(lambda q, k, v: ({}).transpose(1, 2).flatten(2))(*(lambda D: (x[0][..., :{h} * D]"
        ".unflatten(-1, ({h}, D)).transpose(1, 2), x[0][..., {h} * D:{hk} * D].unflatten(-1, "
        "({kv}, D)).transpose(1, 2).repeat_interleave({g}, 1), x[0][..., {hk} * D:].unflatten("
        "-1, ({kv}, D)).transpose(1, 2).repeat_interleave({g}, 1)))(x[0].shape[-1] // {w}))",
        kTorchCausalAttention, fmt::arg("h", heads), fmt::arg("hk", heads + kv_heads),
        fmt::arg("kv", kv_heads), fmt::arg("g", heads / kv_heads),
        fmt::arg("w", heads + 2 * kv_heads));
  };
  return {
      // grouped: qkv [B, T, (4 + 2 KV) D], 4 query heads over KV = 2 or 1 key/value heads,
      // each repeated for its group as Hugging Face's repeat_kv does
      {fam, "causal_self_attention 4 heads 2 key/value heads", grouped_torch(4, 2), grouped(2, 0),
       Sweep{{f({2, 4, 16})}, {f({1, 5, 24})}}},
      {fam, "causal_self_attention 4 heads 1 key/value head", grouped_torch(4, 1), grouped(1, 0),
       Sweep{{f({2, 4, 12})}, {f({1, 66, 6})}}},
      {fam, "causal_self_attention 4 heads 2 key/value heads dropout 0.3", "", grouped(2, 0.3),
       Sweep{{f({2, 4, 16})}}, Checks::gradcheck_only},
  };
}

// RoPE over x [B, T, 16]: 3 heads of 4 columns turned, the last 4 passed through, by the
// angles (t + 1) 0.3 / (i + 1) (any table will do: the op reads it, never its origin).
std::vector<Row> rope_rows() {
  auto table = [](bool sine) {
    Tensor t = empty({8, 2}, DType::Float64);
    for (int64_t p = 0; p < 8; ++p)
      for (int64_t i = 0; i < 2; ++i) {
        const double angle = (p + 1) * 0.3 / (i + 1);
        t.data<double>()[p * 2 + i] = sine ? std::sin(angle) : std::cos(angle);
      }
    return t;
  };
  const char* torch_rope =
      "(lambda x, ang: (lambda h, c, s: torch.cat([torch.cat([h[..., :2] * c - h[..., 2:] * s, "
      "h[..., 2:] * c + h[..., :2] * s], -1).flatten(-2), x[..., 12:]], -1))("
      "x[..., :12].unflatten(-1, (3, 4)), ang.cos()[:, None, :], ang.sin()[:, None, :]))("
      "x[0], ((torch.arange(x[0].shape[1], dtype=x[0].dtype)[:, None] + 1) * 0.3 / "
      "(torch.arange(2, dtype=x[0].dtype)[None, :] + 1)))";
  return {{"layers", "rope 3 of 4 heads", torch_rope,
           one([cos = table(false), sin = table(true)](In x) {
             return ag::rope(x[0], cos, sin, 3, 4);
           }),
           in_layouts({f({2, 5, 16})}) + Sweep{{f({1, 8, 16})}}}};
}

// The attention of the chapter written with the primitive ops: projections, scores, mask.
std::vector<Row> composed_attention_rows() {
  return {{"attention", "attention composed from ops",
           "(lambda q, k, v: torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(2.0))"
           ".masked_fill(x[4], -inf), -1) @ v)(x[0] @ x[1], x[0] @ x[2], x[0] @ x[3])",
           one([](In x) {
             Tensor q = matmul(x[0], x[1]), k = matmul(x[0], x[2]), v = matmul(x[0], x[3]);
             Tensor scores = matmul(q, k.transpose(-1, -2)) / std::sqrt(2.0);
             return matmul(softmax(masked_fill(scores, x[4], -kInf), -1), v);
           }),
           Sweep{{f({2, 4, 3}), f({3, 2}), ft({3, 2}), fs({3, 2}), mask({4, 4}, causal())}}}};
}

}  // namespace

std::vector<Row> elementwise_rows() {
  return concat({arithmetic_rows(), scalar_rows()});
}

std::vector<Row> reduce_rows() {
  return concat({sum_mean_rows(), max_rows(), sum_to_rows()});
}

std::vector<Row> matmul_rows() {
  return concat({matmul_only_rows(), linear_rows()});
}

std::vector<Row> view_rows() {
  return concat(
      {transpose_like_rows(), reshape_like_rows(), squeeze_like_rows(), composed_view_rows()});
}

std::vector<Row> join_rows() {
  return concat({cat_stack_rows(), split_rows()});
}

std::vector<Row> softmax_rows() {
  return concat({masked_fill_rows(), plain_softmax_rows(), masked_softmax_rows(),
                 cross_entropy_rows(), linear_cross_entropy_rows()});
}

std::vector<Row> layer_rows() {
  return concat({embedding_rows(), layer_norm_rows(), rms_norm_rows(), rope_rows(), dropout_rows(),
                 checkpoint_rows()});
}

std::vector<Row> attention_rows() {
  return concat({attention_only_rows(), grouped_attention_rows(), composed_attention_rows()});
}

}  // namespace ag::op_table
