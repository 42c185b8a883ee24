#include "train/evaluate.h"

#include <optional>

#include "data/dataset.h"
#include "io/checkpoint.h"
#include "train/config.h"
#include "train/world.h"

namespace train {

namespace {

constexpr int64_t kEvalBatch = 16;  // windows per forward pass

// The bytes of text the targets stand for.
int64_t target_bytes(const std::vector<int64_t>& y, std::span<const uint32_t> token_bytes) {
  int64_t bytes = 0;
  for (int64_t id : y) bytes += token_bytes[static_cast<size_t>(id)];
  return bytes;
}

// The gradients the evaluation accumulated, as a checkpoint-shaped HDF5 file.
void write_gradients(nn::GPT& model, const EvalResult& r, const std::string& path) {
  io::Checkpoint g;
  RunConfig rc;
  rc.model = model.config();
  g.config = rc.to_json();
  g.config["contents"] = "gradients of the evaluation loss";
  g.config["loss"] = r.loss;
  g.config["tokens"] = r.tokens;
  for (const auto& [name, p] : model.named_parameters())
    g.model.emplace_back(name, p.grad().defined() ? p.grad() : ag::zeros_like(p));
  g.tokenizer.type = "none";
  io::save_checkpoint(path, g);
}

}  // namespace

EvalResult evaluate_with_grads(nn::GPT& model, const data::TokenStore& ids,
                               std::span<const uint32_t> token_bytes, int64_t T,
                               const std::string* grads_path,
                               const std::function<bool()>& cancelled, int64_t max_windows) {
  if (T == 0) T = model.config().context_length;
  const data::EvalWindows windows(ids.size(), T);
  EvalResult r;
  r.windows = max_windows > 0 ? std::min(max_windows, windows.count()) : windows.count();
  r.tokens = r.windows * T;
  if (r.tokens == 0) return r;
  const bool was_training = model.is_training();
  model.eval();
  model.zero_grad();
  std::optional<ag::NoGradGuard> no_grad;
  if (!grads_path) no_grad.emplace();
  // Under mpirun batch b is evaluated by rank b % ranks, and the batches' sums are added
  // in batch order as one process adds them: the same loss, bit for bit, on any number.
  const World& world = World::current();
  const int ranks = world.distributed() && !grads_path ? world.size() : 1;
  const int64_t batches = (r.windows + kEvalBatch - 1) / kEvalBatch;
  const int64_t per_rank = (batches + ranks - 1) / ranks;
  std::vector<double> sums(2 * per_rank);  // per own batch: nats, bytes
  std::vector<int64_t> x(kEvalBatch * T), y(kEvalBatch * T);
  for (int64_t b = ranks > 1 ? world.rank() : 0; b < batches; b += ranks) {
    if (ranks == 1 && cancelled && cancelled()) {  // ranks must not leave one by one
      model.zero_grad();
      model.train(was_training);
      return EvalResult{};
    }
    const int64_t n = std::min<int64_t>(kEvalBatch, r.windows - b * kEvalBatch);
    x.resize(n * T), y.resize(n * T);
    windows.copy(ids, b * kEvalBatch, n, x.data(), y.data());
    if (!token_bytes.empty()) sums[2 * (b / ranks) + 1] = target_bytes(y, token_bytes);
    auto out = model.forward(ag::from_vector(x, {n, T}), ag::from_vector(y, {n, T}));
    sums[2 * (b / ranks)] = out.loss.item() * n * T;
    // the batch's share of the mean over every target, so the gradients add up to it
    if (grads_path) (out.loss * (static_cast<double>(n * T) / r.tokens)).backward();
  }
  const std::vector<double> all = ranks > 1 ? world.all_gather(sums) : sums;
  double total = 0;
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t at = (b % ranks) * 2 * per_rank + 2 * (b / ranks);
    total += all[at];
    r.bytes += static_cast<int64_t>(all[at + 1]);
  }
  r.loss = total / r.tokens;
  if (grads_path) {
    write_gradients(model, r, *grads_path);
    model.zero_grad();
  }
  model.train(was_training);
  return r;
}

EvalResult evaluate(nn::GPT& model, const data::TokenStore& ids,
                    std::span<const uint32_t> token_bytes, int64_t max_windows,
                    const std::function<bool()>& cancelled) {
  return evaluate_with_grads(model, ids, token_bytes, model.config().context_length, nullptr,
                             cancelled, max_windows);
}

}  // namespace train
