#include "cli/sample_chat.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/utf8.h"
#include "cli/options.h"
#include "cli/sample_output.h"
#include "train/config.h"

namespace cli {

namespace {

// A line of a conversation typed or piped in: longer ones are refused, not held.
constexpr size_t kMaxChatLineBytes = size_t{1} << 20;

// The ids that end a reply.
struct ReplyEnds {
  const data::ChatTokens& tokens;
  const std::vector<int64_t>& stop_ids;
  int64_t vocab_size;
  bool operator()(int64_t id) const {
    return tokens.is_special(id) || id >= vocab_size ||
           std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end();
  }
};

// One reply to the prompt, printed as it is made; its ids.
std::vector<int64_t> reply(const nn::GPT& model, const data::Tokenizer& tokenizer,
                           const ReplyEnds& ends, const std::vector<int64_t>& prompt,
                           const nn::GenerationOptions& g, const std::vector<std::string>& stops,
                           nn::GenerationStats& stats) {
  SampleWriter out(STDOUT_FILENO, 1, stops, isatty(STDOUT_FILENO) != 0, "");
  std::vector<int64_t> ids, one(1);
  stats = nn::generate(model, prompt, g, [&](int64_t, int64_t id) {
    if (ends(id)) {
      out.end_sample(0);
      return false;
    }
    ids.push_back(id);
    one[0] = id;
    return out.add(0, tokenizer.decode(one));
  });
  out.finish();
  if (out.failed())
    throw std::runtime_error(
        fmt::format("cannot write to standard output ({})", std::strerror(out.failed())));
  return ids;
}

enum class LineRead { line, too_long, end };

// A line of standard input without its line break, at most kMaxChatLineBytes.
LineRead read_line(std::string& line) {
  line.clear();
  bool too_long = false;
  for (int c; (c = std::getchar()) != EOF;) {
    if (c == '\n') return too_long ? LineRead::too_long : LineRead::line;
    if (line.size() == kMaxChatLineBytes)
      too_long = true;
    else
      line += static_cast<char>(c);
  }
  if (too_long) return LineRead::too_long;
  return line.empty() ? LineRead::end : LineRead::line;
}

// The conversation so far: its system turn, then user and assistant turns.
class Conversation {
 public:
  Conversation(const data::ChatTokens& tokens, const std::string& system, int64_t room)
      : tokens_(tokens), room_(room) {
    if (!system.empty()) messages_.push_back({data::ChatRole::system, system});
    kept_ = messages_.size();
  }
  // The prompt after the user's line: the oldest turns dropped while it leaves less than
  // `room` of the context for the reply (said once). A line the format refuses is thrown.
  std::vector<int64_t> prompt_after(const std::string& line, int64_t context_length) {
    messages_.push_back({data::ChatRole::user, line});
    std::vector<int64_t> ids;
    try {
      ids = tokens_.conversation(messages_, true);
      while (static_cast<int64_t>(ids.size()) + room_ > context_length &&
             messages_.size() > kept_ + 1) {
        drop_oldest_exchange();
        ids = tokens_.conversation(messages_, true);
        if (!said_)
          fmt::print(stderr,
                     "(the conversation outgrew the context of {} tokens: its oldest "
                     "turns are dropped)\n",
                     context_length);
        said_ = true;
      }
    } catch (const data::ChatContentError&) {
      messages_.pop_back();
      throw;
    }
    return ids;
  }
  void answered(std::string text) {
    messages_.push_back({data::ChatRole::assistant, std::move(text)});
  }

 private:
  // The oldest user turn and the replies to it (the conversation then starts as the
  // conversations a chat model learns from do: its system turn, then a user's).
  void drop_oldest_exchange() {
    const auto first = messages_.begin() + static_cast<ptrdiff_t>(kept_);
    auto end = first + 1;
    while (end != messages_.end() - 1 && end->role == data::ChatRole::assistant) ++end;
    messages_.erase(first, end);
  }

  const data::ChatTokens& tokens_;
  int64_t room_;
  std::vector<data::ChatMessage> messages_;
  size_t kept_ = 0;
  bool said_ = false;
};

nn::GenerationStats converse(const nn::GPT& model, const data::Tokenizer& tokenizer,
                             const data::ChatTokens& tokens, const ReplyEnds& ends,
                             const ChatRequest& r, const nn::GenerationOptions& g,
                             const std::vector<std::string>& stops) {
  const int64_t context = model.config().context_length;
  Conversation conversation(tokens, r.system, std::min(g.max_new_tokens, context / 2));
  const bool terminal = isatty(STDIN_FILENO) != 0;
  nn::GenerationStats stats;
  std::string line;
  for (LineRead got;
       (terminal && std::fputs("> ", stderr)), (got = read_line(line)) != LineRead::end;) {
    if (got == LineRead::too_long) {
      fmt::print(stderr, "a line of more than {} bytes is not taken\n", kMaxChatLineBytes);
      continue;
    }
    if (line.empty()) continue;
    std::vector<int64_t> prompt;
    try {
      prompt = conversation.prompt_after(line, context);
    } catch (const data::ChatContentError& e) {
      fmt::print(stderr, "not taken: {}\n", e.what());
      continue;
    }
    const std::vector<int64_t> ids = reply(model, tokenizer, ends, prompt, g, stops, stats);
    conversation.answered(tokenizer.decode(ids));
  }
  return stats;
}

}  // namespace

ChatModel chat_model_of(const io::Checkpoint& ckpt, const std::optional<data::ChatFormat>& named) {
  const train::RunConfig cfg = train::RunConfig::from_json(ckpt.config);
  ChatModel m;
  m.stop_ids = cfg.stop_token_ids;
  if (named || cfg.chat_format) {
    m.format = named ? *named : *cfg.chat_format;
    return m;
  }
  throw UsageError(fmt::format(
      "'{}' has no chat format: it was not trained with --task chat, and no chat template "
      "that attograd knows came with its import; name one with --chat-format (chatml or llama3)",
      base::printable(ckpt.source)));
}

nn::GenerationStats run_chat(const nn::GPT& model, const data::Tokenizer& tokenizer,
                             const ChatModel& chat, const ChatRequest& r,
                             const nn::GenerationOptions& g,
                             const std::vector<std::string>& stops) {
  const data::ChatTokens tokens(chat.format, tokenizer);
  const ReplyEnds ends{tokens, chat.stop_ids, tokenizer.vocab_size()};
  if (!r.message) return converse(model, tokenizer, tokens, ends, r, g, stops);
  std::vector<data::ChatMessage> messages;
  if (!r.system.empty()) messages.push_back({data::ChatRole::system, r.system});
  messages.push_back({data::ChatRole::user, *r.message});
  std::vector<int64_t> prompt;
  try {
    prompt = tokens.conversation(messages, true);
  } catch (const data::ChatContentError& e) {
    throw UsageError(fmt::format(
        "{}: {}", messages[e.message].role == data::ChatRole::system ? "--system" : "--chat",
        e.what()));
  }
  nn::GenerationStats stats;
  reply(model, tokenizer, ends, prompt, g, stops, stats);
  return stats;
}

}  // namespace cli
