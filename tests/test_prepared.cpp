// Prepared corpora (data/prepared.h): round trips of every tokenizer, docs/model.md's split, the
// same ids as the in-memory path, BPE learned from the training text only, uint16 or
// uint32 ids, stable identities, batches and evaluation windows equal to the vector path,
// prepare_text, progress, and streaming in bounded memory. Hostile folders and files are
// in test_prepared_hostile.cpp.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "base/utf8.h"
#include "data/data.h"
#include "support.h"
#include "train/memory_plan.h"

using ag_test::TempDir;
using Catch::Matchers::Contains;

namespace {

// Hostile Unicode and plain ASCII, a few kilobytes: combining marks, emoji with
// modifiers and joiners, CJK, right-to-left text, a BOM, CRLF line ends, NUL and DEL.
std::string sample_text(int lines = 120) {
  static const std::string kLines[] = {
      "The quick brown fox jumps over the lazy dog.\n",
      "e\xcc\x81\xcc\x82 caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 \xc3\x85ngstr\xc3\xb6m\n",
      "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd "
      "\xf0\x9f\x87\xab\xf0\x9f\x87\xb7\n",
      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe6\x96\x87\xe7\xab\xa0\xe3\x80\x82\r\n",
      "\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d \xd8\xb3\xd9\x84\xd8\xa7\xd9\x85 \xef\xbb\xbf x\n",
      "  indented\tand tabbed   1234567 numbers, (brackets) [and] {braces}!?\n",
      std::string("nul \0 and del \x7f end\n", 21),
  };
  std::string text;
  for (int i = 0; i < lines; ++i) text += kLines[(i * 7 + i / 3) % 7];
  text += std::string("tail with a NUL \0 inside", 24);
  return text;
}

std::string prepared_read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

data::PrepareOptions prepared_options(std::vector<std::string> sources,
                                      const std::string& tokenizer, const std::string& out,
                                      double val_fraction = 0.1, int64_t vocab = 0) {
  data::PrepareOptions o;
  o.sources = std::move(sources), o.tokenizer = base::parse_choice<data::TokenizerKind>(tokenizer),
  o.vocab_size = vocab;
  o.val_fraction = val_fraction, o.out_dir = out, o.sync = false;
  return o;
}

// The corpus cut into three files (one of them empty), at byte offsets between characters.
std::vector<std::string> write_parts(const TempDir& dir, const std::string& text) {
  const size_t a = text.size() / 3, b = 2 * text.size() / 3;
  const auto at_char = [&](size_t i) {
    while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) ++i;
    return i;
  };
  return {dir.write("src/a.txt", text.substr(0, at_char(a))), dir.write("src/b.txt", ""),
          dir.write("src/c.txt", text.substr(at_char(a), at_char(b) - at_char(a))),
          dir.write("src/d.txt", text.substr(at_char(b)))};
}

// The text of a store's ids, the documents' ends (a reserved <|endoftext|>) left out.
std::string decoded(const data::PreparedData& d, const data::TokenStore& store) {
  std::vector<int64_t> ids = store.to_vector();
  if (const auto end = d.tokenizer->reserved_end_of_text()) std::erase(ids, *end);
  return d.tokenizer->decode(ids);
}

// A byte prepare's ids by the rule of docs/data.md: the bytes split at n_train, and 256
// after each document, in train while its end is within the first n_train bytes.
data::Split byte_documents(const std::vector<std::string>& sources, double val_fraction) {
  std::vector<std::string> docs;
  size_t units = 0;
  for (const std::string& path : sources) units += prepared_read_file(path).size();
  const size_t n_train = units - data::split_val_units(units, val_fraction);
  data::Split out;
  size_t u = 0;
  for (const std::string& path : sources) {
    for (const char c : prepared_read_file(path))
      (u++ < n_train ? out.train : out.val).push_back(static_cast<unsigned char>(c));
    (u > n_train ? out.val : out.train).push_back(256);
  }
  return out;
}

}  // namespace

