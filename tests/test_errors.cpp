// Every bad input is rejected with a typed exception whose message names what is wrong:
// the shapes, dtypes, dims or values involved. Each check pins the exception type and the
// substrings a user needs to find the mistake, not the whole wording.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autograd.h"

using ag::DType;
using ag::Tensor;
using Catch::Matchers::Contains;

// ------------------------------------------------------------------ elementwise
TEST_CASE("add of unbroadcastable shapes names both shapes", "[errors][elementwise]") {
  Tensor a = ag::zeros({2, 3}), b = ag::zeros({4});
  REQUIRE_THROWS_AS(ag::add(a, b), std::invalid_argument);
  REQUIRE_THROWS_WITH(ag::add(a, b), Contains("add") && Contains("[2, 3]") && Contains("[4]"));
  // the operator form goes through the same check
  REQUIRE_THROWS_WITH(a + b, Contains("[2, 3]") && Contains("[4]"));
  REQUIRE_THROWS_WITH(ag::sub(b, a), Contains("sub") && Contains("[4]") && Contains("[2, 3]"));
}

TEST_CASE("mixing float32 and float64 names both dtypes", "[errors][elementwise]") {
  Tensor a = ag::zeros({2}), b = ag::zeros({2}, DType::Float64);
  REQUIRE_THROWS_AS(ag::mul(a, b), std::invalid_argument);
  REQUIRE_THROWS_WITH(ag::mul(a, b), Contains("mul") && Contains("float32") && Contains("float64"));
  REQUIRE_THROWS_WITH(ag::div(b, a), Contains("div") && Contains("float64") &&
                                         Contains("float32") && Contains(".to()"));
}

TEST_CASE("float-only ops reject int64 and bool tensors by dtype", "[errors][elementwise]") {
  Tensor i = ag::arange(3);
  REQUIRE_THROWS_AS(ag::exp(i), std::invalid_argument);
  REQUIRE_THROWS_WITH(ag::exp(i), Contains("exp") && Contains("int64"));
  REQUIRE_THROWS_WITH(ag::add(ag::ones({2}, DType::Bool), ag::ones({2}, DType::Bool)),
                      Contains("add") && Contains("bool"));
  REQUIRE_THROWS_WITH(ag::sum(i), Contains("sum") && Contains("int64"));
}

// ------------------------------------------------------------------ matmul
TEST_CASE("matmul of misaligned shapes names both shapes", "[errors][matmul]") {
  Tensor a = ag::zeros({2, 3}), b = ag::zeros({4, 5});
  REQUIRE_THROWS_AS(ag::matmul(a, b), std::invalid_argument);
  REQUIRE_THROWS_WITH(ag::matmul(a, b), Contains("matmul") && Contains("[2, 3]") &&
                                            Contains("[4, 5]") && Contains("3 vs 4"));

  SECTION("vector operands") {
    REQUIRE_THROWS_WITH(ag::matmul(ag::zeros({3}), ag::zeros({4})),
                        Contains("[3]") && Contains("[4]"));
  }
  SECTION("a 0-dim operand") {
    REQUIRE_THROWS_WITH(ag::matmul(ag::full({}, 1.0), a),
                        Contains("at least one dim") && Contains("[2, 3]"));
  }
  SECTION("unbroadcastable batch dims") {
    REQUIRE_THROWS_WITH(ag::matmul(ag::zeros({2, 2, 3}), ag::zeros({3, 3, 4})),
                        Contains("batch") && Contains("[2]") && Contains("[3]"));
  }
  SECTION("mixed dtypes") {
    REQUIRE_THROWS_WITH(ag::matmul(a, ag::zeros({3, 2}, DType::Float64)),
                        Contains("float32") && Contains("float64"));
  }
}

