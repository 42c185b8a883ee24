// Prepared folders and their files as hostile input: damaged or forged meta.json,
// tokenizer.json and token files, links and FIFOs where files should be, output folders
// that are not ours, sources that are outputs, and folders another process holds. Every
// refusal is a DataError naming the file.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/data.h"
#include "support.h"

using ag_test::TempDir;
using Catch::Matchers::Contains;
using Json = nlohmann::ordered_json;

namespace {

std::string hostile_read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A prepared folder at dir/o from a small corpus.
struct Prepared {
  TempDir dir;
  std::string out = dir.file("o"), meta = dir.file("o/meta.json"),
              tokenizer = dir.file("o/tokenizer.json"), train = dir.file("o/train.bin");
  explicit Prepared(const std::string& tokenizer_type = "char", int64_t vocab = 0) {
    std::string text;
    for (int i = 0; i < 200; ++i) text += "some text, t\xc3\xa9xt and more text\n";
    data::PrepareOptions o;
    o.sources = {dir.write("corpus.txt", text)},
    o.tokenizer = base::parse_choice<data::TokenizerKind>(tokenizer_type);
    o.vocab_size = vocab, o.out_dir = out, o.sync = false;
    data::prepare(o);
  }
  Json meta_json() const { return Json::parse(hostile_read_file(meta)); }
  void write_meta(const Json& j) const { write_file(meta, j.dump(2)); }
};

data::PrepareOptions hostile_options(const std::vector<std::string>& sources,
                                     const std::string& out) {
  data::PrepareOptions o;
  o.sources = sources, o.tokenizer = data::TokenizerKind::chars, o.out_dir = out, o.sync = false;
  return o;
}

}  // namespace

TEST_CASE("forged or damaged metadata is refused naming the file and the key", "[prepared]") {
  const Prepared p;
  Json j = p.meta_json();
  const auto refused = [&](const std::string& what) {
    p.write_meta(j);
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains(p.meta) && Contains(what));
  };
  SECTION("not JSON") {
    write_file(p.meta, "{\"format\": ");
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains(p.meta) && Contains("not valid JSON"));
  }
  SECTION("another format") {
    j["format"] = "something-else";
    refused("'format'");
  }
  SECTION("a newer version") {
    j["format_version"] = 2;
    refused("'format_version' is 2");
  }
  SECTION("an unknown key") {
    j["extra"] = 1;
    refused("'extra' is not a key");
  }
  SECTION("a count that is negative") {
    j["train"]["tokens"] = -5;
    refused("'train.tokens' must be an unsigned integer");
  }
  SECTION("token counts that disagree with the split") {
    j["train"]["tokens"] = j["train"]["tokens"].get<uint64_t>() + 1;
    refused("'train.tokens'");
  }
  SECTION("a split that is not docs/model.md's") {
    j["split"]["val_units"] = 0;
    refused("'split.val_units'");
  }
  SECTION("sources that do not add up") {
    j["corpus"]["sources"][0]["bytes"] = j["corpus"]["sources"][0]["bytes"].get<uint64_t>() + 1;
    refused("'corpus.bytes'");
  }
  SECTION("a dtype that does not fit the vocabulary") {
    j["dtype"] = "uint32";
    refused("'dtype'");
  }
  SECTION("a vocabulary beyond any tokenizer") {
    j["tokenizer"]["vocab_size"] = uint64_t{1} << 40;
    refused("'tokenizer.vocab_size'");
  }
  SECTION("a key given twice") {
    write_file(p.meta, "{\"format\": \"attograd-prepared\", \"format\": \"attograd-prepared\"}");
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains(p.meta) && Contains("twice"));
  }
  SECTION("nesting without end") {
    write_file(p.meta, std::string(100000, '[') + std::string(100000, ']'));
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains(p.meta) && Contains("nested"));
  }
  SECTION("larger than any metadata") {
    write_file(p.meta, std::string(data::kMaxMetaBytes + 1, ' '));
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains(p.meta) && Contains("more than"));
  }
}