TEST_CASE("char and byte prepare round-trips the corpus and gives the in-memory ids",
          "[prepared]") {
  const std::string text = sample_text();
  TempDir dir;
  const auto sources = write_parts(dir, text);
  const std::string tokenizer = GENERATE("char", "byte");
  const size_t chunk = GENERATE(size_t{16}, size_t{37}, size_t{1} << 20);
  const double f = GENERATE(0.0, 0.1, 0.37, 0.999);
  INFO(tokenizer << " chunk " << chunk << " val_fraction " << f);
  data::PrepareOptions o = prepared_options(sources, tokenizer, dir.file("out"), f);
  o.chunk_bytes = chunk;
  const data::PrepareResult r = data::prepare(o);
  const data::PreparedData d = data::open_prepared(dir.file("out"));

  REQUIRE(decoded(d, d.train) + decoded(d, d.val) == text);
  REQUIRE(d.train_text_bytes + d.val_text_bytes == text.size());
  REQUIRE(decoded(d, d.train) == text.substr(0, d.train_text_bytes));
  // today's path: the tokenizer of the whole text, its encode, split_tokens (byte: and
  // <|endoftext|> after each of the four documents)
  std::unique_ptr<data::Tokenizer> reference;
  if (tokenizer == "char")
    reference = std::make_unique<data::CharTokenizer>(data::CharTokenizer::from_text(text));
  else
    reference = std::make_unique<data::ByteTokenizer>(data::EndOfText::reserved);
  const data::Split split = tokenizer == "char" ? data::split_tokens(reference->encode(text), f)
                                                : byte_documents(sources, f);
  REQUIRE(d.train.to_vector() == split.train);
  REQUIRE(d.val.to_vector() == split.val);
  REQUIRE(d.tokenizer->vocab_size() == reference->vocab_size());
  if (tokenizer == "char")
    REQUIRE(dynamic_cast<const data::CharTokenizer&>(*d.tokenizer).code_points() ==
            dynamic_cast<const data::CharTokenizer&>(*reference).code_points());
  // the metadata
  const data::PreparedMeta& m = r.meta;
  REQUIRE(m.total_bytes == text.size());
  REQUIRE(m.total_chars == base::utf8_decode(text).size());
  REQUIRE(m.sources.size() == 4);
  REQUIRE(m.sources[1].bytes == 0);
  REQUIRE(m.sources[0].sha256 == data::text_identity(prepared_read_file(sources[0])).substr(7));
  REQUIRE(m.train.tokens == split.train.size());
  REQUIRE(m.val.tokens == split.val.size());
  REQUIRE(d.identity == r.identity);
}

TEST_CASE("the split is the last fraction of the characters or bytes", "[prepared]") {
  // 4 characters of 1, 2, 3 and 4 bytes: 10 bytes
  const std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  TempDir dir;
  const std::string src = dir.write("t.txt", text);
  SECTION("char: floor(4 * 0.5) = 2 characters of validation") {
    const auto r = data::prepare(prepared_options({src}, "char", dir.file("o"), 0.5));
    REQUIRE(r.meta.split_unit == data::SplitUnit::chars);
    REQUIRE(r.meta.val_units == 2);
    REQUIRE(r.meta.split_char == 2);
    REQUIRE(r.meta.split_byte == 3);  // "a" and "é"
    REQUIRE(r.meta.train.tokens == 2);
    REQUIRE(r.meta.val.text_bytes == 7);
  }
  SECTION("byte: floor(10 * 0.35) = 3 bytes of validation, the split inside a character") {
    const auto r = data::prepare(prepared_options({src}, "byte", dir.file("o"), 0.35));
    REQUIRE(r.meta.split_unit == data::SplitUnit::bytes);
    REQUIRE(r.meta.val_units == 3);
    REQUIRE(r.meta.split_byte == 7);
    REQUIRE(r.meta.split_char == 4);  // characters that start before byte 7
    REQUIRE(r.meta.train.tokens == 7);
    REQUIRE(r.meta.val.tokens == 4);  // and <|endoftext|>: the document ends there
    REQUIRE(r.meta.val.documents == 1);
  }
  SECTION("a val_fraction of 0 leaves validation empty") {
    const auto r = data::prepare(prepared_options({src}, "char", dir.file("o"), 0.0));
    REQUIRE(r.meta.val.tokens == 0);
    REQUIRE(r.meta.split_byte == 10);
    const auto d = data::open_prepared(dir.file("o"));
    REQUIRE(d.val.empty());
    REQUIRE(d.train.size() == 4);
  }
}

