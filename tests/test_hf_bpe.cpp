// data/hf_bpe.h: Hugging Face tokenizers' byte-level BPE (the hf kind) on its own: added
// tokens matched leftmost and longest before the split, NFC between them, several merges
// making one token, ignore_merges, the template's ids; a stream in any chunks gives encode's
// ids; a checkpoint and a prepared folder's tokenizer file keep it whole. Its ids against
// tokenizers itself: reference.hf_families (tests/reference/hf_families_reference.sh).
#include <catch2/catch.hpp>
#include <random>

#include "data/hf_bpe.h"
#include "data/normalize.h"
#include "data/tokenizer_file.h"
#include "io/checkpoint.h"
#include "io/tokenizer_section.h"
#include "support.h"

using ag_test::TempDir;
using Catch::Matchers::Contains;

namespace {

// The 256 bytes at ids 0-255 (byte b at id b), then these tokens, made by these merges.
data::HfBpeSpec small_spec() {
  data::HfBpeSpec spec;
  for (int b = 0; b < 256; ++b) spec.tokens.emplace_back(1, static_cast<char>(b));
  for (const char* t : {"he", "the", " the", "ll", "hell", "\xc3\xa9"}) spec.tokens.push_back(t);
  // 256 he, 257 the, 258 " the", 259 ll, 260 hell, 261 é
  spec.merges = {{'h', 'e'}, {'t', 256}, {' ', 257}, {'l', 'l'}, {256, 259}, {0xC3, 0xA9}};
  spec.split_pattern = std::string(data::kGpt2SplitPattern);
  spec.tokens.push_back("<|im_start|>");   // 262
  spec.tokens.push_back("<|im_start|>x");  // 263: longer, starting the same
  spec.tokens.push_back("<s>");            // 264: matched in the normalized text
  spec.added = {{262, "<|im_start|>", true, false, false},
                {263, "<|im_start|>x", true, false, false},
                {264, "<s>", false, true, false}};
  return spec;
}

std::vector<int64_t> ids(std::initializer_list<int64_t> list) {
  return list;
}

// The ids a stream encoder gives text cut into chunks at random places.
std::vector<int64_t> streamed(const data::HfBpeTokenizer& tok, const std::string& text,
                              uint32_t seed) {
  std::mt19937 gen(seed);
  const auto encoder = data::make_hf_stream_encoder(tok);
  std::vector<uint32_t> out;
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = std::min<size_t>(text.size() - pos, gen() % 7);
    encoder->add(std::string_view(text).substr(pos, n), out);
    pos += n;
  }
  encoder->finish(out);
  return {out.begin(), out.end()};
}

}  // namespace

TEST_CASE("hf: added tokens are matched leftmost and longest, never split", "[hf_bpe][tokenizer]") {
  const data::HfBpeTokenizer tok(small_spec());
  REQUIRE(tok.encode("<|im_start|>the") == ids({262, 257}));
  REQUIRE(tok.encode("<|im_start|>xthe") == ids({263, 257}));
  REQUIRE(tok.encode("a<s> the") == ids({'a', 264, 258}));
  REQUIRE(tok.encode("<|im_star") == ids({'<', '|', 'i', 'm', '_', 's', 't', 'a', 'r'}));
  REQUIRE(tok.decode(tok.encode("x<|im_start|>x<s>")) == "x<|im_start|>x<s>");
}

TEST_CASE("hf: several merges may make one token, wherever its id is", "[hf_bpe][tokenizer]") {
  data::HfBpeSpec spec = small_spec();
  spec.merges.push_back({'h', 260});  // "hello" is no token: refused
  REQUIRE_THROWS_WITH(data::HfBpeTokenizer(spec), Contains("merge 6"));
  spec = small_spec();
  spec.merges.insert(spec.merges.begin(), {'t', 'h'});  // no token "th": refused
  REQUIRE_THROWS_WITH(data::HfBpeTokenizer(spec), Contains("no token of the model"));
  spec = small_spec();
  spec.tokens.push_back("th");                                                 // 265
  spec.merges = {{'t', 'h'}, {265, 'e'}, {'h', 'e'}, {'t', 256}, {' ', 257}};  // two make "the"
  const data::HfBpeTokenizer tok(spec);
  REQUIRE(tok.encode("the") == ids({257}));
  REQUIRE(tok.encode(" the") == ids({258}));
}

TEST_CASE("hf: ignore_merges takes a piece that is a token whole", "[hf_bpe][tokenizer]") {
  data::HfBpeSpec spec = small_spec();
  spec.merges = {{'l', 'l'}, {'h', 'e'}, {256, 'l'}};  // "hello": he, ll first
  spec.tokens[260] = "hello";
  spec.merges.pop_back();
  data::HfBpeTokenizer merged(spec);
  REQUIRE(merged.encode("hello") == ids({256, 259, 'o'}));
  spec.ignore_merges = true;
  REQUIRE(data::HfBpeTokenizer(spec).encode("hello") == ids({260}));
}