// ------------------------------------------------------------------ element access
TEST_CASE("out-of-range element access names the index and the shape", "[errors][access]") {
  Tensor x = ag::zeros({2, 3});
  SECTION("at") {
    REQUIRE_THROWS_AS(x.at({2, 0}), std::out_of_range);
    REQUIRE_THROWS_WITH(x.at({2, 0}),
                        Contains("[2, 0]") && Contains("[2, 3]") && Contains("dim 0"));
    REQUIRE_THROWS_WITH(x.at({0, -1}), Contains("[0, -1]") && Contains("dim 1"));
  }
  SECTION("at with the wrong number of indices") {
    REQUIRE_THROWS_AS(x.at({1}), std::out_of_range);
    REQUIRE_THROWS_WITH(x.at({1}), Contains("1 entries") && Contains("[2, 3]"));
  }
  SECTION("set") {
    REQUIRE_THROWS_AS(x.set({0, 3}, 1.0), std::out_of_range);
    REQUIRE_THROWS_WITH(x.set({0, 3}, 1.0), Contains("[0, 3]") && Contains("[2, 3]"));
    CHECK(x.to_vector() == std::vector<double>(6, 0.0));  // nothing was written
  }
  SECTION("set through a view checks the view's shape, not the base's") {
    Tensor row = x.select(0, 0);
    REQUIRE_THROWS_WITH(row.set({3}, 1.0), Contains("[3]") && Contains("out of range"));
  }
}

TEST_CASE("select and narrow past the end name the range and the shape", "[errors][view]") {
  Tensor x = ag::zeros({2, 3});
  SECTION("select") {
    REQUIRE_THROWS_AS(x.select(0, 2), std::out_of_range);
    REQUIRE_THROWS_WITH(x.select(0, 2),
                        Contains("select") && Contains("index 2") && Contains("[2, 3]"));
    REQUIRE_THROWS_WITH(x.select(1, -4), Contains("index -4") && Contains("dim 1"));
  }
  SECTION("narrow") {
    REQUIRE_THROWS_AS(x.narrow(1, 2, 2), std::out_of_range);
    REQUIRE_THROWS_WITH(x.narrow(1, 2, 2),
                        Contains("narrow") && Contains("[2, 4)") && Contains("[2, 3]"));
    REQUIRE_THROWS_AS(x.narrow(1, 0, -1), std::out_of_range);
    REQUIRE_THROWS_AS(x.narrow(0, -3, 1), std::out_of_range);
  }
}

TEST_CASE("a dim outside the tensor's rank names the dim and the rank", "[errors][view]") {
  Tensor x = ag::zeros({2, 3});
  REQUIRE_THROWS_AS(x.transpose(0, 5), std::out_of_range);
  REQUIRE_THROWS_WITH(x.transpose(0, 5),
                      Contains("transpose") && Contains("dim 5") && Contains("rank 2"));
  REQUIRE_THROWS_WITH(x.transpose(-3, 0), Contains("dim -3") && Contains("rank 2"));
  REQUIRE_THROWS_WITH(x.size(2), Contains("dim 2") && Contains("rank 2"));
  REQUIRE_THROWS_WITH(x.unsqueeze(4), Contains("unsqueeze") && Contains("dim 4"));
  REQUIRE_THROWS_WITH(x.squeeze(2), Contains("squeeze") && Contains("dim 2"));
  REQUIRE_THROWS_WITH(ag::softmax(x, 2), Contains("softmax") && Contains("dim 2"));
  REQUIRE_THROWS_WITH(ag::sum(x, {0, 3}), Contains("sum") && Contains("dim 3"));
  REQUIRE_THROWS_WITH(ag::cat({x, x}, 2), Contains("cat") && Contains("dim 2"));
}

