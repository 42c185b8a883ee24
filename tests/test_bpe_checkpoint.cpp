// A bpe tokenizer in a checkpoint (/tokenizer: type "bpe", dataset merges [M, 2] uint32,
// attribute split_pattern): it round-trips exactly and checksummed, with no merges too;
// merges and patterns a tokenizer cannot be built from, or beyond the limits, are refused
// naming /tokenizer, by the child's load and the in-process parse alike; the stream from
// the child is bounded like every other frame.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>

#include "data/bpe.h"
#include "data/tokenizer_file.h"
#include "io/checkpoint.h"
#include "io/checkpoint_builder.h"
#include "io/files.h"
#include "io/hdf5.h"
#include "io/read_frames.h"
#include "io/tokenizer_section.h"
#include "support.h"

using ag_test::TempDir;
using Catch::Matchers::Contains;

namespace {

// Combining marks, emoji (a ZWJ family, a flag), CJK, right-to-left text, a tab and CRLF.
const std::string kHostileText =
    "cafe\xcc\x81 na\xc3\xafve \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f"
    "\x91\xa7 \xf0\x9f\x87\xaf\xf0\x9f\x87\xb5 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
    "\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d\t123456 it's\r\n";

data::BpeTokenizer trained(const std::string& pattern = std::string(data::kGpt4SplitPattern)) {
  std::string text;
  for (int i = 0; i < 50; ++i)
    text += fmt::format("{} the cat {} sat on the mat\n", kHostileText, i);
  return data::BpeTokenizer::train(text, 300, pattern);
}

io::Checkpoint with_tokenizer(const data::Tokenizer& tok) {
  io::Checkpoint c;
  c.step = 3;
  c.model = {{"w", ag::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2})}};
  c.tokenizer = io::tokenizer_section(tok);
  return c;
}

// The root, /model and a /tokenizer of type bpe that body fills in, written by hand.
template <typename Body>
std::string bpe_file(const TempDir& dir, const std::string& name, Body body) {
  using namespace io::h5;
  const std::string path = dir.file(name);
  silence_library_errors();
  Handle f = check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), path);
  write_attr_string(f, "format", io::kFormatName);
  write_attr_int(f, "format_version", 1);
  write_attr_string(f, "config", "{}");
  write_attr_int(f, "step", 0);
  create_group(f, "model");
  Handle t = create_group(f, "tokenizer");
  write_attr_string(t, "type", "bpe");
  body(t.get());
  return path;
}

// Refused by the load (in the child) and by the in-process parse with the same message.
std::string refusal(const std::string& path) {
  std::string message = "(it loaded)";
  try {
    io::load_checkpoint(path);
  } catch (const io::CheckpointError& e) {
    message = e.what();
  }
  REQUIRE_THROWS_WITH(io::parse_checkpoint_in_process(base::read_input_file(path, "file"), path),
                      message);
  return message;
}

std::vector<uint32_t> merge_ids(const data::BpeTokenizer& tok) {
  std::vector<uint32_t> ids;
  for (const auto& [left, right] : tok.merges()) ids.insert(ids.end(), {left, right});
  return ids;
}

// The child's frames for a checkpoint with this tokenizer section, replayed into a builder.
void replay_tokenizer_frame(const io::TokenizerSection& section) {
  std::FILE* tmp = std::tmpfile();
  REQUIRE(tmp);
  io::detail::FrameWriter writer(fileno(tmp), 99);
  writer.tokenizer(section);
  writer.flush();
  std::string stream(static_cast<size_t>(std::ftell(tmp)), '\0');
  std::rewind(tmp);
  REQUIRE(std::fread(stream.data(), 1, stream.size(), tmp) == stream.size());
  std::fclose(tmp);
  io::detail::CheckpointBuilder builder("x.h5", {}, {true, false}, 1 << 30);
  io::detail::FrameReader reader(builder);
  std::memcpy(reader.space(stream.size()), stream.data(), stream.size());
  reader.commit(stream.size());
}

}  // namespace

TEST_CASE("a bpe tokenizer round-trips through a checkpoint with the same merges and pattern") {
  TempDir dir;
  const std::string gpt2 =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  for (const std::string& pattern : {std::string(data::kGpt4SplitPattern), gpt2}) {
    const data::BpeTokenizer tok = trained(pattern);
    REQUIRE(tok.merges().size() > 20);
    io::save_checkpoint(dir.file("bpe.h5"), with_tokenizer(tok));
    const io::Checkpoint back = io::load_checkpoint(dir.file("bpe.h5"));
    REQUIRE(back.tokenizer.type == "bpe");
    REQUIRE(back.tokenizer.merges == tok.merges());
    REQUIRE(back.tokenizer.split_pattern == pattern);
    const auto again = io::make_tokenizer(back.tokenizer);
    REQUIRE(again->encode(kHostileText) == tok.encode(kHostileText));
    REQUIRE(again->decode(again->encode(kHostileText)) == kHostileText);
    REQUIRE(data::tokenizer_file_bytes(*again) == data::tokenizer_file_bytes(tok));
    const io::VerifyReport report = io::verify_checkpoint(dir.file("bpe.h5"));
    REQUIRE(report.all_checked());
    REQUIRE(std::count(report.checked.begin(), report.checked.end(), "/tokenizer/merges") == 1);
  }
}

