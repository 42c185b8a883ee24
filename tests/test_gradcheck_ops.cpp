// A float64 finite-difference gradient check for every differentiable op, over broadcast
// shapes and non-contiguous (transposed, sliced) inputs. Tolerances: see tight() in
// gradcheck_helpers.h (eps 1e-6, atol 1e-8, rtol 1e-6).
#include "gradcheck_helpers.h"

using namespace ag_test;
using In = const std::vector<Tensor>&;

namespace {
Layout any_layout() {
  return GENERATE(Layout::contiguous, Layout::transposed, Layout::sliced);
}
}  // namespace

// ------------------------------------------------------------------ binary, broadcast
TEST_CASE("gradcheck add with broadcasting", "[gradcheck][elementwise]") {
  ag::Generator gen(1);
  auto layout = any_layout();
  CAPTURE(layout_name(layout));
  auto shapes =
      GENERATE(std::pair<Shape, Shape>{{3, 4}, {3, 4}}, std::pair<Shape, Shape>{{2, 3, 4}, {3, 1}},
               std::pair<Shape, Shape>{{4, 1}, {1, 5}}, std::pair<Shape, Shape>{{3, 4}, {}});
  Tensor a = randn_leaf(shapes.first, gen, layout), b = randn_leaf(shapes.second, gen, layout);
  REQUIRE_GRADCHECK([](In in) { return in[0] + in[1]; }, (std::vector<Tensor>{a, b}));
}

TEST_CASE("gradcheck sub with broadcasting", "[gradcheck][elementwise]") {
  ag::Generator gen(2);
  auto layout = any_layout();
  Tensor a = randn_leaf({2, 3, 4}, gen, layout), b = randn_leaf({3, 4}, gen, layout);
  REQUIRE_GRADCHECK([](In in) { return in[0] - in[1]; }, (std::vector<Tensor>{a, b}));
  REQUIRE_GRADCHECK([](In in) { return in[1] - in[0]; }, (std::vector<Tensor>{a, b}));
}

TEST_CASE("gradcheck mul with broadcasting", "[gradcheck][elementwise]") {
  ag::Generator gen(3);
  auto layout = any_layout();
  Tensor a = randn_leaf({2, 3, 4}, gen, layout), b = randn_leaf({1, 4}, gen, layout);
  REQUIRE_GRADCHECK([](In in) { return in[0] * in[1]; }, (std::vector<Tensor>{a, b}));
}

TEST_CASE("gradcheck div with broadcasting", "[gradcheck][elementwise]") {
  ag::Generator gen(4);
  auto layout = any_layout();
  Tensor a = randn_leaf({3, 4}, gen, layout), b = away_from_zero_leaf({3, 1}, gen, layout);
  REQUIRE_GRADCHECK([](In in) { return in[0] / in[1]; }, (std::vector<Tensor>{a, b}));
}

TEST_CASE("gradcheck scalar add and mul", "[gradcheck][elementwise]") {
  ag::Generator gen(5);
  Tensor a = randn_leaf({3, 4}, gen, any_layout());
  REQUIRE_GRADCHECK([](In in) { return in[0] * 2.5 + 1.5; }, (std::vector<Tensor>{a}));
  REQUIRE_GRADCHECK([](In in) { return (in[0] - 0.5) / 4.0; }, (std::vector<Tensor>{a}));
  REQUIRE_GRADCHECK([](In in) { return 3.0 * in[0]; }, (std::vector<Tensor>{a}));
}

TEST_CASE("gradcheck pow with a tensor exponent", "[gradcheck][elementwise]") {
  ag::Generator gen(6);
  auto layout = any_layout();
  Tensor a = uniform_leaf({3, 4}, 0.5, 2.0, gen, layout), b = randn_leaf({4}, gen, layout);
  REQUIRE_GRADCHECK([](In in) { return ag::pow(in[0], in[1]); }, (std::vector<Tensor>{a, b}));
}