TEST_CASE("bpe merges are learned from the training split only", "[prepared]") {
  // training text of 'a' words, validation text of 'b' words: no merge may involve 'b'
  std::string train, val;
  for (int i = 0; i < 400; ++i) train += (i % 3 ? "aaa aaaa " : "aa aaa\n");
  for (int i = 0; i < 200; ++i) val += "bbb bbbb ";
  train.resize(3000), val.resize(1000);
  const std::string text = train + val;
  TempDir dir;
  const std::vector<std::string> sources = {dir.write("t.txt", text)};  // one document
  const double f = 0.25;  // 1000 of 4000 characters, exactly
  data::PrepareOptions o = prepared_options(sources, "bpe", dir.file("out"), f, 300);
  o.chunk_bytes = GENERATE(size_t{16}, size_t{1000}, size_t{1} << 20);
  const data::PrepareResult r = data::prepare(o);
  const data::PreparedData d = data::open_prepared(dir.file("out"));
  const auto& tok = dynamic_cast<const data::BpeTokenizer&>(*d.tokenizer);
  for (const auto& [left, right] : tok.merges()) {
    REQUIRE(tok.token_bytes(left).find('b') == std::string_view::npos);
    REQUIRE(tok.token_bytes(right).find('b') == std::string_view::npos);
  }
  // the same merges as training on the training text in one piece, each part on its own
  const data::BpeTokenizer whole = data::BpeTokenizer::train(
      train, 300, std::string(data::kGpt4SplitPattern), data::EndOfText::reserved);
  REQUIRE(tok.merges() == whole.merges());
  REQUIRE(d.train.to_vector() == whole.encode(train));
  std::vector<int64_t> val_ids = whole.encode(val);
  val_ids.push_back(*whole.reserved_end_of_text());  // the document ends in validation
  REQUIRE(d.val.to_vector() == val_ids);
  REQUIRE(decoded(d, d.train) + decoded(d, d.val) == text);
  REQUIRE(r.meta.split_byte == train.size());
  REQUIRE(r.meta.train.text_bytes == train.size());
}

TEST_CASE("bpe prepare round-trips hostile Unicode over many chunk sizes", "[prepared]") {
  const std::string text = sample_text(60);
  TempDir dir;
  const std::vector<std::string> sources = {dir.write("t.txt", text)};  // one document
  data::PrepareOptions o = prepared_options(sources, "bpe", dir.file("out"), 0.2, 400);
  o.chunk_bytes = GENERATE(size_t{16}, size_t{333}, size_t{1} << 20);
  data::prepare(o);
  const data::PreparedData d = data::open_prepared(dir.file("out"));
  REQUIRE(decoded(d, d.train) + decoded(d, d.val) == text);
  const data::PreparedData t = data::prepare_text(text, data::TokenizerKind::bpe, 400, 0.2);
  REQUIRE(d.train.to_vector() == t.train.to_vector());
  REQUIRE(d.val.to_vector() == t.val.to_vector());
}

TEST_CASE("ids are uint16 up to 65536 tokens and uint32 beyond", "[prepared]") {
  // 70000 distinct code points from U+4E00 on (surrogates skipped)
  std::string text;
  int distinct = 0;
  for (uint32_t cp = 0x4E00; distinct < 70000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    base::utf8_append(text, cp);
    ++distinct;
  }
  TempDir dir;
  const std::string src = dir.write("wide.txt", text);
  const auto r = data::prepare(prepared_options({src}, "char", dir.file("o"), 0.1));
  REQUIRE(r.meta.dtype == data::TokenDtype::kUint32);
  REQUIRE(r.meta.vocab_size == 70000);
  REQUIRE(std::filesystem::file_size(dir.file("o/train.bin")) == 4 * r.meta.train.tokens);
  const auto d = data::open_prepared(dir.file("o"));
  REQUIRE(d.train.dtype() == data::TokenDtype::kUint32);
  REQUIRE(decoded(d, d.train) + decoded(d, d.val) == text);
  const auto t = data::prepare_text(text, data::TokenizerKind::chars, 0, 0.1);
  REQUIRE(t.train.dtype() == data::TokenDtype::kUint32);
  REQUIRE(t.val.to_vector() == d.val.to_vector());

  const auto small =
      data::prepare(prepared_options({dir.write("s.txt", "abc")}, "byte", dir.file("p")));
  REQUIRE(small.meta.dtype == data::TokenDtype::kUint16);
  REQUIRE(data::dtype_for_vocab(65536) == data::TokenDtype::kUint16);
  REQUIRE(data::dtype_for_vocab(65537) == data::TokenDtype::kUint32);
}

