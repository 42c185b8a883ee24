#pragma once
// A request's answer in OpenAI's shapes, built from the decoder's events: the whole body
// (`text_completion` or `chat.completion`), or server-sent events, one chunk per piece of
// text (`chat.completion.chunk`: the role first, then content deltas, then the finish
// reason), the usage when asked (stream_options.include_usage) and "data: [DONE]".
//
//   serve::Answer answer(prepared, tokenizer, "cmpl-1", "model", created);
//   for (each event e) { std::string sse = answer.take(e); ... if (answer.done()) break; }
//   body = answer.whole();                // or: answer.stream_end()
//
// A choice whose text reaches a stop text is finished by the answer itself (take() then
// returns it in stopped_choice(), for the caller to cancel its decoding).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "serve/engine.h"
#include "serve/reply_text.h"
#include "serve/request.h"

namespace serve {

// A request ready for the decoder: its prompt as ids and its token budget.
struct Prepared {
  GenerationRequest request;
  std::vector<int64_t> prompt;
  int64_t max_tokens = 16;
};

class Answer {
 public:
  Answer(const Prepared& p, const data::Tokenizer& tokenizer, std::string id, std::string model,
         int64_t created);
  // The server-sent events a stream sends for the event (possibly none).
  std::string take(const TokenEvent& e);
  // The choice a stop text just ended (its decoding is to be cancelled), if any.
  std::optional<int64_t> stopped_choice() { return std::exchange(stopped_, std::nullopt); }
  bool done() const { return finished_ == static_cast<int64_t>(choices_.size()); }
  std::string opening() const;     // a stream's first events (chat: each choice's role)
  std::string whole() const;       // the body of an answer not streamed
  std::string stream_end() const;  // the usage chunk when asked, and [DONE]

 private:
  struct Choice {
    explicit Choice(std::vector<std::string> stops) : text(std::move(stops)) {}
    ReplyText text;
    std::string sent;  // everything released so far
    Finish finish = Finish::none;
    nlohmann::json tokens, token_logprobs, top_logprobs, text_offset;  // completions' logprobs
    std::pair<std::string, std::string> frame;  // a stream's token chunk before and after its text
  };
  std::string chunk(int64_t choice, const std::string& text, const nlohmann::json& logprobs,
                    Finish finish) const;
  std::string token_chunk(int64_t choice, const std::string& text) const;
  nlohmann::json logprobs_of(const TokenEvent& e, const std::string& bytes, Choice& c) const;
  void end(int64_t choice, Finish why, std::string& out);
  nlohmann::json usage() const;
  nlohmann::json header(const char* object) const;

  const Prepared& p_;
  const data::Tokenizer& tokenizer_;
  std::string id_, model_;
  int64_t created_;
  bool chat_, stream_;
  std::vector<Choice> choices_;
  int64_t finished_ = 0, completion_tokens_ = 0;
  std::optional<int64_t> stopped_;
};

}  // namespace serve
