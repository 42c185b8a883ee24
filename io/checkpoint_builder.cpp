#include "io/checkpoint_builder.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "base/json.h"
#include "data/bpe.h"
#include "io/checkpoint_reader.h"
#include "io/history.h"
#include "io/tokenizer_section.h"

namespace io::detail {

namespace {

// Whether the split pattern (rather than the merges) is what a bpe tokenizer refused.
bool pattern_problem(const std::string& pattern) {
  try {
    data::SplitPattern compiled(pattern);
    return false;
  } catch (const std::invalid_argument&) {
    return true;
  }
}

// The kind of value a row holds, as the Scalar's alternative.
size_t scalar_index(ItemKind kind) {
  return kind == ItemKind::text ? 0 : kind == ItemKind::integer ? 1 : 2;
}

}  // namespace

nlohmann::json parse_config_json(const std::string& text, const std::string& source) {
  if (text.size() > kMaxConfigBytes)
    throw CheckpointError(
        fmt::format("'{}': root attribute 'config' holds {} bytes, more than the {} allowed",
                    source, text.size(), kMaxConfigBytes));
  nlohmann::json config;
  try {
    config = base::parse_json(text, {}, kMaxJsonString);
  } catch (const base::JsonError& e) {
    if (e.kind == base::JsonError::Kind::syntax)
      throw CheckpointError(fmt::format("'{}': root attribute 'config' is not valid JSON: '{}'",
                                        source, printable(text.substr(0, 80))));
    throw CheckpointError(fmt::format("'{}': root attribute 'config': {}", source, e.what()));
  }
  if (!config.is_object())
    throw CheckpointError(fmt::format("'{}': root attribute 'config' is not a JSON object: '{}'",
                                      source, printable(text.substr(0, 80))));
  return config;
}

CheckpointBuilder::CheckpointBuilder(std::string source, LoadOptions options, ReadRequest request,
                                     uint64_t file_bytes)
    : source_(std::move(source)),
      options_(options),
      request_(request),
      budget_(data_budget(file_bytes)) {
  ckpt_.source = source_;
}

void CheckpointBuilder::expect_open(const char* what) const {
  if (done_) throw StreamError(fmt::format("{} after the end", what));
}

// Everything received counts against what the file could hold, so a reader that lies
// cannot make this process allocate more than the file's size allows.
void CheckpointBuilder::charge(uint64_t bytes, const char* what) {
  if (bytes > budget_ - used_)
    throw StreamError(
        fmt::format("{} beyond the {} bytes a file of this size may hold", what, budget_));
  used_ += bytes;
}

void CheckpointBuilder::fatal(const std::string& message) {
  expect_open("an error");
  charge(message.size(), "an error message");
  if (fatal_.empty()) fatal_ = message;
  open_.reset();
  packed_next_.reset();
}

void CheckpointBuilder::load_error(const std::string& message) {
  expect_open("an error");
  charge(message.size(), "an error message");
  if (load_error_.empty()) load_error_ = message;
  open_.reset();  // a tensor cut short by the error ends here
  packed_next_.reset();
}

// A root row sent once, after the row its bound names.
const RootAttribute& CheckpointBuilder::root_row_once(size_t row) {
  const RootAttribute& a = kRootAttributes[row];
  if (roots_seen_[row]) throw StreamError(fmt::format("a second {}", a.name));
  if (a.limits.at_least_of && !roots_seen_[root_row(a.limits.at_least_of)])
    throw StreamError(fmt::format("{} before {}", a.name, a.limits.at_least_of));
  roots_seen_[row] = true;
  return a;
}

void CheckpointBuilder::root_attribute(size_t row, const Scalar& value) {
  if (const auto* text = std::get_if<std::string>(&value)) return root_text_value(row, *text);
  const RootAttribute& a = root_row_once(row);
  const int64_t integer = std::get<int64_t>(value);
  if (!root_integer_problem(row, integer, ckpt_, source_).empty())
    throw StreamError(fmt::format("a refused {}", a.name));
  if (const auto* field = std::get_if<int64_t Checkpoint::*>(&a.value)) ckpt_.** field = integer;
}

void CheckpointBuilder::root_text_value(size_t row, const std::string& value) {
  const RootAttribute& a = root_row_once(row);
  charge(value.size(), a.name);
  if (!root_text_problem(row, value, source_).empty())
    throw StreamError(fmt::format("a refused {}", a.name));
  if (!loading()) return;
  if (const auto* field = std::get_if<std::string Checkpoint::*>(&a.value)) ckpt_.** field = value;
  if (row == root_row("history")) {
    try {
      parse_history(value, source_);  // a damaged table is named here, not where it is drawn
    } catch (const CheckpointError& e) {
      load_error(e.what());
    }
  }
  if (const auto* json = std::get_if<nlohmann::json Checkpoint::*>(&a.value)) {
    try {
      ckpt_.** json = parse_config_json(value, source_);
    } catch (const CheckpointError& e) {
      load_error(e.what());
    }
  }
}

void CheckpointBuilder::attribute(Section section, size_t row, const std::string& name,
                                  const Scalar& value) {
  expect_open("an attribute");
  const auto* text = std::get_if<std::string>(&value);
  if (std::string why = attribute_problem(section, row, name, text ? text->size() : 0);
      !why.empty())
    throw StreamError(why);
  if (value.index() != scalar_index(item(section, row).kind))
    throw StreamError(fmt::format("an attribute of the wrong type in /{}", layout(section).group));
  if (sections_ended_[static_cast<size_t>(section)])
    throw StreamError(fmt::format("an attribute of /{} after its end", layout(section).group));
  if (section == Section::root) return root_attribute(row, value);
  if (section == Section::optimizer) return optimizer_attribute(row, name, value);
  if (section == Section::model) return packed_format(name, std::get<std::string>(value));
  if (const ItemSection* s = item_section(section))
    return take_item(*s, row, name, std::visit([](const auto& v) { return ItemValue(v); }, value));
  // the tokenizer's (the only other section with attributes that are read)
  tokenizer_item(row);
  charge(text->size(), "a tokenizer");
  try {
    set_tokenizer_text(ckpt_.tokenizer, row, *text);
  } catch (const std::runtime_error& e) {
    throw StreamError(fmt::format("/tokenizer special tokens a reader refuses: {}", e.what()));
  }
}

void CheckpointBuilder::optimizer_attribute(size_t row, const std::string& key,
                                            const Scalar& value) {
  if (row == row_of(Section::optimizer, "type")) {
    if (ckpt_.optimizer) throw StreamError("a second optimizer");
    const std::string& type = std::get<std::string>(value);
    charge(type.size(), "an optimizer");
    ckpt_.optimizer = optim::OptimizerState{type, {}, {}};
    return;
  }
  if (!ckpt_.optimizer) throw StreamError("an optimizer setting before the optimizer");
  const double setting = std::get<double>(value);
  charge(key.size() + sizeof setting, "an optimizer setting");
  if (const std::string why = optim::state_scalar_problem(key, setting); !why.empty() && loading())
    load_error(fmt::format("'{}': /optimizer attribute '{}': {}", source_, printable(key), why));
  ckpt_.optimizer->scalars.emplace_back(key, setting);
}

// A tokenizer item: its type first, each once, only those its type holds.
void CheckpointBuilder::tokenizer_item(size_t row) {
  const size_t type_row = row_of(Section::tokenizer, "type");
  tokenizer_items_seen_.resize(layout(Section::tokenizer).items.size());
  if (row != type_row && !tokenizer_items_seen_[type_row])
    throw StreamError("a tokenizer's item before its type");
  if (tokenizer_items_seen_[row])
    throw StreamError(row == type_row ? "a second tokenizer" : "a tokenizer's item twice");
  tokenizer_items_seen_[row] = true;
  const Item& it = item(Section::tokenizer, row);
  if (row != type_row && !held_for(it, ckpt_.tokenizer.type))
    throw StreamError(fmt::format("/tokenizer/{} for a tokenizer of type '{}'", it.name,
                                  printable(ckpt_.tokenizer.type)));
}

void CheckpointBuilder::begin_dataset(Section section, size_t row, const std::string& name,
                                      const std::vector<uint64_t>& dims) {
  expect_open("a tensor");
  if (open_) throw StreamError("a tensor begun inside another");
  if (std::string why = dataset_problem(section, row, name, dims); !why.empty())
    throw StreamError(why);
  if (sections_ended_[static_cast<size_t>(section)])
    throw StreamError(fmt::format("a dataset of /{} after its end", layout(section).group));
  if (section == Section::optimizer && loading() && !ckpt_.optimizer)
    throw StreamError("optimizer state before the optimizer");
  if (section == Section::tokenizer) tokenizer_item(row);
  const DType dtype = item(section, row).dtype;
  if (packed_next_ && dtype != DType::packed)
    throw StreamError("a packed format before a dataset of floats");
  uint64_t numel = 1;
  for (uint64_t d : dims) {
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / d)
      throw StreamError("a tensor of more elements than memory holds");
    numel *= d;
  }
  if (dtype == DType::packed) numel = begin_packed(name, dims);  // its bytes
  charge(name.size() + dtype_bytes(dtype) * numel, "a tensor");
  OpenDataset d{section, row, name, dims, {}, {}, numel, 0, loading()};
  if (d.keep && dtype == DType::packed)
    d.tensor = ag::quant::packed_empty(
        {static_cast<int64_t>(dims[0]), static_cast<int64_t>(dims[1])}, *packed_next_->second);
  if (d.keep && dtype == DType::float32) {
    const ag::Shape shape(dims.begin(), dims.end());
    d.tensor = section == Section::model ? given_tensor(name, shape) : ag::Tensor();
    if (!d.tensor.defined()) d.tensor = ag::empty(shape, ag::DType::Float32);
  }
  if (dtype == DType::uint32 || dtype == DType::uint64)
    d.integers.reserve(numel);  // within the budget just charged
  open_ = std::move(d);
}

