#include "train/evaluate.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "data/data_error.h"
#include "data/examples.h"
#include "io/checkpoint.h"
#include "train/config.h"
#include "train/window_feed.h"
#include "train/world.h"

namespace train {

namespace {

// The bytes of text the counted targets stand for.
int64_t target_bytes(const std::vector<int64_t>& y, std::span<const uint32_t> token_bytes) {
  int64_t bytes = 0;
  for (int64_t id : y)
    if (id != data::kIgnoreTarget) bytes += token_bytes[static_cast<size_t>(id)];
  return bytes;
}

// The gradients the evaluation accumulated, as a checkpoint-shaped HDF5 file.
void write_gradients(nn::GPT& model, const EvalResult& r, const std::string& path) {
  io::Checkpoint g;
  RunConfig rc;
  rc.model = model.config();
  g.config = rc.to_json();
  g.config["contents"] = io::kGradientDumpContents;
  g.config["loss"] = r.loss;
  g.config["tokens"] = r.tokens;
  for (const auto& [name, p] : model.named_parameters())
    g.model.emplace_back(name, p.grad().defined() ? p.grad() : ag::zeros_like(p));
  g.tokenizer.type = "none";
  io::save_checkpoint(path, g);
}

// Restores the model's mode and drops its gradients unless they are wanted.
struct EvalMode {
  nn::GPT& model;
  bool was_training = model.is_training();
  std::optional<ag::NoGradGuard> no_grad;
  EvalMode(nn::GPT& m, bool grads) : model(m) {
    model.eval();
    model.zero_grad();
    if (!grads) no_grad.emplace();
  }
  ~EvalMode() { model.train(was_training); }
};

// Every batch's (nats, bytes), added in batch order as one process adds them: under
// mpirun batch b is evaluated by rank b % ranks and the sums are gathered, so any number
// of processes gives the same loss, bit for bit.
void total_in_batch_order(std::vector<double> sums, int64_t batches, int ranks, EvalResult& r) {
  const int64_t per_rank = (batches + ranks - 1) / ranks;
  sums.resize(static_cast<size_t>(2 * per_rank));
  const std::vector<double> all = ranks > 1 ? World::current().all_gather(sums) : sums;
  double total = 0;
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t at = (b % ranks) * 2 * per_rank + 2 * (b / ranks);
    total += all[static_cast<size_t>(at)];
    r.bytes += static_cast<int64_t>(all[static_cast<size_t>(at + 1)]);
  }
  r.loss = total / static_cast<double>(r.tokens);
}

// Gradients were accumulated for the sum of nats; the loss is their mean.
void scale_gradients(nn::GPT& model, double factor) {
  ag::NoGradGuard no_grad;
  for (const auto& p : model.parameters())
    if (p.grad().defined()) p.set_grad(p.grad() * factor);
}

// One batch of windows (x, y: n * T ids each, counting `counted` targets): its nats and the
// bytes its counted targets encode appended to sums. With `gradients`, also backward of the
// batch's share of the mean over every counted target (over `known` targets when the count
// is known ahead, known > 0; else of the sum, scaled afterwards), so that the gradients add
// up to it.
void evaluate_batch(nn::GPT& model, const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                    int64_t T, int64_t counted, std::span<const uint32_t> token_bytes,
                    bool gradients, int64_t known, std::vector<double>& sums) {
  const auto n = static_cast<int64_t>(x.size()) / T;
  auto out = model.forward(ag::from_vector(x, {n, T}), ag::from_vector(y, {n, T}));
  sums.push_back(out.loss.item() * static_cast<double>(counted));
  sums.push_back(token_bytes.empty() ? 0.0 : static_cast<double>(target_bytes(y, token_bytes)));
  if (!gradients) return;
  const double share = static_cast<double>(counted) / static_cast<double>(known > 0 ? known : 1);
  (out.loss * share).backward();
}

EvalResult evaluate_feed(nn::GPT& model, WindowFeed& feed, std::span<const uint32_t> token_bytes,
                         int64_t T, const std::string* grads_path,
                         const std::function<bool()>& cancelled, int64_t windows_per_forward) {
  const int64_t per_forward = std::max<int64_t>(1, windows_per_forward);
  EvalResult r;
  EvalMode mode(model, grads_path != nullptr);
  const World& world = World::current();
  const int ranks = world.distributed() && !grads_path ? world.size() : 1;
  const int64_t known = feed.known_targets();
  std::vector<double> sums;  // per own batch: nats, bytes
  std::vector<int64_t> x(per_forward * T), y(per_forward * T);
  int64_t b = 0;
  for (;; ++b) {
    if (ranks == 1 && cancelled && cancelled()) {  // ranks must not leave one by one
      model.zero_grad();
      return EvalResult{};
    }
    const FeedBatch batch = feed.next(per_forward, x.data(), y.data());
    if (batch.windows == 0) break;
    r.windows += batch.windows, r.tokens += batch.counted;
    if (b % ranks != (ranks > 1 ? world.rank() : 0)) continue;
    if (!feed.failure().empty()) {
      sums.insert(sums.end(), {0.0, 0.0});
      continue;
    }
    x.resize(batch.windows * batch.length), y.resize(batch.windows * batch.length);
    evaluate_batch(model, x, y, batch.length, batch.counted, token_bytes, grads_path != nullptr,
                   known, sums);
    x.resize(per_forward * T), y.resize(per_forward * T);
  }
  if (r.tokens == 0) return r;
  total_in_batch_order(std::move(sums), b, ranks, r);
  if (grads_path && feed.failure().empty()) {
    if (known <= 0) scale_gradients(model, 1.0 / static_cast<double>(r.tokens));
    write_gradients(model, r, *grads_path);
    model.zero_grad();
  }
  return r;
}

}  // namespace

EvalResult evaluate_stores(nn::GPT& model, std::vector<const data::TokenStore*> parts,
                           std::span<const uint32_t> token_bytes, const data::ScoringWindows& rule,
                           const std::string* grads_path, const std::function<bool()>& cancelled,
                           int64_t max_windows, int64_t windows_per_forward) {
  StoreFeed feed(std::move(parts), rule, max_windows);
  EvalResult r = evaluate_feed(model, feed, token_bytes, rule.full_length(), grads_path, cancelled,
                               windows_per_forward);
  // every rank learns of damaged data any of them met, and all stop with it
  if (const World::Failure f = World::current().first_failure(feed.failure()); f.code != 0)
    throw data::DataError(f.rank == 0 ? f.message : fmt::format("{} (rank {})", f.message, f.rank));
  return r;
}

EvalResult evaluate_text(nn::GPT& model, data::TextIds& text, std::span<const uint32_t> token_bytes,
                         const data::ScoringWindows& rule, const std::string* grads_path) {
  TextFeed feed(text, rule);
  EvalResult r = evaluate_feed(model, feed, token_bytes, rule.full_length(), grads_path, {},
                               kEvalWindowsPerForward);
  r.ids = feed.ids_read();
  return r;
}

EvalResult evaluate(nn::GPT& model, const data::TokenStore& ids,
                    std::span<const uint32_t> token_bytes, int64_t max_windows,
                    const std::function<bool()>& cancelled, int64_t windows_per_forward) {
  const data::ScoringWindows full{.context = model.config().context_length, .drop_partial = true};
  return evaluate_stores(model, {&ids}, token_bytes, full, nullptr, cancelled, max_windows,
                         windows_per_forward);
}

}  // namespace train
