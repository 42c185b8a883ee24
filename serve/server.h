#pragma once
// `attograd serve`: a model behind an OpenAI-compatible HTTP server (docs/serving.md).
//
//   GET  /health               {"status": "ok"} (no key needed)
//   GET  /v1/models            the one model, by the name it was given
//   POST /v1/completions       a prompt continued (logprobs, echo, stop, n, stream)
//   POST /v1/chat/completions  a reply in the model's chat format (a model without one
//                              answers 400 and says to use /v1/completions)
//
// Requests are parsed by request.h, decoded together by engine.h (sample's generation,
// batched), answered whole or as server-sent events ending "data: [DONE]"; errors are
// OpenAI-shaped JSON with their HTTP status. run() blocks until SIGTERM or SIGINT, then
// takes no new request (503), lets those in flight finish for up to drain_seconds (then
// ends them at their next token) and returns.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/chat_format.h"
#include "data/tokenizer.h"
#include "nn/gpt.h"
#include "serve/engine.h"
#include "serve/request.h"
#include "serve/transport.h"

namespace serve {

struct ServedModel {
  const nn::GPT* model = nullptr;
  const data::Tokenizer* tokenizer = nullptr;
  std::string name;                      // the id /v1/models lists
  std::optional<data::ChatFormat> chat;  // none: completions only
  std::vector<int64_t> chat_stop_ids;    // the checkpoint's stop ids (an import's eos list)
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (said on the listening line)
  std::string api_key;  // empty: none asked for
  EngineOptions engine;
  RequestLimits limits;
  TransportLimits transport;
  double drain_seconds = 10;
  int64_t completion_default_tokens = 16;  // OpenAI's default max_tokens for completions
  // Called once the port is bound (before any request is taken), with the port.
  std::function<void(int port)> on_listening;
};

// Serves until SIGTERM or SIGINT; throws std::runtime_error when the address cannot be
// bound. Blocks those signals in every thread it starts, and waits for them itself.
void run(const ServedModel& served, const ServerOptions& options);

}  // namespace serve
