// Runs every op case of the table (autograd/op_cases.h) that PyTorch checks, in float64
// and in float32, and writes all that compare_with_torch.py needs to repeat it in PyTorch
// with no code of its own per op: each case's PyTorch expression and tolerances, its
// inputs, the upstream gradients, and attograd's outputs and gradients.
//
//   attograd_op_driver RESULTS
//
// RESULTS is text, one record a line. A tensor is written "<rank> <dims...> <values...>",
// values as %.17g (inf, -inf and nan included). Per case:
//   case <name>                   the rest of the line is the case's name
//   row <op and arguments>        the rest of the line
//   torch <expression>            the rest of the line: Python over x[0], x[1], ...
//   tolerance <torch_atol> <torch_rtol> <f32_atol> <f32_rtol>
//   input f|i|b <tensor>          one per input, in order: float, int64, bool, row-major
//   input none                    an absent optional input (None in Python)
//   upstream <tensor>             one per float output, drawn from the case's generator
// then for float64 and for float32:
//   dtype <float64|float32>
//   out <tensor>                  one per output
//   grad <tensor> | grad none     one per float input: the gradient of
//                                 sum(output_k * upstream_k), one backward per output
//   error <message>               instead of out/grad when the op threw
// and
//   end
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/op_cases.h"

namespace {

using ag::Tensor;

void write_tensor(std::ostream& out, const ag::Shape& shape, const std::vector<double>& values) {
  out << shape.size();
  for (int64_t s : shape) out << ' ' << s;
  char buf[32];
  for (double v : values) {
    std::snprintf(buf, sizeof buf, " %.17g", v);
    out << buf;
  }
}

void write_tensor(std::ostream& out, const Tensor& t) {
  write_tensor(out, t.shape(), t.to_vector());
}

const char* kind_word(ag::InputKind kind) {
  switch (kind) {
    case ag::InputKind::floating: return "f";
    case ag::InputKind::int64: return "i";
    case ag::InputKind::boolean: return "b";
    case ag::InputKind::none: return "none";
  }
  return "?";
}

// Random upstream gradients for the float outputs, the same for both dtypes.
std::vector<Tensor> draw_upstream(const ag::OpCase& c, const std::vector<Tensor>& outs) {
  ag::Generator gen(ag::case_seed(c.name) ^ 0x9e3779b97f4a7c15ULL);
  std::vector<Tensor> upstream;
  for (const Tensor& o : outs)
    if (ag::is_floating(o.dtype()))
      upstream.push_back(ag::randn(o.shape(), gen, ag::DType::Float64));
  return upstream;
}

// The case forward and backward in one dtype; draws the upstream gradients on its first
// run. One backward per float output accumulates into the leaves, which checks that too;
// every output but the last keeps the graph it shares with the others.
std::string run(const ag::OpCase& c, ag::DType dtype, std::vector<Tensor>& upstream) {
  std::ostringstream body;  // so that a throw midway leaves only the error line
  try {
    std::vector<Tensor> inputs = ag::case_inputs(c, dtype);
    std::vector<Tensor> outs = c.fn(inputs);
    if (dtype == ag::DType::Float64) upstream = draw_upstream(c, outs);
    size_t k = 0;
    for (const Tensor& o : outs) {
      if (!ag::is_floating(o.dtype())) continue;
      if (k >= upstream.size()) throw std::runtime_error("more float outputs than in float64");
      o.backward(upstream[k].to(o.dtype()), /*retain_graph=*/k + 1 < upstream.size());
      ++k;
    }
    for (const Tensor& o : outs) {
      body << "out ";
      write_tensor(body, o);
      body << '\n';
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (c.inputs[i].kind != ag::InputKind::floating) continue;
      Tensor g = inputs[i].grad();
      body << "grad ";
      if (g.defined())
        write_tensor(body, g);
      else
        body << "none";
      body << '\n';
    }
    return body.str();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (char& ch : msg)
      if (ch == '\n') ch = ' ';
    return "error " + msg + "\n";
  }
}

void write_case(const ag::OpCase& c, std::ostream& out) {
  std::vector<Tensor> upstream;
  const std::string f64 = run(c, ag::DType::Float64, upstream);
  const std::string f32 = run(c, ag::DType::Float32, upstream);
  const ag::Tolerance& t = c.tolerance;
  out << "case " << c.name << "\nrow " << c.row << "\ntorch " << c.torch << '\n';
  char buf[128];
  std::snprintf(buf, sizeof buf, "tolerance %.17g %.17g %.17g %.17g\n", t.torch_atol, t.torch_rtol,
                t.f32_atol, t.f32_rtol);
  out << buf;
  std::vector<std::vector<double>> values = ag::case_input_values(c);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    out << "input " << kind_word(c.inputs[i].kind);
    if (c.inputs[i].kind != ag::InputKind::none) {
      out << ' ';
      write_tensor(out, c.inputs[i].shape, values[i]);
    }
    out << '\n';
  }
  for (const Tensor& u : upstream) {
    out << "upstream ";
    write_tensor(out, u);
    out << '\n';
  }
  out << "dtype float64\n" << f64 << "dtype float32\n" << f32 << "end\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " RESULTS\n";
    return 2;
  }
  try {
    std::ofstream out(argv[1]);
    if (!out) throw std::runtime_error(std::string("cannot write ") + argv[1]);
    for (const ag::OpCase& c : ag::op_cases())
      if (c.torch_check()) write_case(c, out);
    if (!out.flush()) throw std::runtime_error(std::string("writing ") + argv[1] + " failed");
  } catch (const std::exception& e) {
    std::cerr << "attograd_op_driver: " << e.what() << '\n';
    return 2;
  }
  return 0;
}