TEST_CASE("invalid UTF-8 is reported with the file and the byte offset", "[prepared]") {
  TempDir dir;
  const std::string good = dir.write("good.txt", "fine text\n");
  const std::string tokenizer = GENERATE("char", "byte", "bpe");
  const int64_t vocab = tokenizer == std::string("bpe") ? 260 : 0;
  SECTION("a byte that is never UTF-8, past the first chunk") {
    const std::string bad = dir.write("bad.txt", std::string(100, 'x') + "\xff tail");
    data::PrepareOptions o = prepared_options({good, bad}, tokenizer, dir.file("o"), 0.1, vocab);
    o.chunk_bytes = 32;
    REQUIRE_THROWS_WITH(data::prepare(o),
                        Contains(bad) && Contains("invalid UTF-8") && Contains("offset 100"));
  }
  SECTION("a character cut off at the end of a file, though the next file completes it") {
    const std::string a = dir.write("a.txt", "ab\xc3"), b = dir.write("b.txt", "\xa9 cd");
    REQUIRE_THROWS_WITH(
        data::prepare(prepared_options({a, b}, tokenizer, dir.file("o"), 0.1, vocab)),
        Contains(a) && Contains("offset 2"));
  }
  REQUIRE_FALSE(std::filesystem::exists(dir.file("o")));  // nothing written, no folder left
}

TEST_CASE("the identity is stable across prepares and ignores where the files lie", "[prepared]") {
  const std::string text = sample_text(30);
  TempDir dir;
  const std::string a = dir.write("a/corpus.txt", text), b = dir.write("b/other.txt", text);
  const auto first = data::prepare(prepared_options({a}, "char", dir.file("o1")));
  const std::string meta = prepared_read_file(dir.file("o1/meta.json"));
  const auto again = data::prepare(prepared_options({a}, "char", dir.file("o1")));  // replaces it
  REQUIRE(again.identity == first.identity);
  REQUIRE(prepared_read_file(dir.file("o1/meta.json")) == meta);  // the same bytes
  const auto moved = data::prepare(prepared_options({b}, "char", dir.file("o2")));
  REQUIRE(moved.identity == first.identity);
  REQUIRE(prepared_read_file(dir.file("o2/meta.json")) != meta);  // the path is recorded
  REQUIRE(data::open_prepared(dir.file("o2")).identity == first.identity);
  REQUIRE(first.identity.rfind("sha256:", 0) == 0);
  REQUIRE(first.identity.size() == 7 + 64);
  // anything that changes the data changes the identity
  REQUIRE(data::prepare(prepared_options({a}, "char", dir.file("o3"), 0.2)).identity !=
          first.identity);
  REQUIRE(data::prepare(prepared_options({a}, "byte", dir.file("o4"))).identity != first.identity);
  const std::string c = dir.write("c.txt", text + "!");
  REQUIRE(data::prepare(prepared_options({c}, "char", dir.file("o5"))).identity != first.identity);
}

TEST_CASE("batches from a file store equal the batches from the vector", "[prepared]") {
  TempDir dir;
  const std::string text = sample_text(200);
  data::prepare(prepared_options({dir.write("t.txt", text)}, "char", dir.file("o")));
  using Access = data::TokenStore::FileAccess;
  const auto access = GENERATE(Access::kAuto, Access::kRead, Access::kMap);
  const data::PreparedData d = data::open_prepared(dir.file("o"), access);
  REQUIRE(d.train.is_file());
  REQUIRE(d.train.is_mapped() == (access == Access::kMap));
  REQUIRE(d.train.is_loaded() == (access == Access::kAuto));  // kAuto reads a small file whole
  const std::vector<int64_t> ids = d.train.to_vector();
  const data::TokenStore owned = data::TokenStore::from_ids(ids, d.tokenizer->vocab_size());
  for (const int64_t T : {1, 7, 64}) {
    data::BatchSampler from_vector(&ids, 8, T), from_file(&d.train, 8, T), from_owned(&owned, 8, T);
    ag::Generator g1(5), g2(5), g3(5);
    for (int step = 0; step < 50; ++step) {
      const auto [x1, y1] = from_vector.next(g1);
      const auto [x2, y2] = from_file.next(g2);
      const auto [x3, y3] = from_owned.next(g3);
      REQUIRE(ag_test::bit_equal(x1, x2));
      REQUIRE(ag_test::bit_equal(y1, y2));
      REQUIRE(ag_test::bit_equal(x1, x3));
      REQUIRE(ag_test::bit_equal(y1, y3));
    }
  }
}

