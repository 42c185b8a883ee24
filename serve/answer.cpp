#include "serve/answer.h"

#include <fmt/format.h>

#include "base/utf8.h"

namespace serve {

using nlohmann::json;

namespace {

// JSON text of a value whose strings may hold bytes that are not UTF-8 (a byte-level
// model may write half a character and never finish it): those become U+FFFD.
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string event(const json& j) {
  return "data: " + dump(j) + "\n\n";
}

// Appends text as the inside of a JSON string exactly as nlohmann's dump writes it (not
// ensure_ascii): '"' and '\\' escaped, \b \f \n \r \t by name, the other control
// characters as \u00xx, everything else as it is. False, with `out` as it was, when text is
// not UTF-8: dump's replacement of such bytes is left to dump.
bool append_json_string(std::string& out, std::string_view text) {
  const size_t start = out.size();
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      uint32_t code_point = 0;
      const size_t n = base::utf8_char(text, i, code_point);
      if (n == 0) {
        out.resize(start);
        return false;
      }
      out.append(text, i, n);
      i += n;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20)
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
        else
          out += static_cast<char>(c);
    }
    ++i;
  }
  return true;
}

json finish_reason(Finish f) {
  switch (f) {
    case Finish::none: return nullptr;
    case Finish::length: return "length";
    case Finish::stop:
    case Finish::cancelled: return "stop";
  }
  return nullptr;
}

}  // namespace

Answer::Answer(const Prepared& p, const data::Tokenizer& tokenizer, std::string id,
               std::string model, int64_t created)
    : p_(p),
      tokenizer_(tokenizer),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      chat_(p.request.endpoint == Endpoint::chat),
      stream_(p.request.stream) {
  for (int64_t c = 0; c < p.request.n; ++c) {
    choices_.emplace_back(p.request.stop);
    Choice& choice = choices_.back();
    if (p.request.echo) choice.sent = p.request.prompt;
    for (json* list :
         {&choice.tokens, &choice.token_logprobs, &choice.top_logprobs, &choice.text_offset})
      *list = json::array();
    if (stream_) {  // the chunk of an empty text, cut where its text goes
      const std::string frame = chunk(c, "", nullptr, Finish::none);
      const std::string_view empty = chat_ ? R"("content":"")" : R"("text":"")";
      const size_t at = frame.find(empty) + empty.size() - 1;  // the closing quote
      choice.frame = {frame.substr(0, at), frame.substr(at)};
    }
  }
}

// A token's chunk without logprobs, the hot path of a stream (a chunk through json took
// about 2.8 us, and a stream sends one a token): the frame around the escaped text, the
// same bytes as chunk() writes (tests/test_serve_request.cpp), or chunk() itself for text
// that is not UTF-8.
std::string Answer::token_chunk(int64_t choice, const std::string& text) const {
  const auto& [head, tail] = choices_[static_cast<size_t>(choice)].frame;
  std::string out;
  out.reserve(head.size() + text.size() + tail.size() + 8);
  out += head;
  if (!append_json_string(out, text)) return chunk(choice, text, nullptr, Finish::none);
  return out += tail;
}

json Answer::header(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

json Answer::usage() const {
  const auto prompt = static_cast<int64_t>(p_.prompt.size());
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion_tokens_},
          {"total_tokens", prompt + completion_tokens_}};
}