// LoadOptions::into's tensor of this name when it can take the dataset's values as they
// come (the same shape, float32, contiguous), else none.
ag::Tensor CheckpointBuilder::given_tensor(const std::string& name, const ag::Shape& shape) const {
  if (!options_.into) return {};
  for (const auto& [given_name, tensor] : *options_.into)
    if (given_name == name && tensor.defined() && tensor.shape() == shape &&
        tensor.dtype() == ag::DType::Float32 && tensor.is_contiguous() && !tensor.packing())
      return tensor.detach();
  return {};
}

void CheckpointBuilder::dataset_data(const void* values, size_t bytes) {
  expect_open("tensor values");
  if (!open_) throw StreamError("tensor values outside a tensor");
  const DType dtype = item(open_->section, open_->row).dtype;
  if (bytes % dtype_bytes(dtype) != 0) throw StreamError("values of a partial element");
  const size_t count = bytes / dtype_bytes(dtype);
  if (count > open_->numel - open_->filled)
    throw StreamError("more values than the tensor's shape holds");
  if (dtype == DType::uint32 || dtype == DType::uint64) return take_integers(values, count);
  if (open_->keep && count > 0 && dtype == DType::packed)
    std::memcpy(ag::quant::packed_data(open_->tensor).data() + open_->filled, values, bytes);
  else if (open_->keep && count > 0)
    std::memcpy(open_->tensor.data<float>() + open_->filled, values, bytes);
  open_->filled += count;
}

