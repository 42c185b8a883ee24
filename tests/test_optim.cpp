// optim/: SGD, Adam and AdamW steps against values worked out by hand (the formulas of
// torch.optim), parameter groups, gradient clipping, schedules, and optimizer state that
// round-trips exactly.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "optim/optim.h"
#include "support.h"

using ag::Tensor;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

// One float64 parameter with a fixed gradient, so every step's arithmetic is known.
struct Fixture {
  Tensor p;
  explicit Fixture(std::vector<double> values) {
    p = ag::from_vector(values, {static_cast<int64_t>(values.size())}, ag::DType::Float64)
            .requires_grad_();
  }
  std::vector<optim::ParamGroup> groups(double wd = 0) const { return {{{{"w", p}}, wd}}; }
  void grad(std::vector<double> g) const {
    p.set_grad(ag::from_vector(g, {static_cast<int64_t>(g.size())}, ag::DType::Float64));
  }
};

}  // namespace

TEST_CASE("SGD without momentum steps against the gradient plus weight decay") {
  Fixture f({1.0, -2.0});
  optim::SGD sgd(f.groups(/*wd=*/0.1), /*lr=*/0.5);
  f.grad({0.2, 0.4});
  sgd.step();
  // p -= lr * (g + wd p)
  ag_test::require_values(f.p, {1.0 - 0.5 * (0.2 + 0.1), -2.0 - 0.5 * (0.4 - 0.2)}, 1e-15);
}

TEST_CASE("SGD momentum and Nesterov follow torch.optim.SGD over two steps") {
  const double lr = 0.1, mu = 0.9, g1 = 0.5, g2 = -0.25;
  SECTION("heavy ball") {
    Fixture f({1.0});
    optim::SGD sgd(f.groups(), lr, mu);
    f.grad({g1});
    sgd.step();  // b = g1
    f.grad({g2});
    sgd.step();  // b = mu g1 + g2
    const double b2 = mu * g1 + g2;
    ag_test::require_values(f.p, {1.0 - lr * g1 - lr * b2}, 1e-15);
  }
  SECTION("nesterov") {
    Fixture f({1.0});
    optim::SGD sgd(f.groups(), lr, mu, /*nesterov=*/true);
    f.grad({g1});
    sgd.step();  // b = g1, d = g1 + mu b
    f.grad({g2});
    sgd.step();  // b = mu g1 + g2, d = g2 + mu b
    const double d1 = g1 + mu * g1, b2 = mu * g1 + g2, d2 = g2 + mu * b2;
    ag_test::require_values(f.p, {1.0 - lr * d1 - lr * d2}, 1e-15);
  }
}

TEST_CASE("Adam and AdamW match the bias-corrected update worked by hand") {
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  const double p0 = 0.7, g1 = 0.3, g2 = -0.6;
  auto adam_delta = [&](double m, double v, int t) {
    const double mh = m / (1 - std::pow(b1, t)), vh = v / (1 - std::pow(b2, t));
    return lr * mh / (std::sqrt(vh) + eps);
  };
  SECTION("AdamW decays the weight itself, outside the moments") {
    Fixture f({p0});
    optim::AdamW opt(f.groups(wd), lr, b1, b2, eps);
    f.grad({g1});
    opt.step();
    double m = (1 - b1) * g1, v = (1 - b2) * g1 * g1;
    double p = p0 * (1 - lr * wd) - adam_delta(m, v, 1);
    ag_test::require_values(f.p, {p}, 1e-12);
    f.grad({g2});
    opt.step();
    m = b1 * m + (1 - b1) * g2;
    v = b2 * v + (1 - b2) * g2 * g2;
    p = p * (1 - lr * wd) - adam_delta(m, v, 2);
    ag_test::require_values(f.p, {p}, 1e-12);
    REQUIRE(opt.steps() == 2);
  }
  SECTION("Adam adds L2 decay to the gradient") {
    Fixture f({p0});
    optim::Adam opt(f.groups(wd), lr, b1, b2, eps);
    f.grad({g1});
    opt.step();
    const double g = g1 + wd * p0;
    const double m = (1 - b1) * g, v = (1 - b2) * g * g;
    ag_test::require_values(f.p, {p0 - adam_delta(m, v, 1)}, 1e-12);
  }
}

TEST_CASE("the first Adam step moves every weight by about lr whatever its gradient's scale") {
  Fixture f({0.0, 0.0, 0.0});
  optim::Adam opt(f.groups(), 1e-3);
  f.grad({1e-4, 3.0, -50.0});
  opt.step();
  ag_test::require_values(f.p, {-1e-3, -1e-3, 1e-3}, 1e-7);
}