TEST_CASE("a tokenizer file that is not the folder's is refused", "[prepared]") {
  const Prepared p;
  SECTION("edited after the prepare") {
    write_file(p.tokenizer, hostile_read_file(p.tokenizer) + " ");
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains(p.tokenizer) && Contains("SHA-256"));
  }
  SECTION("another tokenizer, with meta.json forged to match its hash") {
    const std::string bytes = data::tokenizer_file_bytes(data::ByteTokenizer());
    write_file(p.tokenizer, bytes);
    Json j = p.meta_json();
    j["tokenizer"]["sha256"] = data::text_identity(bytes).substr(7);
    p.write_meta(j);
    REQUIRE_THROWS_WITH(data::open_prepared(p.out),
                        Contains(p.tokenizer) && Contains("a byte tokenizer of 256 ids"));
  }
  SECTION("missing") {
    std::filesystem::remove(p.tokenizer);
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains(p.tokenizer));
  }
}

TEST_CASE("token files of the wrong size or with ids out of range are refused", "[prepared]") {
  const Prepared p;
  const auto access =
      GENERATE(data::TokenStore::FileAccess::kRead, data::TokenStore::FileAccess::kMap);
  SECTION("one byte short") {
    std::filesystem::resize_file(p.train, std::filesystem::file_size(p.train) - 1);
    REQUIRE_THROWS_WITH(data::open_prepared(p.out, access),
                        Contains(p.train) && Contains("bytes, but the metadata says"));
  }
  SECTION("ids beyond the vocabulary: refused when read, naming the position") {
    // written after the open, as another process could mid-run (before it, the token
    // file's hash refuses the folder: below)
    const data::PreparedData d = data::open_prepared(p.out, access);
    std::string bytes = hostile_read_file(p.train);
    for (size_t i = 10; 2 * i < bytes.size(); i += 8)  // tokens 10, 18, 26, ... are id 65535
      bytes[2 * i] = '\xff', bytes[2 * i + 1] = '\xff';
    write_file(p.train, bytes);
    REQUIRE_NOTHROW(d.train.slice(0, 10));
    REQUIRE_THROWS_WITH(d.train.slice(5, 10), Contains(p.train) && Contains("token 10") &&
                                                  Contains("(byte 20)") && Contains("id 65535"));
    data::BatchSampler sampler(&d.train, 64, 32);
    ag::Generator gen(1);
    REQUIRE_THROWS_WITH(sampler.next(gen), Contains(p.train));
  }
}

TEST_CASE("a token file truncated while open is an error when read", "[prepared]") {
  const Prepared p;
  const data::PreparedData d = data::open_prepared(p.out, data::TokenStore::FileAccess::kRead);
  const size_t n = d.train.size();
  std::filesystem::resize_file(p.train, 100);
  REQUIRE_NOTHROW(d.train.slice(0, 50));
  REQUIRE_THROWS_WITH(d.train.slice(n - 10, 10), Contains(p.train) && Contains("shorter"));
}

TEST_CASE("a token file changed after the prepare is refused when the folder opens", "[prepared]") {
  const Prepared p;
  const std::string val = p.dir.file("o/val.bin");
  const std::string before = data::open_prepared(p.out).identity;
  SECTION("one id edited, in range") {
    std::string bytes = hostile_read_file(p.train);
    bytes[6] = static_cast<char>(bytes[6] == 1 ? 2 : 1), bytes[7] = 0;
    write_file(p.train, bytes);
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains(p.train) && Contains("SHA-256") &&
                                                        Contains(p.meta) &&
                                                        Contains("changed after it was prepared"));
  }
  SECTION("val.bin's ids rotated by one: the same size and ids, in another order") {
    const std::string ids = hostile_read_file(val);
    write_file(val, ids.substr(2) + ids.substr(0, 2));
    REQUIRE_THROWS_WITH(data::open_prepared(p.out, data::TokenStore::FileAccess::kRead),
                        Contains(val) && Contains("changed after it was prepared"));
  }
  SECTION("an ID out of range written before the open: refused by the hash, not mid-run") {
    std::string bytes = hostile_read_file(p.train);
    bytes[bytes.size() - 2] = '\xff', bytes[bytes.size() - 1] = '\xff';
    write_file(p.train, bytes);
    REQUIRE_THROWS_WITH(data::open_prepared(p.out, data::TokenStore::FileAccess::kMap),
                        Contains(p.train) && Contains("SHA-256"));
  }
  SECTION("meta.json's hashes forged to match: another identity, which resume refuses") {
    std::string bytes = hostile_read_file(p.train);
    bytes[6] = static_cast<char>(bytes[6] == 1 ? 2 : 1), bytes[7] = 0;
    write_file(p.train, bytes);
    Json j = p.meta_json();
    const int fd = open(p.train.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    j["train"]["sha256"] = data::token_file_sha256(fd, bytes.size(), p.train);
    j["train"]["sample_sha256"] = data::token_file_sample_sha256(fd, bytes.size(), p.train);
    close(fd);
    p.write_meta(j);
    REQUIRE(data::open_prepared(p.out).identity != before);
  }
}