TEST_CASE("hf: NFC composes the text between added tokens", "[hf_bpe][tokenizer]") {
  REQUIRE(data::nfc("e\xcc\x81") == "\xc3\xa9");
  REQUIRE(data::nfc(std::string("a\0b", 3)) == std::string("a\0b", 3));
  REQUIRE(data::nfc_stable_end("ab") == 1);
  REQUIRE(data::nfc_stable_end("ae\xcc\x81") == 1);
  data::HfBpeSpec spec = small_spec();
  spec.normalizer = data::Normalizer::nfc;
  const data::HfBpeTokenizer tok(spec);
  REQUIRE(tok.encode("e\xcc\x81") == ids({261}));
  // the mark after an added token is normalized alone, as tokenizers does
  REQUIRE(tok.encode("<|im_start|>\xcc\x81") == ids({262, 0xCC, 0x81}));
}

TEST_CASE("hf: a stream in any chunks gives encode's ids", "[hf_bpe][tokenizer]") {
  for (const auto normalizer : {data::Normalizer::none, data::Normalizer::nfc}) {
    data::HfBpeSpec spec = small_spec();
    spec.normalizer = normalizer;
    const data::HfBpeTokenizer tok(spec);
    const std::string text =
        "hello the<|im_start|>xthe <s><s>e\xcc\x81 e\xcc\x81\xcc\xa7 \xe1\x84\x80\xe1\x85\xa1 "
        "<|im_start|><|im_sta the  \r\n 1234 \xf0\x9f\x98\x80<|im_start|>";
    for (uint32_t seed = 0; seed < 40; ++seed)
      REQUIRE(streamed(tok, text, seed) == tok.encode(text));
  }
}

TEST_CASE("hf: the template's ids come around the text only when asked", "[hf_bpe][tokenizer]") {
  data::HfBpeSpec spec = small_spec();
  spec.prefix = {262};
  const data::HfBpeTokenizer tok(spec);
  REQUIRE(tok.encode("the") == ids({257}));
  REQUIRE(tok.with_template(tok.encode("the")) == ids({262, 257}));
  spec.prefix = {9999};
  REQUIRE_THROWS_WITH(data::HfBpeTokenizer(spec), Contains("the template adds id 9999"));
}

TEST_CASE("hf: a checkpoint and a tokenizer file keep it whole", "[hf_bpe][tokenizer]") {
  data::HfBpeSpec spec = small_spec();
  spec.normalizer = data::Normalizer::nfc;
  spec.ignore_merges = true;
  spec.prefix = {262};
  const data::HfBpeTokenizer tok(spec);
  const std::string text = "hello the <|im_start|>xe\xcc\x81<s>";
  TempDir dir;
  io::Checkpoint c;
  c.model = {{"w", ag::from_vector(std::vector<float>{1, 2}, {1, 2})}};
  c.tokenizer = io::tokenizer_section(tok);
  io::save_checkpoint(dir.file("hf.h5"), c);
  const auto back = io::make_tokenizer(io::load_checkpoint(dir.file("hf.h5")).tokenizer);
  REQUIRE(back->type() == "hf");
  REQUIRE(back->encode(text) == tok.encode(text));
  const auto& again = dynamic_cast<const data::HfBpeTokenizer&>(*back);
  REQUIRE(again.spec().prefix == spec.prefix);
  REQUIRE(data::hf_settings_json(again.spec()) == data::hf_settings_json(spec));
  const std::string file = data::tokenizer_file_bytes(tok);
  const auto reread = data::parse_tokenizer_file(file, "tokenizer.json");
  REQUIRE(reread->encode(text) == tok.encode(text));
  REQUIRE(data::tokenizer_file_bytes(*reread) == file);
}

TEST_CASE("hf: settings that are not what attograd writes are refused naming the key",
          "[hf_bpe][tokenizer]") {
  data::HfBpeSpec spec;
  REQUIRE_THROWS_WITH(data::read_hf_settings("[]", spec), Contains("not a JSON object"));
  std::string json = data::hf_settings_json(small_spec());
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string s = json;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  REQUIRE_THROWS_WITH(data::read_hf_settings(with("\"none\"", "\"NFKC\""), spec),
                      Contains("'normalizer' is not NFC or none"));
  REQUIRE_THROWS_WITH(data::read_hf_settings(with("\"special\":true", "\"special\":1"), spec),
                      Contains("'added_tokens[0].special' has the wrong type"));
}