TEST_CASE("decay_groups decays matrices and embeddings but not biases or LayerNorm") {
  nn::StateDict named = {{"fc.weight", ag::zeros({3, 2})},
                         {"fc.bias", ag::zeros({3})},
                         {"ln.weight", ag::ones({2})},
                         {"emb.weight", ag::zeros({5, 2})}};
  auto groups = optim::decay_groups(named, 0.1);
  REQUIRE(groups.size() == 2);
  REQUIRE(groups[0].weight_decay == 0.1);
  REQUIRE(groups[0].params.size() == 2);
  CHECK(groups[0].params[0].first == "fc.weight");
  CHECK(groups[0].params[1].first == "emb.weight");
  REQUIRE(groups[1].weight_decay == 0.0);
  CHECK(groups[1].params[0].first == "fc.bias");
  CHECK(groups[1].params[1].first == "ln.weight");
}

TEST_CASE("parameters without a gradient are left alone by step") {
  Fixture f({1.0}), g({2.0});
  optim::AdamW opt({{{{"a", f.p}, {"b", g.p}}, 0.1}}, 0.1);
  f.grad({1.0});
  opt.step();
  ag_test::require_values(g.p, {2.0}, 0);
  REQUIRE(f.p.item() != 1.0);
}

TEST_CASE("clip_grad_norm scales to the limit and returns the norm before clipping") {
  Fixture a({0.0, 0.0}), b({0.0});
  a.grad({3.0, 0.0});
  b.grad({4.0});
  const double norm = optim::clip_grad_norm({a.p, b.p}, 1.0);
  REQUIRE_THAT(norm, WithinAbs(5.0, 1e-12));
  const double s = 1.0 / (5.0 + 1e-6);  // torch.nn.utils.clip_grad_norm_'s factor
  ag_test::require_values(a.p.grad(), {3.0 * s, 0.0}, 1e-15);
  ag_test::require_values(b.p.grad(), {4.0 * s}, 1e-15);

  SECTION("gradients under the limit are untouched") {
    REQUIRE_THAT(optim::clip_grad_norm({a.p, b.p}, 10.0), WithinRel(5.0 * s, 1e-12));
    ag_test::require_values(b.p.grad(), {4.0 * s}, 0);
  }
  SECTION("a non-finite norm is reported and the gradients are not touched") {
    b.grad({std::nan("")});
    REQUIRE(std::isnan(optim::clip_grad_norm({a.p, b.p}, 1.0)));
    ag_test::require_values(a.p.grad(), {3.0 * s, 0.0}, 0);
  }
}

TEST_CASE("clip_grad_norm scales a gradient set as a strided view element by element") {
  Tensor p = ag::zeros({3, 2}, ag::DType::Float64);
  p.requires_grad_();
  // columns 1 and 2 of a 3 x 4 tensor: a view with an offset and gaps between its rows
  Tensor wide = ag::tensor({{9.0, 1.0, 2.0, 9.0}, {9.0, 3.0, 4.0, 9.0}, {9.0, 5.0, 6.0, 9.0}},
                           ag::DType::Float64);
  p.set_grad(wide.narrow(1, 1, 2));
  REQUIRE_FALSE(p.grad().is_contiguous());
  const double norm = optim::clip_grad_norm({p}, 1.0);
  REQUIRE_THAT(norm, WithinAbs(std::sqrt(91.0), 1e-12));
  const double s = 1.0 / (std::sqrt(91.0) + 1e-6);
  ag_test::require_values(p.grad(), {1 * s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s}, 1e-15);
}

TEST_CASE("clip_grad_norm sums many chunks the same way on one and two threads") {
  ag::Generator gen(5);
  std::vector<Tensor> params;
  for (int64_t n : {70000, 3, 40000}) {
    params.push_back(ag::zeros({n}));
    params.back().requires_grad_();
    params.back().set_grad(ag::randn({n}, gen));
  }
  auto norm_on = [&](int threads) {
    const int saved = omp_get_max_threads();
    ag::set_num_threads(threads);
    const double norm = optim::clip_grad_norm(params, 1e9);
    ag::set_num_threads(saved);
    return norm;
  };
  const double one = norm_on(1), two = norm_on(2);
  REQUIRE(one == two);
  double sq = 0;
  for (const auto& p : params)
    for (double v : p.grad().to_vector()) sq += v * v;
  REQUIRE_THAT(one, WithinRel(std::sqrt(sq), 1e-12));
}

