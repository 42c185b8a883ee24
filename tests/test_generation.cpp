// Generation (nn/generation.h) with and without the key/value cache: the same tokens,
// greedy and seeded, well past the context length, on the default and base configs (the
// base config's path without the cache as its windows' forwards, one a window start); the
// window schedule; the sampler's top-k and top-p; callbacks and time limits.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <set>
#include <tuple>

#include "decode_support.h"

namespace {

nn::GenerationOptions options(int64_t tokens, bool cache) {
  nn::GenerationOptions o;
  o.max_new_tokens = tokens;
  o.use_cache = cache;
  return o;
}

// The smallest gap between the two largest logits over the windows a generation used
// (computed by the cached decoder along the same schedule): greedy paths that agree only
// mean something when no choice on the way was a near-tie.
double smallest_top2_gap(const nn::GPT& model, const std::vector<int64_t>& text, int64_t prompt) {
  const int64_t T = model.config().context_length, V = model.config().vocab_size;
  const int64_t slide = nn::default_slide(T);
  nn::CachedInference dec(model, 1);
  double gap = INFINITY;
  int64_t s = -1;
  for (int64_t n = prompt; n < static_cast<int64_t>(text.size()); ++n) {
    const int64_t start = nn::window_start(n, T, slide);
    std::span<const float> l =
        start != s ? dec.prefill(std::span<const int64_t>(&text[start], n - start), n - start)
                   : dec.step(std::span<const int64_t>(&text[n - 1], 1));
    s = start;
    std::vector<float> top(l.begin(), l.begin() + V);
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
    gap = std::min<double>(gap, top[0] - top[1]);
  }
  return gap;
}

// The tokens the loop without the cache picks for one sample along `text` from position
// `prompt` on (its sampler and generator from `o`), each from its window
// [window_start(n), n), found by one forward a window start: the model is causal, so the
// logits that predict token n are row n - 1 - s of a forward over the longest window from
// s. The loop itself runs a forward a token, each over its whole window: on the base config
// about 400 of up to 256 positions, a minute under the sanitizers.
std::vector<int64_t> teacher_forced(const nn::GPT& model, const std::vector<int64_t>& text,
                                    int64_t prompt, const nn::GenerationOptions& o) {
  const int64_t T = model.config().context_length, V = model.config().vocab_size;
  const int64_t slide = nn::default_slide(T), length = static_cast<int64_t>(text.size());
  nn::TokenSampler sampler(V, o.sampling);
  ag::Generator gen(o.seed);
  std::vector<int64_t> picked;
  for (int64_t n = prompt; n < length;) {
    const int64_t s = nn::window_start(n, T, slide);
    int64_t last = n;  // the last position predicted from a window starting at s
    while (last + 1 < length && nn::window_start(last + 1, T, slide) == s) ++last;
    const ag::Tensor logits =
        ag_test::forward_logits(model, std::vector<int64_t>(text.begin() + s, text.begin() + last));
    for (; n <= last; ++n)
      picked.push_back(sampler.choose(
          std::span<const float>(logits.const_data<float>() + (n - 1 - s) * V, V), gen));
  }
  return picked;
}

std::vector<std::tuple<std::string, nn::GPTConfig, nn::WeightFormat>> configs_and_formats() {
  std::vector<std::tuple<std::string, nn::GPTConfig, nn::WeightFormat>> out;
  for (const auto& [name, cfg] : ag_test::decode_configs())
    for (auto format : {nn::WeightFormat::fp32, nn::WeightFormat::bf16})
      out.emplace_back(name, cfg, format);
  return out;
}

}  // namespace

