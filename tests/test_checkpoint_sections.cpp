// Each section of a checkpoint is described once (io/read_protocol.h's layouts): the writer
// writes its rows, the forked reader sends them by row, the frame stream carries them by row
// and the builder takes them back, every bound read from the row.
#include <hdf5.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "io/checkpoint.h"
#include "io/checkpoint_builder.h"
#include "io/checkpoint_reader.h"
#include "io/hdf5.h"
#include "io/read_frames.h"

namespace {

using io::detail::ItemKind;
using io::detail::layout;
using io::detail::Section;
using io::detail::StreamError;

// What a reader said, item by item: (section, row, name).
struct ItemRecorder final : io::detail::ReadSink {
  std::vector<std::tuple<Section, size_t, std::string>> items;
  std::vector<Section> ended;
  void progress(uint64_t) override {}
  void fatal(const std::string& m) override { FAIL(m); }
  void load_error(const std::string& m) override { FAIL(m); }
  void attribute(Section s, size_t row, const std::string& name,
                 const io::detail::Scalar&) override {
    items.emplace_back(s, row, name);
  }
  void begin_dataset(Section s, size_t row, const std::string& name,
                     const std::vector<uint64_t>&) override {
    items.emplace_back(s, row, name);
  }
  void dataset_data(const void*, size_t) override {}
  void end_dataset() override {}
  void end_section(Section s) override { ended.push_back(s); }
  void verdict(io::detail::Verdict, const std::string&, const std::string&) override {}
  void done() override {}
};

io::Checkpoint sections_checkpoint() {
  io::Checkpoint c;
  c.step = 3;
  c.model = {{"w", ag::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2})}};
  c.optimizer = optim::OptimizerState{"sgd", {{"lr", 0.5}}, {}};
  c.tokenizer = {"bpe", {}, {{104, 101}, {256, 108}}, "\\s+|\\S+", {}, {}};
  c.rng = {{"data", {1, 2, 3, 4}}};
  c.best_validation = io::BestValidation{"val_loss", 2.5, 7, 1};
  return c;
}

// The frames a FrameWriter makes of the events `say` sends, replayed into builder.
template <typename Say>
void through_frames(io::detail::CheckpointBuilder& builder, Say&& say) {
  std::FILE* tmp = std::tmpfile();
  REQUIRE(tmp);
  io::detail::FrameWriter writer(fileno(tmp), 99);
  say(writer);
  writer.flush();
  std::string stream(static_cast<size_t>(std::ftell(tmp)), '\0');
  std::rewind(tmp);
  REQUIRE(std::fread(stream.data(), 1, stream.size(), tmp) == stream.size());
  std::fclose(tmp);
  io::detail::FrameReader reader(builder);
  std::memcpy(reader.space(stream.size()), stream.data(), stream.size());
  reader.commit(stream.size());
}

}  // namespace

TEST_CASE("a section's rows are what the writer writes and the reader sends, in their order",
          "[checkpoint][sections]") {
  const io::Checkpoint c = sections_checkpoint();
  const std::string image = io::checkpoint_image(c);
  io::h5::silence_library_errors();
  io::h5::ImageFile file(image);
  REQUIRE(file.get() >= 0);
  for (const auto& it : layout(Section::tokenizer).items) {
    if (!io::detail::held_for(it, c.tokenizer.type)) continue;
    // an item a type may lack (byte's and bpe's reserved <|endoftext|>) is written when held
    if (io::detail::optional_for(it, c.tokenizer.type) && c.tokenizer.special_tokens.empty())
      continue;
    INFO(it.name);
    const std::string where = std::string("/tokenizer/") + it.name;
    if (it.kind == ItemKind::text)
      REQUIRE(H5Aexists_by_name(file, "/tokenizer", it.name, H5P_DEFAULT) > 0);
    else
      REQUIRE(H5Lexists(file, where.c_str(), H5P_DEFAULT) > 0);
  }
  const auto& note = layout(Section::rng).items[0];
  REQUIRE(io::h5::read_attr_string(io::h5::Handle(H5Gopen2(file, "rng", H5P_DEFAULT)), note.name,
                                   "/rng") == note.note);

  ItemRecorder said;
  io::detail::read_checkpoint_image(image, "s.h5", {}, said);
  REQUIRE(said.ended == std::vector<Section>{Section::root, Section::model, Section::optimizer,
                                             Section::tokenizer, Section::rng,
                                             Section::best_validation});
  size_t last_tokenizer_row = 0;
  for (const auto& [section, row, name] : said.items) {
    REQUIRE(row < layout(section).items.size());
    const auto& it = io::detail::item(section, row);
    REQUIRE((it.name == nullptr) == !name.empty());  // a row of any name carries the file's
    if (section != Section::tokenizer) continue;
    REQUIRE(row >= last_tokenizer_row);
    last_tokenizer_row = row;
  }

  // the child's stream and the builder give back what was written
  const io::Checkpoint back = io::load_checkpoint_image(image, "s.h5");
  REQUIRE(back.tokenizer.merges == c.tokenizer.merges);
  REQUIRE(back.tokenizer.split_pattern == c.tokenizer.split_pattern);
  REQUIRE(back.optimizer->scalars == c.optimizer->scalars);
  REQUIRE(back.rng == c.rng);
  REQUIRE(back.best_validation == c.best_validation);
}