std::string Answer::chunk(int64_t choice, const std::string& text, const json& logprobs,
                          Finish finish) const {
  json c = {{"index", choice}, {"finish_reason", finish_reason(finish)}};
  if (chat_) {
    c["delta"] = finish == Finish::none ? json{{"content", text}} : json::object();
  } else {
    c["text"] = text;
    c["logprobs"] = logprobs;
  }
  json j = header(chat_ ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array({c});
  return event(j);
}

std::string Answer::opening() const {
  std::string out;
  for (size_t c = 0; c < choices_.size(); ++c) {
    if (chat_) {
      json j = header("chat.completion.chunk");
      j["choices"] = json::array({json{{"index", c},
                                       {"delta", {{"role", "assistant"}, {"content", ""}}},
                                       {"finish_reason", nullptr}}});
      out += event(j);
    } else if (!choices_[c].sent.empty()) {  // echo: the prompt first
      out += chunk(static_cast<int64_t>(c), choices_[c].sent, nullptr, Finish::none);
    }
  }
  return out;
}

// A completions token's logprobs: its text, its logprob, its alternatives and where it
// begins in the choice's text; the entry a stream's chunk carries.
json Answer::logprobs_of(const TokenEvent& e, const std::string& bytes, Choice& c) const {
  json top = json::object();
  for (const auto& [id, logprob] : e.top)
    top[base::replace_invalid_utf8(tokenizer_.decode({id}))] = logprob;
  const std::string token = base::replace_invalid_utf8(bytes);
  const auto offset = static_cast<int64_t>(c.sent.size());
  c.tokens.push_back(token);
  c.token_logprobs.push_back(e.logprob);
  c.top_logprobs.push_back(top);
  c.text_offset.push_back(offset);
  return {{"tokens", {token}},
          {"token_logprobs", {e.logprob}},
          {"top_logprobs", {top}},
          {"text_offset", {offset}}};
}

void Answer::end(int64_t choice, Finish why, std::string& out) {
  Choice& c = choices_[static_cast<size_t>(choice)];
  if (c.finish != Finish::none) return;
  const std::string rest = c.text.finish();
  c.sent += rest;
  c.finish = why;
  ++finished_;
  if (!stream_) return;
  if (!rest.empty()) out += chunk(choice, rest, nullptr, Finish::none);
  out += chunk(choice, "", nullptr, why);
}

std::string Answer::take(const TokenEvent& e) {
  std::string out;
  Choice& c = choices_.at(static_cast<size_t>(e.choice));
  if (c.finish != Finish::none) return out;  // ended by a stop text: the rest is ignored
  if (e.finish != Finish::none) {
    end(e.choice, e.finish, out);
    return out;
  }
  ++completion_tokens_;
  const std::string bytes = tokenizer_.decode({e.id});
  json logprobs = nullptr;
  if (p_.request.logprobs) logprobs = logprobs_of(e, bytes, c);
  const std::string text = c.text.add(bytes);
  c.sent += text;
  if (stream_ && !logprobs.is_null())
    out += chunk(e.choice, text, logprobs, Finish::none);
  else if (stream_ && !text.empty())
    out += token_chunk(e.choice, text);
  if (c.text.stopped()) {
    stopped_ = e.choice;
    end(e.choice, Finish::stop, out);
  }
  return out;
}

std::string Answer::whole() const {
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json choice = {{"index", i}, {"finish_reason", finish_reason(c.finish)}};
    if (chat_) {
      choice["message"] = {{"role", "assistant"}, {"content", c.sent}};
      choice["logprobs"] = nullptr;
    } else {
      choice["text"] = c.sent;
      choice["logprobs"] = p_.request.logprobs ? json{{"tokens", c.tokens},
                                                      {"token_logprobs", c.token_logprobs},
                                                      {"top_logprobs", c.top_logprobs},
                                                      {"text_offset", c.text_offset}}
                                               : json(nullptr);
    }
    choices.push_back(choice);
  }
  json j = header(chat_ ? "chat.completion" : "text_completion");
  j["choices"] = choices;
  j["usage"] = usage();
  return dump(j);
}

std::string Answer::stream_end() const {
  std::string out;
  if (p_.request.include_usage) {
    json j = header(chat_ ? "chat.completion.chunk" : "text_completion");
    j["choices"] = json::array();
    j["usage"] = usage();
    out += event(j);
  }
  return out + "data: [DONE]\n\n";
}

}  // namespace serve
