#include "serve/server.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <thread>

#include "autograd/generator.h"
#include "serve/answer.h"

namespace serve {

using nlohmann::json;

namespace {

// The seed of a request that names none: the next draw of one generator the system's
// entropy seeded once. A std::random_device a request had cost about a tenth of the
// server's CPU on 1-token requests in a VM (its constructor's CPUID probes trap to the
// hypervisor: perf, 2026-12-07).
uint64_t fresh_seed() {
  static std::mutex mutex;
  static ag::Generator seeds = [] {
    std::random_device device;
    return ag::Generator(static_cast<uint64_t>(device()) << 32 | device());
  }();
  std::lock_guard lock(mutex);
  return seeds.next_u64();
}

constexpr std::chrono::milliseconds kPoll{100};  // how often a waiting handler looks at its client
// After a stream's write, its handler lets the decoder run a while before it looks for
// more tokens: the tokens made meanwhile go out in one write, where a wake-up and a write
// a token cost the decoder's cores about a fifth of their time with 8 streams of a small
// model. The wait is kGather for each stream in flight, at most kGatherMost, so that the
// server writes about 500 times a second up to 8 streams: every write wakes a handler and
// a client, and each wake-up takes a core from the decoder's threads mid-step, where the
// other thread then waits at a barrier (with a fixed wait of 2 ms, 8 streams of the default
// model: a team step took 260-310 us against 180 with no HTTP, and the team was in use a
// third of the time). Each token still reaches its client within the wait of being made;
// the end of a stream cuts the wait short (an 8-token stream 2.4x quicker), and the first
// token goes out as soon as it is made.
constexpr std::chrono::microseconds kGather{2000}, kGatherMost{16000};
std::chrono::microseconds gather_wait(int64_t streams) {
  return std::min(kGatherMost, kGather * std::max<int64_t>(streams, 1));
}

void reply_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(error_body(e), "application/json");
}

class Server {
 public:
  Server(const ServedModel& served, const ServerOptions& o)
      : served_(served), o_(o), http_(o.transport), engine_(*served.model, o.engine) {
    if (served.chat) chat_.emplace(*served.chat, *served.tokenizer);
    routes();
  }
  void run();

 private:
  void routes();
  bool authorised(const httplib::Request& req) const;
  httplib::Server::HandlerResponse before(const httplib::Request& req, httplib::Response& res);
  Prepared prepare(const std::string& body, Endpoint endpoint) const;
  std::vector<int64_t> chat_prompt(const GenerationRequest& r) const;
  std::vector<Job> jobs(const Prepared& p, const std::shared_ptr<Channel>& channel) const;
  void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  void answer_whole(std::shared_ptr<Prepared> p, const std::shared_ptr<Channel>& channel,
                    httplib::Response& res);
  void answer_stream(std::shared_ptr<Prepared> p, std::shared_ptr<Channel> channel,
                     httplib::Response& res);
  std::unique_ptr<Answer> new_answer(const Prepared& p);
  void wait_for_signal();

  const ServedModel& served_;
  const ServerOptions& o_;
  BoundedServer http_;
  Engine engine_;
  std::optional<data::ChatTokens> chat_;
  std::atomic<bool> draining_{false}, listened_{false};
  std::atomic<int64_t> next_id_{0};
};

bool Server::authorised(const httplib::Request& req) const {
  return o_.api_key.empty() || req.get_header_value("Authorization") == "Bearer " + o_.api_key;
}

// Before a body is read: the key, a drain, a body longer than the bound (413 at once,
// without reading it).
httplib::Server::HandlerResponse Server::before(const httplib::Request& req,
                                                httplib::Response& res) {
  using R = httplib::Server::HandlerResponse;
  if (req.path == "/health") return R::Unhandled;
  if (!authorised(req)) {
    reply_error(res, ApiError(401, "invalid_request_error", "",
                              "a valid API key is required "
                              "(Authorization: Bearer KEY)",
                              "invalid_api_key"));
    return R::Handled;
  }
  if (draining_.load()) {
    reply_error(res, ApiError(503, "server_error", "", "the server is shutting down"));
    return R::Handled;
  }
  const std::string length = req.get_header_value("Content-Length");
  const bool digits = std::all_of(length.begin(), length.end(), [](char c) {
    return c >= '0' && c <= '9';
  });  // anything else is cpp-httplib's to refuse
  if (digits && !length.empty() &&
      (length.size() > 18 || std::stoull(length) > o_.transport.body_bytes)) {
    close_after_response();
    reply_error(res,
                ApiError(413, "invalid_request_error", "",
                         fmt::format("the body is larger than {} bytes", o_.transport.body_bytes)));
    return R::Handled;
  }
  return R::Unhandled;
}

void Server::routes() {
  http_.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { return before(req, res); });
  http_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json model = {
        {"id", served_.name}, {"object", "model"}, {"created", 0}, {"owned_by", "attograd"}};
    res.set_content(json{{"object", "list"}, {"data", {model}}}.dump(), "application/json");
  });
  http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, Endpoint::completions);
  });
  http_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, Endpoint::chat);
  });
  http_.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int status = res.status;
    reply_error(res, ApiError(status, "invalid_request_error", "",
                              status == 404 ? "no such endpoint" : fmt::format("HTTP {}", status)));
  });
  http_.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        reply_error(res, ApiError(500, "server_error", "", "the server failed on this request"));
      });
}

