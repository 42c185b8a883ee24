// attograd's own byte and bpe tokenizers reserve <|endoftext|> (data::EndOfText): the last
// id, decoded to its text, never made by encode; recorded by tokenizer files, checkpoints
// and prepared folders, while files written before it was reserved read exactly as before
// (tests/fixtures/before_end_of_text: folders the previous attograd prepared). A prepare
// puts it after each document (source), in the part holding the document's end.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "data/bpe.h"
#include "data/examples.h"
#include "data/gpt2_tokenizer.h"
#include "data/prepared.h"
#include "data/tokenizer_file.h"
#include "io/checkpoint.h"
#include "io/hdf5.h"
#include "io/tokenizer_section.h"
#include "support.h"
#include "train/config.h"
#include "train/task.h"

using ag_test::TempDir;
using Catch::Matchers::Contains;

namespace {

const std::string kFixtures =
    std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/before_end_of_text";
constexpr int64_t kEnd = 256;  // a byte tokenizer's <|endoftext|>

std::vector<int64_t> ids_of(const data::TokenStore& s) {
  return s.to_vector();
}

std::vector<int64_t> eot_bytes_of(const std::string& text) {
  return std::vector<int64_t>(text.begin(), text.end());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

data::BpeTokenizer trained_bpe(int64_t vocab) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += fmt::format("the cat {} sat on the mat, then the hat\n", i);
  return data::BpeTokenizer::train(text, vocab, std::string(data::kGpt4SplitPattern),
                                   data::EndOfText::reserved);
}

io::Checkpoint eot_with_tokenizer(const data::Tokenizer& tok) {
  io::Checkpoint c;
  c.step = 1;
  c.model = {{"w", ag::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2})}};
  c.tokenizer = io::tokenizer_section(tok);
  return c;
}

}  // namespace

TEST_CASE("a byte tokenizer reserves <|endoftext|> at 256, which no text encodes to",
          "[end_of_text]") {
  const data::ByteTokenizer tok(data::EndOfText::reserved);
  REQUIRE(tok.vocab_size() == 257);
  REQUIRE(tok.reserved_end_of_text() == kEnd);
  REQUIRE(data::end_of_text_id(tok) == kEnd);
  // the text "<|endoftext|>" is ordinary text, as the gpt2 kind encodes it
  REQUIRE(tok.encode("a<|endoftext|>") == eot_bytes_of("a<|endoftext|>"));
  REQUIRE(tok.decode({'a', kEnd, 'b'}) == "a<|endoftext|>b");
  REQUIRE_THROWS_WITH(tok.decode({257}), Contains("id 257 at position 0 is not a byte or"));
  REQUIRE(data::token_byte_lengths(tok)[kEnd] == 0);  // a document's end is no text
  const data::ByteTokenizer before;                   // one made before it was reserved
  REQUIRE(before.vocab_size() == 256);
  REQUIRE_FALSE(before.reserved_end_of_text());
  REQUIRE(data::end_of_text_id(before) == 256);  // instruct still grows such a base by one
  REQUIRE_THROWS_WITH(before.decode({256}), Contains("is not a byte"));
}

