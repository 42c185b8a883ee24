#pragma once
// The request layer of `attograd serve`: the body of an OpenAI-style request, JSON from
// anyone on the network, to a generation request, checked field by field before any work.
// A pure function (no model, no I/O): the fuzz target `serve_request` and
// tests/test_serve_request.cpp call it as the server does.
//
//   serve::RequestLimits limits{.max_tokens = 4096, .max_choices = 8};
//   try {
//     serve::GenerationRequest r = serve::parse_request(body, serve::Endpoint::chat, limits);
//   } catch (const serve::ApiError& e) {   // e.status (400), e.param ("temperature"), what()
//     reply(e.status, serve::error_body(e));
//   }
//
// What is read (the OpenAI fields that apply; docs/serving.md):
//   both         model (any string), max_tokens (and chat's max_completion_tokens),
//                temperature [0, 2], top_p (0, 1], top_k >= 0 (an extension; -1: all),
//                stop (a string or up to 4), seed, n, stream, stream_options.include_usage
//   completions  prompt (a string, or an array of one), logprobs 0..5, echo
//   chat         messages: roles system (or developer), user, assistant; content a string or
//                an array of {"type": "text", "text": ...} parts
// Fields that would change the result and are not implemented (penalties, logit_bias,
// tools, a JSON response_format, best_of, suffix, chat logprobs) are refused when set to
// anything but their neutral value, never silently ignored; every other field is ignored,
// as OpenAI ignores what it does not know. The body is parsed by base/json.h (its depth
// limit, no key twice).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat_format.h"

namespace serve {

enum class Endpoint { completions, chat };

// An error as OpenAI's API states one: an HTTP status, a type, the parameter at fault.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string type, std::string param, const std::string& message,
           std::string code = "")
      : std::runtime_error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type;   // invalid_request_error, server_error, ...
  std::string param;  // the field at fault, or ""
  std::string code;   // a machine-readable code (context_length_exceeded), or ""
};

// A 400 invalid_request_error naming `param`.
ApiError bad_request(std::string param, const std::string& message, std::string code = "");

// {"error": {"message", "type", "param", "code"}} (param and code null when empty).
std::string error_body(const ApiError& e);

struct RequestLimits {
  int64_t max_tokens = 4096;  // the most new tokens a choice may ask for
  int64_t max_choices = 8;    // n
  int64_t max_logprobs = 5;   // completions' logprobs (OpenAI's bound)
  size_t max_stops = 4;       // OpenAI's bound
  size_t max_stop_bytes = 256;
  size_t max_messages = 1024;
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;
  std::string prompt;                       // completions
  std::vector<data::ChatMessage> messages;  // chat
  std::optional<int64_t> max_tokens;        // none: the endpoint's default (docs/serving.md)
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  std::vector<std::string> stop;
  std::optional<uint64_t> seed;
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  std::optional<int64_t> logprobs;  // completions: alternatives per token (0..5)
  bool echo = false;                // completions: the prompt before the text
};

// Throws ApiError (400, naming the field) for anything it refuses.
GenerationRequest parse_request(std::string_view body, Endpoint endpoint,
                                const RequestLimits& limits);

}  // namespace serve
