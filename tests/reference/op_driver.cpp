// Runs attograd ops on the cases that compare_with_torch.py writes, and writes back each
// op's outputs and the gradient of sum(output * upstream) for every float input, once in
// float64 and once in float32, so the script can hold them against PyTorch.
//
//   attograd_op_driver CASES RESULTS
//
// Both files are whitespace-separated text, one record a line. A tensor is written
// "<rank> <dims...> <values...>", values as %.17g (inf, -inf and nan included).
//
// CASES, per case:
//   case <id> <op>
//   iargs <n> <ints...>           dims, sizes, flags: their meaning is per op, see ops()
//   fargs <n> <doubles...>
//   input <kind> <tensor>         kind: f  float leaf;  ft  float leaf passed to the op as
//                                 leaf.transpose(-1, -2);  fs  float leaf passed as
//                                 leaf.narrow(-1, 1, size - 2), a view with an offset;
//                                 i  int64;  b  bool;  none  (no tensor; <tensor> omitted)
//   upstream <tensor>             one per float output
//   end
// RESULTS, per case and dtype:
//   case <id> <float64|float32>
//   out <tensor>                  one per output
//   grad <tensor> | grad none     one per f/ft/fs input, w.r.t. the leaf, in input order
//   error <message>               instead of out/grad when the op threw
//   end
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/autograd.h"