TEST_CASE("a step given the clip factor gives the bits of clip_grad_norm then step") {
  // Gradients far over the limit so the factor is not 1; weight decay on, so the L2 term
  // (Adam, SGD) meets the scaled gradient in the same expression.
  auto run = [](const std::string& which, ag::DType dtype, bool fused) {
    ag::Generator gen(11);
    Tensor p = ag::randn({5000}, gen).to(dtype).requires_grad_();
    std::vector<optim::ParamGroup> groups{{{{"w", p}}, 0.1}};
    std::unique_ptr<optim::Optimizer> opt;
    if (which == "sgd") opt = std::make_unique<optim::SGD>(groups, 0.01, 0.9);
    if (which == "adam") opt = std::make_unique<optim::Adam>(groups, 1e-3);
    if (which == "adamw") opt = std::make_unique<optim::AdamW>(groups, 1e-3);
    for (int step = 0; step < 3; ++step) {
      p.set_grad((ag::randn({5000}, gen) * 3.0).to(dtype));
      if (fused) {
        const double norm = optim::grad_norm({p});
        REQUIRE(optim::clip_factor(norm, 1.0) < 0.1);
        opt->step(optim::clip_factor(norm, 1.0));
      } else {
        optim::clip_grad_norm({p}, 1.0);
        opt->step();
      }
    }
    return p;
  };
  for (const std::string which : {"sgd", "adam", "adamw"})
    for (const ag::DType dtype : {ag::DType::Float32, ag::DType::Float64}) {
      INFO(which << " " << ag::dtype_name(dtype));
      ag_test::require_values(run(which, dtype, true), run(which, dtype, false).to_vector(), 0);
    }
  REQUIRE(optim::clip_factor(0.5, 1.0) == 1.0);
  REQUIRE(optim::clip_factor(NAN, 1.0) == 1.0);
  REQUIRE(optim::clip_factor(3.0, INFINITY) == 1.0);
}

TEST_CASE("warm-up then cosine rises linearly and decays to the floor") {
  optim::WarmupCosineLR s(1e-3, 1e-4, /*warmup=*/10, /*total=*/110);
  REQUIRE_THAT(s.lr_at(1), WithinRel(1e-4, 1e-12));
  REQUIRE_THAT(s.lr_at(5), WithinRel(5e-4, 1e-12));
  REQUIRE_THAT(s.lr_at(10), WithinRel(1e-3, 1e-12));
  REQUIRE_THAT(s.lr_at(60), WithinRel(1e-4 + 0.5 * 9e-4, 1e-12));  // half way: cos = 0
  REQUIRE_THAT(s.lr_at(35), WithinRel(1e-4 + 0.5 * 9e-4 * (1 + std::cos(M_PI / 4)), 1e-12));
  REQUIRE_THAT(s.lr_at(110), WithinRel(1e-4, 1e-12));
  REQUIRE_THAT(s.lr_at(500), WithinRel(1e-4, 1e-12));
  REQUIRE_THROWS_WITH(optim::WarmupCosineLR(1e-3, 2e-3, 0, 10), Contains("min_lr"));
}

TEST_CASE("step decay and constant schedules and their JSON round trip") {
  optim::StepLR step(0.1, /*step_size=*/3, /*gamma=*/0.5);
  CHECK(step.lr_at(1) == 0.1);
  CHECK(step.lr_at(3) == 0.1);
  CHECK(step.lr_at(4) == 0.05);
  CHECK(step.lr_at(7) == 0.025);
  optim::ConstantLR constant(0.02);
  optim::WarmupCosineLR cosine(1e-3, 1e-4, 10, 100);
  for (const optim::LRSchedule* s :
       std::vector<const optim::LRSchedule*>{&step, &constant, &cosine}) {
    auto back = optim::schedule_from_json(s->to_json());
    for (int64_t t : {1, 2, 5, 9, 10, 11, 50, 100, 200}) CHECK(back->lr_at(t) == s->lr_at(t));
  }
  REQUIRE_THROWS_WITH(optim::schedule_from_json({{"type", "zigzag"}}), Contains("zigzag"));
}

TEST_CASE("optimizer state round-trips so the next step is bit-identical") {
  ag::Generator gen(7);
  Tensor w1 = ag::randn({4, 3}, gen).requires_grad_(), b1 = ag::randn({3}, gen).requires_grad_();
  Tensor w2 = w1.detach().clone().requires_grad_(), b2 = b1.detach().clone().requires_grad_();
  optim::AdamW a(optim::decay_groups({{"w", w1}, {"b", b1}}, 0.1), 1e-2);
  optim::AdamW b(optim::decay_groups({{"w", w2}, {"b", b2}}, 0.1), 1e-2);
  std::vector<Tensor> grads = {ag::randn({4, 3}, gen), ag::randn({3}, gen)};
  for (int i = 0; i < 3; ++i) {
    w1.set_grad(grads[0]), b1.set_grad(grads[1]);
    a.step();
  }
  // b continues from a's state, with a's weights
  ag::copy_(w2, w1), ag::copy_(b2, b1);
  b.load_state(a.state());
  REQUIRE(b.steps() == 3);
  Tensor next_w = ag::randn({4, 3}, gen), next_b = ag::randn({3}, gen);
  w1.set_grad(next_w), b1.set_grad(next_b);
  w2.set_grad(next_w), b2.set_grad(next_b);
  a.step();
  b.step();
  REQUIRE(w1.to_vector() == w2.to_vector());
  REQUIRE(b1.to_vector() == b2.to_vector());
}