TEST_CASE("greedy generation is the same with and without the cache past the context",
          "[generation]") {
  // with float32 weights, and with bfloat16 ones (the model rounded; the full-window path
  // runs the rounded model, the cached one its bfloat16 copies)
  for (const auto& [name, cfg, format] : configs_and_formats()) {
    INFO(name << (format == nn::WeightFormat::bf16 ? ", bfloat16 weights" : ""));
    const auto model = ag_test::sharp_model(cfg, 1);
    if (format == nn::WeightFormat::bf16) nn::round_weights_to_bfloat16(*model);
    const std::vector<int64_t> prompt = ag_test::random_tokens(10, cfg.vocab_size, 9);
    // twice the context on the default config, against the loop without the cache; on the
    // base config through a window move and on past it, against its windows' forwards
    const int64_t T = cfg.context_length;
    const int64_t tokens = name == "base" ? T + nn::default_slide(T) + 10 : 2 * T;
    auto o = options(tokens, true);
    o.sampling.temperature = 0;
    o.weights = format;
    const auto cached = nn::generate_tokens(*model, prompt, o);
    REQUIRE(cached[0].size() == static_cast<size_t>(tokens));
    std::vector<int64_t> text = prompt;
    text.insert(text.end(), cached[0].begin(), cached[0].end());
    if (name == "base") {  // the same windows' forwards, one a window start (above)
      CHECK(cached[0] == teacher_forced(*model, text, 10, o));
    } else {
      o.use_cache = false;
      CHECK(cached == nn::generate_tokens(*model, prompt, o));
    }
    // meaningful: the text wanders, and no choice on the way was a near-tie (the paths'
    // logits differ by under 1e-5 of the largest, here under 1e-4; test_decode.cpp)
    const size_t distinct = std::set<int64_t>(cached[0].begin(), cached[0].end()).size();
    const double gap = smallest_top2_gap(*model, text, 10);
    CHECK(distinct >= 10);
    CHECK(gap > 1e-3);
  }
}

TEST_CASE("seeded sampling draws the same text with and without the cache", "[generation]") {
  // three samples for twice the context on the default config, against the loop without
  // the cache; on the base config one sample, through a window move and on past it,
  // against its windows' forwards
  for (const auto& [name, cfg] : ag_test::decode_configs()) {
    INFO(name);
    const bool base = name == "base";
    const auto model = ag_test::sharp_model(cfg, 6);
    const std::vector<int64_t> prompt = ag_test::random_tokens(3, cfg.vocab_size, 4);
    const int64_t T = cfg.context_length;
    auto o = options(base ? T + nn::default_slide(T) + 10 : 2 * T + 3, true);
    o.num_samples = base ? 1 : 3, o.seed = 42, o.sampling.top_k = 30, o.sampling.top_p = 0.9;
    const auto cached = nn::generate_tokens(*model, prompt, o);
    if (base) {  // against its windows' forwards, one a window start (teacher_forced)
      std::vector<int64_t> text = prompt;
      text.insert(text.end(), cached[0].begin(), cached[0].end());
      CHECK(cached[0] == teacher_forced(*model, text, 3, o));
    } else {
      o.use_cache = false;
      CHECK(cached == nn::generate_tokens(*model, prompt, o));
      CHECK(cached[0] != cached[1]);  // the samples are independent draws
    }
  }
}

TEST_CASE("GPT::generate is the generation loop, its windows included", "[generation]") {
  const nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  const auto model = ag_test::sharp_model(cfg, 8);
  const std::vector<int64_t> prompt = ag_test::random_tokens(5, cfg.vocab_size, 2);
  auto o = options(cfg.context_length + 20, true);  // past the context: the window moves
  o.seed = 3;
  const auto cached = nn::generate_tokens(*model, prompt, o);
  ag::Generator gen(3);
  const ag::Tensor old =
      model->generate(ag::from_vector(prompt, {1, 5}), o.max_new_tokens, 1.0, 0, gen);
  std::vector<int64_t> old_new;
  for (int64_t t = 5; t < old.shape()[1]; ++t)
    old_new.push_back(static_cast<int64_t>(old.at({0, t})));
  CHECK(cached[0] == old_new);
}