TEST_CASE("layout ops reject malformed arguments", "[errors][view]") {
  Tensor x = ag::zeros({2, 3, 4});
  SECTION("permute with the wrong count or a repeat") {
    REQUIRE_THROWS_AS(x.permute({0, 1}), std::invalid_argument);
    REQUIRE_THROWS_WITH(x.permute({0, 1}), Contains("2 dims") && Contains("[2, 3, 4]"));
    REQUIRE_THROWS_WITH(x.permute({0, 1, 1}), Contains("repeated"));
  }
  SECTION("t() on a 3-D tensor") {
    REQUIRE_THROWS_AS(x.t(), std::invalid_argument);
    REQUIRE_THROWS_WITH(x.t(), Contains("2-D") && Contains("[2, 3, 4]"));
  }
  SECTION("expand of a dim that is not 1") {
    REQUIRE_THROWS_AS(x.expand({2, 5, 4}), std::invalid_argument);
    REQUIRE_THROWS_WITH(x.expand({2, 5, 4}), Contains("[2, 3, 4]") && Contains("[2, 5, 4]"));
    REQUIRE_THROWS_WITH(x.expand({3, 4}), Contains("fewer dims"));
  }
}

TEST_CASE("view with an incompatible shape names the shapes", "[errors][view]") {
  Tensor x = ag::zeros({2, 3});
  REQUIRE_THROWS_AS(x.view({4}), std::invalid_argument);
  REQUIRE_THROWS_WITH(x.view({4}), Contains("view") && Contains("[4]") && Contains("[2, 3]") &&
                                       Contains("6 elements"));
  REQUIRE_THROWS_WITH(x.view({-1, 4}), Contains("[-1, 4]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(x.view({-1, -1}), Contains("only one dimension can be -1"));
  REQUIRE_THROWS_WITH(x.reshape({5, -2}), Contains("invalid size -2"));
}

TEST_CASE("item() on a multi-element tensor names its shape", "[errors][access]") {
  REQUIRE_THROWS_AS(ag::zeros({2, 2}).item(), std::invalid_argument);
  REQUIRE_THROWS_WITH(ag::zeros({2, 2}).item(), Contains("item()") && Contains("[2, 2]"));
  REQUIRE_THROWS_WITH(ag::zeros({0}).item(), Contains("[0]"));
}

// ------------------------------------------------------------------ creation
TEST_CASE("creation rejects inconsistent sizes", "[errors][creation]") {
  REQUIRE_THROWS_AS(ag::from_vector(std::vector<double>{1, 2, 3}, {2, 2}), std::invalid_argument);
  REQUIRE_THROWS_WITH(ag::from_vector(std::vector<double>{1, 2, 3}, {2, 2}),
                      Contains("3 values") && Contains("[2, 2]") && Contains("4 elements"));
  REQUIRE_THROWS_WITH(ag::zeros({2, -1}), Contains("negative size") && Contains("[2, -1]"));
  REQUIRE_THROWS_WITH(ag::tensor({{1.0, 2.0}, {3.0}}),
                      Contains("ragged") && Contains("2 and 1 values"));
  REQUIRE_THROWS_WITH(ag::arange(0, 5, 0), Contains("step must be nonzero"));
  ag::Generator gen(0);
  REQUIRE_THROWS_WITH(ag::randn({2}, gen, DType::Int64), Contains("int64"));
  REQUIRE_THROWS_WITH(ag::zeros({2}).data<double>(),
                      Contains("data<float64>") && Contains("float32"));
}

// ------------------------------------------------------------------ losses and layers
TEST_CASE("cross_entropy with an out-of-range target names the target and its position",
          "[errors][loss]") {
  Tensor logits = ag::zeros({3, 4});
  Tensor targets = ag::from_vector(std::vector<int64_t>{0, 7, 1}, {3});
  REQUIRE_THROWS_AS(ag::cross_entropy(logits, targets), std::out_of_range);
  REQUIRE_THROWS_WITH(ag::cross_entropy(logits, targets),
                      Contains("target 7") && Contains("position 1") && Contains("4 classes"));

  SECTION("a negative target other than ignore_index") {
    Tensor neg = ag::from_vector(std::vector<int64_t>{0, 1, -1}, {3});
    REQUIRE_THROWS_WITH(ag::cross_entropy(logits, neg),
                        Contains("target -1") && Contains("position 2"));
  }
  SECTION("the position is counted over the flattened targets") {
    Tensor t2 = ag::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 0}, {2, 3});
    REQUIRE_THROWS_WITH(ag::cross_entropy(ag::zeros({2, 3, 4}), t2),
                        Contains("target 4") && Contains("position 4"));
  }
  SECTION("float targets") {
    REQUIRE_THROWS_AS(ag::cross_entropy(logits, ag::zeros({3})), std::invalid_argument);
    REQUIRE_THROWS_WITH(ag::cross_entropy(logits, ag::zeros({3})),
                        Contains("int64") && Contains("float32"));
  }
  SECTION("targets of the wrong shape") {
    Tensor t = ag::from_vector(std::vector<int64_t>{0, 1}, {2});
    REQUIRE_THROWS_WITH(ag::cross_entropy(logits, t),
                        Contains("[3, 4]") && Contains("[3]") && Contains("[2]"));
  }
}

