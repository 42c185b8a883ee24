#include "serve/request.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/json.h"

namespace serve {

using nlohmann::json;

ApiError bad_request(std::string param, const std::string& message, std::string code) {
  return ApiError(400, "invalid_request_error", std::move(param), message, std::move(code));
}

std::string error_body(const ApiError& e) {
  json error = {{"message", e.what()},
                {"type", e.type},
                {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  return json{{"error", error}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

// The fields of one request object, each read at most once by its name.
class Fields {
 public:
  explicit Fields(const json& object) : object_(object) {}

  // The value at `key`, or null when absent (JSON null reads as absent, as OpenAI's does).
  const json* find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  std::optional<bool> boolean(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) throw wrong(key, *v, "a boolean");
    return v->get<bool>();
  }
  // An integer in [lo, hi]; a fraction, a string or a number out of range is refused.
  std::optional<int64_t> integer(const char* key, int64_t lo, int64_t hi) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
      throw out_of_range(key, lo, hi);
    if (!v->is_number_integer()) throw wrong(key, *v, "an integer");
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) throw out_of_range(key, lo, hi);
    return x;
  }
  // A finite number in [lo, hi] (lo excluded when open_low).
  std::optional<double> number(const char* key, double lo, double hi, bool open_low) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) throw wrong(key, *v, "a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi || (open_low && x == lo))
      throw bad_request(key, fmt::format("'{}' must be a number in {}{}, {}], got {}", key,
                                         open_low ? "(" : "[", lo, hi, base::json_quote(*v)));
    return x;
  }
  const json* string_or_array(const char* key) const {
    const json* v = find(key);
    if (v && !v->is_string() && !v->is_array()) throw wrong(key, *v, "a string or an array");
    return v;
  }

  static ApiError wrong(const std::string& key, const json& v, const char* kind) {
    return bad_request(key, fmt::format("'{}' must be {}, got {} {}", key, kind, base::json_kind(v),
                                        base::json_quote(v)));
  }
  static ApiError out_of_range(const std::string& key, int64_t lo, int64_t hi) {
    return bad_request(key, fmt::format("'{}' must be an integer from {} to {}", key, lo, hi));
  }

 private:
  const json& object_;
};

// Fields that would change the text and are not implemented: refused unless neutral.
void refuse_unsupported(const Fields& f, Endpoint endpoint) {
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (f.number(key, -2.0, 2.0, false).value_or(0.0) != 0.0)
      throw bad_request(key, fmt::format("'{}' is not supported (only 0)", key));
  for (const char* key : {"logit_bias", "tools", "functions", "tool_choice", "suffix"}) {
    const json* v = f.find(key);
    if (v && !(v->empty() || (v->is_string() && (*v == "none" || *v == ""))))
      throw bad_request(key, fmt::format("'{}' is not supported", key));
  }
  if (const json* format = f.find("response_format"))
    if (!format->is_object() || format->value("type", std::string("text")) != "text")
      throw bad_request("response_format", "only the 'text' response_format is supported");
  if (f.integer("best_of", 1, 1000).value_or(1) > 1)
    throw bad_request("best_of", "'best_of' is not supported (only 1)");
  if (endpoint == Endpoint::chat &&
      (f.boolean("logprobs").value_or(false) || f.find("top_logprobs")))
    throw bad_request("logprobs", "chat completions do not give logprobs here (completions do)");
}

// stop: a string or an array of up to limits.max_stops non-empty strings.
std::vector<std::string> read_stops(const Fields& f, const RequestLimits& limits) {
  const json* v = f.string_or_array("stop");
  if (!v) return {};
  const json list = v->is_string() ? json::array({*v}) : *v;
  if (list.size() > limits.max_stops)
    throw bad_request("stop", fmt::format("'stop' holds at most {} strings", limits.max_stops));
  std::vector<std::string> stops;
  for (const json& s : list) {
    if (!s.is_string()) throw Fields::wrong("stop", s, "a string");
    const auto& text = s.get_ref<const std::string&>();
    if (text.empty() || text.size() > limits.max_stop_bytes)
      throw bad_request(
          "stop", fmt::format("each 'stop' string must be 1 to {} bytes", limits.max_stop_bytes));
    stops.push_back(text);
  }
  return stops;
}

std::string read_prompt(const Fields& f) {
  const json* v = f.string_or_array("prompt");
  if (!v) throw bad_request("prompt", "'prompt' is required");
  if (v->is_string()) return v->get<std::string>();
  if (v->size() == 1 && (*v)[0].is_string()) return (*v)[0].get<std::string>();
  throw bad_request("prompt",
                    "'prompt' must be a string or an array of one string (one prompt "
                    "a request; token arrays are not taken)");
}

// A message's content: a string, or text parts joined.
std::string read_content(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw Fields::wrong(where, content, "a string or an array of parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw bad_request(where, fmt::format("{}: only parts {{\"type\": \"text\", \"text\": ...}} "
                                           "are taken",
                                           where));
    text += part["text"].get<std::string>();
  }
  return text;
}

data::ChatMessage read_message(const json& m, size_t i) {
  const std::string where = fmt::format("messages[{}]", i);
  if (!m.is_object()) throw Fields::wrong(where, m, "an object");
  const Fields f(m);
  const json* role = f.find("role");
  if (!role || !role->is_string())
    throw bad_request(where + ".role", where + ".role must be system, user or assistant");
  data::ChatMessage message;
  const auto& name = role->get_ref<const std::string&>();
  if (name == "system" || name == "developer")
    message.role = data::ChatRole::system;
  else if (name == "user")
    message.role = data::ChatRole::user;
  else if (name == "assistant")
    message.role = data::ChatRole::assistant;
  else
    throw bad_request(where + ".role", fmt::format("{}.role must be system, user or assistant, "
                                                   "got {}",
                                                   where, base::json_quote(*role)));
  const json* content = f.find("content");
  if (!content && message.role != data::ChatRole::assistant)
    throw bad_request(where + ".content", where + ".content is required");
  if (content) message.content = read_content(*content, where + ".content");
  return message;
}

std::vector<data::ChatMessage> read_messages(const Fields& f, const RequestLimits& limits) {
  const json* v = f.find("messages");
  if (!v) throw bad_request("messages", "'messages' is required");
  if (!v->is_array() || v->empty() || v->size() > limits.max_messages)
    throw bad_request("messages", fmt::format("'messages' must be an array of 1 to {} messages",
                                              limits.max_messages));
  std::vector<data::ChatMessage> messages;
  for (size_t i = 0; i < v->size(); ++i) messages.push_back(read_message((*v)[i], i));
  return messages;
}

void read_sampling(const Fields& f, const RequestLimits& limits, GenerationRequest& r) {
  const char* tokens_key = r.endpoint == Endpoint::chat && f.find("max_completion_tokens")
                               ? "max_completion_tokens"
                               : "max_tokens";
  r.max_tokens = f.integer(tokens_key, 1, limits.max_tokens);
  r.temperature = f.number("temperature", 0.0, 2.0, false).value_or(1.0);
  r.top_p = f.number("top_p", 0.0, 1.0, true).value_or(1.0);
  r.top_k =
      std::max<int64_t>(0, f.integer("top_k", -1, std::numeric_limits<int32_t>::max()).value_or(0));
  r.n = f.integer("n", 1, limits.max_choices).value_or(1);
  if (auto seed = f.integer("seed", std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max()))
    r.seed = static_cast<uint64_t>(*seed);
  r.stop = read_stops(f, limits);
  r.stream = f.boolean("stream").value_or(false);
  if (const json* options = f.find("stream_options")) {
    if (!options->is_object()) throw Fields::wrong("stream_options", *options, "an object");
    r.include_usage = Fields(*options).boolean("include_usage").value_or(false);
  }
}

}  // namespace

GenerationRequest parse_request(std::string_view body, Endpoint endpoint,
                                const RequestLimits& limits) {
  json j;
  try {
    j = base::parse_json(body);
  } catch (const base::JsonError& e) {
    throw bad_request("", fmt::format("the body is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) throw bad_request("", "the body must be a JSON object");
  const Fields f(j);
  GenerationRequest r;
  r.endpoint = endpoint;
  if (const json* model = f.find("model")) {
    if (!model->is_string()) throw Fields::wrong("model", *model, "a string");
    r.model = model->get<std::string>();
  }
  refuse_unsupported(f, endpoint);
  read_sampling(f, limits, r);
  if (endpoint == Endpoint::chat) {
    r.messages = read_messages(f, limits);
    return r;
  }
  r.prompt = read_prompt(f);
  r.logprobs = f.integer("logprobs", 0, limits.max_logprobs);
  r.echo = f.boolean("echo").value_or(false);
  return r;
}

}  // namespace serve