TEST_CASE("a folder prepared before the token hashes were recorded opens as before", "[prepared]") {
  const Prepared p;
  Json j = p.meta_json();
  REQUIRE(j["train"].contains("sha256"));
  REQUIRE(j["val"].contains("sample_sha256"));
  for (const char* part : {"train", "val"}) j[part].erase("sha256"), j[part].erase("sample_sha256");
  SECTION("without hashes: opens, with the identity such a folder always had") {
    p.write_meta(j);
    const data::PreparedData d = data::open_prepared(p.out);
    REQUIRE(d.meta->train.sha256.empty());
    // the identity is the SHA-256 of meta.json's bytes without paths, as before the hashes
    data::PreparedMeta m = *d.meta;
    for (data::SourceFile& s : m.sources) s.path.clear();
    REQUIRE(d.identity == data::text_identity(data::prepared_meta_bytes(m)));
    REQUIRE(data::prepared_meta_bytes(m).find("sha256\": \"" + m.tokenizer_sha256) !=
            std::string::npos);
    REQUIRE(data::prepared_meta_bytes(m).find("sample_sha256") == std::string::npos);
  }
  SECTION("one hash without the other: refused naming the key") {
    j["val"]["sha256"] = std::string(64, 'a');
    p.write_meta(j);
    REQUIRE_THROWS_WITH(data::open_prepared(p.out),
                        Contains(p.meta) && Contains("val.sample_sha256") && Contains("missing"));
  }
  SECTION("a hash that is not 64 hex digits: refused naming the key") {
    j["train"]["sha256"] = "abc", j["train"]["sample_sha256"] = std::string(64, 'a');
    p.write_meta(j);
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains("train.sha256"));
  }
}

TEST_CASE("the sampled hash reads 64 blocks from the first byte to the last", "[prepared]") {
  TempDir dir;
  const std::string path = dir.file("big.bin");
  std::string bytes(5u << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 2654435761u >> 13);
  const auto sample = [&] {
    write_file(path, bytes);
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const std::string h = data::token_file_sample_sha256(fd, bytes.size(), path);
    close(fd);
    return h;
  };
  const std::string first = sample();
  // block 10 starts at 10 * (size - block) / 63 and the next 82 KB later: a byte in between
  const size_t gap = (bytes.size() - data::kSampleBlockBytes) * 10 / 63 + data::kSampleBlockBytes;
  bytes[gap + 100] ^= 1;
  REQUIRE(sample() == first);  // what the full check is for
  bytes[gap - 100] ^= 1;       // inside block 10
  REQUIRE(sample() != first);
  bytes[gap - 100] ^= 1;
  bytes.back() ^= 1;  // the last block ends at the last byte
  REQUIRE(sample() != first);
  bytes.back() ^= 1;
  bytes.front() ^= 1;
  REQUIRE(sample() != first);
  std::string small(1000, 'x');  // a file no larger than the blocks: hashed whole
  write_file(path, small);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(data::token_file_sample_sha256(fd, small.size(), path) ==
          data::token_file_sha256(fd, small.size(), path));
  close(fd);
}

