#include "serve/engine.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/autograd.h"
#include "nn/module.h"

namespace serve {

void Channel::push(TokenEvent e) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    const bool ends = e.finish != Finish::none;
    ends_queued_ += ends ? 1 : 0;
    wake = ends || (events_.empty() && !gathering_);
    events_.push_back(std::move(e));
  }
  if (wake) ready_.notify_one();
}

bool Channel::pop(TokenEvent& e, std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, wait, [&] { return !events_.empty(); })) return false;
  e = std::move(events_.front());
  events_.pop_front();
  ends_queued_ -= e.finish != Finish::none ? 1 : 0;
  return true;
}

void Channel::gather_until(std::chrono::steady_clock::time_point until) {
  std::unique_lock lock(mutex_);
  gathering_ = true;
  ready_.wait_until(lock, until, [&] { return ends_queued_ > 0; });
  gathering_ = false;
}

// A choice being decoded: its row of the decoder, its text so far as ids, its generator.
struct Engine::Sequence {
  Sequence(Job j, int64_t slot, int64_t vocab)
      : job(std::move(j)),
        slot(slot),
        history(job.prompt),
        sampler(vocab, job.sampling),
        gen(job.choice == 0
                ? ag::Generator(job.seed)
                : ag::Generator::substream(job.seed, static_cast<uint64_t>(job.choice))) {}
  Job job;
  int64_t slot;
  std::vector<int64_t> history;  // the prompt, then every token chosen
  int64_t window = -1;           // where the window the cache holds starts (-1: none yet)
  int64_t made = 0;              // tokens delivered
  nn::TokenSampler sampler;
  ag::Generator gen;
  bool done = false;
};

Engine::Engine(const nn::GPT& model, EngineOptions options)
    : model_(model),
      options_(options),
      context_(model.config().context_length),
      slide_(options.slide > 0 ? options.slide : nn::default_slide(context_)),
      decoder_(model, options.slots) {
  for (int64_t slot = options.slots - 1; slot >= 0; --slot) free_slots_.push_back(slot);
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_one();
  thread_.join();
}

int64_t Engine::memory_bytes(const nn::GPTConfig& cfg, const EngineOptions& o) {
  const double decoder = static_cast<double>(
      nn::CachedInference::memory_bytes(cfg, o.slots, o.threads, nn::WeightFormat::fp32, 0));
  // each sequence's sampler (vocab_size doubles twice and ids) and history (a context)
  const double per_sequence =
      static_cast<double>(cfg.vocab_size) * 24.0 + static_cast<double>(cfg.context_length) * 16.0;
  const double bytes = decoder + static_cast<double>(o.slots + o.max_queued) * per_sequence;
  return bytes < 9e18 ? static_cast<int64_t>(bytes) : INT64_MAX;
}

bool Engine::submit(std::vector<Job> jobs) {
  {
    std::lock_guard lock(mutex_);
    // in flight: the choices in rows and those queued; beyond the rows, max_queued wait
    const int64_t after = in_flight_.load() + static_cast<int64_t>(jobs.size());
    if (stopping_ || after > options_.slots + options_.max_queued) return false;
    in_flight_ += static_cast<int64_t>(jobs.size());
    for (Job& job : jobs) queue_.push_back(std::move(job));
  }
  work_.notify_one();
  return true;
}

void Engine::cancel_all() {
  {
    std::lock_guard lock(mutex_);
    for (Job& job : queue_) job.channel->cancel(job.choice);
  }
  work_.notify_one();
  abort_.store(true);  // the decoder's thread ends the active ones at their next token
}

void Engine::run() {
  ag::set_num_threads(options_.threads);  // OpenMP's count is per thread
  nn::InferenceScope inference;
  ag::NoGradGuard no_grad;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
      if (stopping_) {
        for (Job& job : queue_) job.channel->push(TokenEvent::end(job.choice, Finish::cancelled));
        queue_.clear();
        break;
      }
    }
    admit();
    step();
  }
  for (auto& s : active_) finish(*s, Finish::cancelled);
}