TEST_CASE("a bpe tokenizer reserves <|endoftext|> as its last id", "[end_of_text]") {
  const data::BpeTokenizer tok = trained_bpe(300);
  REQUIRE(tok.vocab_size() == 300);
  REQUIRE(tok.merges().size() == 300 - 257);
  REQUIRE(tok.reserved_end_of_text() == 299);
  REQUIRE(tok.token_bytes(299) == "<|endoftext|>");
  const std::vector<int64_t> ids = tok.encode("the cat <|endoftext|> sat");
  REQUIRE(std::find(ids.begin(), ids.end(), 299) == ids.end());
  REQUIRE(tok.decode(ids) == "the cat <|endoftext|> sat");
  REQUIRE(tok.decode({299}) == "<|endoftext|>");
  REQUIRE(data::token_byte_lengths(tok)[299] == 0);
  REQUIRE(data::end_of_text_id(tok) == 299);
  REQUIRE_THROWS_WITH(data::BpeTrainer().train(256, data::EndOfText::reserved),
                      Contains("at least 257 (the byte tokens and <|endoftext|>)"));
  // its byte-level form names it, and reads back as the same kind
  const data::ByteLevelVocab v = data::byte_level_vocab(tok);
  REQUIRE(v.end_of_text == 299);
  REQUIRE(v.tokens.back() == "<|endoftext|>");
  const auto back = data::tokenizer_from_byte_level(v);
  REQUIRE(back->kind() == data::TokenizerKind::bpe);
  REQUIRE(data::tokenizer_file_bytes(*back) == data::tokenizer_file_bytes(tok));
  const auto bytes = data::bytes_alone_as_byte(data::tokenizer_from_byte_level(
      data::byte_level_vocab(data::ByteTokenizer(data::EndOfText::reserved))));
  REQUIRE(bytes->kind() == data::TokenizerKind::bytes);
  REQUIRE(bytes->reserved_end_of_text() == kEnd);
}

TEST_CASE("tokenizer files record the reserved token; files written before read as before",
          "[end_of_text]") {
  const data::ByteTokenizer byte(data::EndOfText::reserved);
  const std::string bytes = data::tokenizer_file_bytes(byte);
  REQUIRE_THAT(bytes, Contains("\"special_tokens\": [\"<|endoftext|>\"]"));
  REQUIRE(data::parse_tokenizer_file(bytes, "t.json")->vocab_size() == 257);
  const data::BpeTokenizer bpe = trained_bpe(280);
  const auto bpe_back = data::parse_tokenizer_file(data::tokenizer_file_bytes(bpe), "t.json");
  REQUIRE(bpe_back->reserved_end_of_text() == 279);
  REQUIRE(data::tokenizer_file_bytes(*bpe_back) == data::tokenizer_file_bytes(bpe));
  // what the previous attograd wrote: no special_tokens, the same ids and vocabulary
  const std::string old_byte =
      "{\n  \"format\": \"attograd-tokenizer\",\n  \"format_version\": 1,\n  \"type\": "
      "\"byte\"\n}\n";
  const auto old = data::parse_tokenizer_file(old_byte, "old.json");
  REQUIRE(old->vocab_size() == 256);
  REQUIRE_FALSE(old->reserved_end_of_text());
  REQUIRE(data::tokenizer_file_bytes(*old) == old_byte);  // saved again, the same bytes
  const std::string old_bpe_path = kFixtures + "/bpe.prepared/tokenizer.json";
  const auto old_bpe = data::read_tokenizer_file(old_bpe_path);
  REQUIRE(old_bpe->vocab_size() == 270);
  REQUIRE_FALSE(old_bpe->reserved_end_of_text());
  REQUIRE(data::tokenizer_file_bytes(*old_bpe) == read_file(old_bpe_path));
  // ids the previous attograd's `encode` gave with this file
  REQUIRE(old_bpe->encode("Second document, <|endoftext|> as text.") ==
          std::vector<int64_t>{269, 99,  111, 110, 100, 260, 99,  259, 101, 110, 116,
                               44,  261, 124, 101, 110, 100, 111, 102, 116, 101, 120,
                               116, 124, 62,  32,  97,  115, 267, 101, 120, 116, 46});
  // only that one token may be reserved
  REQUIRE_THROWS_WITH(
      data::parse_tokenizer_file(R"({"format": "attograd-tokenizer", "format_version": 1,
          "type": "byte", "special_tokens": ["<|im_end|>"]})",
                                 "bad.json"),
      Contains("bad.json: 'special_tokens' must be [\"<|endoftext|>\"]"));
}

