// The sections of a checkpoint, each described once (read_protocol.h): the writer writes a
// section's items in its rows' order, the reader reads and bounds them by their rows, the
// stream names them by row and the builder checks them again by their rows.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>

#include "data/hf_bpe.h"
#include "data/tokenizer_file.h"
#include "io/read_protocol.h"
#include "io/root_attributes.h"
#include "io/tokenizer_section.h"

namespace io::detail {

namespace {

// A char vocabulary: one entry per code point at most.
constexpr uint64_t kMaxVocab = 0x110000;
// bpe merges: each makes one token past the 256 bytes, up to the largest vocabulary.
constexpr uint64_t kMaxMerges = data::kMaxBpeVocabSize - 256;
// hf tokens: the largest vocabulary and its added tokens
constexpr uint64_t kMaxHfTokens = data::kMaxBpeVocabSize + data::HfBpeTokenizer::kMaxAddedTokens;

// The longest name of a packed format ("q4_k"), with room.
constexpr uint64_t kMaxFormatName = 16;

const Item kModelItems[] = {
    {.name = nullptr, .kind = ItemKind::dataset, .dtype = DType::float32},  // a parameter
    // a frozen weight held as blocks: its format (named by the parameter), then its blocks
    {.name = nullptr, .kind = ItemKind::text, .max_length = kMaxFormatName},
    {.name = nullptr,
     .kind = ItemKind::dataset,
     .dtype = DType::packed,
     .rank = 2,
     .max_length = UINT64_MAX},
};

const Item kOptimizerItems[] = {
    {.name = "type", .kind = ItemKind::text},
    {.name = nullptr, .kind = ItemKind::real},  // a setting ("step" written as an integer)
    // its state, "<buffer>/<parameter>" (or directly in /optimizer)
    {.name = nullptr, .kind = ItemKind::dataset, .dtype = DType::float32},
};

const Item kTokenizerItems[] = {
    {.name = "type", .kind = ItemKind::text},
    {.name = "vocab",
     .kind = ItemKind::dataset,
     .dtype = DType::uint32,
     .rank = 1,
     .max_length = kMaxVocab,
     .max_value = 0x10FFFF,
     .for_types = "char"},
    {.name = "split_pattern",
     .kind = ItemKind::text,
     .max_length = data::kMaxSplitPatternBytes,
     .for_types = "bpe gpt2 hf"},
    {.name = "merges",
     .kind = ItemKind::dataset,
     .dtype = DType::uint32,
     .rank = 2,
     .dims = {0, 2},
     .max_length = kMaxMerges,
     .max_value = UINT32_MAX,
     .for_types = "bpe gpt2 hf"},
    {.name = "byte_order",
     .kind = ItemKind::dataset,
     .dtype = DType::uint32,
     .rank = 1,
     .dims = {256, 0},
     .max_length = 256,
     .max_value = 255,
     .for_types = "gpt2"},
    {.name = "special_tokens",
     .kind = ItemKind::text,
     .max_length = kMaxSpecialTokensJsonBytes,
     .for_types = "gpt2 byte bpe",
     .optional_for = "byte bpe"},
    {.name = "token_bytes",
     .kind = ItemKind::dataset,
     .dtype = DType::uint32,
     .rank = 1,
     .max_length = data::BpeTokenizer::kMaxTotalTokenBytes,
     .max_value = 255,
     .for_types = "hf"},
    {.name = "token_ends",
     .kind = ItemKind::dataset,
     .dtype = DType::uint32,
     .rank = 1,
     .max_length = kMaxHfTokens,
     .max_value = UINT32_MAX,
     .for_types = "hf"},
    {.name = "hf_settings",
     .kind = ItemKind::text,
     .max_length = data::kMaxHfSettingsJsonBytes,
     .for_types = "hf"},
};

const Item kRngItems[] = {
    {.name = "algorithm", .kind = ItemKind::text, .note = "xoshiro256** (four uint64 words)"},
    // a generator's state
    {.name = nullptr,
     .kind = ItemKind::dataset,
     .dtype = DType::uint64,
     .rank = 1,
     .dims = {4, 0},
     .max_length = 4},
};

// The best validation figure so far (train --early-stopping, --keep-best).
const Item kBestValidationItems[] = {
    {.name = "metric", .kind = ItemKind::text, .max_length = 64},
    {.name = "value", .kind = ItemKind::real},
    {.name = "step", .kind = ItemKind::integer},
    {.name = "evaluations_since", .kind = ItemKind::integer},
};

// The root's rows are kRootAttributes' rows, in its order.
std::span<const Item> root_items() {
  static const auto items = [] {
    std::array<Item, kRootAttributes.size()> out{};
    for (size_t row = 0; row < out.size(); ++row) {
      const RootAttribute& a = kRootAttributes[row];
      out[row] = {.name = a.name,
                  .kind = a.integer() ? ItemKind::integer : ItemKind::text,
                  .max_length = a.limits.max_bytes};
    }
    return out;
  }();
  return items;
}

const std::array<SectionLayout, kSectionCount>& layouts() {
  // indexed by Section
  static const std::array<SectionLayout, kSectionCount> all = {{
      {Section::model, "model", true, kModelItems},
      {Section::optimizer, "optimizer", false, kOptimizerItems},
      {Section::root, "", true, root_items()},
      {Section::tokenizer, "tokenizer", true, kTokenizerItems},
      {Section::rng, "rng", false, kRngItems},
      {Section::best_validation, "best_validation", false, kBestValidationItems},
  }};
  return all;
}

std::string event_name(Section section, size_t row, const std::string& name) {
  const Item& it = item(section, row);
  return fmt::format("/{}/{}", layout(section).group, it.name ? it.name : name.c_str());
}

// A section and row a stream names: one that exists, of the kind the event is.
std::string row_problem(Section section, size_t row, bool dataset) {
  if (static_cast<size_t>(section) >= kSectionCount) return "an item of an unknown section";
  if (row >= layout(section).items.size()) return "an item of an unknown row";
  const Item& it = item(section, row);
  if ((it.kind == ItemKind::dataset) != dataset)
    return fmt::format("{} sent as an {}", it.name ? it.name : "an item",
                       dataset ? "dataset" : "attribute");
  if (it.note) return fmt::format("{}, which is never read", it.name);
  return "";
}

std::string name_problem(const Item& it, const std::string& name) {
  if (it.name && !name.empty()) return fmt::format("{} sent with a second name", it.name);
  if (name.size() > kMaxTextBytes) return fmt::format("a name of {} bytes", name.size());
  return "";
}

}  // namespace

const SectionLayout& layout(Section section) {
  return layouts().at(static_cast<size_t>(section));
}

const Item& item(Section section, size_t row) {
  return layout(section).items[row];
}

size_t row_of(Section section, const char* name) {
  const auto items = layout(section).items;
  for (size_t row = 0; row < items.size(); ++row)
    if (items[row].name && std::string_view(items[row].name) == name) return row;
  throw std::invalid_argument(fmt::format("no item '{}' in /{}", name, layout(section).group));
}

size_t any_name_row(Section section, ItemKind kind) {
  const auto items = layout(section).items;
  for (size_t row = 0; row < items.size(); ++row)
    if (!items[row].name && items[row].kind == kind) return row;
  throw std::invalid_argument(fmt::format("no item of any name in /{}", layout(section).group));
}

namespace {

bool listed(const char* list, const std::string& type) {
  const std::string_view types = list;
  for (size_t at = 0; at < types.size();) {
    const size_t end = std::min(types.find(' ', at), types.size());
    if (types.substr(at, end - at) == type) return true;
    at = end + 1;
  }
  return false;
}

}  // namespace

bool held_for(const Item& it, const std::string& type) {
  return !it.for_types || listed(it.for_types, type);
}

bool optional_for(const Item& it, const std::string& type) {
  return it.optional_for && listed(it.optional_for, type);
}

std::string dataset_problem(Section section, size_t row, const std::string& name,
                            const std::vector<uint64_t>& dims) {
  if (std::string why = row_problem(section, row, true); !why.empty()) return why;
  const Item& it = item(section, row);
  if (std::string why = name_problem(it, name); !why.empty()) return why;
  const std::string where = event_name(section, row, name);
  if (dims.size() > kMaxRank) return fmt::format("{} of more than {} dimensions", where, kMaxRank);
  if (it.rank != 0 && dims.size() != it.rank)
    return fmt::format("{} of {} dimensions, not {}", where, dims.size(), it.rank);
  for (size_t d = 0; d < std::min<size_t>(dims.size(), 2); ++d)
    if (it.dims[d] != 0 && dims[d] != it.dims[d])
      return fmt::format("{} of dimension {} sized {}, not {}", where, d, dims[d], it.dims[d]);
  if (it.kind == ItemKind::dataset && !dims.empty() && it.rank != 0 && dims[0] > it.max_length)
    return fmt::format("{} of {} rows, more than {}", where, dims[0], it.max_length);
  return "";
}

std::string attribute_problem(Section section, size_t row, const std::string& name,
                              size_t text_bytes) {
  if (std::string why = row_problem(section, row, false); !why.empty()) return why;
  const Item& it = item(section, row);
  if (std::string why = name_problem(it, name); !why.empty()) return why;
  if (it.kind == ItemKind::text && text_bytes > it.max_length)
    return fmt::format("{} of {} bytes, more than {}", event_name(section, row, name), text_bytes,
                       it.max_length);
  return "";
}

// ------------------------------------------------------------------ the sections' events
void ReadSink::root_text(size_t row, const std::string& value) {
  attribute(Section::root, row, "", value);
}

void ReadSink::root_integer(size_t row, int64_t value) {
  attribute(Section::root, row, "", value);
}

void ReadSink::begin_tensor(Section section, const std::string& name,
                            const std::vector<uint64_t>& dims) {
  begin_dataset(section, any_name_row(section, ItemKind::dataset), name, dims);
}

void ReadSink::integers(Section section, size_t row, const std::string& name,
                        const std::vector<uint64_t>& dims, const std::vector<uint64_t>& values) {
  begin_dataset(section, row, name, dims);
  if (item(section, row).dtype == DType::uint64) {
    dataset_data(values.data(), values.size() * sizeof(uint64_t));
  } else {
    const std::vector<uint32_t> narrow(values.begin(), values.end());
    dataset_data(narrow.data(), narrow.size() * sizeof(uint32_t));
  }
  end_dataset();
}

// Every item the type holds, and any other the section holds something in (which the
// builder refuses: a tokenizer that is not bpe has no merges).
void ReadSink::tokenizer(const TokenizerSection& t) {
  for_each_tokenizer_item(
      t, TextFor::stream, /*also_misplaced=*/true,
      [&](size_t row, const std::string& text) { attribute(Section::tokenizer, row, "", text); },
      [&](size_t row, const std::vector<uint64_t>& dims, const std::vector<uint64_t>& values) {
        integers(Section::tokenizer, row, "", dims, values);
      });
  end_section(Section::tokenizer);
}

}  // namespace io::detail