TEST_CASE("evaluation windows computed lazily equal eval_windows", "[prepared]") {
  std::vector<int64_t> ids(103);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i % 50);
  const data::TokenStore store = data::TokenStore::from_ids(ids, 50);
  for (const size_t n : {size_t{0}, size_t{1}, size_t{9}, size_t{10}, size_t{103}}) {
    for (const int64_t T : {0, 1, 3, 4, 9, 200}) {
      INFO("n " << n << " T " << T);
      const auto expected = data::eval_windows(n, T);
      const data::EvalWindows windows(n, T);
      REQUIRE(windows.count() == static_cast<int64_t>(expected.size()));
      for (int64_t w = 0; w < windows.count(); ++w) REQUIRE(windows[w] == expected[w]);
    }
  }
  const data::EvalWindows windows(ids.size(), 4);
  const auto [x, y] = windows.batch(store, 3, 5);  // windows 3..7
  for (int64_t b = 0; b < 5; ++b)
    for (int64_t t = 0; t < 4; ++t) {
      REQUIRE(x.data<int64_t>()[b * 4 + t] == ids[(3 + b) * 4 + t]);
      REQUIRE(y.data<int64_t>()[b * 4 + t] == ids[(3 + b) * 4 + t + 1]);
    }
  REQUIRE_THROWS_AS(windows.batch(store, windows.count() - 1, 2), std::out_of_range);
}

TEST_CASE("prepare_text gives what prepare gives for a file of the same text", "[prepared]") {
  const std::string text = sample_text(80);
  TempDir dir;
  const std::string src = dir.write("t.txt", text);
  const std::string tokenizer = GENERATE("char", "byte", "bpe");
  const int64_t vocab = tokenizer == std::string("bpe") ? 350 : 0;
  data::prepare(prepared_options({src}, tokenizer, dir.file("o"), 0.15, vocab));
  const data::PreparedData file = data::open_prepared(dir.file("o"));
  const data::PreparedData mem = data::prepare_text(
      text, base::parse_choice<data::TokenizerKind>(tokenizer), vocab, 0.15, "t.txt");
  REQUIRE(mem.train.to_vector() == file.train.to_vector());
  REQUIRE(mem.val.to_vector() == file.val.to_vector());
  REQUIRE(data::tokenizer_file_bytes(*mem.tokenizer) ==
          prepared_read_file(dir.file("o/tokenizer.json")));
  REQUIRE(mem.train_text_bytes == file.train_text_bytes);
  REQUIRE(mem.val_text_bytes == file.val_text_bytes);
  REQUIRE(mem.identity == data::text_identity(text));  // what a text's checkpoint records
  REQUIRE_FALSE(mem.train.is_file());
  REQUIRE(mem.train.memory_bytes() == mem.train.size() * data::dtype_bytes(mem.train.dtype()));
}

TEST_CASE("prepare_text with a checkpoint's tokenizer", "[prepared]") {
  SECTION("bpe encodes the two parts on their own") {
    const std::string text = "hello world hello world hello";
    auto tok = std::make_unique<data::BpeTokenizer>(data::BpeTokenizer::train(text, 270));
    const data::BpeTokenizer copy(tok->merges());
    const auto d = data::prepare_text(text, std::move(tok), 0.25);
    const size_t cut = text.size() - data::split_val_units(text.size(), 0.25);
    REQUIRE(d.train.to_vector() == copy.encode(text.substr(0, cut)));
    REQUIRE(d.val.to_vector() == copy.encode(text.substr(cut)));
  }
  SECTION("char with a replacement for unknown characters") {
    auto tok = std::make_unique<data::CharTokenizer>(data::CharTokenizer::from_text("ab"));
    REQUIRE_THROWS_WITH(
        data::prepare_text("abc", std::make_unique<data::CharTokenizer>(*tok), 0, "new.txt"),
        Contains("new.txt") && Contains("U+0063"));
    tok->set_replacement('a');
    const auto d = data::prepare_text("abc", std::move(tok), 0);
    REQUIRE(d.train.to_vector() == std::vector<int64_t>{0, 1, 0});
  }
  SECTION("refused options") {
    REQUIRE_THROWS_AS(data::prepare_text("abc", data::TokenizerKind::chars, 5, 0.1),
                      std::invalid_argument);
    REQUIRE_THROWS_AS(data::prepare_text("abc", data::TokenizerKind::bpe, 100, 0.1),
                      std::invalid_argument);
    REQUIRE_THROWS_AS(base::parse_choice<data::TokenizerKind>("word"), std::invalid_argument);
    REQUIRE_THROWS_AS(data::prepare_text("abc", data::TokenizerKind::chars, 0, 1.0),
                      std::invalid_argument);
    REQUIRE_THROWS_WITH(data::prepare_text("", data::TokenizerKind::chars, 0, 0.1, "empty.txt"),
                        Contains("empty.txt") && Contains("empty"));
    REQUIRE_THROWS_WITH(data::prepare_text("a\xff", data::TokenizerKind::bytes, 0, 0.1, "x.txt"),
                        Contains("x.txt") && Contains("offset 1"));
  }
}

