// Special tokens a fine-tuning adds to a base that lacks them (docs/finetuning.md): a chat
// run from a byte model's checkpoint grows the embedding and head by the chat format's
// tokens, the new rows the mean of the old (as Hugging Face's resize_token_embeddings with
// mean_resizing starts them), trains, and resumes exactly.
#include <catch2/catch.hpp>

#include "checkpoint_support.h"
#include "support.h"
#include "train/model_loading.h"
#include "train/task.h"
#include "train/train.h"

namespace {

// Each column's mean over the rows of a [rows, width] tensor, summed in double in row order.
std::vector<float> row_mean(const ag::Tensor& t) {
  const std::vector<double> v = t.to_vector();
  const int64_t rows = t.size(0), width = t.numel() / rows;
  std::vector<double> sum(static_cast<size_t>(width), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) sum[c] += v[r * width + c];
  std::vector<float> mean;
  for (double s : sum) mean.push_back(static_cast<float>(s / static_cast<double>(rows)));
  return mean;
}

// Row r of a [rows, width] tensor.
std::vector<float> special_row(const ag::Tensor& t, int64_t r) {
  const std::vector<double> v = t.to_vector();
  const int64_t width = t.numel() / t.size(0);
  return {v.begin() + r * width, v.begin() + (r + 1) * width};
}

std::string write_chats(const ag_test::TempDir& dir) {
  std::string lines;
  for (const char* pair : {"France|Paris", "Italy|Rome", "Spain|Madrid", "Peru|Lima"}) {
    const std::string p = pair;
    const size_t bar = p.find('|');
    lines += R"({"messages": [{"role": "user", "content": "Capital of )" + p.substr(0, bar) +
             R"(?"}, {"role": "assistant", "content": ")" + p.substr(bar + 1) + "\"}]}\n";
  }
  return dir.write("chats.jsonl", lines);
}

}  // namespace

TEST_CASE(
    "a fine-tuning that needs ids its base lacks grows the embedding and head by them, "
    "new rows the mean of the old",
    "[special_tokens][init]") {
  for (bool tied : {true, false}) {
    INFO("tied " << tied);
    nn::GPTConfig base = ag_test::gpt_config(11, 8, 8, 2, 2, 0.0);
    base.tie_weights = tied;
    nn::GPT lm(base, 5);
    const io::Checkpoint init = ag_test::init_checkpoint(lm);

    train::RunConfig run;
    train::take_model_of(init, run);
    run.model.vocab_size = 13;  // two special tokens past the base's 11 ids
    CHECK(train::init_vocab_grows(init, run.model));
    CHECK_THROWS(train::check_weights_fit(init, run.model));
    train::check_init_fits(init, run.model);
    nn::GPT grown(run.model, 9);
    train::load_init_weights(init, grown);
    const nn::StateDict mine = grown.named_parameters(), theirs = lm.named_parameters();
    REQUIRE(mine.size() == theirs.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      INFO(mine[i].first);
      const ag::Tensor &now = mine[i].second, &was = theirs[i].second;
      if (now.shape() == was.shape()) {
        CHECK(ag_test::bit_equal(now, was));
        continue;
      }
      REQUIRE(now.size(0) == 13);
      REQUIRE(was.size(0) == 11);
      for (int64_t r = 0; r < 11; ++r) CHECK(special_row(now, r) == special_row(was, r));
      for (int64_t r = 11; r < 13; ++r) CHECK(special_row(now, r) == row_mean(was));
    }
  }
}

TEST_CASE(
    "a chat fine-tuning of a byte model grows its vocabulary by the format's tokens, "
    "trains and resumes exactly",
    "[special_tokens][chat][training_run]") {
  ag_test::TempDir dir;
  train::RunConfig base = ag_test::tiny_run(dir);
  base.tokenizer = data::TokenizerKind::bytes;
  base.model.context_length = 48;
  base.steps = 2;
  base.out = dir.file("base.h5");
  REQUIRE(train::run_training(base) == 0);
  REQUIRE(io::load_checkpoint(base.out).config.at("vocab_size") == 257);  // <|endoftext|>

  train::RunConfig chat = ag_test::tiny_run(dir);
  chat.task = train::TaskHandle(train::task_named("chat"));
  chat.data = write_chats(dir);
  chat.init_from = base.out;
  chat.val_fraction = 0;
  chat.eval_interval = 0;
  chat.warmup_steps = 0;
  chat.steps = 6;
  chat.out = dir.file("chat.h5");
  REQUIRE(train::run_training(chat) == 0);
  const io::Checkpoint straight = io::load_checkpoint(chat.out);
  CHECK(straight.config.at("vocab_size") == 259);  // <|im_start|> and <|im_end|>

  train::RunConfig split = chat;
  split.out = dir.file("split.h5");
  split.stop_at = 3;
  REQUIRE(train::run_training(split) == 0);
  const io::Checkpoint half = io::load_checkpoint(split.out);
  REQUIRE(half.step == 3);
  train::RunConfig resumed = train::RunConfig::from_json(half.config);
  resumed.threads = 1, resumed.out = split.out;
  REQUIRE(train::run_training(resumed, &half) == 0);
  const io::Checkpoint rest = io::load_checkpoint(split.out);
  REQUIRE(rest.step == 6);
  CHECK(ag_test::same_bits(rest.model, straight.model));
}