TEST_CASE("a token file truncated or rewritten after the open never raises SIGBUS", "[prepared]") {
  const Prepared p;
  SECTION("read whole when opened (the default for a small file): later changes unseen") {
    const data::PreparedData d = data::open_prepared(p.out);
    REQUIRE(d.train.is_loaded());
    const std::vector<int64_t> ids = d.train.to_vector();
    std::filesystem::resize_file(p.train, 10);
    REQUIRE(d.train.to_vector() == ids);
    write_file(p.train, std::string(ids.size() * 2, '\xff'));
    REQUIRE(d.train.to_vector() == ids);
  }
  SECTION("mapped: the size is checked before each copy") {
    const data::PreparedData d = data::open_prepared(p.out, data::TokenStore::FileAccess::kMap);
    const size_t n = d.train.size();
    std::filesystem::resize_file(p.train, 100);
    REQUIRE_NOTHROW(d.train.slice(0, 50));
    REQUIRE_THROWS_WITH(d.train.slice(n - 10, 10),
                        Contains(p.train) && Contains("shorter") && Contains("at byte 100"));
  }
}

TEST_CASE("links and special files in a prepared folder are refused", "[prepared]") {
  const Prepared p;
  SECTION("train.bin a symbolic link to a file of the right size") {
    std::filesystem::rename(p.train, p.dir.file("elsewhere.bin"));
    std::filesystem::create_symlink(p.dir.file("elsewhere.bin"), p.train);
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains(p.train) && Contains("symbolic link"));
  }
  SECTION("meta.json a symbolic link") {
    std::filesystem::rename(p.meta, p.dir.file("meta-elsewhere.json"));
    std::filesystem::create_symlink(p.dir.file("meta-elsewhere.json"), p.meta);
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains(p.meta) && Contains("symbolic link"));
  }
  SECTION("val.bin a FIFO: refused without blocking") {
    const std::string val = p.dir.file("o/val.bin");
    std::filesystem::remove(val);
    REQUIRE(mkfifo(val.c_str(), 0600) == 0);
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains(val) && Contains("FIFO"));
  }
  SECTION("the folder is a file, or missing, or not prepared") {
    REQUIRE_THROWS_WITH(data::open_prepared(p.dir.file("corpus.txt")),
                        Contains("corpus.txt") && Contains("not a prepared folder"));
    REQUIRE_THROWS_WITH(data::open_prepared(p.dir.file("none")), Contains("none"));
    std::filesystem::remove(p.meta);
    REQUIRE_THROWS_WITH(data::open_prepared(p.out), Contains("no meta.json"));
    REQUIRE(data::is_prepared_folder(p.dir.file("nothing")) == false);
  }
}

TEST_CASE("prepare writes only into new empty or prepared folders", "[prepared]") {
  TempDir dir;
  const std::string src = dir.write("corpus.txt", "hello\n");
  SECTION("a folder with someone else's file") {
    dir.write("mine/notes.txt", "keep me");
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({src}, dir.file("mine"))),
                        Contains("notes.txt") && Contains("not part of a prepared folder"));
    REQUIRE(hostile_read_file(dir.file("mine/notes.txt")) == "keep me");
  }
  SECTION("a folder with a train.bin but no meta.json") {
    dir.write("mine/train.bin", "their data");
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({src}, dir.file("mine"))),
                        Contains("no meta.json"));
    REQUIRE(hostile_read_file(dir.file("mine/train.bin")) == "their data");
  }
  SECTION("a folder whose meta.json is not a prepared folder's") {
    dir.write("mine/meta.json", "{\"name\": \"my project\"}");
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({src}, dir.file("mine"))),
                        Contains("not the metadata of a prepared folder"));
  }
  SECTION("a symbolic link to a folder") {
    std::filesystem::create_directory(dir.file("real"));
    std::filesystem::create_directory_symlink(dir.file("real"), dir.file("link"));
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({src}, dir.file("link"))),
                        Contains("symbolic link"));
    REQUIRE(std::filesystem::is_empty(dir.file("real")));
  }
  SECTION("a regular file") {
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({src}, src)), Contains("not a folder"));
    REQUIRE(hostile_read_file(src) == "hello\n");
  }
  SECTION("a subfolder in it") {
    std::filesystem::create_directories(dir.file("mine/sub"));
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({src}, dir.file("mine"))), Contains("'sub'"));
  }
  SECTION("the temporary files of an interrupted prepare are removed") {
    dir.write("out/.train.bin.partial-1-00000000", "left over");
    data::prepare(hostile_options({src}, dir.file("out")));
    REQUIRE_FALSE(std::filesystem::exists(dir.file("out/.train.bin.partial-1-00000000")));
  }
}