TEST_CASE("the window moves by the slide and always holds its last tokens", "[generation]") {
  const int64_t T = 8;
  CHECK(nn::window_start(1, T, 2) == 0);
  CHECK(nn::window_start(8, T, 2) == 0);
  CHECK(nn::window_start(9, T, 2) == 2);   // 7 tokens
  CHECK(nn::window_start(10, T, 2) == 2);  // 8 tokens
  CHECK(nn::window_start(11, T, 2) == 4);
  CHECK(nn::window_start(9, T, 1) == 1);
  CHECK(nn::window_start(20, T, 8) == 16);
  for (int64_t slide = 1; slide <= T; ++slide)
    for (int64_t n = T + 1; n < 5 * T; ++n) {
      const int64_t w = n - nn::window_start(n, T, slide);
      CHECK(w <= T);
      CHECK(w >= T - slide + 1);
    }
  CHECK(nn::default_slide(64) == 32);
  CHECK(nn::default_slide(3) == 1);
}

TEST_CASE("a sample's tokens do not depend on how many samples are drawn beside it",
          "[generation]") {
  const nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  const auto model = ag_test::sharp_model(cfg, 9);
  const std::vector<int64_t> prompt{1, 2, 3};
  auto o = options(40, true);
  o.seed = 7;
  const auto one = nn::generate_tokens(*model, prompt, o);
  o.num_samples = 4;
  const auto four = nn::generate_tokens(*model, prompt, o);
  CHECK(four[0] == one[0]);
  CHECK(four[1] != four[0]);
}

TEST_CASE("a sample ends when its callback says so and the others go on", "[generation]") {
  const nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  const auto model = ag_test::sharp_model(cfg, 9);
  const std::vector<int64_t> prompt{1};
  auto o = options(30, true);
  o.num_samples = 2;
  std::vector<std::vector<int64_t>> got(2);
  const nn::GenerationStats st = nn::generate(*model, prompt, o, [&](int64_t b, int64_t id) {
    got[b].push_back(id);
    return !(b == 0 && got[0].size() == 5);
  });
  CHECK(got[0].size() == 5);
  CHECK(got[1].size() == 30);
  CHECK(st.new_tokens == 35);
  const auto alone = nn::generate_tokens(*model, prompt, o);
  CHECK(alone[1] == got[1]);
}

TEST_CASE("generation stops at its time limit", "[generation]") {
  const nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  const auto model = ag_test::sharp_model(cfg, 9);
  auto o = options(1000000, true);
  o.max_seconds = 0.2;
  const nn::GenerationStats st =
      nn::generate(*model, std::vector<int64_t>{1}, o, [](int64_t, int64_t) { return true; });
  CHECK(st.timed_out);
  CHECK(st.new_tokens < 1000000);
  CHECK(st.seconds < 5.0);
}

TEST_CASE("generation options are checked", "[generation]") {
  const nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  const auto model = ag_test::sharp_model(cfg, 9);
  const std::vector<int64_t> prompt{1};
  auto run = [&](auto change) {
    auto o = options(5, true);
    change(o);
    return nn::generate_tokens(*model, prompt, o);
  };
  using O = nn::GenerationOptions;
  CHECK_THROWS_WITH(run([](O& o) { o.num_samples = 0; }), Catch::Contains("num_samples"));
  CHECK_THROWS_WITH(run([](O& o) { o.slide = 65; }), Catch::Contains("slide"));
  CHECK_THROWS_WITH(run([](O& o) { o.max_seconds = NAN; }), Catch::Contains("max_seconds"));
  CHECK_THROWS_WITH(run([](O& o) { o.sampling.top_p = 0; }), Catch::Contains("top_p"));
  CHECK_THROWS_WITH(run([](O& o) { o.sampling.top_p = 1.5; }), Catch::Contains("top_p"));
  CHECK_THROWS_WITH(run([](O& o) { o.sampling.temperature = INFINITY; }),
                    Catch::Contains("temperature"));
  CHECK_THROWS_WITH(nn::generate_tokens(*model, std::vector<int64_t>{}, options(5, true)),
                    Catch::Contains("prompt"));
}