// ------------------------------------------------------------------ unary
TEST_CASE("gradcheck neg", "[gradcheck][elementwise]") {
  ag::Generator gen(7);
  Tensor a = randn_leaf({3, 4}, gen, any_layout());
  REQUIRE_GRADCHECK([](In in) { return -in[0]; }, (std::vector<Tensor>{a}));
}

TEST_CASE("gradcheck exp", "[gradcheck][elementwise]") {
  ag::Generator gen(8);
  Tensor a = randn_leaf({3, 4}, gen, any_layout());
  REQUIRE_GRADCHECK([](In in) { return ag::exp(in[0]); }, (std::vector<Tensor>{a}));
}

TEST_CASE("gradcheck log on positive inputs", "[gradcheck][elementwise]") {
  ag::Generator gen(9);
  Tensor a = uniform_leaf({3, 4}, 0.3, 3.0, gen, any_layout());
  REQUIRE_GRADCHECK([](In in) { return ag::log(in[0]); }, (std::vector<Tensor>{a}));
}

TEST_CASE("gradcheck sqrt on positive inputs", "[gradcheck][elementwise]") {
  ag::Generator gen(10);
  Tensor a = uniform_leaf({3, 4}, 0.3, 3.0, gen, any_layout());
  REQUIRE_GRADCHECK([](In in) { return ag::sqrt(in[0]); }, (std::vector<Tensor>{a}));
}

TEST_CASE("gradcheck pow with a scalar exponent", "[gradcheck][elementwise]") {
  ag::Generator gen(11);
  Tensor a = uniform_leaf({3, 4}, 0.3, 2.0, gen, any_layout());
  auto e = GENERATE(2.0, 3.0, 0.5, -1.5);
  CAPTURE(e);
  REQUIRE_GRADCHECK([e](In in) { return ag::pow(in[0], e); }, (std::vector<Tensor>{a}));
}

TEST_CASE("gradcheck tanh", "[gradcheck][elementwise]") {
  ag::Generator gen(12);
  Tensor a = randn_leaf({3, 4}, gen, any_layout());
  REQUIRE_GRADCHECK([](In in) { return ag::tanh(in[0]); }, (std::vector<Tensor>{a}));
}

// Inputs keep |x| >= 0.2: relu has a kink at 0 where no finite difference is meaningful.
TEST_CASE("gradcheck relu away from its kink", "[gradcheck][elementwise]") {
  ag::Generator gen(13);
  Tensor a = away_from_zero_leaf({3, 4}, gen, any_layout());
  REQUIRE_GRADCHECK([](In in) { return ag::relu(in[0]); }, (std::vector<Tensor>{a}));
}

TEST_CASE("gradcheck gelu", "[gradcheck][elementwise]") {
  ag::Generator gen(14);
  Tensor a = leaf({3, 5}, any_layout(), gen, [](ag::Generator& g) { return 6 * g.uniform() - 3; });
  REQUIRE_GRADCHECK([](In in) { return ag::gelu(in[0]); }, (std::vector<Tensor>{a}));
}

// ------------------------------------------------------------------ reductions
TEST_CASE("gradcheck sum over dims with and without keepdim", "[gradcheck][reduce]") {
  ag::Generator gen(15);
  Tensor a = randn_leaf({2, 3, 4}, gen, any_layout());
  auto dims = GENERATE(std::vector<int64_t>{}, std::vector<int64_t>{0}, std::vector<int64_t>{-1},
                       std::vector<int64_t>{0, 2});
  bool keepdim = GENERATE(false, true);
  CAPTURE(dims, keepdim);
  REQUIRE_GRADCHECK([&](In in) { return ag::sum(in[0], dims, keepdim); }, (std::vector<Tensor>{a}));
}

TEST_CASE("gradcheck mean over dims with and without keepdim", "[gradcheck][reduce]") {
  ag::Generator gen(16);
  Tensor a = randn_leaf({2, 3, 4}, gen, any_layout());
  auto dims =
      GENERATE(std::vector<int64_t>{}, std::vector<int64_t>{1}, std::vector<int64_t>{0, -1});
  bool keepdim = GENERATE(false, true);
  CAPTURE(dims, keepdim);
  REQUIRE_GRADCHECK([&](In in) { return ag::mean(in[0], dims, keepdim); },
                    (std::vector<Tensor>{a}));
}

