// The fine-tuning tasks' shared machinery (data/examples.h, train/evaluate_examples.h):
// splits, padded batches, the sampler's draws, and the evaluation of examples.
#include <catch2/catch.hpp>

#include "data/examples.h"
#include "nn/gpt.h"
#include "train/evaluate_examples.h"

namespace {

data::Example labelled(std::vector<int64_t> ids, int64_t label, int64_t line) {
  data::Example e;
  e.ids = std::move(ids);
  e.label = label;
  e.line = line;
  return e;
}

std::vector<data::Example> numbered(int64_t n) {
  std::vector<data::Example> all;
  for (int64_t i = 0; i < n; ++i) all.push_back(labelled({i % 7, 1 + i % 3}, i % 2, i + 1));
  return all;
}

}  // namespace

TEST_CASE("a task split holds out a seeded share and keeps file order on each side") {
  const data::ExampleSplit s = data::split_examples(numbered(100), 0.1, 42);
  REQUIRE(s.val.size() == 10);
  REQUIRE(s.train.size() == 90);
  for (const auto* side : {&s.train, &s.val})
    for (size_t i = 1; i < side->size(); ++i) CHECK((*side)[i - 1].line < (*side)[i].line);
  const data::ExampleSplit again = data::split_examples(numbered(100), 0.1, 42);
  const data::ExampleSplit other = data::split_examples(numbered(100), 0.1, 43);
  bool same = true, differs = false;
  for (size_t i = 0; i < 10; ++i) {
    same = same && again.val[i].line == s.val[i].line;
    differs = differs || other.val[i].line != s.val[i].line;
  }
  CHECK(same);
  CHECK(differs);  // a sorted file (labels in blocks) is not split by its order
}

TEST_CASE("a task split of two examples keeps one on each side; none held out at fraction 0") {
  const data::ExampleSplit two = data::split_examples(numbered(2), 0.1, 1);
  CHECK(two.train.size() == 1);
  CHECK(two.val.size() == 1);
  CHECK(data::split_examples(numbered(5), 0.0, 1).val.empty());
}

TEST_CASE("a batch pads rows on the right, ignores padding targets and gives lengths") {
  data::Example a, b;
  a.ids = {5, 6, 7};
  a.targets = {data::kIgnoreTarget, 7, 9};
  b.ids = {8};
  b.targets = {3};
  const std::vector<const data::Example*> rows = {&a, &b};
  const data::ExampleBatch batch = data::make_batch(rows, 99);
  REQUIRE(batch.x.shape() == ag::Shape{2, 3});
  const std::vector<int64_t> x(batch.x.data<int64_t>(), batch.x.data<int64_t>() + 6);
  const std::vector<int64_t> y(batch.y.data<int64_t>(), batch.y.data<int64_t>() + 6);
  CHECK(x == std::vector<int64_t>{5, 6, 7, 8, 99, 99});
  CHECK(y == std::vector<int64_t>{-100, 7, 9, 3, -100, -100});
  CHECK(batch.lengths.data<int64_t>()[0] == 3);
  CHECK(batch.lengths.data<int64_t>()[1] == 1);
  CHECK(batch.targets == 3);
}

TEST_CASE("a batch of labelled examples has one label per row") {
  const std::vector<data::Example> all = {labelled({1, 2}, 1, 1), labelled({3}, 0, 2)};
  const std::vector<const data::Example*> rows = {&all[0], &all[1]};
  const data::ExampleBatch batch = data::make_batch(rows, 0);
  REQUIRE(batch.y.shape() == ag::Shape{2});
  CHECK(batch.y.data<int64_t>()[0] == 1);
  CHECK(batch.y.data<int64_t>()[1] == 0);
  CHECK(batch.targets == 2);
}

TEST_CASE("the example sampler's draws follow its generator, and skip draws what next does") {
  const std::vector<data::Example> all = numbered(50);
  const data::ExampleSampler sampler(&all, 4, 0);
  ag::Generator g1(7), g2(7);
  const data::ExampleBatch first = sampler.next(g1);
  sampler.skip(g2);
  CHECK(g1.state() == g2.state());
  ag::Generator g3(7);
  const data::ExampleBatch again = sampler.next(g3);
  const int64_t n = first.x.numel();
  CHECK(std::equal(first.x.data<int64_t>(), first.x.data<int64_t>() + n, again.x.data<int64_t>()));
}

TEST_CASE("evaluating examples counts the response targets only and equals the forward's loss") {
  nn::GPTConfig cfg;
  cfg.vocab_size = 11, cfg.context_length = 8, cfg.d_model = 16, cfg.n_heads = 2;
  cfg.n_layers = 1, cfg.dropout = 0;
  nn::GPT model(cfg, 3);
  data::Example a, b;
  a.ids = {1, 2, 3, 4};
  a.targets = {data::kIgnoreTarget, data::kIgnoreTarget, 4, 10};
  b.ids = {5, 6};
  b.targets = {data::kIgnoreTarget, 10};
  const train::ExampleEval r = train::evaluate_examples(model, {a, b}, 1, 10);
  CHECK(r.targets == 3);
  CHECK(r.examples == 2);
  // the same loss from one padded batch: padding never changes an earlier position
  const std::vector<const data::Example*> rows = {&a, &b};
  const data::ExampleBatch batch = data::make_batch(rows, 10);
  ag::NoGradGuard no_grad;
  model.eval();
  CHECK(model.forward(batch.x, batch.y).loss.item() == Approx(r.loss).epsilon(1e-5));
}