std::vector<int64_t> Server::chat_prompt(const GenerationRequest& r) const {
  if (!chat_)
    throw bad_request("model",
                      fmt::format("'{}' is a language model without a chat format: it "
                                  "answers /v1/completions only",
                                  served_.name),
                      "model_not_chat");
  try {
    return chat_->conversation(r.messages, true);
  } catch (const data::ChatContentError& e) {
    throw bad_request(fmt::format("messages[{}].content", e.message), e.what());
  }
}

// The request's prompt as ids and its token budget, checked against the context.
Prepared Server::prepare(const std::string& body, Endpoint endpoint) const {
  Prepared p{parse_request(body, endpoint, o_.limits), {}, 0};
  const GenerationRequest& r = p.request;
  if (endpoint == Endpoint::chat) {
    p.prompt = chat_prompt(r);
  } else {
    try {  // as `sample` does, an empty prompt is a line break
      p.prompt = served_.tokenizer->encode(r.prompt.empty() ? "\n" : r.prompt);
    } catch (const std::invalid_argument& e) {
      throw bad_request("prompt", e.what());
    }
  }
  const int64_t context = served_.model->config().context_length;
  const auto length = static_cast<int64_t>(p.prompt.size());
  if (length > context)
    throw bad_request(
        "messages",
        fmt::format("the prompt is {} tokens; the model's context is {}", length, context),
        "context_length_exceeded");
  const int64_t fallback = endpoint == Endpoint::chat ? std::max<int64_t>(1, context - length)
                                                      : o_.completion_default_tokens;
  p.max_tokens = r.max_tokens.value_or(std::min(fallback, o_.limits.max_tokens));
  return p;
}

std::vector<Job> Server::jobs(const Prepared& p, const std::shared_ptr<Channel>& channel) const {
  const GenerationRequest& r = p.request;
  Job job;
  job.channel = channel;
  job.prompt = p.prompt;
  job.max_tokens = p.max_tokens;
  job.sampling.temperature = r.temperature;
  job.sampling.top_k = r.top_k;
  job.sampling.top_p = r.top_p;
  job.seed = r.seed ? *r.seed : fresh_seed();
  job.logprobs = r.logprobs.value_or(-1);
  const int64_t vocab = served_.tokenizer->vocab_size();
  job.ends_from = vocab;  // ids past the tokenizer's vocabulary have no text: they end it
  if (chat_) {
    job.end_ids = served_.chat_stop_ids;
    for (int64_t id = 0; id < vocab && r.endpoint == Endpoint::chat; ++id)
      if (chat_->is_special(id)) job.end_ids.push_back(id);
  }
  if (r.endpoint == Endpoint::completions) job.end_ids.clear();
  std::vector<Job> out;
  for (int64_t c = 0; c < r.n; ++c) {
    out.push_back(job);
    out.back().choice = c;
  }
  return out;
}

std::unique_ptr<Answer> Server::new_answer(const Prepared& p) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::make_unique<Answer>(
      p, *served_.tokenizer,
      fmt::format("{}-{}", p.request.endpoint == Endpoint::chat ? "chatcmpl" : "cmpl", ++next_id_),
      served_.name, std::chrono::duration_cast<std::chrono::seconds>(now).count());
}