// Random normals have no ties, so every max has one winner and a well-defined gradient.
TEST_CASE("gradcheck max over a dim and over everything", "[gradcheck][reduce]") {
  ag::Generator gen(17);
  Tensor a = randn_leaf({3, 4, 5}, gen, any_layout());
  int64_t dim = GENERATE(0, 1, -1);
  bool keepdim = GENERATE(false, true);
  CAPTURE(dim, keepdim);
  REQUIRE_GRADCHECK([&](In in) { return ag::max(in[0], dim, keepdim); }, (std::vector<Tensor>{a}));
  REQUIRE_GRADCHECK([](In in) { return ag::max(in[0]); }, (std::vector<Tensor>{a}));
}

// ------------------------------------------------------------------ matmul
TEST_CASE("gradcheck matmul 2-D", "[gradcheck][matmul]") {
  ag::Generator gen(18);
  auto la = any_layout();
  auto lb = GENERATE(Layout::contiguous, Layout::transposed);
  Tensor a = randn_leaf({3, 4}, gen, la), b = randn_leaf({4, 5}, gen, lb);
  REQUIRE_GRADCHECK([](In in) { return ag::matmul(in[0], in[1]); }, (std::vector<Tensor>{a, b}));
}

TEST_CASE("gradcheck matmul batched with batch broadcasting", "[gradcheck][matmul]") {
  ag::Generator gen(19);
  auto layout = any_layout();
  auto shapes = GENERATE(std::pair<Shape, Shape>{{2, 3, 4}, {2, 4, 2}},
                         std::pair<Shape, Shape>{{2, 1, 3, 4}, {3, 4, 2}},
                         std::pair<Shape, Shape>{{2, 3, 4}, {4, 5}},
                         std::pair<Shape, Shape>{{3, 4}, {2, 4, 2}});
  Tensor a = randn_leaf(shapes.first, gen, layout), b = randn_leaf(shapes.second, gen, layout);
  REQUIRE_GRADCHECK([](In in) { return ag::matmul(in[0], in[1]); }, (std::vector<Tensor>{a, b}));
}

TEST_CASE("gradcheck matmul with vectors", "[gradcheck][matmul]") {
  ag::Generator gen(20);
  Tensor v = randn_leaf({4}, gen), w = randn_leaf({4}, gen), m = randn_leaf({4, 3}, gen),
         n = randn_leaf({2, 4}, gen);
  REQUIRE_GRADCHECK([](In in) { return ag::matmul(in[0], in[1]); }, (std::vector<Tensor>{v, w}));
  REQUIRE_GRADCHECK([](In in) { return ag::matmul(in[0], in[1]); }, (std::vector<Tensor>{v, m}));
  REQUIRE_GRADCHECK([](In in) { return ag::matmul(in[0], in[1]); }, (std::vector<Tensor>{n, v}));
}

TEST_CASE("gradcheck matmul of q and a transposed k view", "[gradcheck][matmul]") {
  ag::Generator gen(21);
  Tensor q = randn_leaf({2, 5, 3}, gen), k = randn_leaf({2, 5, 3}, gen);
  REQUIRE_GRADCHECK([](In in) { return ag::matmul(in[0], in[1].transpose(-1, -2)); },
                    (std::vector<Tensor>{q, k}));
}

