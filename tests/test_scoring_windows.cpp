// The windows `eval` scores (data/scoring_windows.h) and their evaluation
// (train/evaluate.h): every target counted exactly once, the last partial window and a text
// shorter than the context scored, sliding windows with the history Hugging Face's
// perplexity guide gives, and the loss of a text read a chunk at a time equal to the loss
// of its ids in a store.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "data/data.h"
#include "data/examples.h"
#include "data/scoring_windows.h"
#include "data/text_ids.h"
#include "support.h"
#include "train/evaluate.h"

namespace {

// Each window of rule over n ids, in order.
std::vector<data::ScoringWindow> all_windows(const data::ScoringWindows& rule, int64_t n) {
  std::vector<data::ScoringWindow> out;
  for (int64_t w = 0;; ++w) {
    const auto win = rule.window(w, n);
    if (!win) break;
    out.push_back(*win);
  }
  return out;
}

// Hugging Face's perplexity guide, as written there: windows [begin, end) of max_length ids
// at begin = 0, stride, 2 stride, ...; the last end - prev_end labels counted (the first id
// of a sequence has none); stop once a window reaches the end. {begin, ids, counted}.
std::vector<std::array<int64_t, 3>> hf_windows(int64_t n, int64_t max_length, int64_t stride) {
  std::vector<std::array<int64_t, 3>> out;
  int64_t prev_end = 0;
  for (int64_t begin = 0; begin < n; begin += stride) {
    const int64_t end = std::min(begin + max_length, n);
    const int64_t trg_len = end - prev_end;
    out.push_back({begin, end - begin, std::min(trg_len, end - begin - 1)});
    prev_end = end;
    if (end == n) break;
  }
  return out;
}

}  // namespace

TEST_CASE("every target is scored exactly once under every rule", "[scoring_windows]") {
  for (int64_t T = 1; T <= 9; ++T)
    for (int64_t S = 0; S < T; ++S)
      for (int64_t n = 0; n <= 60; ++n) {
        const data::ScoringWindows rule{.context = T, .stride = S};
        std::map<int64_t, int> scored;
        int64_t total = 0;
        const auto windows = all_windows(rule, n);
        for (size_t w = 0; w < windows.size(); ++w) {
          const auto& win = windows[w];
          INFO("T " << T << " S " << S << " n " << n << " window " << w);
          REQUIRE(win.start == rule.start(static_cast<int64_t>(w)));
          REQUIRE(win.length >= 1);
          REQUIRE(win.length <= rule.full_length());
          REQUIRE(win.start + win.length < n);  // its last target is an id
          REQUIRE((win.counted >= 1 && win.counted <= win.length));
          for (int64_t k = win.length - win.counted; k < win.length; ++k)
            ++scored[win.start + 1 + k];
          total += win.counted;
        }
        INFO("T " << T << " S " << S << " n " << n);
        REQUIRE(static_cast<int64_t>(scored.size()) == std::max<int64_t>(0, n - 1));
        for (const auto& [at, times] : scored) REQUIRE((at >= 1 && at < n && times == 1));
        REQUIRE(rule.count(n) == static_cast<int64_t>(windows.size()));
        REQUIRE(rule.counted(n) == total);
      }
}

TEST_CASE("side-by-side windows score the last partial one and a text shorter than the context",
          "[scoring_windows]") {
  const data::ScoringWindows rule{.context = 4};
  const auto w = all_windows(rule, 11);  // targets 1..10: 4 + 4 + 2
  REQUIRE(w.size() == 3);
  CHECK((w[2].start == 8 && w[2].length == 2 && w[2].counted == 2));
  const auto short_text = all_windows(data::ScoringWindows{.context = 1024}, 500);
  REQUIRE(short_text.size() == 1);  // a GPT-2 scores a 500-token text: 499 targets
  CHECK((short_text[0].start == 0 && short_text[0].length == 499 && short_text[0].counted == 499));
  CHECK(all_windows(rule, 1).empty());  // one id: no target
  // the evaluation during training keeps full windows only, as eval_windows gives them
  const data::ScoringWindows full{.context = 4, .drop_partial = true};
  const auto kept = all_windows(full, 11);
  REQUIRE(kept.size() == data::eval_windows(11, 4).size());
  for (size_t i = 0; i < kept.size(); ++i)
    CHECK(kept[i].start == data::eval_windows(11, 4)[i].first);
  CHECK(full.counted(11) == 8);
}