namespace {

using Outs = std::vector<ag::Tensor>;

struct RawTensor {
  ag::Shape shape;
  std::vector<double> values;
};

struct Input {
  std::string kind;
  RawTensor data;
};

struct Case {
  std::string id, op;
  std::vector<int64_t> iargs;
  std::vector<double> fargs;
  std::vector<Input> inputs;
  std::vector<RawTensor> upstream;
};

struct Args {
  const std::vector<ag::Tensor>& in;  // as the op sees them: ft, fs already viewed
  const std::vector<int64_t>& i;
  const std::vector<double>& f;
  ag::Shape i_from(size_t k) const { return {i.begin() + static_cast<ptrdiff_t>(k), i.end()}; }
};

using OpFn = std::function<Outs(const Args&)>;

// The ops under test, by the names compare_with_torch.py uses.
const std::map<std::string, OpFn>& ops() {
  static const std::map<std::string, OpFn> table = {
      {"add", [](const Args& a) { return Outs{ag::add(a.in[0], a.in[1])}; }},
      {"sub", [](const Args& a) { return Outs{ag::sub(a.in[0], a.in[1])}; }},
      {"mul", [](const Args& a) { return Outs{ag::mul(a.in[0], a.in[1])}; }},
      {"div", [](const Args& a) { return Outs{ag::div(a.in[0], a.in[1])}; }},
      {"add_scalar", [](const Args& a) { return Outs{ag::add(a.in[0], a.f[0])}; }},
      {"sub_scalar", [](const Args& a) { return Outs{a.in[0] - a.f[0]}; }},
      {"mul_scalar", [](const Args& a) { return Outs{ag::mul(a.in[0], a.f[0])}; }},
      {"rmul_scalar", [](const Args& a) { return Outs{a.f[0] * a.in[0]}; }},
      {"div_scalar", [](const Args& a) { return Outs{a.in[0] / a.f[0]}; }},
      {"pow", [](const Args& a) { return Outs{ag::pow(a.in[0], a.in[1])}; }},
      {"pow_scalar", [](const Args& a) { return Outs{ag::pow(a.in[0], a.f[0])}; }},
      {"neg", [](const Args& a) { return Outs{ag::neg(a.in[0])}; }},
      {"exp", [](const Args& a) { return Outs{ag::exp(a.in[0])}; }},
      {"log", [](const Args& a) { return Outs{ag::log(a.in[0])}; }},
      {"sqrt", [](const Args& a) { return Outs{ag::sqrt(a.in[0])}; }},
      {"tanh", [](const Args& a) { return Outs{ag::tanh(a.in[0])}; }},
      {"relu", [](const Args& a) { return Outs{ag::relu(a.in[0])}; }},
      {"gelu", [](const Args& a) { return Outs{ag::gelu(a.in[0])}; }},
      // iargs: keepdim, dims... (no dims: every dim)
      {"sum", [](const Args& a) { return Outs{ag::sum(a.in[0], a.i_from(1), a.i[0] != 0)}; }},
      {"mean", [](const Args& a) { return Outs{ag::mean(a.in[0], a.i_from(1), a.i[0] != 0)}; }},
      {"max_all", [](const Args& a) { return Outs{ag::max(a.in[0])}; }},
      // iargs: dim, keepdim
      {"max_dim", [](const Args& a) { return Outs{ag::max(a.in[0], a.i[0], a.i[1] != 0)}; }},
      {"argmax", [](const Args& a) { return Outs{ag::argmax(a.in[0], a.i[0], a.i[1] != 0)}; }},
      {"sum_to", [](const Args& a) { return Outs{ag::sum_to(a.in[0], a.i)}; }},
      {"matmul", [](const Args& a) { return Outs{ag::matmul(a.in[0], a.in[1])}; }},
      {"transpose", [](const Args& a) { return Outs{a.in[0].transpose(a.i[0], a.i[1])}; }},
      {"permute", [](const Args& a) { return Outs{a.in[0].permute(a.i)}; }},
      {"reshape", [](const Args& a) { return Outs{a.in[0].reshape(a.i)}; }},
      {"view", [](const Args& a) { return Outs{a.in[0].view(a.i)}; }},
      {"narrow", [](const Args& a) { return Outs{a.in[0].narrow(a.i[0], a.i[1], a.i[2])}; }},
      {"select", [](const Args& a) { return Outs{a.in[0].select(a.i[0], a.i[1])}; }},
      {"expand", [](const Args& a) { return Outs{a.in[0].expand(a.i)}; }},
      {"unsqueeze", [](const Args& a) { return Outs{a.in[0].unsqueeze(a.i[0])}; }},
      {"squeeze", [](const Args& a) { return Outs{a.in[0].squeeze(a.i[0])}; }},
      {"contiguous", [](const Args& a) { return Outs{a.in[0].contiguous()}; }},
      {"clone", [](const Args& a) { return Outs{a.in[0].clone()}; }},
      // iargs: dim
      {"cat", [](const Args& a) { return Outs{ag::cat(a.in, a.i[0])}; }},
      {"stack", [](const Args& a) { return Outs{ag::stack(a.in, a.i[0])}; }},
      // iargs: dim, split_size  |  dim, sizes...
      {"split", [](const Args& a) { return ag::split(a.in[0], a.i[1], a.i[0]); }},
      {"split_sizes", [](const Args& a) { return ag::split(a.in[0], a.i_from(1), a.i[0]); }},
      // inputs: a, mask; fargs: value
      {"masked_fill",
       [](const Args& a) { return Outs{ag::masked_fill(a.in[0], a.in[1], a.f[0])}; }},
      // iargs: dim
      {"softmax", [](const Args& a) { return Outs{ag::softmax(a.in[0], a.i[0])}; }},
      {"log_softmax", [](const Args& a) { return Outs{ag::log_softmax(a.in[0], a.i[0])}; }},
      // inputs: a, mask; iargs: dim. Masked entries become -inf before the softmax.
      {"masked_softmax",
       [](const Args& a) {
         return Outs{ag::softmax(ag::masked_fill(a.in[0], a.in[1], -ag::kInf), a.i[0])};
       }},
      {"masked_log_softmax",
       [](const Args& a) {
         return Outs{ag::log_softmax(ag::masked_fill(a.in[0], a.in[1], -ag::kInf), a.i[0])};
       }},
      // inputs: logits, targets; iargs: ignore_index
      {"cross_entropy",
       [](const Args& a) { return Outs{ag::cross_entropy(a.in[0], a.in[1], a.i[0])}; }},
      // inputs: weight, ids
      {"embedding", [](const Args& a) { return Outs{ag::embedding(a.in[0], a.in[1])}; }},
      // inputs: x, weight|none, bias|none; fargs: eps
      {"layer_norm",
       [](const Args& a) { return Outs{ag::layer_norm(a.in[0], a.in[1], a.in[2], a.f[0])}; }},
  };
  return table;
}

// ---------------------------------------------------------------- reading cases

class Tokens {
 public:
  explicit Tokens(std::istream& in) : in_(in) {}
  bool next(std::string& tok) { return static_cast<bool>(in_ >> tok); }
  std::string word() {
    std::string tok;
    if (!next(tok)) throw std::runtime_error("cases file: unexpected end");
    return tok;
  }
  // strtod, unlike operator>>, reads "inf", "-inf" and "nan".
  double number() {
    std::string tok = word();
    char* end = nullptr;
    double v = std::strtod(tok.c_str(), &end);
    if (end != tok.c_str() + tok.size())
      throw std::runtime_error("cases file: not a number: " + tok);
    return v;
  }
  int64_t integer() { return static_cast<int64_t>(number()); }
  RawTensor tensor() {
    RawTensor t;
    int64_t rank = integer();
    for (int64_t d = 0; d < rank; ++d) t.shape.push_back(integer());
    int64_t n = ag::shape_numel(t.shape);
    t.values.reserve(n);
    for (int64_t k = 0; k < n; ++k) t.values.push_back(number());
    return t;
  }