// ------------------------------------------------------------------ views and layout
TEST_CASE("gradcheck views: transpose permute reshape narrow select expand", "[gradcheck][views]") {
  ag::Generator gen(22);
  Tensor a = randn_leaf({2, 3, 4}, gen, any_layout());
  Tensor w = randn_leaf({4, 3, 2}, gen);  // weights the view so every element has its own gradient
  std::vector<Tensor> in{a, w};
  REQUIRE_GRADCHECK([](In x) { return x[0].permute({2, 1, 0}) * x[1]; }, in);
  REQUIRE_GRADCHECK([](In x) { return x[0].transpose(0, 2) * x[1]; }, in);
  REQUIRE_GRADCHECK([](In x) { return x[0].reshape({4, 3, 2}) * x[1]; }, in);
  REQUIRE_GRADCHECK([](In x) { return x[0].reshape({-1}).narrow(0, 5, 11) * 2.0; }, in);
  REQUIRE_GRADCHECK(
      [](In x) {
        return x[0].narrow(2, 1, 2) * x[1].narrow(0, 0, 2).permute({2, 1, 0});
      },
      in);
  REQUIRE_GRADCHECK([](In x) { return x[0].select(1, 2) * 3.0; }, in);
  REQUIRE_GRADCHECK([](In x) { return x[0].unsqueeze(1).squeeze(1).contiguous() * x[0]; }, in);
  REQUIRE_GRADCHECK([](In x) { return x[0].clone() * x[0]; }, in);
}

TEST_CASE("gradcheck expand sums the gradient over expanded dims", "[gradcheck][views]") {
  ag::Generator gen(23);
  Tensor a = randn_leaf({3, 1}, gen), w = randn_leaf({2, 3, 4}, gen);
  REQUIRE_GRADCHECK(
      [](In x) {
        return x[0].expand({2, 3, 4}) * x[1];
      },
      (std::vector<Tensor>{a, w}));
}

TEST_CASE("gradcheck view of a contiguous tensor", "[gradcheck][views]") {
  ag::Generator gen(24);
  Tensor a = randn_leaf({6, 4}, gen), w = randn_leaf({2, 3, 4}, gen);
  REQUIRE_GRADCHECK([](In x) { return x[0].view({2, 3, 4}) * x[1]; }, (std::vector<Tensor>{a, w}));
}

TEST_CASE("gradcheck conversion between float types", "[gradcheck][views]") {
  ag::Generator gen(25);
  Tensor a = randn_leaf({3, 2}, gen);
  // a round trip through float32 rounds the values; the gradient is still exactly 1
  ag::GradcheckOptions o = tight();
  o.eps = 1e-3;
  o.atol = 1e-4;
  auto r = ag::gradcheck([](In x) { return x[0].to(DType::Float32).to(DType::Float64); }, {a}, o);
  INFO(r.message);
  REQUIRE(r.ok);
}

// ------------------------------------------------------------------ join / split
TEST_CASE("gradcheck cat along each dim", "[gradcheck][join]") {
  ag::Generator gen(26);
  auto layout = any_layout();
  int64_t dim = GENERATE(0, 1, -1);
  Shape sa{2, 3, 4}, sb{2, 3, 4};
  sb[dim < 0 ? 2 : dim] = 2;
  Tensor a = randn_leaf(sa, gen, layout), b = randn_leaf(sb, gen, layout);
  Shape sw = sa;
  sw[dim < 0 ? 2 : dim] += sb[dim < 0 ? 2 : dim];
  Tensor w = randn_leaf(sw, gen);
  REQUIRE_GRADCHECK(
      [dim](In x) {
        return ag::cat({x[0], x[1]}, dim) * x[2];
      },
      (std::vector<Tensor>{a, b, w}));
}

TEST_CASE("gradcheck stack", "[gradcheck][join]") {
  ag::Generator gen(27);
  Tensor a = randn_leaf({2, 3}, gen), b = randn_leaf({2, 3}, gen, Layout::transposed),
         w = randn_leaf({2, 2, 3}, gen);
  REQUIRE_GRADCHECK(
      [](In x) {
        return ag::stack({x[0], x[1]}, 1) * x[2];
      },
      (std::vector<Tensor>{a, b, w}));
}

