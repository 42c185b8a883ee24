#include "serve/engine.h"

#include <omp.h>

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

// A decoder with its share of the slots, and its sequences.
struct Engine::Lane {
  explicit Lane(std::unique_ptr<nn::CachedInference> d) : decoder(std::move(d)) {
    for (int64_t slot = decoder->batch() - 1; slot >= 0; --slot) free_slots.push_back(slot);
  }
  std::unique_ptr<nn::CachedInference> decoder;
  std::vector<std::unique_ptr<Sequence>> active;  // the thread decoding the lane only
  std::vector<int64_t> free_slots;                // the thread decoding the lane only
  std::atomic<int64_t> rows{0};  // slots taken: changed under mutex_, read by the others
};

int Engine::decoders(const nn::GPTConfig& cfg, const EngineOptions& o) {
  const int64_t asked = o.decoders > 0                                         ? o.decoders
                        : nn::keeps_weight_panels(cfg, nn::WeightFormat::fp32) ? o.threads
                                                                               : 1;
  return static_cast<int>(std::clamp<int64_t>(asked, 1, std::max<int64_t>(o.slots, 1)));
}

namespace {

// Lane i's share of `slots` over `lanes`.
int64_t lane_slots(int64_t slots, int lanes, int i) {
  return slots / lanes + (i < slots % lanes);
}

}  // namespace

Engine::Engine(const nn::GPT& model, EngineOptions options)
    : model_(model),
      options_(options),
      context_(model.config().context_length),
      slide_(options.slide > 0 ? options.slide : nn::default_slide(context_)) {
  const int lanes = decoders(model.config(), options);
  for (int i = 0; i < lanes; ++i) {
    const int64_t rows = lane_slots(options.slots, lanes, i);
    lanes_.push_back(std::make_unique<Lane>(
        i == 0 ? std::make_unique<nn::CachedInference>(model, rows)
               : std::make_unique<nn::CachedInference>(*lanes_[0]->decoder, rows)));
  }
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

int64_t Engine::memory_bytes(const nn::GPTConfig& cfg, const EngineOptions& o) {
  const int lanes = decoders(cfg, o);
  double caches = 0;
  for (int i = 0; i < lanes; ++i)
    caches += static_cast<double>(nn::CachedInference::memory_bytes(
        cfg, std::max<int64_t>(lane_slots(o.slots, lanes, i), 1), o.threads));
  // the weights' copies are made once, by the first decoder
  caches -= (lanes - 1) * static_cast<double>(
                              nn::CachedInference::weight_copy_bytes(cfg, nn::WeightFormat::fp32));
  // each sequence's sampler (vocab_size doubles twice and ids) and history (a context)
  const double per_sequence =
      static_cast<double>(cfg.vocab_size) * 24.0 + static_cast<double>(cfg.context_length) * 16.0;
  const double bytes = caches + static_cast<double>(o.slots + o.max_queued) * per_sequence;
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
  work_.notify_all();
  return true;
}

void Engine::cancel_all() {
  {
    std::lock_guard lock(mutex_);
    for (Job& job : queue_) job.channel->cancel(job.choice);
  }
  work_.notify_all();
  abort_.store(true);  // the decoders' threads end the active ones at their next token
}

namespace {

// Every kGiveWayEvery of decoding, between two steps, a decoder's thread lets any thread
// that waits for a core run first (a handler with tokens to write, a request to parse, the
// clients themselves on the same machine); the call returns at once when none waits.
// Without it a decoder kept its core until the scheduler's next tick, and on 2 cores the
// clients of 8 streams waited about 4 ms at a time to start their requests and read their
// tokens; after every step of a small model (10 us) the switches cost more than they gave
// (docs/serving.md, "Giving way").
constexpr auto kGiveWayEvery = std::chrono::microseconds(200);

void give_way() {
  thread_local auto last = std::chrono::steady_clock::now();
  const auto now = std::chrono::steady_clock::now();
  if (now - last < kGiveWayEvery) return;
  std::this_thread::yield();
  last = std::chrono::steady_clock::now();
}

}  // namespace

void Engine::run() {
  ag::set_num_threads(options_.threads);  // OpenMP's count is per thread
  nn::InferenceScope inference;
  ag::NoGradGuard no_grad;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || !queue_.empty() || busy_lanes() > 0; });
      if (stopping_) {
        for (Job& job : queue_) job.channel->push(TokenEvent::end(job.choice, Finish::cancelled));
        queue_.clear();
        break;
      }
    }
    for (auto& lane : lanes_) admit(*lane, nn::CachedInference::Threads::kTimed);
    if (busy_lanes() > 1) {
      decode_apart();
    } else {
      for (auto& lane : lanes_)
        if (!lane->active.empty()) step(*lane, nn::CachedInference::Threads::kTimed);
      give_way();
    }
  }
  for (auto& lane : lanes_)
    for (auto& s : lane->active) finish(*s, Finish::cancelled);
}

int Engine::busy_lanes() const {
  int busy = 0;
  for (const auto& lane : lanes_) busy += lane->rows.load() > 0 ? 1 : 0;
  return busy;
}

