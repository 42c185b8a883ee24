#include "train/evaluate.h"

#include <fmt/format.h>

#include <optional>

#include "data/data_error.h"
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
  g.config["contents"] = io::kGradientDumpContents;
  g.config["loss"] = r.loss;
  g.config["tokens"] = r.tokens;
  for (const auto& [name, p] : model.named_parameters())
    g.model.emplace_back(name, p.grad().defined() ? p.grad() : ag::zeros_like(p));
  g.tokenizer.type = "none";
  io::save_checkpoint(path, g);
}

// The evaluation windows, a batch at a time and in order.
class WindowFeed {
 public:
  virtual ~WindowFeed() = default;
  // Up to n windows: inputs into x and targets into y ([n, T] each); how many (0: no more).
  virtual int64_t next(int64_t n, int64_t* x, int64_t* y) = 0;
  virtual int64_t known_windows() const { return -1; }  // -1 until the end is seen
  // Why the ids could not be read (damaged data), once it happened: the windows from then
  // on are counted but not evaluated, so every rank still takes part in the gathering.
  const std::string& failure() const { return failure_; }

 protected:
  std::string failure_;
};

// Windows of ids in a store (data::EvalWindows).
class StoreFeed : public WindowFeed {
 public:
  StoreFeed(const data::TokenStore& ids, int64_t T, int64_t max_windows)
      : ids_(ids), windows_(ids.size(), T) {
    count_ = max_windows > 0 ? std::min(max_windows, windows_.count()) : windows_.count();
  }
  int64_t next(int64_t n, int64_t* x, int64_t* y) override {
    const int64_t m = std::min(n, count_ - done_);
    if (m > 0 && failure_.empty()) {
      try {
        windows_.copy(ids_, done_, m, x, y);
      } catch (const data::DataError& e) {
        failure_ = e.what();
      }
    }
    done_ += m;
    return m;
  }
  int64_t known_windows() const override { return count_; }

 private:
  const data::TokenStore& ids_;
  data::EvalWindows windows_;
  int64_t count_, done_ = 0;
};

// Windows of a text read a chunk at a time: ids are kept only from the next window's
// start on.
class TextFeed : public WindowFeed {
 public:
  TextFeed(data::TextIds& text, int64_t T) : text_(text), T_(T) {}
  int64_t next(int64_t n, int64_t* x, int64_t* y) override {
    int64_t m = 0;
    for (; m < n && fill(); ++m, at_ += T_) {
      std::copy_n(ids_.begin() + at_, T_, x + m * T_);
      std::copy_n(ids_.begin() + at_ + 1, T_, y + m * T_);
    }
    return m;
  }
  int64_t ids_read() const { return read_; }

 private:
  bool fill() {  // whether T + 1 ids from at_ on are there
    if (static_cast<int64_t>(ids_.size()) - at_ > T_) return true;
    ids_.erase(ids_.begin(), ids_.begin() + at_);
    at_ = 0;
    while (static_cast<int64_t>(ids_.size()) <= T_) {
      const size_t before = ids_.size();
      if (!text_.next(ids_)) return false;
      read_ += static_cast<int64_t>(ids_.size() - before);
    }
    return true;
  }
  data::TextIds& text_;
  int64_t T_, at_ = 0, read_ = 0;
  std::vector<int64_t> ids_;
};

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

// One batch of windows (x, y: n * T ids each): its nats and the bytes its targets encode
// appended to sums. With `gradients`, also backward of the batch's share of the mean over
// every target (over `known` windows when the count is known ahead, known > 0; else of the
// sum, scaled afterwards), so that the gradients add up to it.
void evaluate_batch(nn::GPT& model, const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                    int64_t T, std::span<const uint32_t> token_bytes, bool gradients, int64_t known,
                    std::vector<double>& sums) {
  const auto n = static_cast<int64_t>(x.size()) / T;
  auto out = model.forward(ag::from_vector(x, {n, T}), ag::from_vector(y, {n, T}));
  sums.push_back(out.loss.item() * static_cast<double>(n * T));
  sums.push_back(token_bytes.empty() ? 0.0 : static_cast<double>(target_bytes(y, token_bytes)));
  if (!gradients) return;
  const double share = static_cast<double>(n * T) / static_cast<double>(known > 0 ? known * T : 1);
  (out.loss * share).backward();
}

EvalResult evaluate_feed(nn::GPT& model, WindowFeed& feed, std::span<const uint32_t> token_bytes,
                         int64_t T, const std::string* grads_path,
                         const std::function<bool()>& cancelled) {
  EvalResult r;
  EvalMode mode(model, grads_path != nullptr);
  const World& world = World::current();
  const int ranks = world.distributed() && !grads_path ? world.size() : 1;
  const int64_t known = feed.known_windows();
  std::vector<double> sums;  // per own batch: nats, bytes
  std::vector<int64_t> x(kEvalBatch * T), y(kEvalBatch * T);
  int64_t b = 0;
  for (;; ++b) {
    if (ranks == 1 && cancelled && cancelled()) {  // ranks must not leave one by one
      model.zero_grad();
      return EvalResult{};
    }
    const int64_t n = feed.next(kEvalBatch, x.data(), y.data());
    if (n == 0) break;
    r.windows += n;
    if (b % ranks != (ranks > 1 ? world.rank() : 0)) continue;
    if (!feed.failure().empty()) {
      sums.insert(sums.end(), {0.0, 0.0});
      continue;
    }
    x.resize(n * T), y.resize(n * T);
    evaluate_batch(model, x, y, T, token_bytes, grads_path != nullptr, known, sums);
    x.resize(kEvalBatch * T), y.resize(kEvalBatch * T);
  }
  r.tokens = r.windows * T;
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

EvalResult evaluate_with_grads(nn::GPT& model, const data::TokenStore& ids,
                               std::span<const uint32_t> token_bytes, int64_t T,
                               const std::string* grads_path,
                               const std::function<bool()>& cancelled, int64_t max_windows) {
  if (T == 0) T = model.config().context_length;
  StoreFeed feed(ids, T, max_windows);
  EvalResult r = evaluate_feed(model, feed, token_bytes, T, grads_path, cancelled);
  // every rank learns of damaged data any of them met, and all stop with it
  if (const World::Failure f = World::current().first_failure(feed.failure()); f.code != 0)
    throw data::DataError(f.rank == 0 ? f.message : fmt::format("{} (rank {})", f.message, f.rank));
  return r;
}

EvalResult evaluate_text(nn::GPT& model, data::TextIds& text, std::span<const uint32_t> token_bytes,
                         int64_t T, const std::string* grads_path) {
  if (T == 0) T = model.config().context_length;
  TextFeed feed(text, T);
  EvalResult r = evaluate_feed(model, feed, token_bytes, T, grads_path, {});
  r.ids = feed.ids_read();
  return r;
}

EvalResult evaluate(nn::GPT& model, const data::TokenStore& ids,
                    std::span<const uint32_t> token_bytes, int64_t max_windows,
                    const std::function<bool()>& cancelled) {
  return evaluate_with_grads(model, ids, token_bytes, model.config().context_length, nullptr,
                             cancelled, max_windows);
}

}  // namespace train