TEST_CASE("gradcheck split into equal and unequal parts", "[gradcheck][join]") {
  ag::Generator gen(28);
  Tensor a = randn_leaf({5, 3}, gen, any_layout());
  REQUIRE_GRADCHECK(
      [](In x) {
        auto parts = ag::split(x[0], 2, 0);  // sizes 2, 2, 1
        return parts[0] * parts[1] + ag::sum(parts[2]);
      },
      (std::vector<Tensor>{a}));
  REQUIRE_GRADCHECK(
      [](In x) {
        auto parts = ag::split(x[0], std::vector<int64_t>{1, 2}, 1);
        return ag::sum(parts[0], {1}, true) * parts[1] * 2.0;
      },
      (std::vector<Tensor>{a}));
}

// ------------------------------------------------------------------ masking and softmax
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

TEST_CASE("gradcheck softmax along each dim", "[gradcheck][softmax]") {
  ag::Generator gen(30);
  Tensor a = randn_leaf({3, 4, 5}, gen, any_layout());
  int64_t dim = GENERATE(0, 1, -1);
  CAPTURE(dim);
  REQUIRE_GRADCHECK([dim](In x) { return ag::softmax(x[0], dim); }, (std::vector<Tensor>{a}));
}

TEST_CASE("gradcheck log_softmax along each dim", "[gradcheck][softmax]") {
  ag::Generator gen(31);
  Tensor a = randn_leaf({3, 4, 5}, gen, any_layout());
  int64_t dim = GENERATE(0, 1, -1);
  CAPTURE(dim);
  REQUIRE_GRADCHECK([dim](In x) { return ag::log_softmax(x[0], dim); }, (std::vector<Tensor>{a}));
}

TEST_CASE("gradcheck softmax of causally masked scores", "[gradcheck][softmax]") {
  ag::Generator gen(32);
  Tensor scores = randn_leaf({2, 5, 5}, gen, any_layout());
  Tensor mask = ag::triu_mask(5, 5);
  REQUIRE_GRADCHECK(
      [mask](In x) { return ag::softmax(ag::masked_fill(x[0], mask, -ag::kInf), -1); },
      (std::vector<Tensor>{scores}));
  // log-probabilities of masked positions are -inf; the outer masked_fill stops gradient
  // reaching them, as any loss over masked log-probabilities must
  REQUIRE_GRADCHECK(
      [mask](In x) {
        return ag::masked_fill(ag::log_softmax(ag::masked_fill(x[0], mask, -ag::kInf), -1), mask,
                               0.0);
      },
      (std::vector<Tensor>{scores}));
}

TEST_CASE("gradcheck softmax with a fully masked row", "[gradcheck][softmax]") {
  ag::Generator gen(33);
  Tensor scores = randn_leaf({3, 4}, gen);
  Tensor mask = ag::zeros({3, 4}, DType::Bool);
  for (int64_t j = 0; j < 4; ++j) mask.set({1, j}, 1);  // row 1 sees nothing
  mask.set({2, 3}, 1);
  Tensor w = randn_leaf({3, 4}, gen);
  REQUIRE_GRADCHECK(
      [mask](In x) { return ag::softmax(ag::masked_fill(x[0], mask, -ag::kInf), -1) * x[1]; },
      (std::vector<Tensor>{scores, w}));
}

TEST_CASE("gradcheck cross_entropy with ignored targets", "[gradcheck][softmax]") {
  ag::Generator gen(34);
  Tensor logits = randn_leaf({2, 3, 5}, gen, any_layout());
  Tensor targets = ag::from_vector(std::vector<int64_t>{0, 4, -100, 2, 2, 1}, {2, 3});
  REQUIRE_GRADCHECK([targets](In x) { return ag::cross_entropy(x[0], targets); },
                    (std::vector<Tensor>{logits}));
  Tensor flat = randn_leaf({4, 3}, gen);
  Tensor t2 = ag::from_vector(std::vector<int64_t>{2, 0, 1, 7}, {4});
  REQUIRE_GRADCHECK([t2](In x) { return ag::cross_entropy(x[0], t2, 7); },
                    (std::vector<Tensor>{flat}));
}