TEST_CASE("a prepare that fails leaves no folder it made, and a folder it was given as it was",
          "[prepared]") {
  TempDir dir;
  const std::string bad = dir.write("bad.txt", "good text\n\xff bad\n");
  REQUIRE_THROWS_WITH(data::prepare(hostile_options({bad}, dir.file("new"))),
                      Contains("invalid UTF-8"));
  REQUIRE_FALSE(std::filesystem::exists(dir.file("new")));
  std::filesystem::create_directory(dir.file("given"));
  REQUIRE_THROWS_WITH(data::prepare(hostile_options({bad}, dir.file("given"))),
                      Contains("invalid UTF-8"));
  REQUIRE(std::filesystem::is_empty(dir.file("given")));
}

TEST_CASE("prepare never writes over one of its inputs", "[prepared]") {
  TempDir dir;
  const std::string src = dir.write("corpus.txt", "hello\n");
  data::prepare(hostile_options({src}, dir.file("o")));
  SECTION("a source that is the folder's train.bin") {
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({dir.file("o/train.bin")}, dir.file("o"))),
                        Contains("refusing to overwrite an input"));
  }
  SECTION("a source hard-linked to its meta.json") {
    std::filesystem::create_hard_link(dir.file("o/meta.json"), dir.file("m.txt"));
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({dir.file("m.txt")}, dir.file("o"))),
                        Contains("m.txt") && Contains("overwrite an input"));
  }
  SECTION("a source that is a leftover temporary file") {
    const std::string temp = dir.write("o/.val.bin.partial-9-0000abcd", "x");
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({temp}, dir.file("o"))),
                        Contains("overwrite an input"));
    REQUIRE(std::filesystem::exists(temp));
  }
}

TEST_CASE("sources that are not regular files or come twice are refused", "[prepared]") {
  TempDir dir;
  const std::string src = dir.write("corpus.txt", "hello\n");
  SECTION("a FIFO, without blocking") {
    REQUIRE(mkfifo(dir.file("fifo.txt").c_str(), 0600) == 0);
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({dir.file("fifo.txt")}, dir.file("o"))),
                        Contains("fifo.txt") && Contains("FIFO"));
  }
  SECTION("a device") {
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({"/dev/zero"}, dir.file("o"))),
                        Contains("/dev/zero") && Contains("device"));
  }
  SECTION("the same file twice, by a link") {
    std::filesystem::create_symlink(src, dir.file("again.txt"));
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({src, dir.file("again.txt")}, dir.file("o"))),
                        Contains("given twice"));
  }
  SECTION("an empty corpus") {
    const std::string empty = dir.write("empty.txt", "");
    REQUIRE_THROWS_WITH(data::prepare(hostile_options({empty}, dir.file("o"))), Contains("empty"));
  }
  SECTION("options out of range") {
    data::PrepareOptions o = hostile_options({src}, dir.file("o"));
    o.val_fraction = 1;
    REQUIRE_THROWS_AS(data::prepare(o), std::invalid_argument);
    o.val_fraction = 0.1, o.tokenizer = data::TokenizerKind::bpe, o.vocab_size = 100;
    REQUIRE_THROWS_AS(data::prepare(o), std::invalid_argument);
    o.vocab_size = data::kMaxBpeVocabSize + 1;
    REQUIRE_THROWS_AS(data::prepare(o), std::invalid_argument);
    o.tokenizer = data::TokenizerKind::chars;
    REQUIRE_THROWS_WITH(data::prepare(o), Contains("bpe only"));
  }
  REQUIRE_FALSE(std::filesystem::exists(dir.file("o/meta.json")));
}

