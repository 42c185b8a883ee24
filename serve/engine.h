#pragma once
// The server's decoders: every choice of every request in flight decoded in rows of
// nn::CachedInference (a key/value cache per sequence, at a length of its own): each step
// runs every active row of a decoder at once (CachedInference::step_slots, the rows batched
// into the weight passes), so that K sequences cost far less than K single ones. A
// sequence's tokens are chosen as `attograd sample` chooses them (nn::TokenSampler over the
// same logits bits, the same generator per choice, the same window once past the context:
// nn::window_start), so greedy output is sample's byte for byte, whatever else is decoded
// beside it and on whichever decoder.
//
//   serve::Engine engine(model, {.slots = 4, .max_queued = 8, .threads = 2});
//   auto channel = std::make_shared<serve::Channel>(/*choices=*/1);
//   if (!engine.submit({job}))  -> the queue is full: 429
//   serve::TokenEvent e;
//   while (channel->pop(e, 100ms) ...)   // tokens and each choice's end, in order
//   channel->cancel();                   // the client left: its rows free at the next token
//
// Decoders: a model whose weights stay in the caches (nn::keeps_weight_panels) is decoded by
// one decoder a thread, each with its own share of the slots and no barrier between them: a
// step of such a model costs by its rows, and the team's barriers and imbalance cost more
// than a second core's share of them (docs/serving.md, "one decoder a thread"). A decoder
// whose rows are the only ones in flight runs its passes on the team as its pace decides
// (one stream gets both cores); while another decoder has rows, each runs on its own thread.
// A larger model's step is bound by reading its weights, which one decoder of every row
// reads once for all of them: it keeps one decoder on the team. Between steps, every 200 us
// of decoding, a decoder's thread yields its core to any thread waiting for one (a handler,
// a client on the same machine), which would otherwise wait for the scheduler's next tick.
//
// Admission: a request's choices are admitted together or not at all; beyond the free
// slots they wait in a queue of at most max_queued choices, and submit() refuses past it
// (the caller answers 429 with Retry-After) rather than letting it grow. A queued choice
// goes to the decoder with the fewest rows.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "nn/generation.h"
#include "nn/gpt.h"
#include "nn/inference.h"
#include "nn/sampling.h"

namespace serve {

enum class Finish { none, length, stop, cancelled };

// One token of one choice, or (finish != none) the end of that choice.
struct TokenEvent {
  int64_t choice = 0;
  int64_t id = -1;
  Finish finish = Finish::none;
  double logprob = 0;                           // with logprobs: the token's
  std::vector<std::pair<int64_t, double>> top;  // with logprobs: the likeliest ids

  static TokenEvent token(int64_t choice, int64_t id) { return {choice, id, Finish::none, 0, {}}; }
  static TokenEvent end(int64_t choice, Finish why) { return {choice, -1, why, 0, {}}; }
};

// What the decoder tells one request, and what the request tells it: cancel(choice) (a
// stop text reached) ends that choice at its next token, cancel() (a client gone) all.
class Channel {
 public:
  explicit Channel(int64_t choices)
      : choices_(choices),
        cancelled_(std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(choices))) {}
  // Wakes the reader when it waits in pop() for the first event, or when the event ends a
  // choice; tokens pushed while it gathers (gather_until) wake nothing.
  void push(TokenEvent e);
  // The next event, waiting at most `wait`; false when none came.
  bool pop(TokenEvent& e, std::chrono::milliseconds wait);
  // Lets events gather for one write: returns at `until`, or as soon as a choice's end is
  // queued (a finished stream's last write never waits).
  void gather_until(std::chrono::steady_clock::time_point until);
  void cancel(int64_t choice) { cancelled_[static_cast<size_t>(choice)].store(true); }
  void cancel() {
    for (int64_t c = 0; c < choices_; ++c) cancel(c);
  }
  bool cancelled(int64_t choice) const { return cancelled_[static_cast<size_t>(choice)].load(); }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<TokenEvent> events_;
  int64_t ends_queued_ = 0;  // events_' ends of choices
  bool gathering_ = false;   // a reader is in gather_until
  int64_t choices_;
  std::unique_ptr<std::atomic<bool>[]> cancelled_;
};

// One choice to generate.
struct Job {
  std::shared_ptr<Channel> channel;
  int64_t choice = 0;           // its index in the request (its generator's substream)
  std::vector<int64_t> prompt;  // 1..context_length ids
  int64_t max_tokens = 16;
  nn::SamplingOptions sampling;
  uint64_t seed = 0;
  std::vector<int64_t> end_ids;   // ids that end the choice (not delivered as tokens)
  int64_t ends_from = INT64_MAX;  // ids from this one on end it too (past the vocabulary)
  int64_t logprobs = -1;          // -1: none; else the alternatives a token carries
};

struct EngineOptions {
  int64_t slots = 8;       // sequences decoded at once (--max-concurrent)
  int64_t max_queued = 8;  // choices waiting beyond them
  int threads = 2;         // the decoders' OpenMP threads
  int64_t slide = 0;       // the window past the context (0: nn::default_slide)
  int decoders = 0;        // decoders, one a thread (0: as the model's size asks, above)
};

class Engine {
 public:
  Engine(const nn::GPT& model, EngineOptions options);
  ~Engine();  // cancels what is left and joins the decoder
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request's choices (all or none); false when the queue cannot take them all.
  bool submit(std::vector<Job> jobs);
  // Ends every choice in flight or queued at its next token (a drain that ran out of time).
  void cancel_all();
  int64_t in_flight() const { return in_flight_.load(); }  // choices admitted or queued

  // The bytes the decoders allocate for `options` (their caches over the whole context).
  static int64_t memory_bytes(const nn::GPTConfig& cfg, const EngineOptions& options);
  // The decoders a server of `options` runs for a model of `cfg` (above).
  static int decoders(const nn::GPTConfig& cfg, const EngineOptions& options);

 private:
  struct Sequence;
  struct Lane;
  void run();
  void decode_apart();
  int busy_lanes() const;
  bool may_take(const Lane& lane) const;
  void admit(Lane& lane, nn::CachedInference::Threads threads);
  void step(Lane& lane, nn::CachedInference::Threads threads);
  void start(Lane& lane, Sequence& s, nn::CachedInference::Threads threads);
  bool abandoned(Sequence& s);
  std::span<const int64_t> window(Sequence& s) const;
  void deliver(Sequence& s, std::span<const float> logits);
  void finish(Sequence& s, Finish why);

  const nn::GPT& model_;
  EngineOptions options_;
  int64_t context_, slide_;
  std::mutex mutex_;
  std::condition_variable work_;
  std::deque<Job> queue_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> abort_{false};
  std::atomic<int64_t> in_flight_{0};
  std::vector<std::unique_ptr<Lane>> lanes_;  // a decoder and its rows each
  std::thread thread_;
};

}  // namespace serve