TEST_CASE("sliding windows are Hugging Face's, each target with context - stride ids of history",
          "[scoring_windows]") {
  for (int64_t T = 2; T <= 8; ++T)
    for (int64_t S = 1; S < T; ++S)
      for (int64_t n = 2; n <= 40; ++n) {
        INFO("T " << T << " S " << S << " n " << n);
        const data::ScoringWindows rule{.context = T, .stride = S};
        const auto ours = all_windows(rule, n);
        const auto hf = hf_windows(n, T, S);
        REQUIRE(ours.size() == hf.size());
        for (size_t w = 0; w < ours.size(); ++w) {
          // HF's window of `ids` ids is ours of ids - 1 inputs
          CHECK((ours[w].start == hf[w][0] && ours[w].length == hf[w][1] - 1 &&
                 ours[w].counted == hf[w][2]));
          // the first counted target of a later window sees the ids from its window's start
          const int64_t history = ours[w].length - ours[w].counted + 1;
          if (w > 0) CHECK(history >= T - S);
        }
      }
}

TEST_CASE("a rule whose stride is not below its context is refused", "[scoring_windows]") {
  CHECK_THROWS_AS((data::ScoringWindows{.context = 4, .stride = 4}.count(10)),
                  std::invalid_argument);
  CHECK_THROWS_AS((data::ScoringWindows{.context = 0}.window(0, 10)), std::invalid_argument);
}

namespace {

nn::GPT tiny_model() {
  nn::GPTConfig cfg;
  cfg.vocab_size = 256, cfg.context_length = 8, cfg.d_model = 16, cfg.n_heads = 2;
  cfg.n_layers = 1, cfg.dropout = 0;
  return nn::GPT(cfg, 5);
}

// The mean loss over rule's counted targets, one forward per window.
double window_by_window(nn::GPT& model, const std::vector<int64_t>& ids,
                        const data::ScoringWindows& rule) {
  ag::NoGradGuard no_grad;
  model.eval();
  double nats = 0;
  int64_t counted = 0;
  for (const auto& w : all_windows(rule, static_cast<int64_t>(ids.size()))) {
    std::vector<int64_t> x(ids.begin() + w.start, ids.begin() + w.start + w.length);
    std::vector<int64_t> y(ids.begin() + w.start + 1, ids.begin() + w.start + w.length + 1);
    std::fill_n(y.begin(), w.length - w.counted, data::kIgnoreTarget);
    const auto out =
        model.forward(ag::from_vector(x, {1, w.length}), ag::from_vector(y, {1, w.length}));
    nats += out.loss.item() * static_cast<double>(w.counted);
    counted += w.counted;
  }
  return nats / static_cast<double>(counted);
}

}  // namespace

TEST_CASE("eval's loss is the mean over each window's counted targets, from a store or a text",
          "[scoring_windows]") {
  nn::GPT model = tiny_model();
  const ag_test::TempDir dir;
  std::string text;
  for (int i = 0; i < 45; ++i) text += static_cast<char>('a' + (i * 7) % 26);
  const std::string path = dir.write("t.txt", text);
  const std::vector<int64_t> ids(text.begin(), text.end());
  const data::TokenStore store = data::TokenStore::from_ids(ids, 256, "t");
  const std::vector<uint32_t> bytes(256, 1);
  const data::ByteTokenizer tok;
  for (const int64_t stride : {0, 3}) {
    INFO("stride " << stride);
    const data::ScoringWindows rule{.context = 8, .stride = stride};
    const train::EvalResult r = train::evaluate_stores(model, {&store}, bytes, rule, nullptr);
    CHECK(r.tokens == 44);
    CHECK(r.windows == rule.count(45));
    CHECK(r.bytes == 44);  // the bytes of the counted targets only
    CHECK(r.loss == Approx(window_by_window(model, ids, rule)).epsilon(1e-6));
    CHECK(r.bits_per_byte() == Approx(r.loss / std::log(2.0)).epsilon(1e-12));
    data::TextIds chunks(path, tok, /*chunk_bytes=*/5);  // windows across many chunks
    const train::EvalResult t = train::evaluate_text(model, chunks, bytes, rule, nullptr);
    CHECK(t.loss == r.loss);  // the same windows in the same batches: bit for bit
    CHECK((t.tokens == r.tokens && t.windows == r.windows && t.bytes == r.bytes && t.ids == 45));
  }
}

TEST_CASE("two stores are scored as one sequence of ids", "[scoring_windows]") {
  nn::GPT model = tiny_model();
  std::vector<int64_t> ids;
  for (int i = 0; i < 30; ++i) ids.push_back((i * 11) % 256);
  const data::TokenStore whole = data::TokenStore::from_ids(ids, 256, "whole");
  const data::TokenStore head =
      data::TokenStore::from_ids({ids.begin(), ids.begin() + 13}, 256, "a");
  const data::TokenStore tail = data::TokenStore::from_ids({ids.begin() + 13, ids.end()}, 256, "b");
  const data::ScoringWindows rule{.context = 8};
  const auto one = train::evaluate_stores(model, {&whole}, {}, rule, nullptr);
  const auto two = train::evaluate_stores(model, {&head, &tail}, {}, rule, nullptr);
  CHECK((two.loss == one.loss && two.tokens == 29 && two.windows == 4));
}