// Integers widened to 64 bits, each within its row's bound.
void CheckpointBuilder::take_integers(const void* values, size_t count) {
  const Item& it = item(open_->section, open_->row);
  const char* p = static_cast<const char*>(values);
  for (size_t i = 0; i < count; ++i) {
    uint64_t v = 0;
    if (it.dtype == DType::uint64) {
      std::memcpy(&v, p + 8 * i, 8);
    } else {
      uint32_t narrow = 0;
      std::memcpy(&narrow, p + 4 * i, 4);
      v = narrow;
    }
    if (v > it.max_value)
      throw StreamError(fmt::format("a value of /{}/{} above {}", layout(open_->section).group,
                                    it.name ? it.name : "", it.max_value));
    open_->integers.push_back(v);
  }
  open_->filled += count;
}

namespace {

// Counts the NaN and infinite values among n floats, the first at index `at` + its place.
void count_non_finite(const float* v, uint64_t n, uint64_t at, uint64_t& nan, uint64_t& inf,
                      uint64_t& first) {
  for (uint64_t i = 0; i < n; ++i) {
    if (std::isfinite(v[i])) continue;
    if (nan + inf == 0) first = at + i;
    std::isnan(v[i]) ? ++nan : ++inf;
  }
}

}  // namespace

void CheckpointBuilder::check_finite(const OpenDataset& t) {
  uint64_t nan = 0, inf = 0, first = 0;
  count_non_finite(t.tensor.data<float>(), t.numel, 0, nan, inf, first);
  refuse_non_finite(t, nan, inf, first);
}

// The blocks' values, dequantized a few rows at a time (never the whole matrix).
void CheckpointBuilder::check_finite_packed(const OpenDataset& t) {
  const int64_t rows = t.tensor.shape()[0], width = t.tensor.shape()[1];
  const int64_t tile = std::max<int64_t>(1, (int64_t{1} << 18) / width);
  std::vector<float> values(static_cast<size_t>(std::min(rows, tile) * width));
  uint64_t nan = 0, inf = 0, first = 0;
  for (int64_t r = 0; r < rows; r += tile) {
    const int64_t end = std::min(rows, r + tile);
    ag::quant::unpack_rows(t.tensor, r, end, ag::DType::Float32, values.data());
    count_non_finite(values.data(), static_cast<uint64_t>((end - r) * width),
                     static_cast<uint64_t>(r * width), nan, inf, first);
  }
  refuse_non_finite(t, nan, inf, first);
}