TEST_CASE("checkpoints record the reserved token; those without it load as before",
          "[end_of_text]") {
  const TempDir dir;
  const data::BpeTokenizer bpe = trained_bpe(290);
  const data::ByteTokenizer byte(data::EndOfText::reserved);
  for (const data::Tokenizer* tok :
       {static_cast<const data::Tokenizer*>(&bpe), static_cast<const data::Tokenizer*>(&byte)}) {
    const std::string path = dir.file(tok->type() + ".h5");
    io::save_checkpoint(path, eot_with_tokenizer(*tok));
    const auto back = io::make_tokenizer(io::load_checkpoint(path).tokenizer);
    REQUIRE(back->vocab_size() == tok->vocab_size());
    REQUIRE(back->reserved_end_of_text() == tok->reserved_end_of_text());
  }
  // a byte tokenizer without it is written as before: no special_tokens attribute
  const std::string path = dir.file("old.h5");
  io::save_checkpoint(path, eot_with_tokenizer(data::ByteTokenizer()));
  {
    using namespace io::h5;
    Handle f = check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path);
    Handle g = check(H5Gopen2(f, "tokenizer", H5P_DEFAULT), path);
    REQUIRE_FALSE(attr_exists(g, "special_tokens"));
  }
  const auto old = io::make_tokenizer(io::load_checkpoint(path).tokenizer);
  REQUIRE(old->vocab_size() == 256);
  REQUIRE_FALSE(old->reserved_end_of_text());
  io::TokenizerSection wrong =
      io::tokenizer_section(data::ByteTokenizer(data::EndOfText::reserved));
  wrong.special_tokens = {"<|im_start|>"};
  REQUIRE_THROWS_WITH(io::make_tokenizer(wrong),
                      Contains("byte tokenizer: special_tokens must be [\"<|endoftext|>\"]"));
}

TEST_CASE("folders prepared before the reserved token open with their ids and identity",
          "[end_of_text]") {
  const std::string text = read_file(kFixtures + "/one.txt") + read_file(kFixtures + "/two.txt");
  // identities and ids as the previous attograd's `inspect` and `prepare` gave them
  const std::pair<const char*, const char*> folders[] = {
      {"byte.prepared", "sha256:4751c1a5100c6784e29380e5a205cb5d12851f4a2216524876748ecebe264398"},
      {"bpe.prepared", "sha256:97769569522ac1ff704e9956146607130bb9b4d754e36ba56f7fc7ad3785838d"}};
  for (const auto& [name, identity] : folders) {
    const data::PreparedData d = data::open_prepared(kFixtures + "/" + name);
    REQUIRE(d.identity == identity);
    REQUIRE_FALSE(d.meta->end_of_text);
    REQUIRE_FALSE(d.tokenizer->reserved_end_of_text());
    std::vector<int64_t> ids = ids_of(d.train);
    const std::vector<int64_t> val = ids_of(d.val);
    ids.insert(ids.end(), val.begin(), val.end());
    if (d.tokenizer->kind() == data::TokenizerKind::bytes) {
      REQUIRE(d.tokenizer->vocab_size() == 256);
      REQUIRE(ids == eot_bytes_of(text));  // no token between the documents
    } else {
      REQUIRE(d.tokenizer->vocab_size() == 270);
      REQUIRE(d.tokenizer->decode(ids) == text);
    }
  }
}