// Queued choices into free rows: each prefilled, its first token chosen.
void Engine::admit() {
  while (!free_slots_.empty()) {
    std::unique_ptr<Sequence> s;
    {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) return;
      s = std::make_unique<Sequence>(std::move(queue_.front()), free_slots_.back(),
                                     model_.config().vocab_size);
      queue_.pop_front();
    }
    free_slots_.pop_back();
    start(*s);
    if (s->done)
      free_slots_.push_back(s->slot);
    else
      active_.push_back(std::move(s));
  }
}

// The window [window_start(n), n) that predicts token n, prefilled into the sequence's row
// (its first token, and again each time the window moves past the context).
void Engine::start(Sequence& s) {
  if (s.job.channel->cancelled(s.job.choice) || abort_.load()) return finish(s, Finish::cancelled);
  const auto n = static_cast<int64_t>(s.history.size());
  s.window = nn::window_start(n, context_, slide_);
  deliver(s, decoder_.prefill_slot(s.slot, std::span<const int64_t>(s.history).subspan(
                                               static_cast<size_t>(s.window))));
}

// One token for every active sequence: those whose window moved prefilled alone, the
// others stepped together.
void Engine::step() {
  std::vector<int64_t> slots, ids;
  std::vector<Sequence*> stepped;
  for (auto& s : active_) {
    const auto n = static_cast<int64_t>(s->history.size());
    if (nn::window_start(n, context_, slide_) != s->window) {
      start(*s);
      continue;
    }
    slots.push_back(s->slot);
    ids.push_back(s->history.back());
    stepped.push_back(s.get());
  }
  if (!slots.empty()) {
    const std::span<const float> logits = decoder_.step_slots(slots, ids);
    const auto V = static_cast<size_t>(model_.config().vocab_size);
    for (size_t i = 0; i < stepped.size(); ++i) deliver(*stepped[i], logits.subspan(i * V, V));
  }
  for (auto it = active_.begin(); it != active_.end();) {
    if ((*it)->done) {
      free_slots_.push_back((*it)->slot);
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
}

namespace {

// The log-probability of `id` under the logits, and the `k` likeliest ids with theirs.
void add_logprobs(std::span<const float> logits, int64_t id, int64_t k, TokenEvent& e) {
  const float top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - top);
  const double log_total = static_cast<double>(top) + std::log(sum);
  e.logprob = static_cast<double>(logits[static_cast<size_t>(id)]) - log_total;
  std::vector<int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const auto kept = std::min<size_t>(static_cast<size_t>(k), order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(kept), order.end(),
                    [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  for (size_t i = 0; i < kept; ++i)
    e.top.emplace_back(order[i],
                       static_cast<double>(logits[static_cast<size_t>(order[i])]) - log_total);
}

}  // namespace

// The sequence's next token from its logits, handed to its channel.
void Engine::deliver(Sequence& s, std::span<const float> logits) {
  if (s.job.channel->cancelled(s.job.choice) || abort_.load()) return finish(s, Finish::cancelled);
  const int64_t id = s.sampler.choose(logits, s.gen);
  const auto& ends = s.job.end_ids;
  if (id >= s.job.ends_from || std::find(ends.begin(), ends.end(), id) != ends.end())
    return finish(s, Finish::stop);
  TokenEvent e = TokenEvent::token(s.job.choice, id);
  if (s.job.logprobs >= 0) add_logprobs(logits, id, s.job.logprobs, e);
  s.job.channel->push(std::move(e));
  s.history.push_back(id);
  if (++s.made == s.job.max_tokens) finish(s, Finish::length);
}

void Engine::finish(Sequence& s, Finish why) {
  if (s.done) return;
  s.done = true;
  --in_flight_;  // before the client can hear of the end and ask again
  s.job.channel->push(TokenEvent::end(s.job.choice, why));
}

}  // namespace serve