void CheckpointBuilder::refuse_non_finite(const OpenDataset& t, uint64_t nan, uint64_t inf,
                                          uint64_t first) {
  if (nan + inf == 0) return;
  const std::string message =
      fmt::format("'{}': /{}/{} holds {} NaN and {} infinite values (first at {})", source_,
                  layout(t.section).group, printable(t.name), nan, inf,
                  ag::index_str(t.tensor.shape(), static_cast<int64_t>(first)));
  if (options_.allow_non_finite)
    ckpt_.warnings.push_back(message);
  else
    load_error(message);
}

void CheckpointBuilder::end_dataset() {
  expect_open("a tensor's end");
  if (!open_ || open_->filled != open_->numel)
    throw StreamError("a tensor ended before all its values came");
  OpenDataset d = std::move(*open_);
  open_.reset();
  const DType dtype = item(d.section, d.row).dtype;
  if (dtype == DType::float32)
    end_float_dataset(d);
  else if (dtype == DType::packed)
    end_packed(d);
  else
    end_integers(d);
}

void CheckpointBuilder::end_float_dataset(OpenDataset& t) {
  if (!t.keep || !loading()) return;
  check_finite(t);
  if (t.section == Section::optimizer && loading())  // no optimiser could take it
    if (const std::string why =
            optim::state_tensor_problem(ckpt_.optimizer->type, t.name, t.tensor);
        !why.empty())
      load_error(fmt::format("'{}': /optimizer/{} {}", source_, printable(t.name), why));
  if (!loading()) return;
  auto& into = t.section == Section::model ? ckpt_.model : ckpt_.optimizer->tensors;
  into.emplace_back(std::move(t.name), std::move(t.tensor));
}

// The format of the packed dataset to come: one of the packed formats' table (the reader
// refused any other by name), for a parameter not yet held.
void CheckpointBuilder::packed_format(const std::string& name, const std::string& format) {
  if (packed_next_) throw StreamError("a second format before a packed dataset");
  const ag::quant::PackedFormat* f = ag::quant::packed_format_named(format);
  if (!f) throw StreamError(fmt::format("/model/{} in an unknown format", printable(name)));
  charge(name.size() + format.size(), "a packed format");
  packed_next_.emplace(name, f);
}

// The bytes of the packed dataset begun: its format's rows, which must be whole blocks.
uint64_t CheckpointBuilder::begin_packed(const std::string& name,
                                         const std::vector<uint64_t>& dims) {
  if (!packed_next_ || packed_next_->first != name)
    throw StreamError("a packed dataset without its format");
  const ag::quant::PackedFormat& f = *packed_next_->second;
  constexpr uint64_t kMaxDim = uint64_t{1} << 40;  // a product in range, far past any memory
  if (dims[0] > kMaxDim || dims[1] > kMaxDim || !ag::quant::fits(f, static_cast<int64_t>(dims[1])))
    throw StreamError(fmt::format("/model/{} of rows that are not whole blocks", printable(name)));
  const uint64_t bytes = dims[0] * static_cast<uint64_t>(ag::quant::packed_row_bytes(
                                       f, static_cast<int64_t>(dims[1])));
  // dequantized, it takes its float32 values too
  if (!options_.keep_packed) charge(4 * dims[0] * dims[1], "a packed tensor's values");
  return bytes;
}

// A packed dataset whole: its values checked, then kept as blocks or dequantized (into the
// caller's tensor when LoadOptions::into has one of its name and shape).
void CheckpointBuilder::end_packed(OpenDataset& t) {
  const std::string format = packed_next_->second->name;
  packed_next_.reset();
  if (!t.keep || !loading()) return;
  check_finite_packed(t);
  if (!loading()) return;
  ckpt_.packed.emplace(t.name, format);
  if (options_.keep_packed) {
    ckpt_.model.emplace_back(std::move(t.name), std::move(t.tensor));
    return;
  }
  ag::Tensor floats = given_tensor(t.name, t.tensor.shape());
  if (!floats.defined()) floats = ag::empty(t.tensor.shape(), ag::DType::Float32);
  ag::quant::unpack_rows(t.tensor, 0, t.tensor.shape()[0], ag::DType::Float32, floats.raw_data());
  ckpt_.model.emplace_back(std::move(t.name), std::move(floats));
}

