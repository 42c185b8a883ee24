#include "data/chat_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "data/gpt2_tokenizer.h"

namespace data {

namespace {

// The formats as their chat templates write them (Qwen2.5's and SmolLM2's templates for
// ChatML, Llama 3.1's for the header format), a row each, with a template of our own that
// writes exactly what ChatTokens::conversation writes (a GGUF file carries it for llama.cpp).
constexpr std::array<ChatFormatRow, 2> kChatFormats = {{
    {ChatFormat::chatml,
     "",
     "<|im_start|>{role}\n",
     "<|im_end|>",
     "\n",
     {"<|im_start|>", "<|im_end|>", "", ""},
     "<|im_start|>",
     "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
     "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
     "{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    {ChatFormat::llama3,
     "<|begin_of_text|>",
     "<|start_header_id|>{role}<|end_header_id|>\n\n",
     "<|eot_id|>",
     "",
     {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
     "<|start_header_id|>",
     "{{ '<|begin_of_text|>' }}{% for message in messages %}{{ '<|start_header_id|>' + "
     "message['role'] + '<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}"
     "{% endfor %}{% if add_generation_prompt %}"
     "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
}};

// The token's id when the tokenizer has it: one of a gpt2-kind tokenizer's special tokens
// (which it encodes as ordinary text: a GGUF file's control tokens read back), or a text it
// encodes as that one token (an hf tokenizer's added tokens).
std::optional<int64_t> own_token(const Tokenizer& tokenizer, std::string_view text) {
  if (const auto* gpt2 = dynamic_cast<const Gpt2Tokenizer*>(&tokenizer))
    if (const std::optional<int64_t> id = gpt2->special_id(text)) return id;
  try {
    const std::vector<int64_t> ids = tokenizer.encode(std::string(text));
    if (ids.size() == 1 && tokenizer.decode(ids) == text) return ids[0];
  } catch (const std::invalid_argument&) {  // characters a char vocabulary lacks
  }
  return std::nullopt;
}

std::string header_text(const ChatFormatRow& row, ChatRole role) {
  std::string header(row.header);
  const size_t at = header.find("{role}");
  return header.replace(at, 6, base::choice_name(role));
}

}  // namespace

const ChatFormatRow& chat_format_row(ChatFormat format) {
  for (const ChatFormatRow& row : kChatFormats)
    if (row.format == format) return row;
  throw std::invalid_argument("chat_format_row: not a format of the table");
}

std::optional<ChatFormat> detect_chat_format(std::string_view chat_template) {
  for (const ChatFormatRow& row : kChatFormats)
    if (chat_template.find(row.template_marker) != std::string_view::npos) return row.format;
  return std::nullopt;
}

ChatTokens::ChatTokens(ChatFormat format, const Tokenizer& tokenizer)
    : row_(chat_format_row(format)), tokenizer_(tokenizer) {
  for (size_t i = 0; i < row_.special.size() && !row_.special[i].empty(); ++i) {
    const std::optional<int64_t> own = own_token(tokenizer, row_.special[i]);
    ids_[i] = own ? *own : tokenizer.vocab_size() + extra_++;
  }
}

int64_t ChatTokens::special_id(std::string_view text) const {
  for (size_t i = 0; i < row_.special.size(); ++i)
    if (row_.special[i] == text) return ids_[i];
  throw std::invalid_argument(fmt::format("'{}' is not a special token of the format", text));
}

int64_t ChatTokens::end_of_turn() const {
  return special_id(row_.end_of_turn);
}

bool ChatTokens::is_special(int64_t id) const {
  for (size_t i = 0; i < row_.special.size() && !row_.special[i].empty(); ++i)
    if (ids_[i] == id) return true;
  return false;
}

std::string_view ChatTokens::text_of(int64_t id) const {
  for (size_t i = 0; i < row_.special.size() && !row_.special[i].empty(); ++i)
    if (ids_[i] == id) return row_.special[i];
  return {};
}

std::string_view ChatTokens::special_in(std::string_view text) const {
  for (std::string_view special : row_.special)
    if (!special.empty() && text.find(special) != std::string_view::npos) return special;
  return {};
}

void ChatTokens::append_text(std::string_view text, std::vector<int64_t>& out) const {
  while (!text.empty()) {
    size_t first = text.size();
    std::string_view found;
    for (std::string_view special : row_.special) {
      const size_t at = special.empty() ? std::string_view::npos : text.find(special);
      if (at < first) first = at, found = special;
    }
    if (first > 0) {
      const std::vector<int64_t> ids = tokenizer_.encode(std::string(text.substr(0, first)));
      out.insert(out.end(), ids.begin(), ids.end());
    }
    if (found.empty()) return;
    out.push_back(special_id(found));
    text.remove_prefix(first + found.size());
  }
}

void ChatTokens::append_turn(const ChatMessage& m, std::vector<int64_t>& ids,
                             std::vector<bool>* trained) const {
  if (const std::string_view special = special_in(m.content); !special.empty())
    throw std::invalid_argument(
        fmt::format("it holds the chat format's token {}, which would end its turn", special));
  append_text(header_text(row_, m.role), ids);
  if (trained) trained->resize(ids.size(), false);
  const std::vector<int64_t> content = tokenizer_.encode(m.content);
  ids.insert(ids.end(), content.begin(), content.end());
  ids.push_back(end_of_turn());
  if (trained) trained->resize(ids.size(), m.role == ChatRole::assistant);
  append_text(row_.after_turn, ids);
}

std::vector<int64_t> ChatTokens::conversation(std::span<const ChatMessage> messages,
                                              bool generation_prompt,
                                              std::vector<bool>* trained) const {
  std::vector<int64_t> ids;
  append_text(row_.conversation_start, ids);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (trained) trained->resize(ids.size(), false);
    try {
      append_turn(messages[i], ids, trained);
    } catch (const std::invalid_argument& e) {
      throw ChatContentError(i, e.what());
    }
  }
  if (generation_prompt) append_text(header_text(row_, ChatRole::assistant), ids);
  if (trained) trained->resize(ids.size(), false);
  return ids;
}

std::string chat_plain_text(ChatFormat format, std::span<const ChatMessage> messages) {
  const ChatFormatRow& row = chat_format_row(format);
  std::string text;
  for (const ChatMessage& m : messages)
    text += header_text(row, m.role) + m.content + std::string(row.after_turn);
  text += header_text(row, ChatRole::assistant);
  for (std::string_view special : row.special)
    for (size_t at; !special.empty() && (at = text.find(special)) != std::string::npos;)
      text.erase(at, special.size());
  return text;
}

}  // namespace data
