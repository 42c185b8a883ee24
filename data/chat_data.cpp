// The chat task's reader (examples.h): conversations, one JSON object {"messages": [{"role",
// "content"}, ...]} per line (or a JSON array of them), as the OpenAI and Hugging Face chat
// data sets hold them; written in the run's chat format (chat_format.h), tokenized, masked
// but for the assistant's replies, and cut to the context. The file is read as
// json_records.h reads hostile input; every problem is one DataError naming the file, the
// record's line and the field ('messages[2].role').
#include <fmt/format.h>

#include <algorithm>

#include "base/utf8.h"
#include "data/chat_format.h"
#include "data/data_error.h"
#include "data/examples.h"
#include "data/json_records.h"
#include "data/strict_json.h"

namespace data {

namespace {

// Far above any conversation a context holds; a record of 4 MB holds no more anyway.
constexpr size_t kMaxMessages = 100'000;

struct Conversation {
  std::vector<ChatMessage> messages;
  std::string where;  // "FILE: line 12", for messages
  int64_t line = 0;
};

ChatMessage parse_message(const detail::JsonObject& m) {
  ChatMessage message;
  const std::string role = m.string("role");
  const std::optional<ChatRole> known = base::find_choice<ChatRole>(role);
  if (!known)
    m.fail("role", fmt::format("is '{}', not 'system', 'user' or 'assistant'",
                               base::printable(role.substr(0, 40))));
  message.role = *known;
  message.content = m.string("content");
  return message;
}

// The record's messages; other keys than messages (and than role and content in a message)
// are ignored.
Conversation parse_conversation(const detail::JsonRecord& r) {
  Conversation c;
  c.where = r.where;
  c.line = r.line;
  const detail::JsonObject o(r.value, r.where, "");
  const nlohmann::json& list = o.array("messages");
  if (list.empty()) o.fail("messages", "is empty: a conversation needs messages");
  if (list.size() > kMaxMessages)
    o.fail("messages", fmt::format("has {} messages, more than the {} one conversation may have",
                                   list.size(), kMaxMessages));
  for (size_t i = 0; i < list.size(); ++i)
    c.messages.push_back(parse_message(o.element("messages", i)));
  if (std::none_of(c.messages.begin(), c.messages.end(),
                   [](const ChatMessage& m) { return m.role == ChatRole::assistant; }))
    o.fail("messages", "has no assistant message: nothing to train on");
  return c;
}

std::vector<Conversation> read_conversations(const std::string& path) {
  std::vector<Conversation> out;
  detail::for_each_json_record(
      path, {"a chat file", "'messages', a list of 'role' and 'content'"},
      [&](const detail::JsonRecord& r) { out.push_back(parse_conversation(r)); });
  return out;
}

// The conversation's ids and which of them are trained, a refused message named.
std::vector<int64_t> encode_conversation(const ChatTokens& tokens, const Conversation& c,
                                         std::vector<bool>& trained) {
  try {
    return tokens.conversation(c.messages, false, &trained);
  } catch (const ChatContentError& e) {
    throw DataError(fmt::format("{}: 'messages[{}].content': {}", c.where, e.message, e.what()));
  }
}

}  // namespace

Example chat_example(std::span<const int64_t> ids, const std::vector<bool>& trained,
                     int64_t context_length, bool* truncated) {
  if (context_length < 1) throw std::invalid_argument("chat_example: context_length < 1");
  const auto last = std::find(trained.rbegin(), trained.rend(), true);
  const auto n = static_cast<int64_t>(trained.rend() - last);  // up to the last trained id
  const int64_t kept = std::min(n, context_length);
  Example e;
  e.ids.assign(ids.begin(), ids.begin() + kept);
  e.targets.assign(static_cast<size_t>(kept), kIgnoreTarget);
  for (int64_t i = 0; i < kept && i + 1 < n; ++i)
    if (trained[static_cast<size_t>(i + 1)])
      e.targets[static_cast<size_t>(i)] = ids[static_cast<size_t>(i + 1)];
  if (truncated) *truncated = n - 1 > context_length;
  return e;
}

TaskExamples read_chat_examples(const std::string& path, const Tokenizer& tokenizer,
                                const TaskOptions& o) {
  const int64_t T = o.context_length;
  if (T < 1) throw std::invalid_argument("read_chat_examples: a context length");
  const ChatTokens tokens(o.chat_format, tokenizer);
  TaskExamples out;
  std::vector<bool> trained;
  for (const Conversation& c : read_conversations(path)) {
    const std::vector<int64_t> ids = encode_conversation(tokens, c, trained);
    bool cut = false;
    Example e = chat_example(ids, trained, T, &cut);
    if (std::all_of(e.targets.begin(), e.targets.end(),
                    [](int64_t t) { return t == kIgnoreTarget; }))
      throw DataError(fmt::format(
          "{}: the first assistant reply starts past the context length {}: no token of it "
          "would be trained on",
          c.where, T));
    if (!o.truncate && cut)
      throw DataError(fmt::format(
          "{}: the conversation takes {} tokens to its last reply, more than the "
          "context length {} (--no-truncate refuses such a record)",
          c.where, trained.rend() - std::find(trained.rbegin(), trained.rend(), true) - 1, T));
    e.line = c.line;
    out.examples.push_back(std::move(e));
    out.truncated += cut ? 1 : 0;
  }
  return out;
}

std::string chat_corpus_text(const std::string& path, const TaskOptions& o) {
  std::string text;
  for (const Conversation& c : read_conversations(path))
    text += chat_plain_text(o.chat_format, c.messages);
  return text;
}

}  // namespace data
