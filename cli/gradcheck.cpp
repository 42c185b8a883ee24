// `attograd gradcheck`: float64 central-difference checks of every differentiable op and
// layer, run from the binary, one table row per check. The Catch2 suite checks the same
// ops over more shapes and layouts; this is the quick proof a user can run anywhere.
#include <fmt/format.h>

#include <cmath>
#include <functional>

#include "autograd/autograd.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "nn/nn.h"

namespace cli {

namespace {

using ag::Tensor;
using In = const std::vector<Tensor>&;

struct Case {
  const char* name;
  std::function<std::vector<Tensor>(ag::Generator&)> inputs;
  ag::TensorFn fn;
};

Tensor leaf(const ag::Shape& s, ag::Generator& g) {
  return ag::randn(s, g, ag::DType::Float64).requires_grad_();
}
Tensor positive_leaf(const ag::Shape& s, ag::Generator& g) {
  return ag::uniform(s, 0.5, 2.0, g, ag::DType::Float64).requires_grad_();
}
// |x| in [0.2, 2]: away from relu's kink
Tensor away_from_zero(const ag::Shape& s, ag::Generator& g) {
  Tensor m = ag::uniform(s, 0.2, 2.0, g, ag::DType::Float64);
  Tensor sign = ag::uniform(s, -1, 1, g, ag::DType::Float64);
  std::vector<double> v = m.to_vector(), sg = sign.to_vector();
  for (size_t i = 0; i < v.size(); ++i) v[i] *= sg[i] < 0 ? -1 : 1;
  return ag::from_vector(v, s, ag::DType::Float64).requires_grad_();
}

std::vector<Case> cases() {
  auto two = [](ag::Shape a, ag::Shape b) {
    return [a, b](ag::Generator& g) { return std::vector<Tensor>{leaf(a, g), leaf(b, g)}; };
  };
  auto one = [](ag::Shape a) {
    return [a](ag::Generator& g) { return std::vector<Tensor>{leaf(a, g)}; };
  };
  Tensor mask = ag::triu_mask(4, 4, 1);
  Tensor targets = ag::from_vector(std::vector<int64_t>{0, 4, -100, 2, 1, 3}, {2, 3});
  Tensor ids = ag::from_vector(std::vector<int64_t>{1, 3, 1, 0}, {4});
  return {
      {"add (broadcast)", two({2, 3, 4}, {3, 1}), [](In x) { return x[0] + x[1]; }},
      {"sub (broadcast)", two({3, 4}, {4}), [](In x) { return x[0] - x[1]; }},
      {"mul (broadcast)", two({3, 4}, {1, 4}), [](In x) { return x[0] * x[1]; }},
      {"div (broadcast)",
       [](ag::Generator& g) {
         return std::vector<Tensor>{leaf({3, 4}, g), positive_leaf({3, 1}, g)};
       },
       [](In x) { return x[0] / x[1]; }},
      {"neg", one({3, 4}), [](In x) { return -x[0]; }},
      {"exp", one({3, 4}), [](In x) { return ag::exp(x[0]); }},
      {"log",
       [](ag::Generator& g) {
         return std::vector<Tensor>{positive_leaf({3, 4}, g)};
       },
       [](In x) { return ag::log(x[0]); }},
      {"sqrt",
       [](ag::Generator& g) {
         return std::vector<Tensor>{positive_leaf({3, 4}, g)};
       },
       [](In x) { return ag::sqrt(x[0]); }},
      {"pow (scalar exponent)",
       [](ag::Generator& g) {
         return std::vector<Tensor>{positive_leaf({3, 4}, g)};
       },
       [](In x) { return ag::pow(x[0], 1.7); }},
      {"pow (tensor exponent)",
       [](ag::Generator& g) {
         return std::vector<Tensor>{positive_leaf({3, 4}, g), leaf({4}, g)};
       },
       [](In x) { return ag::pow(x[0], x[1]); }},
      {"tanh", one({3, 4}), [](In x) { return ag::tanh(x[0]); }},
      {"relu (away from 0)",
       [](ag::Generator& g) {
         return std::vector<Tensor>{away_from_zero({3, 4}, g)};
       },
       [](In x) { return ag::relu(x[0]); }},
      {"gelu", one({3, 4}), [](In x) { return ag::gelu(x[0]); }},
      {"sum over dims", one({2, 3, 4}),
       [](In x) {
         return ag::sum(x[0], {0, 2}, true);
       }},
      {"mean over dims", one({2, 3, 4}), [](In x) { return ag::mean(x[0], {1}); }},
      {"max over a dim", one({3, 5}), [](In x) { return ag::max(x[0], 1); }},
      {"matmul (batched)", two({2, 3, 4}, {4, 5}), [](In x) { return ag::matmul(x[0], x[1]); }},
      {"matmul (transposed operand)", two({2, 5, 3}, {2, 5, 3}),
       [](In x) { return ag::matmul(x[0], x[1].transpose(-1, -2)); }},
      {"transpose and permute", one({2, 3, 4}),
       [](In x) {
         return x[0].permute({2, 0, 1}) * 2.0;
       }},
      {"reshape and narrow", one({4, 6}),
       [](In x) {
         return x[0].reshape({3, 8}).narrow(1, 2, 4) * 3.0;
       }},
      {"expand", two({3, 1}, {3, 4}),
       [](In x) {
         return x[0].expand({3, 4}) * x[1];
       }},
      {"cat", two({2, 3}, {1, 3}),
       [](In x) {
         return ag::cat({x[0], x[1]}, 0) * 2.0;
       }},
      {"split and stack", one({4, 3}),
       [](In x) {
         auto p = ag::split(x[0], 2, 0);
         return ag::stack({p[0], p[1] * p[1]}, 0);
       }},
      {"masked_fill", one({2, 4, 4}),
       [mask](In x) { return ag::masked_fill(x[0], mask, 5.0) * x[0]; }},
      {"softmax (causally masked)", one({2, 4, 4}),
       [mask](In x) { return ag::softmax(ag::masked_fill(x[0], mask, -ag::kInf), -1); }},
      {"log_softmax", one({3, 5}), [](In x) { return ag::log_softmax(x[0], 0); }},
      {"cross_entropy (ignore_index)", one({2, 3, 5}),
       [targets](In x) { return ag::cross_entropy(x[0], targets); }},
      {"embedding (repeated ids)", one({5, 3}),
       [ids](In x) { return ag::embedding(x[0], ids) * 1.5; }},
      {"layer_norm",
       [](ag::Generator& g) {
         return std::vector<Tensor>{leaf({3, 6}, g), leaf({6}, g), leaf({6}, g)};
       },
       [](In x) { return ag::layer_norm(x[0], x[1], x[2]); }},
      {"dropout (fixed mask)", one({4, 5}),
       [](In x) {
         ag::Generator g(3);
         return ag::dropout(x[0], 0.4, true, g) * x[0];
       }},
      {"scaled_dot_product_attention",
       [](ag::Generator& g) {
         return std::vector<Tensor>{leaf({1, 2, 4, 3}, g), leaf({1, 2, 4, 3}, g),
                                    leaf({1, 2, 4, 3}, g)};
       },
       [](In x) {
         ag::Generator g(5);
         return ag::scaled_dot_product_attention(x[0], x[1], x[2], true, 0.3, &g);
       }},
      {"causal_self_attention (qkv)", one({2, 4, 12}),
       [](In x) {
         ag::Generator g(5);
         return ag::causal_self_attention(x[0], 2, 0.3, &g);
       }},
      {"linear (bias)",
       [](ag::Generator& g) {
         return std::vector<Tensor>{leaf({2, 3, 4}, g), leaf({5, 4}, g), leaf({5}, g)};
       },
       [](In x) { return ag::linear(x[0], x[1], x[2]); }},
      {"linear + gelu (fused)",
       [](ag::Generator& g) {
         return std::vector<Tensor>{leaf({2, 3, 4}, g), leaf({5, 4}, g), leaf({5}, g)};
       },
       [](In x) { return ag::linear(x[0], x[1], x[2], ag::Activation::Gelu); }},
  };
}

}  // namespace

int gradcheck_command(const Args& args) {
  double eps = 1e-6, atol = 1e-8, rtol = 1e-6;
  po::options_description desc("gradcheck options");
  desc.add_options()("help,h", "show this help")("eps", po::value(&eps)->default_value(1e-6),
                                                 "central difference step")(
      "atol", po::value(&atol)->default_value(1e-8), "absolute tolerance")(
      "rtol", po::value(&rtol)->default_value(1e-6), "relative tolerance");
  try {
    auto vm = parse_options(args, desc);
    if (vm.count("help")) {
      fmt::print("usage: attograd gradcheck [--eps E --atol A --rtol R]\n");
      return 0;
    }
    if (!(eps > 0) || !(atol >= 0) || !(rtol >= 0))
      throw UsageError("--eps must be positive and --atol, --rtol non-negative");
  } catch (const UsageError& e) {
    fmt::print(stderr, "attograd gradcheck: error: {}\n", e.what());
    return 2;
  }
  ag::GradcheckOptions opt;
  opt.eps = eps;
  opt.atol = atol;
  opt.rtol = rtol;
  fmt::print(
      "float64 central differences, eps {:g}; pass when |analytic - numeric| <= {:g} + {:g} "
      "|numeric|\n\n",
      eps, atol, rtol);
  fmt::print("{:<32} {:>9} {:>12} {:>6}\n", "op", "entries", "max error", "");
  int failed = 0;
  ag::Generator gen(2024);
  for (const auto& c : cases()) {
    auto result = ag::gradcheck(c.fn, c.inputs(gen), opt);
    fmt::print("{:<32} {:>9} {:>12.2e} {:>6}\n", c.name, result.checked, result.error,
               result.ok ? "ok" : "FAIL");
    if (!result.ok) {
      fmt::print("    {}\n", result.message);
      ++failed;
    }
  }
  fmt::print("\n{} passed, {} failed\n", cases().size() - failed, failed);
  return failed ? 1 : 0;
}

}  // namespace cli