 private:
  std::istream& in_;
};

std::vector<Case> read_cases(std::istream& in) {
  Tokens tok(in);
  std::vector<Case> cases;
  std::string w;
  while (tok.next(w)) {
    if (w != "case") throw std::runtime_error("cases file: expected 'case', got " + w);
    Case c;
    c.id = tok.word();
    c.op = tok.word();
    for (std::string field = tok.word(); field != "end"; field = tok.word()) {
      if (field == "iargs") {
        for (int64_t n = tok.integer(); n > 0; --n) c.iargs.push_back(tok.integer());
      } else if (field == "fargs") {
        for (int64_t n = tok.integer(); n > 0; --n) c.fargs.push_back(tok.number());
      } else if (field == "input") {
        Input input{tok.word(), {}};
        if (input.kind != "none") input.data = tok.tensor();
        c.inputs.push_back(std::move(input));
      } else if (field == "upstream") {
        c.upstream.push_back(tok.tensor());
      } else {
        throw std::runtime_error("cases file: unknown field " + field + " in case " + c.id);
      }
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

// ---------------------------------------------------------------- running one case

bool is_float_input(const Input& in) {
  return in.kind == "f" || in.kind == "ft" || in.kind == "fs";
}

// The non-contiguous views the op sees of its leaves, so strided kernels get tested too.
ag::Tensor as_op_input(const ag::Tensor& leaf, const std::string& kind) {
  if (kind == "ft") return leaf.transpose(-1, -2);
  if (kind == "fs") return leaf.narrow(-1, 1, leaf.size(-1) - 2);
  return leaf;
}

ag::Tensor make_tensor(const Input& in, ag::DType float_dtype) {
  if (in.kind == "none") return {};
  if (in.kind == "i")
    return ag::from_vector(std::vector<int64_t>(in.data.values.begin(), in.data.values.end()),
                           in.data.shape);
  if (in.kind == "b") return ag::from_vector(in.data.values, in.data.shape, ag::DType::Bool);
  if (is_float_input(in)) return ag::from_vector(in.data.values, in.data.shape, float_dtype);
  throw std::runtime_error("cases file: unknown input kind " + in.kind);
}

void write_tensor(std::ostream& out, const ag::Tensor& t) {
  out << t.dim();
  for (int64_t s : t.shape()) out << ' ' << s;
  char buf[32];
  for (double v : t.to_vector()) {
    std::snprintf(buf, sizeof buf, " %.17g", v);
    out << buf;
  }
}

void run_case(const Case& c, ag::DType dtype, std::ostream& out) {
  out << "case " << c.id << ' ' << ag::dtype_name(dtype) << '\n';
  try {
    auto op = ops().find(c.op);
    if (op == ops().end()) throw std::runtime_error("unknown op " + c.op);

    std::vector<ag::Tensor> leaves, op_inputs;
    for (const Input& in : c.inputs) {
      ag::Tensor t = make_tensor(in, dtype);
      if (is_float_input(in)) t.requires_grad_();
      leaves.push_back(t);
      op_inputs.push_back(as_op_input(t, in.kind));
    }
    Outs outs = op->second(Args{op_inputs, c.iargs, c.fargs});

    // One backward per output, accumulating into the leaves, checks that accumulation
    // too; every output but the last keeps the graph it shares with the others.
    for (size_t k = 0; k < c.upstream.size(); ++k) {
      if (k >= outs.size()) throw std::runtime_error("more upstream gradients than outputs");
      const RawTensor& up = c.upstream[k];
      outs[k].backward(ag::from_vector(up.values, up.shape, dtype),
                       /*retain_graph=*/k + 1 < c.upstream.size());
    }

    std::ostringstream body;  // so that a throw midway leaves only the error line
    for (const ag::Tensor& o : outs) {
      body << "out ";
      write_tensor(body, o);
      body << '\n';
    }
    for (size_t k = 0; k < leaves.size(); ++k) {
      if (!is_float_input(c.inputs[k])) continue;
      ag::Tensor g = leaves[k].grad();
      body << "grad ";
      if (g.defined())
        write_tensor(body, g);
      else
        body << "none";
      body << '\n';
    }
    out << body.str();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (char& ch : msg)
      if (ch == '\n') ch = ' ';
    out << "error " << msg << '\n';
  }
  out << "end\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " CASES RESULTS\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    if (!in) throw std::runtime_error(std::string("cannot read ") + argv[1]);
    std::vector<Case> cases = read_cases(in);
    std::ofstream out(argv[2]);
    if (!out) throw std::runtime_error(std::string("cannot write ") + argv[2]);
    for (const Case& c : cases)
      for (ag::DType dtype : {ag::DType::Float64, ag::DType::Float32}) run_case(c, dtype, out);
    if (!out.flush()) throw std::runtime_error(std::string("writing ") + argv[2] + " failed");
  } catch (const std::exception& e) {
    std::cerr << "attograd_op_driver: " << e.what() << '\n';
    return 2;
  }
  return 0;
}