TEST_CASE("token byte lengths add up to the text's bytes", "[prepared]") {
  const std::string text = sample_text(40);
  for (const std::string tokenizer : {"char", "byte", "bpe"}) {
    const auto d = data::prepare_text(text, base::parse_choice<data::TokenizerKind>(tokenizer),
                                      tokenizer == "bpe" ? 300 : 0, 0.3);
    const std::vector<uint32_t> lengths = data::token_byte_lengths(*d.tokenizer);
    uint64_t train = 0;
    for (const int64_t id : d.train.to_vector()) train += lengths.at(id);
    REQUIRE(train == d.train_text_bytes);
  }
}

TEST_CASE("progress reports each pass and can stop the prepare", "[prepared]") {
  TempDir dir;
  const std::string text = sample_text(50);
  const std::string src = dir.write("t.txt", text);
  data::PrepareOptions o = prepared_options({src}, "bpe", dir.file("o"), 0.1, 300);
  o.chunk_bytes = 1024;
  std::vector<std::string> stages;
  uint64_t last = 0;
  o.progress = [&](const data::PrepareProgress& p) {
    REQUIRE(p.passes == 3);
    REQUIRE(p.bytes_total == text.size());
    REQUIRE(p.all_total == 3 * text.size());
    REQUIRE(p.all_done >= last);
    last = p.all_done;
    if (stages.empty() || stages.back() != p.stage) stages.emplace_back(p.stage);
  };
  data::prepare(o);
  REQUIRE(stages == std::vector<std::string>{"checking", "learning merges", "encoding"});
  REQUIRE(last == 3 * text.size());

  o.out_dir = dir.file("stopped");
  o.progress = [](const data::PrepareProgress& p) {
    if (p.pass == 3 && p.bytes_done > 0) throw std::runtime_error("stop");
  };
  REQUIRE_THROWS_WITH(data::prepare(o), "stop");
  REQUIRE_FALSE(std::filesystem::exists(dir.file("stopped")));  // the folder it made is gone
}

TEST_CASE("a failed prepare leaves the folder as it was", "[prepared]") {
  TempDir dir;
  const std::string good = dir.write("good.txt", sample_text(20));
  const auto first = data::prepare(prepared_options({good}, "char", dir.file("o")));
  const std::string bad = dir.write("bad.txt", "fine\n\xc0\xaf");
  REQUIRE_THROWS_WITH(data::prepare(prepared_options({bad}, "char", dir.file("o"))),
                      Contains("bad.txt"));
  REQUIRE(data::open_prepared(dir.file("o")).identity == first.identity);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.file("o")))
    ++entries;
  REQUIRE(entries == 4);  // no temporary file left behind
}

TEST_CASE("a source that changes during a prepare is refused", "[prepared]") {
  TempDir dir;
  const std::string src = dir.write("t.txt", sample_text(20));
  data::PrepareOptions o = prepared_options({src}, "char", dir.file("o"));
  o.progress = [&](const data::PrepareProgress& p) {
    if (p.pass == 2 && p.bytes_done == 0) std::ofstream(src, std::ios::app) << "more";
  };
  REQUIRE_THROWS_WITH(data::prepare(o), Contains(src) && Contains("changed"));
  REQUIRE_FALSE(std::filesystem::exists(dir.file("o")));
}

