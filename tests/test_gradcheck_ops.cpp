// Every case of the op table (autograd/op_cases.h) passes a float64 gradcheck at the
// tolerances the table states: one TEST_CASE per family, one section per case, named by
// the case (shapes, layouts, masks). Checks that are more than a gradcheck stay below as
// tests of their own.
#include <algorithm>

#include "autograd/op_cases.h"
#include "gradcheck_helpers.h"

// this file's own namespace keeps the directive from the files after it in a unity batch
namespace gradcheck_ops_test {
using namespace ag_test;
using In = const std::vector<Tensor>&;

namespace {

// The families with a TEST_CASE here; a family the table gains must be added.
const std::vector<std::string> kFamilies = {"elementwise", "reduce",  "matmul", "views",
                                            "join",        "softmax", "layers", "attention"};

void gradcheck_family(const std::string& family) {
  int cases = 0;
  for (const ag::OpCase& c : ag::op_cases()) {
    if (c.family != family || !c.gradcheck()) continue;
    ++cases;
    DYNAMIC_SECTION(c.name) {
      ag::GradcheckResult r = ag::gradcheck_case(c);
      INFO(r.message);
      REQUIRE(r.ok);
    }
  }
  REQUIRE(cases > 0);
}

Layout any_layout() {
  return GENERATE(Layout::contiguous, Layout::transposed, Layout::sliced);
}

const ag::OpCase& find_case(const std::string& name) {
  const auto& table = ag::op_cases();
  auto it =
      std::find_if(table.begin(), table.end(), [&](const ag::OpCase& c) { return c.name == name; });
  if (it == table.end()) throw std::logic_error("no op case named " + name);
  return *it;
}

}  // namespace

TEST_CASE("gradcheck every elementwise op case", "[gradcheck][elementwise]") {
  gradcheck_family("elementwise");
}

TEST_CASE("gradcheck every reduction op case", "[gradcheck][reduce]") {
  gradcheck_family("reduce");
}

TEST_CASE("gradcheck every matmul and linear op case", "[gradcheck][matmul][linear]") {
  gradcheck_family("matmul");
}

TEST_CASE("gradcheck every view op case", "[gradcheck][views]") {
  gradcheck_family("views");
}

TEST_CASE("gradcheck every join and split op case", "[gradcheck][join]") {
  gradcheck_family("join");
}

TEST_CASE("gradcheck every masking softmax and cross_entropy op case", "[gradcheck][softmax]") {
  gradcheck_family("softmax");
}

TEST_CASE("gradcheck every embedding layer_norm and dropout op case",
          "[gradcheck][embedding][layer_norm][dropout]") {
  gradcheck_family("layers");
}

TEST_CASE("gradcheck every attention op case", "[gradcheck][attention]") {
  gradcheck_family("attention");
}

TEST_CASE("every op case is in a family checked here and builds in both dtypes",
          "[gradcheck][op_table]") {
  for (const std::string& family : ag::op_case_families()) {
    CAPTURE(family);
    REQUIRE(std::find(kFamilies.begin(), kFamilies.end(), family) != kFamilies.end());
  }
  for (const ag::OpCase& c : ag::op_cases()) {
    CAPTURE(c.name);
    REQUIRE(c.torch_check() == !c.torch.empty());
    REQUIRE(ag::case_inputs(c, DType::Float64).size() == c.inputs.size());
    REQUIRE(ag::case_inputs(c, DType::Float32).size() == c.inputs.size());
  }
}

// A green table means something only if a wrong backward turns it red: the mul case,
// its backward for the first operand 1% off.
TEST_CASE("an op case whose backward is wrong fails its gradcheck", "[gradcheck][op_table]") {
  ag::OpCase c = find_case("mul 3x4 3x4");
  REQUIRE(ag::gradcheck_case(c).ok);
  c.fn = [](In x) {
    Tensor out;
    {
      ag::NoGradGuard ng;
      out = ag::mul(x[0], x[1]);
    }
    ag::attach_backward(out, "MulBackwardOnePercentOff", {x[0], x[1]},
                        [a = x[0].detach(), b = x[1].detach()](const Tensor& g) {
                          return std::vector<Tensor>{ag::mul(g, b) * 1.01, ag::mul(g, a)};
                        });
    return std::vector<Tensor>{out};
  };
  ag::GradcheckResult r = ag::gradcheck_case(c);
  INFO(r.message);
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.input == 0);
}

// ------------------------------------------------------------------ more than a gradcheck
TEST_CASE("gradcheck masked_fill gives zero gradient at masked positions", "[gradcheck][softmax]") {
  ag::Generator gen(29);
  Tensor a = randn_leaf({2, 4, 4}, gen, any_layout());
  Tensor mask = ag::triu_mask(4, 4);
  REQUIRE_GRADCHECK([mask](In x) { return ag::masked_fill(x[0], mask, 7.0) * x[0]; },
                    (std::vector<Tensor>{a}));
  a.zero_grad();
  ag::sum(ag::masked_fill(a, mask, 0.0) * 3.0).backward();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) REQUIRE(a.grad().at({1, i, j}) == (j > i ? 0.0 : 3.0));
}

TEST_CASE("linear equals matmul plus bias and gelu composed", "[linear]") {
  ag::Generator gen(42);
  Tensor x = ag::randn({3, 7, 6}, gen, DType::Float64), w = ag::randn({4, 6}, gen, DType::Float64),
         b = ag::randn({4}, gen, DType::Float64);
  Tensor fused = ag::linear(x, w, b, ag::Activation::Gelu);
  Tensor composed = ag::gelu(ag::matmul(x, w.t()) + b);
  REQUIRE(fused.shape() == composed.shape());
  auto f = fused.to_vector(), c = composed.to_vector();
  for (size_t i = 0; i < f.size(); ++i) REQUIRE_THAT(f[i], Catch::Matchers::WithinAbs(c[i], 1e-12));
  REQUIRE_THROWS_WITH(ag::linear(x, ag::zeros({4, 5}, DType::Float64)),
                      Catch::Matchers::Contains("[4, 5]"));
}

}  // namespace gradcheck_ops_test