TEST_CASE("embedding with an id out of range names the id and its position", "[errors][layers]") {
  Tensor weight = ag::zeros({5, 2});
  Tensor ids = ag::from_vector(std::vector<int64_t>{1, 5}, {2});
  REQUIRE_THROWS_AS(ag::embedding(weight, ids), std::out_of_range);
  REQUIRE_THROWS_WITH(ag::embedding(weight, ids),
                      Contains("id 5") && Contains("position 1") && Contains("5 embeddings"));
  REQUIRE_THROWS_WITH(ag::embedding(weight, ag::from_vector(std::vector<int64_t>{-1}, {1})),
                      Contains("id -1") && Contains("position 0"));
  REQUIRE_THROWS_WITH(ag::embedding(weight, ag::zeros({2})), Contains("int64"));
  REQUIRE_THROWS_WITH(ag::embedding(ag::zeros({5}), ids), Contains("[5]"));
}

TEST_CASE("layer_norm with a wrongly shaped weight names the shapes", "[errors][layers]") {
  Tensor x = ag::zeros({2, 4});
  REQUIRE_THROWS_AS(ag::layer_norm(x, ag::ones({3}), Tensor()), std::invalid_argument);
  REQUIRE_THROWS_WITH(ag::layer_norm(x, ag::ones({3}), Tensor()),
                      Contains("weight") && Contains("[3]") && Contains("[4]"));
  REQUIRE_THROWS_WITH(ag::layer_norm(x, ag::ones({4}), ag::zeros({2, 4})),
                      Contains("bias") && Contains("[2, 4]"));
  REQUIRE_THROWS_WITH(ag::layer_norm(x, ag::ones({4}, DType::Float64), Tensor()),
                      Contains("weight") && Contains("float64") && Contains("float32"));
}

TEST_CASE("dropout with p outside the unit interval names p", "[errors][layers]") {
  ag::Generator gen(0);
  Tensor x = ag::ones({4});
  REQUIRE_THROWS_AS(ag::dropout(x, 1.5, true, gen), std::invalid_argument);
  REQUIRE_THROWS_WITH(ag::dropout(x, 1.5, true, gen), Contains("dropout") && Contains("1.5"));
  REQUIRE_THROWS_WITH(ag::dropout(x, -0.25, true, gen), Contains("-0.25"));
  // p is checked even when not training, so a bad config fails at the first eval too
  REQUIRE_THROWS_WITH(ag::dropout(x, 1.5, false, gen), Contains("1.5"));
  REQUIRE_THROWS_WITH(ag::dropout(x, std::nan(""), true, gen), Contains("nan"));
}

// ------------------------------------------------------------------ joining and masking
TEST_CASE("cat of mismatched shapes names the offending tensor and both shapes", "[errors][join]") {
  Tensor a = ag::zeros({2, 3}), b = ag::zeros({2, 4});
  REQUIRE_THROWS_AS(ag::cat({a, b}, 0), std::invalid_argument);
  REQUIRE_THROWS_WITH(ag::cat({a, b}, 0), Contains("tensor 1") && Contains("[2, 4]") &&
                                              Contains("[2, 3]") && Contains("dim 0"));
  // along dim 1 the same pair is fine
  CHECK(ag::cat({a, b}, 1).shape() == ag::Shape{2, 7});
  REQUIRE_THROWS_WITH(ag::cat({a, ag::zeros({2, 3, 1})}, 0), Contains("[2, 3, 1]"));
  REQUIRE_THROWS_WITH(ag::cat({a, ag::zeros({2, 3}, DType::Float64)}, 0),
                      Contains("float64") && Contains("float32"));
  REQUIRE_THROWS_WITH(ag::cat({}, 0), Contains("no tensors"));
  REQUIRE_THROWS_WITH(ag::stack({a, b}, 0), Contains("stack") && Contains("[2, 4]"));
  REQUIRE_THROWS_WITH(ag::split(a, {1, 1}, 1),
                      Contains("split") && Contains("sum to 2") && Contains("[2, 3]"));
}