// While two lanes or more have rows: each lane decoded by a thread of the decoder's team,
// on its own, its passes on that thread alone, taking the queued choices that fall to it.
// The threads are the team's own, which a lone lane's passes use, so none of them sleeps
// for long: a thread woken after a long sleep was seen placed on its master's core (in a
// VM), and a pace timing the team then learnt a slowness that was not the team's.
void Engine::decode_apart() {
  const int lanes = static_cast<int>(lanes_.size());
#pragma omp parallel num_threads(lanes)
  {
    // a team smaller than asked (OpenMP's limits) decodes its lanes in turn
    const int first = omp_get_thread_num(), stride = omp_get_num_threads();
    for (;;) {
      bool rows = false;
      for (int l = first; l < lanes; l += stride) {
        Lane& lane = *lanes_[static_cast<size_t>(l)];
        admit(lane, nn::CachedInference::Threads::kOne);
        if (!lane.active.empty()) step(lane, nn::CachedInference::Threads::kOne);
        give_way();
        rows |= lane.rows.load() > 0;
      }
      std::unique_lock lock(mutex_);
      if (!rows)  // (three lanes or more) until a choice falls to these lanes
        work_.wait(lock, [&] {
          bool takes = false;
          for (int l = first; l < lanes; l += stride) takes |= may_take(*lanes_[l]);
          return stopping_.load() || busy_lanes() < 2 || takes;
        });
      if (stopping_.load() || busy_lanes() < 2) break;
    }
  }
}

// (mutex_ held) Whether `lane` takes the next queued choice: it has a free slot, and no
// other lane with one has fewer rows, or as many and comes first. A lone stream always goes
// to the first lane, whose paces (one thread or the team) are then timed and warm.
bool Engine::may_take(const Lane& lane) const {
  if (queue_.empty() || lane.rows.load() == lane.decoder->batch()) return false;
  bool before = true;  // `other` comes before `lane`
  for (const auto& other : lanes_) {
    before &= other.get() != &lane;
    const int64_t rows = other->rows.load();
    if (other.get() != &lane && rows < other->decoder->batch() &&
        (rows < lane.rows.load() || (rows == lane.rows.load() && before)))
      return false;
  }
  return true;
}

// Queued choices into the lane's free rows, those that fall to it: each prefilled, its
// first token chosen.
void Engine::admit(Lane& lane, nn::CachedInference::Threads threads) {
  for (;;) {
    std::unique_ptr<Sequence> s;
    {
      std::lock_guard lock(mutex_);
      if (!may_take(lane)) return;
      s = std::make_unique<Sequence>(std::move(queue_.front()), lane.free_slots.back(),
                                     model_.config().vocab_size);
      queue_.pop_front();
      ++lane.rows;
    }
    lane.free_slots.pop_back();
    start(lane, *s, threads);
    if (s->done) {
      lane.free_slots.push_back(s->slot);
      std::lock_guard lock(mutex_);
      --lane.rows;
    } else {
      lane.active.push_back(std::move(s));
    }
  }
}

// Whether the sequence ended for want of a listener (its client gone, the server
// stopping): then finished.
bool Engine::abandoned(Sequence& s) {
  if (!s.job.channel->cancelled(s.job.choice) && !abort_.load()) return false;
  finish(s, Finish::cancelled);
  return true;
}

// The window [window_start(n), n) that predicts token n, where the sequence's row holds it
// from: its first token, and again each time the window moves past the context.
std::span<const int64_t> Engine::window(Sequence& s) const {
  const auto n = static_cast<int64_t>(s.history.size());
  s.window = nn::window_start(n, context_, slide_);
  return std::span<const int64_t>(s.history).subspan(static_cast<size_t>(s.window));
}

// The sequence's window prefilled into its row, its next token chosen.
void Engine::start(Lane& lane, Sequence& s, nn::CachedInference::Threads threads) {
  if (abandoned(s)) return;
  lane.decoder->set_threads(threads);
  deliver(s, lane.decoder->prefill_slot(s.slot, window(s)));
}

// One token for every active sequence of the lane: those whose row holds their window
// stepped together, in one pass with the first whose window moved (its new window
// prefilled in that pass: the weights read once for both), any later such prefilled alone.
void Engine::step(Lane& lane, nn::CachedInference::Threads threads) {
  std::vector<int64_t> slots, ids;
  std::vector<Sequence*> stepped;
  Sequence* moved = nullptr;
  for (auto& s : lane.active) {
    const auto n = static_cast<int64_t>(s->history.size());
    if (nn::window_start(n, context_, slide_) == s->window) {
      slots.push_back(s->slot);
      ids.push_back(s->history.back());
      stepped.push_back(s.get());
    } else if (moved) {
      start(lane, *s, threads);
    } else if (!abandoned(*s)) {
      moved = s.get();
    }
  }
  lane.decoder->set_threads(threads);
  const auto V = static_cast<size_t>(model_.config().vocab_size);
  if (moved) {
    const std::span<const float> logits =
        lane.decoder->prefill_and_step_slots(moved->slot, window(*moved), slots, ids);
    deliver(*moved, logits.first(V));
    for (size_t i = 0; i < stepped.size(); ++i)
      deliver(*stepped[i], logits.subspan((i + 1) * V, V));
  } else if (!slots.empty()) {
    const std::span<const float> logits = lane.decoder->step_slots(slots, ids);
    for (size_t i = 0; i < stepped.size(); ++i) deliver(*stepped[i], logits.subspan(i * V, V));
  }
  const auto ended = std::stable_partition(lane.active.begin(), lane.active.end(),
                                           [](const auto& s) { return !s->done; });
  if (ended == lane.active.end()) return;
  for (auto it = ended; it != lane.active.end(); ++it) lane.free_slots.push_back((*it)->slot);
  const auto freed = lane.active.end() - ended;
  lane.active.erase(ended, lane.active.end());
  {
    std::lock_guard lock(mutex_);
    lane.rows -= freed;
  }
  if (lane.rows.load() == 0 && lanes_.size() > 2) work_.notify_all();  // decode_apart's waits
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
