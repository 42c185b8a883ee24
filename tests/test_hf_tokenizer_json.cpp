// interop/tokenizer_json.h: Hugging Face tokenizers' tokenizer.json read back into the
// tokenizer data::hf_tokenizer_json wrote it from (every kind, every split pattern), GPT-2's
// own shape read too, and everything else refused naming the file and the key, without
// quoting the file.
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "data/bpe.h"
#include "data/gpt2_tokenizer.h"
#include "gpt2_vocab_support.h"
#include "interop/model_files.h"
#include "interop/tokenizer_json.h"
#include "io/tokenizer_section.h"
#include "support.h"

using ag_test::TempDir;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

const std::string kJsonText = "the cat's 123 dogs ran  home!\n\tagain <|endoftext|> ok";

// The tokenizer read back from the tokenizer.json written for tok.
std::unique_ptr<data::Tokenizer> round_trip(const data::Tokenizer& tok,
                                            std::vector<std::string>* notes = nullptr) {
  TempDir dir;
  const std::string path = dir.write("tokenizer.json", data::hf_tokenizer_json(tok));
  return io::make_tokenizer(interop::read_hf_tokenizer_json(path, notes));
}

void require_same(const data::Tokenizer& tok, const std::string& text) {
  const auto back = round_trip(tok);
  REQUIRE(back->type() == tok.type());
  REQUIRE(back->vocab_size() == tok.vocab_size());
  REQUIRE(back->encode(text) == tok.encode(text));
  const io::TokenizerSection a = io::tokenizer_section(tok), b = io::tokenizer_section(*back);
  REQUIRE(a.vocab == b.vocab);
  REQUIRE(a.merges == b.merges);
  REQUIRE(a.split_pattern == b.split_pattern);
  REQUIRE(a.byte_order == b.byte_order);
  REQUIRE(a.special_tokens == b.special_tokens);
}

// The message reading `file` (a tokenizer.json's text) gives.
std::string tokenizer_json_refusal(const std::string& file) {
  TempDir dir;
  const std::string path = dir.write("tokenizer.json", file);
  try {
    interop::read_hf_tokenizer_json(path);
  } catch (const interop::InteropError& e) {
    return e.what();
  }
  FAIL("read without an error: " << file.substr(0, 200));
  return "";
}

// A byte-level tokenizer.json attograd writes, changed by `edit`.
std::string edited(const std::function<void(json&)>& edit) {
  json j = json::parse(
      data::hf_tokenizer_json(*data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab())));
  edit(j);
  return j.dump();
}

}  // namespace

TEST_CASE("tokenizer.json of every kind reads back as the tokenizer it was written from",
          "[interop][tokenizer_json]") {
  require_same(data::CharTokenizer::from_text("the cat's dogs ran home!\n\tagain <|>ok123 fx"),
               kJsonText);
  require_same(data::ByteTokenizer(), kJsonText);
  const std::string corpus = "the cat sat on the mat, and the dog ran home. 123 456\n";
  std::string text;
  for (int i = 0; i < 20; ++i) text += corpus;
  require_same(data::BpeTokenizer::train(text, 300), kJsonText);  // GPT-4's pattern
  require_same(data::BpeTokenizer::train(text, 300, std::string(data::kGpt2SplitPattern)),
               kJsonText);
  require_same(data::BpeTokenizer::train(text, 280, "[a-z]+|[^a-z]"), kJsonText);
  require_same(*data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab()),
               kJsonText);  // gpt2, a special
}

TEST_CASE("a char tokenizer's unk_token is noted, as the checkpoint cannot keep it",
          "[interop][tokenizer_json]") {
  data::CharTokenizer chars = data::CharTokenizer::from_text("ab?");
  chars.set_replacement('?');
  std::vector<std::string> notes;
  REQUIRE(round_trip(chars, &notes)->encode("ba") == std::vector<int64_t>{2, 1});
  REQUIRE(notes.size() == 1);
  REQUIRE_THAT(notes[0], Contains("unk_token"));
}

TEST_CASE("GPT-2's own tokenizer.json shape is read", "[interop][tokenizer_json]") {
  // transformers' gpt2: no model type, ByteLevel without use_regex, a ByteLevel
  // post-processor; tokenizers 0.20 writes merges as pairs
  const std::string file = edited([](json& j) {
    j["model"].erase("type");
    j["pre_tokenizer"].erase("use_regex");
    j["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}};
    j["model"]["merges"] = json::array({{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}});
  });
  TempDir dir;
  const auto back =
      io::make_tokenizer(interop::read_hf_tokenizer_json(dir.write("tokenizer.json", file)));
  const auto tok = data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab());
  REQUIRE(back->type() == "gpt2");
  REQUIRE(back->encode(kJsonText) == tok->encode(kJsonText));
  REQUIRE(io::tokenizer_section(*back).special_tokens == std::vector<std::string>{"<|endoftext|>"});
}