TEST_CASE("a folder another process is writing is refused", "[prepared]") {
  TempDir dir;
  const std::string src = dir.write("corpus.txt", "hello\n");
  data::prepare(hostile_options({src}, dir.file("o")));
  // what a prepare in another process holds (flock locks belong to an open file)
  const int fd = open(dir.file("o").c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(fd >= 0);
  REQUIRE(flock(fd, LOCK_EX) == 0);
  REQUIRE_THROWS_WITH(data::open_prepared(dir.file("o")), Contains("a prepare is writing"));
  REQUIRE_THROWS_WITH(data::prepare(hostile_options({src}, dir.file("o"))),
                      Contains("another process"));
  flock(fd, LOCK_UN);
  REQUIRE(flock(fd, LOCK_SH) == 0);  // a reader: another prepare must wait, readers share
  REQUIRE_NOTHROW(data::open_prepared(dir.file("o")));
  REQUIRE_THROWS_WITH(data::prepare(hostile_options({src}, dir.file("o"))),
                      Contains("another process"));
  close(fd);
  REQUIRE_NOTHROW(data::prepare(hostile_options({src}, dir.file("o"))));
}

TEST_CASE("tokenizer files round-trip every tokenizer", "[prepared]") {
  const std::string text = "round trip: na\xc3\xafve \xf0\x9f\x98\x80 text text text";
  std::vector<std::unique_ptr<data::Tokenizer>> all;
  all.push_back(std::make_unique<data::CharTokenizer>(data::CharTokenizer::from_text(text)));
  all.push_back(std::make_unique<data::ByteTokenizer>());
  all.push_back(std::make_unique<data::BpeTokenizer>(data::BpeTokenizer::train(text, 280)));
  for (const auto& tok : all) {
    const std::string bytes = data::tokenizer_file_bytes(*tok);
    const auto again = data::parse_tokenizer_file(bytes, "t.json");
    REQUIRE(again->type() == tok->type());
    REQUIRE(again->encode(text) == tok->encode(text));
    REQUIRE(data::tokenizer_file_bytes(*again) == bytes);
  }
}

TEST_CASE("hostile tokenizer files are refused naming the file and the entry", "[prepared]") {
  const std::string head = R"({"format": "attograd-tokenizer", "format_version": 1, )";
  const auto refused = [&](const std::string& rest, const std::string& what) {
    INFO(rest);
    REQUIRE_THROWS_WITH(data::parse_tokenizer_file(head + rest, "tok.json"),
                        Contains("tok.json") && Contains(what));
  };
  refused(R"("type": "char", "code_points": [98, 97]})", "ascending");
  refused(R"("type": "char", "code_points": [55296]})", "not a valid code point");
  refused(R"("type": "char", "code_points": [1114112]})", "'code_points'[0] must be a code point");
  refused(R"("type": "char", "code_points": [1, -2]})", "'code_points'[1]");
  refused(R"("type": "char", "code_points": [1, [2]]})", "'code_points'[1]");
  refused(R"("type": "char", "code_points": []})", "is empty");
  refused(R"("type": "char", "code_points": "abc"})", "must be an array");
  refused(R"("type": "char", "code_points": [1], "merges": []})", "'merges' is not a key");
  refused(R"("type": "bpe", "split_pattern": " ", "merges": [[256, 1]]})", "merge 0");
  refused(R"("type": "bpe", "split_pattern": " ", "merges": [[1, 2, 3]]})", "'merges'[0]");
  refused(R"("type": "bpe", "split_pattern": " ", "merges": [[1]]})", "'merges'[0]");
  refused(R"("type": "bpe", "split_pattern": " ", "merges": [[1, 2], 3]})", "'merges'[1]");
  refused(R"("type": "bpe", "split_pattern": " ", "merges": [[1, 2], [1, 2]]})", "merge 1");
  refused(R"("type": "bpe", "split_pattern": "(", "merges": []})", "pattern");
  refused(R"("type": "bpe", "split_pattern": ")" + std::string(70000, 'a') + R"(", "merges": []})",
          "more than the 65536");
  refused(R"("type": "byte", "type": "byte"})", "twice");
  refused(R"("type": "word"})", "not one of char, byte, bpe");
  refused(R"("type": "byte", "extra": 1})", "'extra' is not a key");
  REQUIRE_THROWS_WITH(data::parse_tokenizer_file("[1, 2]", "tok.json"),
                      Contains("tok.json") && Contains("must be a JSON object"));
  // many merges of the same pair: refused at the second
  std::string many = R"("type": "bpe", "split_pattern": " ", "merges": [)";
  for (int i = 0; i < 100000; ++i) many += "[97, 97],";
  refused(many + "[97, 97]]}", "merge 1");
  std::string too_many = R"("type": "char", "code_points": [)";
  for (int i = 0; i <= 0x110000; ++i) too_many += "1,";
  refused(too_many + "1]}", "more than 1114112 entries");
}