TEST_CASE("the stream and the builder hold every item to its row's bounds",
          "[checkpoint][sections]") {
  using io::detail::row_of;
  io::detail::CheckpointBuilder builder("x.h5", {}, {true, false}, 1 << 30);
  const size_t type = row_of(Section::tokenizer, "type");
  const size_t merges = row_of(Section::tokenizer, "merges");
  const size_t vocab = row_of(Section::tokenizer, "vocab");
  const auto& merges_row = io::detail::item(Section::tokenizer, merges);
  auto bpe_then = [&](auto&& more) {
    return [&, more](io::detail::ReadSink& sink) {
      sink.attribute(Section::tokenizer, type, "", std::string("bpe"));
      more(sink);
    };
  };
  SECTION("more rows than the row allows, refused by the frame reader before it allocates") {
    auto too_many = bpe_then([&](io::detail::ReadSink& sink) {
      sink.begin_dataset(Section::tokenizer, merges, "", {merges_row.max_length + 1, 2});
    });
    REQUIRE_THROWS_AS(through_frames(builder, too_many), StreamError);
    REQUIRE_THROWS_AS(builder.begin_dataset(Section::tokenizer, merges, "", {1, 3}), StreamError);
  }
  SECTION("a value above the row's bound") {
    io::detail::CheckpointBuilder chars("x.h5", {}, {true, false}, 1 << 30);
    chars.attribute(Section::tokenizer, type, "", std::string("char"));
    REQUIRE_THROWS_AS(chars.integers(Section::tokenizer, vocab, "", {1}, {0x110000}), StreamError);
  }
  SECTION("an item the type does not hold, or a row sent as what it is not") {
    builder.attribute(Section::tokenizer, type, "", std::string("bpe"));
    REQUIRE_THROWS_AS(builder.integers(Section::tokenizer, vocab, "", {1}, {65}), StreamError);
    REQUIRE_THROWS_AS(builder.attribute(Section::tokenizer, merges, "", std::string("x")),
                      StreamError);
    REQUIRE_THROWS_AS(builder.attribute(Section::rng, 0, "", std::string("a note")), StreamError);
  }
  SECTION("a text longer than its row allows") {
    const size_t pattern = row_of(Section::tokenizer, "split_pattern");
    const auto& row = io::detail::item(Section::tokenizer, pattern);
    auto long_text = bpe_then([&](io::detail::ReadSink& sink) {
      sink.attribute(Section::tokenizer, pattern, "", std::string(row.max_length + 1, 'a'));
    });
    REQUIRE_THROWS_AS(through_frames(builder, long_text), StreamError);
  }
  SECTION("a row that does not exist") {
    REQUIRE_THROWS_AS(builder.attribute(Section::tokenizer, 99, "", std::string("x")), StreamError);
    REQUIRE_THROWS_AS(builder.begin_dataset(static_cast<Section>(9), 0, "w", {1}), StreamError);
  }
}

TEST_CASE("a section of items alone is written, read and rebuilt by its rows alone",
          "[checkpoint][sections]") {
  // Every such section's items of a checkpoint come back as they went: the writer, the
  // reader and the builder know the section only by its row in item_sections().
  const io::Checkpoint c = sections_checkpoint();
  const io::Checkpoint back = io::load_checkpoint_image(io::checkpoint_image(c), "s.h5");
  for (const io::detail::ItemSection& s : io::detail::item_sections()) {
    INFO(layout(s.section).group);
    REQUIRE(s.held(c));
    using Item = std::tuple<size_t, std::string, io::detail::ItemValue>;
    auto items_of = [&](const io::Checkpoint& from) {
      std::vector<Item> out;
      s.items(from, [&](size_t row, const std::string& name, const io::detail::ItemValue& v) {
        out.emplace_back(row, name, v);
      });
      return out;
    };
    const auto sent = items_of(c), got = items_of(back);
    REQUIRE(!sent.empty());
    REQUIRE(sent.size() == got.size());
    for (size_t i = 0; i < sent.size(); ++i) {
      REQUIRE(std::get<0>(sent[i]) == std::get<0>(got[i]));
      REQUIRE(std::get<1>(sent[i]) == std::get<1>(got[i]));
      const auto* a = std::get_if<io::detail::Integers>(&std::get<2>(sent[i]));
      const auto* b = std::get_if<io::detail::Integers>(&std::get<2>(got[i]));
      REQUIRE((a == nullptr) == (b == nullptr));
      if (a) REQUIRE((a->dims == b->dims && a->values == b->values));
    }
  }
}

TEST_CASE(
    "an item of a section of items alone comes once, and a value its row refuses fails "
    "the load",
    "[checkpoint][sections]") {
  const size_t row = io::detail::any_name_row(Section::rng, ItemKind::dataset);
  io::detail::CheckpointBuilder builder("x.h5", {}, {true, false}, 1 << 30);
  SECTION("the same generator twice") {
    builder.integers(Section::rng, row, "data", {4}, {1, 2, 3, 4});
    REQUIRE_THROWS_AS(builder.integers(Section::rng, row, "data", {4}, {1, 2, 3, 4}), StreamError);
  }
  SECTION("a generator of the wrong shape never reaches the section's row") {
    REQUIRE_THROWS_AS(builder.integers(Section::rng, row, "data", {3}, {1, 2, 3}), StreamError);
  }
  SECTION("a generator state of all zeros") {
    builder.integers(Section::rng, row, "data", {4}, {0, 0, 0, 0});
    REQUIRE_THAT(builder.load_failure(),
                 Catch::Matchers::Contains("/rng/data") && Catch::Matchers::Contains("all zeros"));
  }
}