TEST_CASE("masked_fill with a mask that does not broadcast names both shapes",
          "[errors][softmax]") {
  Tensor x = ag::zeros({2, 3});
  REQUIRE_THROWS_AS(ag::masked_fill(x, ag::ones({4}, DType::Bool), 0.0), std::invalid_argument);
  REQUIRE_THROWS_WITH(ag::masked_fill(x, ag::ones({4}, DType::Bool), 0.0),
                      Contains("masked_fill") && Contains("[2, 3]") && Contains("[4]"));
  // a mask that broadcasts only to a larger shape would change the output's shape
  REQUIRE_THROWS_WITH(ag::masked_fill(x, ag::ones({2, 2, 3}, DType::Bool), 0.0),
                      Contains("[2, 2, 3]") && Contains("[2, 3]"));
}

// ------------------------------------------------------------------ autograd
TEST_CASE("backward() on a non-scalar without a gradient names the shape", "[errors][autograd]") {
  Tensor w = ag::ones({3}).requires_grad_();
  Tensor y = w * 2.0;
  REQUIRE_THROWS_AS(y.backward(), std::invalid_argument);
  REQUIRE_THROWS_WITH(y.backward(), Contains("backward()") && Contains("[3]"));
  CHECK_FALSE(w.grad().defined());  // the failed call left no partial gradient

  SECTION("a gradient of the wrong shape or dtype") {
    REQUIRE_THROWS_WITH(y.backward(ag::ones({2})), Contains("[2]") && Contains("[3]"));
    REQUIRE_THROWS_WITH(y.backward(ag::ones({3}, DType::Float64)),
                        Contains("float64") && Contains("float32"));
  }
}

TEST_CASE("backward() on a tensor that does not require grad explains why", "[errors][autograd]") {
  Tensor x = ag::ones({1});
  REQUIRE_THROWS_AS(x.backward(), std::logic_error);
  REQUIRE_THROWS_WITH(x.backward(), Contains("does not require grad"));
  Tensor y;
  {
    ag::NoGradGuard guard;
    y = ag::ones({1}).requires_grad_() * 2.0;
  }
  REQUIRE_THROWS_WITH(y.backward(), Contains("NoGradGuard"));
}

TEST_CASE("a second backward through a freed graph names the node", "[errors][autograd]") {
  Tensor w = ag::ones({2}).requires_grad_();
  Tensor loss = ag::sum(w * w);
  loss.backward();
  REQUIRE_THROWS_AS(loss.backward(), std::logic_error);
  REQUIRE_THROWS_WITH(loss.backward(), Contains("SumBackward") && Contains("retain_graph"));
}

TEST_CASE("requires_grad_ on a non-float tensor names the dtype", "[errors][autograd]") {
  Tensor i = ag::arange(3);
  REQUIRE_THROWS_AS(i.requires_grad_(), std::invalid_argument);
  REQUIRE_THROWS_WITH(i.requires_grad_(), Contains("requires_grad_") && Contains("int64"));
  REQUIRE_THROWS_WITH(ag::ones({2}, DType::Bool).requires_grad_(), Contains("bool"));
  CHECK_FALSE(i.requires_grad());

  SECTION("turning it off on a non-leaf points at detach()") {
    Tensor y = ag::ones({2}).requires_grad_() * 2.0;
    REQUIRE_THROWS_AS(y.requires_grad_(false), std::logic_error);
    REQUIRE_THROWS_WITH(y.requires_grad_(false), Contains("detach()"));
  }
  SECTION("set_grad of the wrong shape") {
    Tensor w = ag::ones({2, 2}).requires_grad_();
    REQUIRE_THROWS_WITH(w.set_grad(ag::ones({4})), Contains("[4]") && Contains("[2, 2]"));
  }
}