TEST_CASE("folders of sources give their txt files sorted and recursively", "[prepared]") {
  TempDir dir;
  dir.write("c/b.txt", "B"), dir.write("c/a.txt", "A"), dir.write("c/sub/z.txt", "Z");
  dir.write("c/notes.md", "not text"), dir.write("elsewhere/y.txt", "Y");
  std::filesystem::create_directory_symlink(dir.file("elsewhere"), dir.file("c/link"));
  const auto all = data::list_sources({dir.file("c")});
  REQUIRE(all == std::vector<std::string>{dir.file("c/a.txt"), dir.file("c/b.txt"),
                                          dir.file("c/sub/z.txt")});
  REQUIRE(data::list_sources({dir.file("c")}, false).size() == 2);
  REQUIRE_THROWS_WITH(data::list_sources({dir.file("elsewhere/none")}), Contains("none"));
  std::filesystem::create_directory(dir.file("empty"));
  REQUIRE_THROWS_WITH(data::list_sources({dir.file("empty")}), Contains("no *.txt"));
  const auto r = data::prepare(prepared_options({dir.file("c")}, "byte", dir.file("o"), 0));
  REQUIRE(r.meta.sources.size() == 3);
  const data::PreparedData d = data::open_prepared(dir.file("o"));
  REQUIRE(decoded(d, d.train) == "ABZ");
  REQUIRE(d.train.size() == 6);  // each document followed by <|endoftext|>
}

namespace {

// Runs prepare in a child process and returns how far the child's resident memory rose
// above what it started with (the test process's, shared after fork, whatever earlier
// tests left in it): the peak is reset at the start (clear_refs 5) and read at the end.
double child_peak_growth_mb(const data::PrepareOptions& o) {
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const pid_t pid = fork();
  if (pid == 0) {
    double growth = -1;
    try {
      std::ofstream("/proc/self/clear_refs") << "5";
      const double start = train::process_memory_mb("VmRSS");
      data::prepare(o);
      growth = train::process_memory_mb("VmHWM") - start;
    } catch (...) {
    }
    const ssize_t written = write(pipe_fds[1], &growth, sizeof growth);
    _exit(written == sizeof growth ? 0 : 1);
  }
  close(pipe_fds[1]);
  double growth = -1;
  REQUIRE(read(pipe_fds[0], &growth, sizeof growth) == sizeof growth);
  close(pipe_fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(growth >= 0);  // the prepare succeeded
  return growth;
}

// A corpus of `mb` megabytes of varied text, written a block at a time.
std::string write_big_corpus(const TempDir& dir, size_t mb) {
  const std::string path = dir.file("big.txt");
  std::ofstream out(path, std::ios::binary);
  const std::string block = sample_text(2000);  // ~100 KB
  ag::Generator gen(3);
  for (size_t written = 0; written < (mb << 20);) {
    size_t skip = gen.next_u64() % 1000;  // vary the alignment of the blocks
    while ((static_cast<unsigned char>(block[skip]) & 0xC0) == 0x80) ++skip;
    out << "block " << written << '\n' << std::string_view(block).substr(skip);
    written += block.size() - skip + 20;
  }
  return path;
}

}  // namespace

TEST_CASE("prepare streams a 200 MB corpus in bounded memory", "[prepared]") {
  TempDir dir;
  const std::string corpus = write_big_corpus(dir, 200);
  for (const char* tokenizer : {"char", "byte"}) {
    INFO(tokenizer);
    const double mb =
        child_peak_growth_mb(prepared_options({corpus}, tokenizer, dir.file(tokenizer)));
    // the corpus is 200 MB; the whole process is to stay under 300 MB
    if (!ag_test::kAddressSanitizer) REQUIRE(mb < 100);
    const auto d = data::open_prepared(dir.file(tokenizer));
    REQUIRE(d.train.size() + d.val.size() > (size_t{150} << 20));
  }
}

TEST_CASE("bpe prepare streams a 50 MB corpus in bounded memory", "[prepared]") {
  TempDir dir;
  const std::string corpus = write_big_corpus(dir, 50);
  const double mb =
      child_peak_growth_mb(prepared_options({corpus}, "bpe", dir.file("o"), 0.1, 512));
  if (!ag_test::kAddressSanitizer) REQUIRE(mb < 250);
}
