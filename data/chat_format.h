#pragma once
// Chat formats: how a conversation of system, user and assistant messages is written as
// one text for a chat model, as the chat_template of a Hugging Face tokenizer_config.json
// writes it. Two families are known, each a row of one table (chat_format.cpp):
//   chatml  Qwen2/2.5/3, SmolLM2:  <|im_start|>ROLE\nCONTENT<|im_end|>\n
//   llama3  Llama 3:  <|begin_of_text|> once, then
//           <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>
// The generation prompt is the assistant's header (<|im_start|>assistant\n). Templates are
// recognised by the special tokens they write, never run (no Jinja here).
//
// A format's special tokens are one id each: the tokenizer's own when it encodes the
// token's text as that one token (an imported model's added tokens), else ids past its
// vocabulary in the row's order (a char, byte or bpe tokenizer learned here; the model
// then has as many more rows).
//
//   data::ChatTokens tokens(data::ChatFormat::chatml, tokenizer);
//   std::vector<bool> trained;
//   auto ids = tokens.conversation(messages, /*generation_prompt=*/false, &trained);
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/choice.h"
#include "data/tokenizer.h"

namespace data {

enum class ChatFormat { chatml, llama3 };
enum class ChatRole { system, user, assistant };

}  // namespace data

template <>
struct base::ChoiceNames<data::ChatFormat> {
  static constexpr const char* key = "chat_format";
  static constexpr std::array<std::pair<data::ChatFormat, const char*>, 2> rows = {
      {{data::ChatFormat::chatml, "chatml"}, {data::ChatFormat::llama3, "llama3"}}};
};

template <>
struct base::ChoiceNames<data::ChatRole> {
  static constexpr const char* key = "role";
  static constexpr std::array<std::pair<data::ChatRole, const char*>, 3> rows = {
      {{data::ChatRole::system, "system"},
       {data::ChatRole::user, "user"},
       {data::ChatRole::assistant, "assistant"}}};
};

namespace data {

// One format: the text of each part, special tokens written as their texts.
struct ChatFormatRow {
  ChatFormat format;
  std::string_view conversation_start;      // once, before the first turn
  std::string_view header;                  // a turn's text before its content; {role}: the role
  std::string_view end_of_turn;             // the token after the content (trained, as a reply's)
  std::string_view after_turn;              // text after the end of turn
  std::array<std::string_view, 4> special;  // the format's special tokens ("" past the last)
  std::string_view template_marker;         // what a chat_template of this family writes
  std::string_view chat_template;           // a Jinja chat_template writing exactly this format
};

const ChatFormatRow& chat_format_row(ChatFormat format);

// The family a Hugging Face chat_template writes, by its special tokens; nullopt when it is
// neither (the caller names the file and key).
std::optional<ChatFormat> detect_chat_format(std::string_view chat_template);

struct ChatMessage {
  ChatRole role = ChatRole::user;
  std::string content;
};

// A message that cannot be written in the format: its content holds a character the
// tokenizer lacks, or a special token's text. `message` is its index in the conversation.
struct ChatContentError : std::invalid_argument {
  ChatContentError(size_t message, const std::string& what)
      : std::invalid_argument(what), message(message) {}
  size_t message;
};

// A chat format's special tokens as ids of one tokenizer, and conversations as ids.
class ChatTokens {
 public:
  ChatTokens(ChatFormat format, const Tokenizer& tokenizer);

  ChatFormat format() const { return row_.format; }
  // The ids past the tokenizer's vocabulary that the format needs.
  int64_t extra_ids() const { return extra_; }
  int64_t end_of_turn() const;
  // Whether id is one of the format's special tokens.
  bool is_special(int64_t id) const;
  // The text of the special token of this id ("" when id is none of them).
  std::string_view text_of(int64_t id) const;
  // The first special token's text that `text` holds, or "" (a message must hold none: its
  // text would end its turn).
  std::string_view special_in(std::string_view text) const;

  // The conversation's ids: the format's start, every message's turn, and with
  // generation_prompt the assistant's header after them. With `trained`, one flag per id:
  // whether it is an assistant message's content or its end of turn (what a chat model
  // learns to write). A content the tokenizer refuses, or one holding a special token's
  // text, is a ChatContentError.
  std::vector<int64_t> conversation(std::span<const ChatMessage> messages, bool generation_prompt,
                                    std::vector<bool>* trained = nullptr) const;
  // Text that may hold the format's special tokens (its header texts), as ids.
  void append_text(std::string_view text, std::vector<int64_t>& out) const;

 private:
  void append_turn(const ChatMessage& m, std::vector<int64_t>& ids,
                   std::vector<bool>* trained) const;
  int64_t special_id(std::string_view text) const;

  const ChatFormatRow& row_;
  const Tokenizer& tokenizer_;
  std::array<int64_t, 4> ids_{};
  int64_t extra_ = 0;
};

// A conversation as text with the format's special tokens left out: what a tokenizer
// learned from scratch must cover (its roles, line breaks and contents).
std::string chat_plain_text(ChatFormat format, std::span<const ChatMessage> messages);

}  // namespace data