// ------------------------------------------------------------------ layers' primitives
TEST_CASE("gradcheck embedding with repeated ids", "[gradcheck][embedding]") {
  ag::Generator gen(35);
  Tensor weight = randn_leaf({5, 3}, gen, any_layout());
  Tensor ids = ag::from_vector(std::vector<int64_t>{1, 3, 1, 0, 1, 4}, {2, 3});
  Tensor w = randn_leaf({2, 3, 3}, gen);
  REQUIRE_GRADCHECK([ids](In x) { return ag::embedding(x[0], ids) * x[1]; },
                    (std::vector<Tensor>{weight, w}));
}

TEST_CASE("gradcheck layer_norm with and without affine parameters", "[gradcheck][layer_norm]") {
  ag::Generator gen(36);
  auto layout = any_layout();
  Tensor x = randn_leaf({2, 3, 6}, gen, layout);
  Tensor weight = randn_leaf({6}, gen, layout), bias = randn_leaf({6}, gen, layout);
  REQUIRE_GRADCHECK([](In in) { return ag::layer_norm(in[0], in[1], in[2]); },
                    (std::vector<Tensor>{x, weight, bias}));
  REQUIRE_GRADCHECK([](In in) { return ag::layer_norm(in[0], Tensor(), Tensor()); },
                    (std::vector<Tensor>{x}));
  REQUIRE_GRADCHECK([](In in) { return ag::layer_norm(in[0], in[1], Tensor(), 1e-3); },
                    (std::vector<Tensor>{x, weight}));
}

// A fresh generator with a fixed seed inside the function gives the same mask at every
// evaluation, so finite differences see the same function the backward differentiates.
TEST_CASE("gradcheck dropout with a fixed mask", "[gradcheck][dropout]") {
  ag::Generator gen(37);
  Tensor a = randn_leaf({4, 5}, gen, any_layout());
  double p = GENERATE(0.0, 0.3, 0.5, 1.0);
  CAPTURE(p);
  REQUIRE_GRADCHECK(
      [p](In x) {
        ag::Generator g(99);
        return ag::dropout(x[0], p, true, g) * x[0];
      },
      (std::vector<Tensor>{a}));
}

// ------------------------------------------------------------------ compositions
TEST_CASE("gradcheck scaled dot-product attention composed from ops", "[gradcheck][attention]") {
  ag::Generator gen(38);
  Tensor x = randn_leaf({2, 4, 3}, gen);
  Tensor wq = randn_leaf({3, 2}, gen), wk = randn_leaf({3, 2}, gen, Layout::transposed),
         wv = randn_leaf({3, 2}, gen, Layout::sliced);
  Tensor mask = ag::triu_mask(4, 4);
  REQUIRE_GRADCHECK(
      [mask](In in) {
        Tensor q = ag::matmul(in[0], in[1]), k = ag::matmul(in[0], in[2]),
               v = ag::matmul(in[0], in[3]);
        Tensor scores = ag::matmul(q, k.transpose(-1, -2)) / std::sqrt(2.0);
        Tensor w = ag::softmax(ag::masked_fill(scores, mask, -ag::kInf), -1);
        return ag::matmul(w, v);
      },
      (std::vector<Tensor>{x, wq, wk, wv}));
}

// ------------------------------------------------------------------ linear (fused)
TEST_CASE("gradcheck linear with and without bias and GELU", "[gradcheck][linear]") {
  ag::Generator gen(41);
  auto layout = any_layout();
  bool with_bias = GENERATE(true, false);
  auto act = GENERATE(ag::Activation::None, ag::Activation::Gelu);
  CAPTURE(with_bias, act == ag::Activation::Gelu);
  // a batch of [2, 3] rows of 4 features into 5 outputs; the weight may be a transposed view
  Tensor x = randn_leaf({2, 3, 4}, gen, layout), w = randn_leaf({5, 4}, gen, layout);
  Tensor b = randn_leaf({5}, gen);
  std::vector<Tensor> inputs = with_bias ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w};
  REQUIRE_GRADCHECK(
      [act](In in) { return ag::linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), act); },
      inputs);
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