void Server::generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  std::shared_ptr<Prepared> p;
  auto channel = std::shared_ptr<Channel>();
  try {
    p = std::make_shared<Prepared>(prepare(req.body, endpoint));
    channel = std::make_shared<Channel>(p->request.n);
    if (!engine_.submit(jobs(*p, channel)))
      throw ApiError(draining_.load() ? 503 : 429, "rate_limit_exceeded", "",
                     "the server is busy: every decoding slot and the queue are taken; retry "
                     "later");
  } catch (const ApiError& e) {
    return reply_error(res, e);
  }
  if (p->request.stream) return answer_stream(std::move(p), std::move(channel), res);
  answer_whole(std::move(p), channel, res);
}

void Server::answer_whole(std::shared_ptr<Prepared> p, const std::shared_ptr<Channel>& channel,
                          httplib::Response& res) {
  std::unique_ptr<Answer> answer = new_answer(*p);
  TokenEvent e;
  while (!answer->done()) {
    if (client_gone()) {
      channel->cancel();  // its rows are free at the next token
      close_after_response();
      return;
    }
    if (!channel->pop(e, kPoll)) continue;
    answer->take(e);
    if (auto stopped = answer->stopped_choice()) channel->cancel(*stopped);
  }
  res.set_content(answer->whole(), "application/json");
}

void Server::answer_stream(std::shared_ptr<Prepared> p, std::shared_ptr<Channel> channel,
                           httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  auto answer = std::shared_ptr<Answer>(new_answer(*p));
  res.set_chunked_content_provider(
      "text/event-stream",
      [p, channel, answer, &engine = engine_](size_t, httplib::DataSink& sink) {
        std::string out = answer->opening();
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        TokenEvent e;
        while (!answer->done()) {
          if (client_gone()) return false;
          if (!channel->pop(e, kPoll)) continue;
          out.clear();
          do {  // every event waiting, in one write: the decoder may be ahead of the socket
            out += answer->take(e);
            if (auto stopped = answer->stopped_choice()) channel->cancel(*stopped);
          } while (!answer->done() && channel->pop(e, std::chrono::milliseconds(0)));
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;
          if (!answer->done())
            channel->gather_until(std::chrono::steady_clock::now() +
                                  gather_wait(engine.in_flight()));
        }
        out = answer->stream_end();
        if (!sink.write(out.data(), out.size())) return false;
        sink.done();
        return true;
      },
      [channel](bool) { channel->cancel(); });  // a client gone mid-stream frees its rows
}

// SIGTERM or SIGINT: no new requests, those in flight get drain_seconds, then stop.
void Server::wait_for_signal() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  int got = 0;
  sigwait(&stop_signals, &got);
  draining_.store(true);
  fmt::print(stderr,
             "attograd serve: {} received: finishing {} request(s) in flight (at most "
             "{} s)\n",
             got == SIGINT ? "SIGINT" : "SIGTERM", engine_.in_flight(), o_.drain_seconds);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(o_.drain_seconds * 1e3));
  while (engine_.in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  engine_.cancel_all();
  while (!listened_.load()) {  // again until the listener has ended (a signal at its start)
    http_.stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Server::run() {
  const int port = o_.port == 0 ? http_.bind_to_any_port(o_.host) : o_.port;
  if (port < 0 || (o_.port != 0 && !http_.bind_to_port(o_.host, o_.port)) || !http_.widen_backlog())
    throw std::runtime_error(
        fmt::format("cannot listen on {}:{} (in use, or not an address of "
                    "this machine)",
                    o_.host, o_.port));
  std::thread signals([this] { wait_for_signal(); });
  if (o_.on_listening) o_.on_listening(port);
  http_.listen_after_bind();
  listened_.store(true);
  if (!draining_.load()) kill(getpid(), SIGTERM);  // the listener failed: end the waiter
  signals.join();
}

}  // namespace

void run(const ServedModel& served, const ServerOptions& options) {
  // every thread started from here on inherits the mask: only sigwait takes the signals
  sigset_t stop_signals, before;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &before);
  {
    Server server(served, options);
    server.run();
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

}  // namespace serve