TEST_CASE("tokenizer.json attograd cannot read as it is meant is refused naming the key",
          "[interop][tokenizer_json]") {
  const auto set = [](const char* key, json v) {
    return edited([&](json& j) { j[json::json_pointer(key)] = v; });
  };
  REQUIRE_THAT(tokenizer_json_refusal(set("/normalizer", {{"type", "NFKC"}})),
               Contains("tokenizer.json: normalizer is 'NFKC': attograd reads none or NFC"));
  REQUIRE_THAT(tokenizer_json_refusal(set("/model/type", "WordPiece")),
               Contains("model.type is \"WordPiece\""));
  REQUIRE_THAT(tokenizer_json_refusal(set("/model/dropout", 0.1)),
               Contains("model.dropout is set"));
  REQUIRE_THAT(tokenizer_json_refusal(set("/model/byte_fallback", true)),
               Contains("model.byte_fallback"));
  REQUIRE_THAT(tokenizer_json_refusal(set("/added_tokens/0/lstrip", true)),
               Contains("added_tokens[0].lstrip is true"));
  REQUIRE_THAT(tokenizer_json_refusal(set("/model/end_of_word_suffix", "</w>")),
               Contains("model.end_of_word_suffix is set"));
  REQUIRE_THAT(tokenizer_json_refusal(set("/pre_tokenizer", {{"type", "Whitespace"}})),
               Contains("pre_tokenizer is 'Whitespace'"));
  REQUIRE_THAT(tokenizer_json_refusal(set("/pre_tokenizer/add_prefix_space", true)),
               Contains("pre_tokenizer.add_prefix_space is not false"));
  REQUIRE_THAT(tokenizer_json_refusal(set("/post_processor", {{"type", "TemplateProcessing"}})),
               Contains("post_processor has no single template"));
  REQUIRE_THAT(tokenizer_json_refusal(set("/post_processor", {{"type", "RobertaProcessing"}})),
               Contains("post_processor is 'RobertaProcessing'"));
  REQUIRE_THAT(tokenizer_json_refusal(set("/decoder", {{"type", "WordPiece"}})),
               Contains("decoder is not ByteLevel"));
  REQUIRE_THAT(tokenizer_json_refusal(set("/extra", 1)), Contains("the file has the key 'extra'"));
  REQUIRE_THAT(tokenizer_json_refusal(set("/model/extra", 1)),
               Contains("model has the key 'extra'"));
}

TEST_CASE("hostile tokenizer.json is refused naming the entry, never quoting the file",
          "[interop][tokenizer_json]") {
  REQUIRE_THAT(tokenizer_json_refusal(edited([](json& j) { j["model"]["merges"][1] = "h e x"; })),
               Contains("tokenizer.json: model.merges[1] is not a merge"));
  REQUIRE_THAT(tokenizer_json_refusal(edited([](json& j) { j["model"]["vocab"]["h"] = "x"; })),
               Contains("the id is a string, not an unsigned integer"));
  REQUIRE_THAT(tokenizer_json_refusal(edited([](json& j) { j["model"]["vocab"]["h"] = 5000; })),
               Contains("model.vocab gives id 5000, but its 260 tokens must have ids 0 to 259"));
  REQUIRE_THAT(tokenizer_json_refusal(edited([](json& j) { j["model"]["vocab"]["h"] = 0; })),
               Contains("model.vocab gives id 0"));
  REQUIRE_THAT(tokenizer_json_refusal(edited([](json& j) { j["added_tokens"][0]["id"] = 3; })),
               Contains("added_tokens give id 3 to another token than model.vocab"));
  REQUIRE_THAT(tokenizer_json_refusal(edited([](json& j) { j["added_tokens"][0]["id"] = 900; })),
               Contains("added_tokens give id 900, but the next id is 260"));
  REQUIRE_THAT(tokenizer_json_refusal(edited([](json& j) { j["model"]["merges"][0] = "h zz"; })),
               Contains("tokenizer.json: model.merges[0] names a token that model.vocab does not"));
  REQUIRE_THAT(tokenizer_json_refusal(R"({"model": {}, "model": {}})"),
               Contains("model appears twice"));
  REQUIRE_THAT(tokenizer_json_refusal(R"({"version": "1.0"})"), Contains("the file has no model"));
  REQUIRE_THAT(tokenizer_json_refusal("[1]"), Contains("the file is an array, not a JSON object"));
  REQUIRE_THAT(tokenizer_json_refusal("{\"normalizer\": " + std::string(100, '[')),
               Contains("nested deeper than"));
  REQUIRE_THAT(tokenizer_json_refusal(R"({"model": {"vocab": {}}})"),
               Contains("model.vocab has no tokens"));
  const std::string secret =
      tokenizer_json_refusal("{\"model\": {\"vocab\": {\"SECRET-TEXT\n\": 0}}}");
  REQUIRE_THAT(secret, Contains("not valid JSON"));
  REQUIRE_THAT(secret, !Contains("SECRET"));
  REQUIRE_THAT(
      tokenizer_json_refusal(R"({"model": {"vocab": {"ab": 0}}, "decoder": {"type": "Fuse"}})"),
      Contains("model.vocab token 0 is not one character"));
  REQUIRE_THAT(tokenizer_json_refusal(
                   R"({"model": {"vocab": {"b": 0, "a": 1}}, "decoder": {"type": "Fuse"}})"),
               Contains("token 1 (U+0061) is not after token 0 (U+0062)"));
  TempDir dir;
  const std::string big = dir.write("tokenizer.json", "{}");
  std::filesystem::resize_file(big, interop::kMaxHfTokenizerJsonBytes + 1);  // sparse
  REQUIRE_THROWS_WITH(interop::read_hf_tokenizer_json(big),
                      Contains("bytes, more than the 67108864 such a file may have"));
}
