// serve::Engine: choices decoded together, on one decoder or one a thread, each get the
// tokens they would get alone.
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "nn/gpt.h"
#include "nn/inference.h"
#include "serve/engine.h"
#include "support.h"

namespace {

// the serve tests' model: its weights stay in the caches
nn::GPTConfig engine_small_config() {
  return ag_test::gpt_config(40, 16, 32, 2, 2, 0.0);
}

// Every choice's tokens, by request and choice, from one engine of `decoders` decoders
// given `requests` requests of `choices` choices at once: prompts of different lengths,
// sampled at temperature 1 from each request's seed, past the context (window moves).
std::map<std::pair<int, int64_t>, std::vector<int64_t>> decode(const nn::GPT& model, int decoders,
                                                               int requests, int64_t choices) {
  serve::Engine engine(model, {.slots = 8, .max_queued = 8, .threads = 2, .decoders = decoders});
  std::vector<std::shared_ptr<serve::Channel>> channels;
  for (int r = 0; r < requests; ++r) {
    channels.push_back(std::make_shared<serve::Channel>(choices));
    std::vector<serve::Job> jobs;
    for (int64_t c = 0; c < choices; ++c) {
      serve::Job job;
      job.channel = channels.back();
      job.choice = c;
      job.prompt.assign(static_cast<size_t>(1 + 2 * r), 3 + r);
      job.max_tokens = 40 + 3 * r;
      job.seed = 100 + static_cast<uint64_t>(r);
      jobs.push_back(std::move(job));
    }
    REQUIRE(engine.submit(std::move(jobs)));
  }
  std::map<std::pair<int, int64_t>, std::vector<int64_t>> tokens;
  for (int r = 0; r < requests; ++r)
    for (int64_t ended = 0; ended < choices;) {
      serve::TokenEvent e;
      REQUIRE(channels[static_cast<size_t>(r)]->pop(e, std::chrono::seconds(60)));
      if (e.finish == serve::Finish::none) {
        tokens[{r, e.choice}].push_back(e.id);
      } else {
        CHECK(e.finish == serve::Finish::length);
        ++ended;
      }
    }
  return tokens;
}

}  // namespace

TEST_CASE("choices on a decoder a thread get the tokens one decoder gives them", "[serve]") {
  const nn::GPT model(engine_small_config(), 7);
  nn::InferenceScope inference;
  // the model's weights stay in the caches: one decoder a thread unless told otherwise
  CHECK(serve::Engine::decoders(model.config(), {.slots = 8, .threads = 2}) == 2);
  CHECK(serve::Engine::decoders(model.config(), {.slots = 1, .threads = 2}) == 1);
  CHECK(serve::Engine::decoders(model.config(), {.slots = 8, .threads = 2, .decoders = 1}) == 1);
  const auto alone = decode(model, 1, 1, 1);
  const auto one = decode(model, 1, 4, 2);
  const auto two = decode(model, 2, 4, 2);
  const auto three = decode(model, 3, 4, 2);  // a decoder's thread that runs out of rows waits
  REQUIRE(one.size() == 8);
  CHECK(one == two);
  CHECK(one == three);
  CHECK(one.at({0, 0}) == alone.at({0, 0}));
  CHECK(one.at({0, 0}).size() == 40);
  CHECK(one.at({0, 0}) != one.at({0, 1}));  // a choice's own generator
}

TEST_CASE("decoders made from one decoder's weights share its copies", "[serve]") {
  const nn::GPT model(engine_small_config(), 7);
  const nn::GPTConfig& cfg = model.config();
  const int64_t copies = nn::CachedInference::weight_copy_bytes(cfg, nn::WeightFormat::fp32);
  REQUIRE(copies > 0);  // a small model's panels
  const serve::EngineOptions one{.slots = 8, .threads = 2, .decoders = 1},
      two{.slots = 8, .threads = 2, .decoders = 2};
  // two decoders of 4 rows: two caches of 4 rows and the copies once
  const int64_t rows4 = nn::CachedInference::memory_bytes(cfg, 4, 2),
                rows8 = nn::CachedInference::memory_bytes(cfg, 8, 2);
  CHECK(serve::Engine::memory_bytes(cfg, two) - serve::Engine::memory_bytes(cfg, one) ==
        2 * rows4 - copies - rows8);
  nn::InferenceScope inference;
  nn::CachedInference first(model, 4), second(first, 4);
  const std::vector<int64_t> ids{1, 2, 3};
  const auto a = first.prefill_slot(2, ids);
  const std::vector<float> from_first(a.begin(), a.end());
  const auto b = second.prefill_slot(2, ids);
  CHECK(std::vector<float>(b.begin(), b.end()) == from_first);
}
