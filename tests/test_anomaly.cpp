// Anomaly detection: the first non-finite value is reported at the op and module that
// produced it, forward (with its inputs' statistics) and backward; planted NaNs are found.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autograd.h"
#include "autograd/test_hooks.h"
#include "nn/gpt.h"
#include "support.h"

using Catch::Matchers::Contains;

namespace {

nn::GPTConfig small_config() {
  return ag_test::gpt_config(13, 8, 8, 2, 2, 0.0);
}

// Anomaly detection and injection switched on for one test and off afterwards.
struct AnomalyMode {
  explicit AnomalyMode(bool detect, const std::string& inject = "") {
    ag::set_detect_anomaly(detect);
    ag::set_nan_injection(inject);
  }
  ~AnomalyMode() {
    ag::set_detect_anomaly(false);
    ag::set_nan_injection("");
  }
};

ag::Tensor batch(int64_t vocab, uint64_t seed) {
  ag::Generator g(seed);
  std::vector<int64_t> ids(2 * 8);
  for (auto& id : ids) id = static_cast<int64_t>(g.next_u64() % vocab);
  return ag::from_vector(ids, {2, 8});
}

std::string anomaly_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const ag::AnomalyError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a NaN weight is reported at the first op that uses it with the module path") {
  nn::GPT model(small_config(), 1);
  model.blocks->operator[](0).attn->W_query->weight.set({1, 2}, std::nan(""));
  AnomalyMode mode(true);
  const std::string what = anomaly_of([&] { model.forward(batch(13, 1), batch(13, 2)); });
  INFO(what);
  REQUIRE_THAT(what, Contains("forward of linear in module blocks.0.attn.qkv"));
  REQUIRE_THAT(what, Contains("input 1: [8, 8] float32") && Contains("1 NaN") &&
                         Contains("first at [1, 2]"));
  REQUIRE_THAT(what, Contains("input 0: [2, 8, 8] float32") && Contains("0 NaN, 0 inf"));
}

TEST_CASE("a NaN planted in a gradient is reported at the backward that produced it") {
  nn::GPT model(small_config(), 1);
  AnomalyMode mode(true, "backward:blocks.1.mlp.fc2");
  auto out = model.forward(batch(13, 1), batch(13, 2));
  const std::string what = anomaly_of([&] { out.loss.backward(); });
  INFO(what);
  REQUIRE_THAT(what, Contains("backward of linear in module blocks.1.mlp.fc2"));
  REQUIRE_THAT(what, Contains("the gradient it received") && Contains("0 NaN, 0 inf"));
}

TEST_CASE("a non-finite value planted in a forward is reported where it appeared") {
  nn::GPT model(small_config(), 1);
  AnomalyMode mode(true, "forward:blocks.1.attn.qkv");
  const std::string what = anomaly_of([&] { model.forward(batch(13, 1), batch(13, 2)); });
  INFO(what);
  REQUIRE_THAT(what, Contains("forward of linear in module blocks.1.attn.qkv"));
  REQUIRE_THAT(what, Contains("first at [0, 0, 0]"));
}

TEST_CASE("without anomaly detection a planted NaN reaches the loss gradient silently") {
  nn::GPT model(small_config(), 1);
  AnomalyMode mode(false, "backward:blocks.0.mlp.fc1");
  auto out = model.forward(batch(13, 1), batch(13, 2));
  REQUIRE_NOTHROW(out.loss.backward());
  bool any_nan = false;
  for (const auto& p : model.parameters()) any_nan |= ag::count_non_finite(p.grad()) > 0;
  REQUIRE(any_nan);
}

TEST_CASE("anomaly detection passes a healthy model and leaves its results unchanged") {
  nn::GPT a(small_config(), 3), b(small_config(), 3);
  auto plain = a.forward(batch(13, 1), batch(13, 2));
  plain.loss.backward();
  AnomalyMode mode(true);
  auto checked = b.forward(batch(13, 1), batch(13, 2));
  REQUIRE_NOTHROW(checked.loss.backward());
  REQUIRE(plain.loss.item() == Approx(checked.loss.item()).epsilon(1e-6));
  for (size_t i = 0; i < a.parameters().size(); ++i) {
    auto ga = a.parameters()[i].grad().to_vector(), gb = b.parameters()[i].grad().to_vector();
    for (size_t j = 0; j < ga.size(); ++j) REQUIRE(ga[j] == Approx(gb[j]).margin(1e-7));
  }
}

TEST_CASE("module paths follow the parameter names") {
  nn::GPT model(small_config(), 1);
  REQUIRE(model.path().empty());
  REQUIRE(model.blocks->operator[](1).mlp->output_projection().path() == "blocks.1.mlp.fc2");
  REQUIRE(model.ln_f->path() == "ln_f");
  REQUIRE_THROWS_WITH(ag::set_nan_injection("sideways:ln_f"), Contains("forward:MODULE"));
}