void CheckpointBuilder::end_integers(OpenDataset& d) {
  if (d.section == Section::tokenizer)
    return set_tokenizer_integers(ckpt_.tokenizer, d.row, d.integers);
  take_item(*item_section(d.section), d.row, d.name,
            Integers{std::move(d.dims), std::move(d.integers)});
}

// An item of a section of items alone, each name once, kept by its section's row; a value
// the row refuses fails the load.
void CheckpointBuilder::take_item(const ItemSection& s, size_t row, const std::string& name,
                                  const ItemValue& value) {
  const std::string path =
      fmt::format("/{}/{}", layout(s.section).group, item_name(s.section, row, name));
  if (!items_seen_.insert(path).second) throw StreamError(fmt::format("{} twice", printable(path)));
  charge(path.size() + (std::holds_alternative<std::string>(value)
                            ? std::get<std::string>(value).size()
                            : sizeof(double)),
         "an item");
  if (!loading()) return;
  if (const std::string why = s.take(ckpt_, row, name, value); !why.empty())
    load_error(fmt::format("'{}': {} {}", source_, printable(path), why));
}

// A section ends once; the tokenizer, whole now, is checked by building it.
void CheckpointBuilder::end_section(Section section) {
  expect_open("a section's end");
  if (open_) throw StreamError("a section's end inside a tensor");
  if (packed_next_) throw StreamError("a packed format without its dataset");
  bool& ended = sections_ended_[static_cast<size_t>(section)];
  if (ended) throw StreamError(fmt::format("a second /{}", layout(section).group));
  ended = true;
  if (section != Section::tokenizer) return;
  if (tokenizer_items_seen_.empty()) throw StreamError("a tokenizer without its type");
  const TokenizerSection& t = ckpt_.tokenizer;
  const auto kind = base::find_choice<data::TokenizerKind>(t.type);  // checked by its row
  const bool built_to_check =
      kind && (data::encodes_by_merges(*kind) || *kind == data::TokenizerKind::bytes);
  if (built_to_check && loading()) check_bpe(t);  // byte: its special tokens
}

// A bpe tokenizer is checked by building it: merges of tokens that exist before them, no
// pair twice, tokens within their limits, a pattern that compiles (gpt2: also its byte
// order and special tokens). The message names the part at fault.
void CheckpointBuilder::check_bpe(const TokenizerSection& t) {
  try {
    make_tokenizer(t);
    return;
  } catch (const std::invalid_argument& e) {
    std::string why = e.what();
    const std::string prefix = t.type + " tokenizer: ";
    if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
    if (pattern_problem(t.split_pattern))
      return load_error(
          fmt::format("'{}': /tokenizer attribute 'split_pattern': {}", source_, printable(why)));
    load_error(fmt::format(
        "'{}': /tokenizer{} is not a valid {} tokenizer: {}", source_,
        base::find_choice<data::TokenizerKind>(t.type) == data::TokenizerKind::bpe ? "/merges" : "",
        t.type, printable(why)));
  }
}

void CheckpointBuilder::verdict(Verdict verdict, const std::string& path, const std::string& why) {
  expect_open("a verdict");
  if (!request_.verify) throw StreamError("a verdict when none was asked for");
  charge(path.size() + why.size() + 2, "a verdict");
  const std::string entry = why.empty() ? path : path + ": " + why;
  switch (verdict) {
    case Verdict::checked: report_.checked.push_back(path); break;
    case Verdict::unchecked: report_.unchecked.push_back(entry); break;
    case Verdict::failed: report_.failures.push_back(entry); break;
    case Verdict::refused: report_.refused.push_back(entry); break;
  }
}

void CheckpointBuilder::done() {
  expect_open("a second end");
  if (open_) throw StreamError("the end inside a tensor");
  done_ = true;
  if (!loading()) return;
  for (size_t row = 0; row < kRootAttributes.size(); ++row)
    if (kRootAttributes[row].presence != Presence::optional && !roots_seen_[row])
      throw StreamError(fmt::format("a checkpoint without its {}", kRootAttributes[row].name));
  if (!sections_ended_[static_cast<size_t>(Section::tokenizer)])
    throw StreamError("a checkpoint without its tokenizer");
}

Checkpoint CheckpointBuilder::take_checkpoint() {
  if (!done_ || !loading()) throw StreamError("no checkpoint to take");
  return std::move(ckpt_);
}

}  // namespace io::detail