TEST_CASE("generation is an inference whatever mode the model is in", "[generation]") {
  nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  cfg.dropout = 0.5;
  const auto model = ag_test::sharp_model(cfg, 9);
  const std::vector<int64_t> prompt{1, 2, 3};
  for (bool cache : {true, false}) {
    auto o = options(cfg.context_length + 5, cache);
    o.seed = 4;
    model->eval();
    const auto in_eval = nn::generate_tokens(*model, prompt, o);
    model->train();
    CHECK(nn::generate_tokens(*model, prompt, o) == in_eval);  // no dropout on the way
  }
}

TEST_CASE("top-p keeps the smallest set of likeliest tokens reaching p", "[generation]") {
  // probabilities 0.15, 0.5, 0.05, 0.3 (as logits: their logs)
  const std::vector<double> logits{std::log(0.15), std::log(0.5), std::log(0.05), std::log(0.3)};
  const int draws = 20000;
  auto counts = [&](double top_p, int64_t top_k) {
    nn::SamplingOptions so;
    so.top_p = top_p, so.top_k = top_k;
    nn::TokenSampler sampler(4, so);
    ag::Generator gen(1);
    std::vector<int> n(4);
    for (int i = 0; i < draws; ++i) ++n[sampler.choose(logits, gen)];
    return n;
  };
  auto c = counts(0.7, 0);  // 0.5 < 0.7 <= 0.5 + 0.3: ids 1 and 3, in proportion
  CHECK(c[0] + c[2] == 0);
  CHECK(c[1] / double(draws) == Approx(0.5 / 0.8).margin(0.02));
  c = counts(0.79, 0);
  CHECK(c[0] + c[2] == 0);
  c = counts(0.81, 0);  // needs the third likeliest
  CHECK(c[0] / double(draws) == Approx(0.15 / 0.95).margin(0.02));
  CHECK(c[2] == 0);
  c = counts(0.4, 0);  // the likeliest alone
  CHECK(c[1] == draws);
  c = counts(1.0, 2);  // top-k first: ids 1 and 3
  CHECK(c[0] + c[2] == 0);
  CHECK(c[3] > 0);
  c = counts(0.6, 2);  // then p over those two: 0.5 / 0.8 = 0.625 >= 0.6, id 1 alone
  CHECK(c[1] == draws);
}

TEST_CASE("greedy sampling takes the first largest logit and draws nothing", "[generation]") {
  nn::SamplingOptions so;
  so.temperature = 0;
  nn::TokenSampler sampler(4, so);
  ag::Generator gen(5), untouched(5);
  CHECK(sampler.choose(std::vector<double>{0.1, 2.0, -1.0, 2.0}, gen) == 1);
  CHECK(gen.next_u64() == untouched.next_u64());
}

TEST_CASE("generation's decoder holds the longest window it will use", "[generation]") {
  // the prompt (its last T tokens) and every new token but the last, at most T
  CHECK(nn::longest_window(1, 3, 32768) == 3);
  CHECK(nn::longest_window(5, 1, 64) == 5);
  CHECK(nn::longest_window(100, 10, 64) == 64);
  CHECK(nn::longest_window(10, INT64_MAX, 64) == 64);  // no overflow on the sum
  nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  cfg.context_length = 32768, cfg.d_model = 8, cfg.n_heads = 1, cfg.n_layers = 1;
  nn::GenerationOptions o = options(3, true);
  CHECK(nn::generation_memory_bytes(cfg, 1, o, 2) < (int64_t{2} << 20));
  o.num_samples = int64_t{1} << 62;  // --num-samples 4611686018427387904
  CHECK(nn::generation_memory_bytes(cfg, 1, o, 2) == INT64_MAX);
  o.use_cache = false;
  CHECK(nn::generation_memory_bytes(cfg, 1, o, 2) == INT64_MAX);
  // and a generation of a few tokens from it runs in a decoder of a few positions
  const auto model_ptr = ag_test::sharp_model(cfg, 1);
  CHECK(nn::generate_tokens(*model_ptr, std::vector<int64_t>{1}, options(3, true))[0].size() == 3);
}
