#include "train/evaluate.h"

#include <optional>

#include "data/dataset.h"
#include "io/checkpoint.h"
#include "train/config.h"

namespace train {

namespace {

constexpr int64_t kEvalBatch = 16;  // windows per forward pass

// Windows [first, first + n) as inputs and targets, [n, T] each.
std::pair<ag::Tensor, ag::Tensor> window_batch(std::span<const int64_t> ids,
                                               const std::vector<std::pair<int64_t, int64_t>>& w,
                                               size_t first, int64_t n, int64_t T) {
  std::vector<int64_t> x, y;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t s = w[first + b].first;
    x.insert(x.end(), ids.begin() + s, ids.begin() + s + T);
    y.insert(y.end(), ids.begin() + s + 1, ids.begin() + s + T + 1);
  }
  return {ag::from_vector(x, {n, T}), ag::from_vector(y, {n, T})};
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

EvalResult evaluate_with_grads(nn::GPT& model, std::span<const int64_t> ids, int64_t T,
                               const std::string* grads_path,
                               const std::function<bool()>& cancelled) {
  if (T == 0) T = model.config().context_length;
  const auto windows = data::eval_windows(ids.size(), T);
  EvalResult r;
  r.windows = static_cast<int64_t>(windows.size());
  r.tokens = r.windows * T;
  if (r.tokens == 0) return r;
  const bool was_training = model.is_training();
  model.eval();
  model.zero_grad();
  std::optional<ag::NoGradGuard> no_grad;
  if (!grads_path) no_grad.emplace();
  double total = 0;
  for (size_t w = 0; w < windows.size(); w += kEvalBatch) {
    if (cancelled && cancelled()) {
      model.zero_grad();
      model.train(was_training);
      return EvalResult{};
    }
    const int64_t n = std::min<int64_t>(kEvalBatch, windows.size() - w);
    auto [x, y] = window_batch(ids, windows, w, n, T);
    auto out = model.forward(x, y);
    total += out.loss.item() * n * T;
    // the batch's share of the mean over every target, so the gradients add up to it
    if (grads_path) (out.loss * (static_cast<double>(n * T) / r.tokens)).backward();
  }
  r.loss = total / r.tokens;
  if (grads_path) {
    write_gradients(model, r, *grads_path);
    model.zero_grad();
  }
  model.train(was_training);
  return r;
}

std::pair<double, int64_t> evaluate(nn::GPT& model, std::span<const int64_t> ids,
                                    int64_t max_windows, const std::function<bool()>& cancelled) {
  const int64_t T = model.config().context_length;
  if (max_windows > 0 && static_cast<int64_t>(ids.size()) > max_windows * T + 1)
    ids = ids.first(max_windows * T + 1);  // the first max_windows windows
  EvalResult r = evaluate_with_grads(model, ids, T, nullptr, cancelled);
  return {r.tokens ? r.loss : NAN, r.tokens};
}

}  // namespace train
