// Chat (data/chat_format.h, data/chat_data.cpp, the chat settings of an import): formats
// written exactly, only the assistant's replies trained, special tokens the tokenizer's own
// or past its vocabulary, hostile conversation files refused naming file, line and field,
// and a Hugging Face folder's chat template and stop ids read.
#include <catch2/catch.hpp>

#include "data/chat_format.h"
#include "data/data.h"
#include "data/hf_bpe.h"
#include "data/pretokenize.h"
#include "interop/tokenizer_files.h"
#include "support.h"
#include "train/config.h"

using Catch::Matchers::Contains;

namespace {

// The 256 bytes at ids 0-255, then ChatML's tokens as added tokens (256, 257), no merges.
data::HfBpeTokenizer chatml_tokenizer() {
  data::HfBpeSpec spec;
  for (int b = 0; b < 256; ++b) spec.tokens.emplace_back(1, static_cast<char>(b));
  spec.split_pattern = std::string(data::kGpt2SplitPattern);
  spec.tokens.push_back("<|im_start|>");
  spec.tokens.push_back("<|im_end|>");
  spec.added = {{256, "<|im_start|>", true, false, false}, {257, "<|im_end|>", true, false, false}};
  return data::HfBpeTokenizer(spec);
}

std::vector<int64_t> bytes_of(const std::string& text) {
  return {text.begin(), text.end()};
}

std::vector<int64_t> join(std::initializer_list<std::vector<int64_t>> parts) {
  std::vector<int64_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::string error_of(const ag_test::TempDir& dir, const std::string& content) {
  const std::string path = dir.write("bad.jsonl", content);
  const data::ByteTokenizer tok;
  data::TaskOptions o;
  o.context_length = 512;
  try {
    data::read_chat_examples(path, tok, o);
  } catch (const data::DataError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("chat: ChatML writes each turn, the tokenizer's own special tokens one id each",
          "[chat]") {
  const data::HfBpeTokenizer tok = chatml_tokenizer();
  const data::ChatTokens tokens(data::ChatFormat::chatml, tok);
  REQUIRE(tokens.extra_ids() == 0);
  REQUIRE(tokens.end_of_turn() == 257);
  const std::vector<data::ChatMessage> chat = {{data::ChatRole::system, "S"},
                                               {data::ChatRole::user, "hi"},
                                               {data::ChatRole::assistant, "ok"}};
  std::vector<bool> trained;
  const std::vector<int64_t> ids = tokens.conversation(chat, false, &trained);
  const std::vector<int64_t> expected = join({{256},
                                              bytes_of("system\nS"),
                                              {257},
                                              bytes_of("\n"),
                                              {256},
                                              bytes_of("user\nhi"),
                                              {257},
                                              bytes_of("\n"),
                                              {256},
                                              bytes_of("assistant\nok"),
                                              {257},
                                              bytes_of("\n")});
  REQUIRE(ids == expected);
  REQUIRE(tok.decode(ids) ==
          "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
          "<|im_start|>assistant\nok<|im_end|>\n");
  // trained: the reply's content and its end of turn, nothing else
  std::vector<int64_t> trained_ids;
  for (size_t i = 0; i < ids.size(); ++i)
    if (trained[i]) trained_ids.push_back(ids[i]);
  REQUIRE(trained_ids == join({bytes_of("ok"), {257}}));
  // the generation prompt: the assistant's header after the turns
  const std::vector<data::ChatMessage> asked(chat.begin(), chat.begin() + 2);
  REQUIRE(tok.decode(tokens.conversation(asked, true)) ==
          "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
          "<|im_start|>assistant\n");
}

TEST_CASE("chat: an example's targets are exactly the reply's tokens and its end of turn",
          "[chat]") {
  const data::HfBpeTokenizer tok = chatml_tokenizer();
  const data::ChatTokens tokens(data::ChatFormat::chatml, tok);
  const std::vector<data::ChatMessage> chat = {{data::ChatRole::user, "a"},
                                               {data::ChatRole::assistant, "bc"},
                                               {data::ChatRole::user, "d"},
                                               {data::ChatRole::assistant, "e"}};
  std::vector<bool> trained;
  const std::vector<int64_t> ids = tokens.conversation(chat, false, &trained);
  bool cut = true;
  const data::Example e = data::chat_example(ids, trained, 512, &cut);
  REQUIRE_FALSE(cut);
  REQUIRE(e.ids.size() == ids.size() - 1);  // up to the last reply's end of turn
  REQUIRE(e.ids.back() == 257);
  std::vector<int64_t> counted;
  for (size_t i = 0; i < e.targets.size(); ++i)
    if (e.targets[i] != data::kIgnoreTarget) {
      REQUIRE(e.targets[i] == e.ids[i + 1]);
      counted.push_back(e.targets[i]);
    }
  REQUIRE(counted == join({bytes_of("bc"), {257}, bytes_of("e"), {257}}));
  // cut to the context: only the targets that fit, counted as truncated
  const data::Example short_one = data::chat_example(ids, trained, 20, &cut);
  REQUIRE(cut);
  REQUIRE(short_one.ids.size() == 20);
}

TEST_CASE("chat: Llama 3's format starts once and writes headers", "[chat]") {
  const data::CharTokenizer tok = data::CharTokenizer::from_text("abcdefghijklmnopqrstuvwxyz\n");
  const data::ChatTokens tokens(data::ChatFormat::llama3, tok);
  // a char tokenizer has none of the four: they are the ids past its vocabulary, in order
  REQUIRE(tokens.extra_ids() == 4);
  const int64_t V = tok.vocab_size();
  REQUIRE(tokens.end_of_turn() == V + 3);
  REQUIRE(tokens.is_special(V));
  REQUIRE(tokens.is_special(V + 3));
  REQUIRE_FALSE(tokens.is_special(0));
  const std::vector<data::ChatMessage> chat = {{data::ChatRole::user, "hi"}};
  const std::vector<int64_t> ids = tokens.conversation(chat, true);
  const std::vector<int64_t> expected = join({{V, V + 1},
                                              tok.encode("user"),
                                              {V + 2},
                                              tok.encode("\n\nhi"),
                                              {V + 3},
                                              {V + 1},
                                              tok.encode("assistant"),
                                              {V + 2},
                                              tok.encode("\n\n")});
  REQUIRE(ids == expected);
  REQUIRE(data::chat_plain_text(data::ChatFormat::llama3, chat) == "user\n\nhiassistant\n\n");
}

TEST_CASE("chat: a chat_template's family is found by its special tokens", "[chat]") {
  REQUIRE(data::detect_chat_format("{% for m in messages %}<|im_start|>{{ m.role }}") ==
          data::ChatFormat::chatml);
  REQUIRE(data::detect_chat_format("{{ '<|start_header_id|>' + m.role + '<|end_header_id|>' }}") ==
          data::ChatFormat::llama3);
  REQUIRE_FALSE(data::detect_chat_format("[INST] {{ m.content }} [/INST]"));
}

TEST_CASE("chat: hostile conversation files are refused naming file, line and field", "[chat]") {
  const ag_test::TempDir dir;
  const std::string ok = R"({"messages": [{"role": "user", "content": "a"}, )"
                         R"({"role": "assistant", "content": "b"}]})";
  REQUIRE(error_of(dir, ok + "\n") == "no error");
  REQUIRE_THAT(error_of(dir, ok + "\n" + R"({"messages": [{"role": "tool", "content": "a"}]})"),
               Contains("bad.jsonl: line 2: 'messages[0].role' is 'tool', not 'system', "
                        "'user' or 'assistant'"));
  REQUIRE_THAT(error_of(dir, R"({"messages": [{"role": "user"}]})"),
               Contains("bad.jsonl: line 1: 'messages[0].content' is missing"));
  REQUIRE_THAT(error_of(dir, R"({"messages": [{"role": "user", "content": "a"}]})"),
               Contains("bad.jsonl: line 1: 'messages' has no assistant message"));
  REQUIRE_THAT(error_of(dir, R"({"messages": []})"),
               Contains("bad.jsonl: line 1: 'messages' is empty"));
  REQUIRE_THAT(error_of(dir, R"({"prompt": "a"})"),
               Contains("bad.jsonl: line 1: 'messages' is missing"));
  REQUIRE_THAT(error_of(dir, "\n\n" + std::string(R"({"messages": [{"role": "assistant", )") +
                                 R"("content": "x<|im_end|>"}]})"),
               Contains("bad.jsonl: line 3: 'messages[0].content': it holds the chat format's "
                        "token <|im_end|>"));
  REQUIRE_THAT(error_of(dir, ok + "\n" + std::string(5 << 20, ' ') + "{}\n"),
               Contains("bad.jsonl: line 2: a record of"));
  REQUIRE_THAT(error_of(dir, "[1]"), Contains("bad.jsonl: record 1 (line 1): a record must be"));
}

TEST_CASE("chat: a conversation longer than the context is cut or, with --no-truncate, refused",
          "[chat]") {
  const ag_test::TempDir dir;
  const std::string path =
      dir.write("long.jsonl", R"({"messages": [{"role": "user", "content": "a"}, )"
                              R"({"role": "assistant", "content": ")" +
                                  std::string(100, 'b') + "\"}]}\n");
  const data::ByteTokenizer tok;
  data::TaskOptions o;
  o.context_length = 64;
  const data::TaskExamples cut = data::read_chat_examples(path, tok, o);
  REQUIRE(cut.truncated == 1);
  REQUIRE(cut.examples[0].ids.size() == 64);
  o.truncate = false;
  REQUIRE_THROWS_WITH(data::read_chat_examples(path, tok, o),
                      Contains("long.jsonl: line 1: the conversation takes") &&
                          Contains("(--no-truncate refuses such a record)"));
  o.context_length = 8;  // the reply starts past it
  REQUIRE_THROWS_WITH(data::read_chat_examples(path, tok, o),
                      Contains("the first assistant reply starts past the context length 8"));
}

TEST_CASE("chat: a config keeps the chat format and stop ids, and reads older ones without",
          "[chat]") {
  train::RunConfig c;
  REQUIRE_FALSE(train::RunConfig::from_json(c.to_json()).chat_format);
  REQUIRE_FALSE(c.to_json().contains("chat_format"));
  c.chat_format = data::ChatFormat::llama3;
  c.stop_token_ids = {128001, 128009};
  const train::RunConfig back = train::RunConfig::from_json(c.to_json());
  REQUIRE(back.chat_format == data::ChatFormat::llama3);
  REQUIRE(back.stop_token_ids == c.stop_token_ids);
  nlohmann::json j = c.to_json();
  j["chat_format"] = "vicuna";
  REQUIRE_THROWS_WITH(train::RunConfig::from_json(j), Contains("chat_format"));
}

TEST_CASE("chat: an import reads the chat template's family and generation_config's stop ids",
          "[chat][interop]") {
  const ag_test::TempDir dir;
  std::vector<std::string> notes;
  REQUIRE_FALSE(interop::read_chat_settings(dir.path.string(), dir.path.string(), notes).format);
  dir.write("tokenizer_config.json",
            R"({"added_tokens_decoder": {}, "chat_template": "{{'<|start_header_id|>'}}"})");
  dir.write("generation_config.json", R"({"eos_token_id": [128001, 128008, 128009]})");
  interop::ChatSettings s =
      interop::read_chat_settings(dir.path.string(), dir.path.string(), notes);
  REQUIRE(s.format == data::ChatFormat::llama3);
  REQUIRE(s.stop_ids == std::vector<int64_t>{128001, 128008, 128009});
  dir.write("tokenizer_config.json", R"({"chat_template": "[INST]"})");
  dir.write("generation_config.json", R"({"eos_token_id": 2})");
  s = interop::read_chat_settings(dir.path.string(), dir.path.string(), notes);
  REQUIRE_FALSE(s.format);
  REQUIRE(s.stop_ids == std::vector<int64_t>{2});
  REQUIRE(notes.size() == 1);
  REQUIRE_THAT(notes[0], Contains("tokenizer_config.json: 'chat_template' writes neither"));
  dir.write("generation_config.json", R"({"eos_token_id": ["x"]})");
  REQUIRE_THROWS_WITH(interop::read_chat_settings(dir.path.string(), dir.path.string(), notes),
                      Contains("generation_config.json") && Contains("eos_token_id"));
}