TEST_CASE("a bpe tokenizer of no merges is an empty checksummed 0 by 2 dataset") {
  TempDir dir;
  const data::BpeTokenizer bytes_only(std::vector<data::BpeTokenizer::Merge>{});
  io::save_checkpoint(dir.file("bpe0.h5"), with_tokenizer(bytes_only));
  const io::Checkpoint back = io::load_checkpoint(dir.file("bpe0.h5"));
  REQUIRE(back.tokenizer.type == "bpe");
  REQUIRE(back.tokenizer.merges.empty());
  const auto tok = io::make_tokenizer(back.tokenizer);
  REQUIRE(tok->vocab_size() == 256);
  REQUIRE(tok->decode(tok->encode(kHostileText)) == kHostileText);
  REQUIRE(io::verify_checkpoint(dir.file("bpe0.h5")).all_checked());
  // the shape a reader such as h5py sees
  io::h5::silence_library_errors();
  io::h5::Handle f =
      io::h5::check(H5Fopen(dir.file("bpe0.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open");
  io::h5::Handle d = io::h5::check(H5Dopen2(f, "/tokenizer/merges", H5P_DEFAULT), "merges");
  io::h5::Handle space = io::h5::check(H5Dget_space(d), "space");
  hsize_t dims[2] = {9, 9};
  REQUIRE(H5Sget_simple_extent_ndims(space) == 2);
  H5Sget_simple_extent_dims(space, dims, nullptr);
  REQUIRE(dims[0] == 0);
  REQUIRE(dims[1] == 2);
}

TEST_CASE("bpe merges a tokenizer cannot be built from are refused naming /tokenizer/merges") {
  TempDir dir;
  const std::string pattern(data::kGpt4SplitPattern);
  auto with_merges = [&](const std::vector<uint32_t>& ids, size_t columns) {
    return bpe_file(dir, "m.h5", [&](hid_t t) {
      io::h5::write_attr_string(t, "split_pattern", pattern);
      io::h5::write_u32_rows(t, "merges", ids, columns);
    });
  };
  SECTION("a merge of a token made later") {
    const std::string path = with_merges({104, 101, 300, 32}, 2);
    REQUIRE_THAT(refusal(path), Contains(path) && Contains("/tokenizer/merges") &&
                                    Contains("merge 1 (300, 32) uses token 300"));
  }
  SECTION("a pair merged twice") {
    const std::string path = with_merges({104, 101, 256, 32, 104, 101}, 2);
    REQUIRE_THAT(refusal(path), Contains("/tokenizer/merges") && Contains("merge 2 (104, 101)") &&
                                    Contains("repeats merge 0"));
  }
  SECTION("three columns") {
    REQUIRE_THAT(refusal(with_merges({1, 2, 3, 4, 5, 6}, 3)),
                 Contains("/tokenizer/merges has shape [2, 3], expected [M, 2]"));
  }
  SECTION("one dimension") {
    const std::string path = bpe_file(dir, "flat.h5", [&](hid_t t) {
      io::h5::write_attr_string(t, "split_pattern", pattern);
      io::h5::write_u32(t, "merges", {104, 101});
    });
    REQUIRE_THAT(refusal(path), Contains("/tokenizer/merges has shape [2]"));
  }
  SECTION("floats") {
    const std::string path = bpe_file(dir, "float.h5", [&](hid_t t) {
      io::h5::write_attr_string(t, "split_pattern", pattern);
      io::h5::write_tensor(t, "merges", ag::from_vector(std::vector<float>{104, 101}, {1, 2}));
    });
    REQUIRE_THAT(refusal(path), Contains("/tokenizer/merges does not hold integers"));
  }
  SECTION("int64 as numpy writes them: loaded, unless negative") {
    auto int64_merges = [&](const std::string& name, std::vector<int64_t> ids) {
      return bpe_file(dir, name, [&](hid_t t) {
        using namespace io::h5;
        write_attr_string(t, "split_pattern", pattern);
        const hsize_t dims[2] = {ids.size() / 2, 2};
        Handle space = check(H5Screate_simple(2, dims, nullptr), "space");
        Handle d = check(
            H5Dcreate2(t, "merges", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            "merges");
        check_status(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids.data()),
                     "write");
      });
    };
    const io::Checkpoint ok = io::load_checkpoint(int64_merges("i64.h5", {104, 101, 256, 108}));
    REQUIRE(ok.tokenizer.merges ==
            std::vector<std::pair<uint32_t, uint32_t>>{{104, 101}, {256, 108}});
    REQUIRE_THAT(refusal(int64_merges("neg.h5", {104, -1})),
                 Contains("/tokenizer/merges element 1 is -1"));
  }
  SECTION("no merges dataset") {
    const std::string path = bpe_file(
        dir, "none.h5", [&](hid_t t) { io::h5::write_attr_string(t, "split_pattern", pattern); });
    REQUIRE_THAT(refusal(path), Contains("/tokenizer has type 'bpe' but no 'merges' dataset"));
  }
}

TEST_CASE("more bpe merges than the largest vocabulary allows are refused before they are read") {
  TempDir dir;
  const hsize_t rows = data::kMaxBpeVocabSize - 256 + 1;
  const std::string path = bpe_file(dir, "huge.h5", [&](hid_t t) {
    using namespace io::h5;
    write_attr_string(t, "split_pattern", std::string(data::kGpt4SplitPattern));
    const hsize_t dims[2] = {rows, 2}, chunk[2] = {1 << 16, 2};
    Handle space = check(H5Screate_simple(2, dims, nullptr), "space");
    Handle dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "dcpl");
    H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_deflate(dcpl, 1);  // 8 MB of zeros in a small file
    Handle d = check(H5Dcreate2(t, "merges", H5T_STD_U32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                     "merges");
    const std::vector<uint32_t> zeros(rows * 2, 0);
    check_status(H5Dwrite(d, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data()),
                 "write");
  });
  REQUIRE_THAT(refusal(path), Contains(path) &&
                                  Contains("/tokenizer/merges holds 1048321 merges") &&
                                  Contains("1048576 ids"));
}

TEST_CASE("a bpe split pattern that is missing too long or does not compile is refused") {
  TempDir dir;
  auto with_pattern = [&](const std::string& pattern) {
    return bpe_file(dir, "p.h5", [&](hid_t t) {
      io::h5::write_attr_string(t, "split_pattern", pattern);
      io::h5::write_u32_rows(t, "merges", {104, 101}, 2);
    });
  };
  SECTION("does not compile") {
    const std::string path = with_pattern("(unclosed");
    REQUIRE_THAT(refusal(path), Contains(path) &&
                                    Contains("/tokenizer attribute 'split_pattern'") &&
                                    Contains("does not compile"));
  }
  SECTION("longer than a pattern may be") {
    REQUIRE_THAT(refusal(with_pattern(std::string(data::kMaxSplitPatternBytes + 1, 'a'))),
                 Contains("'split_pattern' of /tokenizer is a string of 65537 bytes"));
  }
  SECTION("missing") {
    const std::string path = bpe_file(dir, "nopattern.h5", [](hid_t t) {
      io::h5::write_u32_rows(t, "merges", {104, 101}, 2);
    });
    REQUIRE_THAT(refusal(path), Contains("attribute 'split_pattern' of /tokenizer is missing"));
  }
}

TEST_CASE("a tokenizer frame beyond the bpe limits or out of place is refused") {
  using io::detail::StreamError;
  io::TokenizerSection t{"bpe", {}, {}, std::string(data::kGpt4SplitPattern), {}, {}};
  SECTION("more merges than the largest vocabulary") {
    t.merges.assign(data::kMaxBpeVocabSize - 256 + 1, {1, 2});
    REQUIRE_THROWS_AS(replay_tokenizer_frame(t), StreamError);
  }
  SECTION("a pattern longer than a pattern may be") {
    t.split_pattern.assign(data::kMaxSplitPatternBytes + 1, 'a');
    REQUIRE_THROWS_AS(replay_tokenizer_frame(t), StreamError);
  }
  SECTION("merges for a char tokenizer") {
    t.type = "char";
    t.merges = {{104, 101}};
    REQUIRE_THROWS_AS(replay_tokenizer_frame(t), StreamError);
  }
  SECTION("a valid one passes") {
    t.merges = {{104, 101}, {256, 108}};
    REQUIRE_NOTHROW(replay_tokenizer_frame(t));
  }
}

TEST_CASE("a checkpoint's bpe merges are uint32 pairs as docs/checkpoint.md says") {
  TempDir dir;
  const data::BpeTokenizer tok = trained();
  io::save_checkpoint(dir.file("bpe.h5"), with_tokenizer(tok));
  io::h5::silence_library_errors();
  io::h5::Handle f =
      io::h5::check(H5Fopen(dir.file("bpe.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open");
  io::h5::Handle d = io::h5::check(H5Dopen2(f, "/tokenizer/merges", H5P_DEFAULT), "merges");
  io::h5::Handle type = io::h5::check(H5Dget_type(d), "type");
  REQUIRE(H5Tequal(type, H5T_STD_U32LE) > 0);
  std::vector<uint32_t> ids(2 * tok.merges().size());
  REQUIRE(H5Dread(d, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids.data()) >= 0);
  REQUIRE(ids == merge_ids(tok));
  io::h5::Handle plist = io::h5::check(H5Dget_create_plist(d), "plist");
  REQUIRE(H5Pget_nfilters(plist) == 1);  // Fletcher32
}