TEST_CASE(
    "loading a mismatched optimizer state is an error that names the problem and changes nothing") {
  Fixture f({1.0, 2.0});
  optim::AdamW opt(f.groups(), 0.1);
  f.grad({1.0, 1.0});
  opt.step();
  optim::OptimizerState good = opt.state();
  SECTION("another optimizer's state") {
    optim::SGD sgd(f.groups(), 0.1, 0.9);
    REQUIRE_THROWS_WITH(sgd.load_state(good), Contains("'adamw'") && Contains("'sgd'"));
  }
  SECTION("a missing buffer") {
    optim::OptimizerState st = good;
    st.tensors.erase(st.tensors.begin());
    REQUIRE_THROWS_WITH(opt.load_state(st), Contains("m/w"));
    REQUIRE(opt.steps() == 1);
  }
  SECTION("a buffer of the wrong shape") {
    optim::OptimizerState st = good;
    st.tensors[1].second = ag::zeros({3});
    REQUIRE_THROWS_WITH(opt.load_state(st), Contains("v/w") && Contains("[3]") && Contains("[2]"));
  }
}

TEST_CASE("optimizer state no optimiser could take is refused by name and changes nothing") {
  Fixture f({1.0, 2.0});
  optim::AdamW opt(f.groups(), 0.1);
  f.grad({1.0, 1.0});
  opt.step();
  const optim::OptimizerState good = opt.state();
  const std::vector<double> v_before = good.tensors[1].second.to_vector();
  auto refused = [&](const optim::OptimizerState& st, const std::string& why) {
    REQUIRE_THROWS_WITH(opt.load_state(st), Contains(why));
    REQUIRE_THROWS_WITH(optim::check_state_values(st), Contains(why));
    REQUIRE(opt.steps() == 1);
    REQUIRE(opt.state().tensors[1].second.to_vector() == v_before);
  };
  auto with_tensor = [&](size_t at, std::vector<double> values) {
    optim::OptimizerState st = good;
    st.tensors[at].second = ag::from_vector(values, {2}, ag::DType::Float64);
    return st;
  };
  auto with_scalar = [&](const std::string& key, double value) {
    optim::OptimizerState st = good;
    for (auto& [k, v] : st.scalars)
      if (k == key) v = value;
    return st;
  };
  SECTION("a negative second moment") {
    refused(with_tensor(1, {0.5, -0.25}),
            "optimizer state 'v/w' holds 1 negative value (first at [1]: -0.25)");
    // the first moment may be negative: a mean of gradients
    REQUIRE_NOTHROW(optim::check_state_values(with_tensor(0, {-0.5, -0.25})));
    // SGD's momentum may be negative too, whatever its buffer is called
    optim::OptimizerState sgd = with_tensor(1, {-0.5, -0.25});
    sgd.type = "sgd";
    REQUIRE_NOTHROW(optim::check_state_values(sgd));
  }
  SECTION("a non-finite moment") {
    refused(with_tensor(0, {NAN, 1.0}), "optimizer state 'm/w' holds 1 NaN and 0 infinite");
    refused(with_tensor(1, {1.0, INFINITY}), "optimizer state 'v/w' holds 0 NaN and 1 infinite");
  }
  SECTION("a step count that is not a whole number >= 0") {
    for (double bad : {-1.0, 1.5, double(NAN), 1e300})
      refused(with_scalar("step", bad), "the step count is");
  }
  SECTION("an lr or a setting that is not finite") {
    refused(with_scalar("lr", -1), "the lr is -1");
    refused(with_scalar("lr", NAN), "the lr is nan");
    refused(with_scalar("beta2", INFINITY), "the setting 'beta2' is inf");
  }
}

TEST_CASE("optimizer hyperparameters out of range are clear errors") {
  Fixture f({1.0});
  REQUIRE_THROWS_WITH(optim::AdamW(f.groups(), 1e-3, 1.0), Contains("beta1"));
  REQUIRE_THROWS_WITH(optim::AdamW(f.groups(), 1e-3, 0.9, -0.1), Contains("beta2"));
  REQUIRE_THROWS_WITH(optim::Adam(f.groups(), 1e-3, 0.9, 0.99, 0.0), Contains("eps"));
  REQUIRE_THROWS_WITH(optim::SGD(f.groups(), -1.0), Contains("learning rate"));
  REQUIRE_THROWS_WITH(optim::SGD(f.groups(), 0.1, 0.0, true), Contains("Nesterov"));
  REQUIRE_THROWS_WITH(optim::SGD(f.groups(-0.1), 0.1), Contains("weight_decay"));
}