TEST_CASE("prepare puts <|endoftext|> after each document, in the part holding its end",
          "[end_of_text]") {
  const TempDir dir;
  const std::string one = "first document\n", two = "second one, longer";
  const std::vector<std::string> sources = {dir.write("a/1.txt", one), dir.write("a/2.txt", two)};
  // 33 bytes, the last 3 validation: document 1 ends in train, document 2 in val
  const data::PrepareResult r =
      data::prepare(sources, data::TokenizerKind::bytes, 0, 0.1, dir.file("byte.prepared"));
  REQUIRE(r.meta.end_of_text == kEnd);
  REQUIRE(r.meta.train.documents == 1);
  REQUIRE(r.meta.val.documents == 1);
  const data::PreparedData d = data::open_prepared(dir.file("byte.prepared"));
  const size_t cut = one.size() + two.size() - 3;
  std::vector<int64_t> train = eot_bytes_of(one);
  train.push_back(kEnd);
  const std::vector<int64_t> rest = eot_bytes_of(two.substr(0, two.size() - 3));
  train.insert(train.end(), rest.begin(), rest.end());
  REQUIRE(ids_of(d.train) == train);
  std::vector<int64_t> val = eot_bytes_of(two.substr(two.size() - 3));
  val.push_back(kEnd);
  REQUIRE(ids_of(d.val) == val);
  REQUIRE(d.train_text_bytes == cut);
  // bpe: each document encoded alone, the token after it
  const data::PrepareResult b =
      data::prepare(sources, data::TokenizerKind::bpe, 270, 0.0, dir.file("bpe.prepared"));
  REQUIRE(b.meta.end_of_text == 269);
  REQUIRE(b.meta.train.documents == 2);
  const data::PreparedData p = data::open_prepared(dir.file("bpe.prepared"));
  std::vector<int64_t> want = p.tokenizer->encode(one);
  want.push_back(269);
  const std::vector<int64_t> second = p.tokenizer->encode(two);
  want.insert(want.end(), second.begin(), second.end());
  want.push_back(269);
  REQUIRE(ids_of(p.train) == want);
  // a text in memory is one document, as a folder of that one file
  const data::PreparedData t = data::prepare_text(one + two, data::TokenizerKind::bytes, 0, 0.1);
  std::vector<int64_t> tail = eot_bytes_of(two.substr(two.size() - 3));
  tail.push_back(kEnd);
  REQUIRE(ids_of(t.val) == tail);
  REQUIRE(ids_of(t.train) == eot_bytes_of((one + two).substr(0, cut)));
}

TEST_CASE("a meta.json whose documents or end_of_text disagree is refused", "[end_of_text]") {
  const TempDir dir;
  const std::vector<std::string> sources = {dir.write("1.txt", "one document\n"),
                                            dir.write("2.txt", "and another")};
  const data::PrepareResult r =
      data::prepare(sources, data::TokenizerKind::bytes, 0, 0.1, dir.file("p"));
  data::PreparedMeta m = r.meta;
  m.end_of_text = 255;
  REQUIRE_THROWS_WITH(data::parse_prepared_meta(data::prepared_meta_bytes(m), "meta.json"),
                      Contains("meta.json: 'tokenizer.end_of_text' is 255; the reserved "
                               "<|endoftext|> is the last id, 256"));
  m = r.meta;
  m.val.documents = 2;
  m.val.tokens += 1;
  REQUIRE_THROWS_WITH(data::parse_prepared_meta(data::prepared_meta_bytes(m), "meta.json"),
                      Contains("'val.documents' is 2, but with train's 1 there are 2 sources"));
  m = r.meta;
  m.train.tokens -= 1;  // the token after document 1 missing
  REQUIRE_THROWS_WITH(data::parse_prepared_meta(data::prepared_meta_bytes(m), "meta.json"),
                      Contains("'train.tokens' is 22, but the split gives 23"));
  std::string bytes = data::prepared_meta_bytes(r.meta);  // documents without end_of_text
  bytes.replace(bytes.find("\"end_of_text\": 256,"), 19, "");
  REQUIRE_THROWS_WITH(data::parse_prepared_meta(bytes, "meta.json"),
                      Contains("'train.documents' is not a key this format has"));
}

TEST_CASE("instruct ends responses with the reserved token: no row for a base that has it",
          "[end_of_text]") {
  const train::RunConfig cfg;
  const train::TaskHandle instruct(train::task_named("instruct"));
  const data::ByteTokenizer reserving(data::EndOfText::reserved), before;
  REQUIRE(instruct->extra_ids(cfg, reserving) == 0);
  REQUIRE(instruct->pad_id(reserving) == kEnd);
  REQUIRE(instruct->extra_ids(cfg, before) == 1);  // grown by one row, as before
  const data::BpeTokenizer bpe = trained_bpe(280);
  REQUIRE(instruct->extra_ids(cfg, bpe) == 0);
  REQUIRE(data::end_of_text_id(bpe) == 279);
}