TEST_CASE("use of an undefined Tensor is a logic_error", "[errors][tensor]") {
  Tensor u;
  CHECK_FALSE(u.defined());
  REQUIRE_THROWS_AS(u.shape(), std::logic_error);
  REQUIRE_THROWS_WITH(u.shape(), Contains("undefined"));
  REQUIRE_THROWS_WITH(u.numel(), Contains("undefined"));
  REQUIRE_THROWS_WITH(u.item(), Contains("undefined"));
  REQUIRE_THROWS_WITH(u.at({0}), Contains("undefined"));
  REQUIRE_THROWS_WITH(u.view({1}), Contains("undefined"));
  REQUIRE_THROWS_WITH(u.backward(), Contains("undefined"));
  REQUIRE_THROWS_WITH(u.requires_grad_(), Contains("undefined"));
  REQUIRE_THROWS_WITH(u.clone(), Contains("undefined"));
  REQUIRE_THROWS_WITH(ag::add(u, ag::ones({1})), Contains("undefined"));
  REQUIRE_THROWS_WITH(ag::matmul(ag::ones({1, 1}), u), Contains("undefined"));
  REQUIRE_THROWS_WITH(ag::masked_fill(ag::ones({1}), u, 0.0), Contains("undefined"));
  REQUIRE_THROWS_WITH(ag::cat({u, u}, 0), Contains("undefined"));
  // printing is the one operation that accepts it
  CHECK(u.str() == "tensor(<undefined>)");
}

TEST_CASE("a 0-dim tensor has no dim to index and says so", "[errors]") {
  Tensor s = ag::full({}, 3.0);
  REQUIRE_THROWS_WITH(s.size(0), Contains("rank 0"));
  REQUIRE_THROWS_WITH(s.select(0, 0), Contains("rank 0"));
  REQUIRE_THROWS_WITH(s.narrow(0, 0, 1), Contains("rank 0"));
  REQUIRE_THROWS_WITH(s.squeeze(0), Contains("rank 0"));
  REQUIRE_THROWS_WITH(s.transpose(0, 0), Contains("rank 0"));
  REQUIRE_THROWS_WITH(ag::cat({s, s}, 0), Contains("rank 0"));
  REQUIRE_THROWS_WITH(ag::split(s, 1, 0), Contains("rank 0"));
  REQUIRE_THROWS_WITH(ag::sum(s, {0}), Contains("rank 0"));
  REQUIRE_THROWS_WITH(ag::max(s, 0), Contains("rank 0"));
  REQUIRE(ag::sum(s).item() == 3.0);  // reducing over every dim is still fine
}

TEST_CASE("narrow with a huge length is out of range rather than an overflow", "[errors]") {
  REQUIRE_THROWS_WITH(ag::zeros({3}).narrow(0, 1, INT64_MAX), Contains("out of range"));
}

TEST_CASE("arange needs finite bounds", "[errors]") {
  REQUIRE_THROWS_WITH(ag::arange(0, INFINITY, 1), Contains("finite"));
  REQUIRE_THROWS_WITH(ag::arange(0, NAN, 1), Contains("finite"));
}

TEST_CASE("a shape too large to address is refused before allocating", "[errors]") {
  REQUIRE_THROWS_WITH(ag::empty({INT64_MAX / 2, 4}), Contains("more elements than memory"));
}

TEST_CASE("set_grad checks the gradient's dtype as well as its shape", "[errors]") {
  Tensor w = ag::ones({2}).requires_grad_();
  REQUIRE_THROWS_WITH(w.set_grad(ag::ones({2}, DType::Int64)),
                      Contains("int64") && Contains("float32"));
}
