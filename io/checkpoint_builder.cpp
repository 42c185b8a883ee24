#include "io/checkpoint_builder.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "base/json.h"
#include "data/bpe.h"
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
}

void CheckpointBuilder::load_error(const std::string& message) {
  expect_open("an error");
  charge(message.size(), "an error message");
  if (load_error_.empty()) load_error_ = message;
  open_.reset();  // a tensor cut short by the error ends here
}

// A row the stream names: one that exists, of the type it is sent as, sent once, after the
// row its bound names.
const RootAttribute& CheckpointBuilder::root_row_once(size_t row, bool integer) {
  expect_open("a root attribute");
  if (row >= kRootAttributes.size()) throw StreamError("a root attribute of unknown row");
  const RootAttribute& a = kRootAttributes[row];
  if (a.integer() != integer)
    throw StreamError(fmt::format("root attribute {} of the wrong type", a.name));
  if (roots_seen_[row]) throw StreamError(fmt::format("a second {}", a.name));
  if (a.limits.at_least_of && !roots_seen_[root_row(a.limits.at_least_of)])
    throw StreamError(fmt::format("{} before {}", a.name, a.limits.at_least_of));
  roots_seen_[row] = true;
  return a;
}

void CheckpointBuilder::root_text(size_t row, const std::string& value) {
  const RootAttribute& a = root_row_once(row, false);
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

void CheckpointBuilder::root_integer(size_t row, int64_t value) {
  const RootAttribute& a = root_row_once(row, true);
  if (!root_integer_problem(row, value, ckpt_, source_).empty())
    throw StreamError(fmt::format("a refused {}", a.name));
  if (const auto* field = std::get_if<int64_t Checkpoint::*>(&a.value)) ckpt_.** field = value;
}

void CheckpointBuilder::begin_tensor(Section section, const std::string& name,
                                     const std::vector<uint64_t>& dims) {
  expect_open("a tensor");
  if (open_) throw StreamError("a tensor begun inside another");
  if (section == Section::optimizer && loading() && !ckpt_.optimizer)
    throw StreamError("optimizer state before the optimizer");
  if (dims.size() > 32) throw StreamError("a tensor of more than 32 dimensions");  // HDF5's limit
  uint64_t numel = 1;
  for (uint64_t d : dims) {
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / 4 / d)
      throw StreamError("a tensor of more elements than memory holds");
    numel *= d;
  }
  charge(name.size() + 4 * numel, "a tensor");
  OpenTensor t{section, name, {}, numel, 0, loading()};
  if (t.keep) t.tensor = ag::empty(ag::Shape(dims.begin(), dims.end()), ag::DType::Float32);
  open_ = std::move(t);
}

void CheckpointBuilder::tensor_data(const void* values, size_t count) {
  expect_open("tensor values");
  if (!open_) throw StreamError("tensor values outside a tensor");
  if (count > open_->numel - open_->filled)
    throw StreamError("more values than the tensor's shape holds");
  if (open_->keep && count > 0)
    std::memcpy(open_->tensor.data<float>() + open_->filled, values, count * sizeof(float));
  open_->filled += count;
}

void CheckpointBuilder::check_finite(const OpenTensor& t) {
  const float* v = t.tensor.data<float>();
  uint64_t nan = 0, inf = 0, first = 0;
  for (uint64_t i = 0; i < t.numel; ++i) {
    if (std::isfinite(v[i])) continue;
    if (nan + inf == 0) first = i;
    std::isnan(v[i]) ? ++nan : ++inf;
  }
  if (nan + inf == 0) return;
  const std::string message =
      fmt::format("'{}': /{}/{} holds {} NaN and {} infinite values (first at {})", source_,
                  t.section == Section::model ? "model" : "optimizer", printable(t.name), nan, inf,
                  ag::index_str(t.tensor.shape(), static_cast<int64_t>(first)));
  if (options_.allow_non_finite)
    ckpt_.warnings.push_back(message);
  else
    load_error(message);
}

void CheckpointBuilder::end_tensor() {
  expect_open("a tensor's end");
  if (!open_ || open_->filled != open_->numel)
    throw StreamError("a tensor ended before all its values came");
  OpenTensor t = std::move(*open_);
  open_.reset();
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

void CheckpointBuilder::optimizer(const std::string& type) {
  expect_open("an optimizer");
  if (ckpt_.optimizer) throw StreamError("a second optimizer");
  charge(type.size(), "an optimizer");
  ckpt_.optimizer = optim::OptimizerState{type, {}, {}};
}

void CheckpointBuilder::optimizer_scalar(const std::string& key, double value) {
  expect_open("an optimizer setting");
  if (!ckpt_.optimizer) throw StreamError("an optimizer setting before the optimizer");
  charge(key.size() + sizeof value, "an optimizer setting");
  if (const std::string why = optim::state_scalar_problem(key, value); !why.empty() && loading())
    load_error(fmt::format("'{}': /optimizer attribute '{}': {}", source_, printable(key), why));
  ckpt_.optimizer->scalars.emplace_back(key, value);
}

void CheckpointBuilder::tokenizer(const TokenizerSection& t) {
  expect_open("a tokenizer");
  if (tokenizer_seen_) throw StreamError("a second tokenizer");
  tokenizer_seen_ = true;
  uint64_t special_bytes = 0;
  for (const std::string& s : t.special_tokens) special_bytes += sizeof s + s.size();
  charge(t.type.size() + 4 * t.vocab.size() + 8 * t.merges.size() + t.split_pattern.size() +
             4 * t.byte_order.size() + special_bytes,
         "a tokenizer");
  for (uint32_t cp : t.vocab)
    if (cp > 0x10FFFF) throw StreamError("a vocabulary entry that is not a code point");
  const bool merges = t.type == "bpe" || t.type == "gpt2";
  if (!merges && (!t.merges.empty() || !t.split_pattern.empty()))
    throw StreamError("bpe merges for a tokenizer that is not bpe");
  if (t.type != "gpt2" && (!t.byte_order.empty() || !t.special_tokens.empty()))
    throw StreamError("a byte order or special tokens for a tokenizer that is not gpt2");
  ckpt_.tokenizer = t;
  if (merges && loading()) check_bpe(t);
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
    load_error(fmt::format("'{}': /tokenizer{} is not a valid {} tokenizer: {}", source_,
                           t.type == "bpe" ? "/merges" : "", t.type, printable(why)));
  }
}

void CheckpointBuilder::rng(const std::string& name, const std::array<uint64_t, 4>& words) {
  expect_open("a generator state");
  charge(name.size() + sizeof words, "a generator state");
  if (words[0] == 0 && words[1] == 0 && words[2] == 0 && words[3] == 0)
    throw StreamError("a generator state of all zeros");
  ckpt_.rng.emplace_back(name, ag::Generator::State{words[0], words[1], words[2], words[3]});
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
  if (!tokenizer_seen_) throw StreamError("a checkpoint without its tokenizer");
}

Checkpoint CheckpointBuilder::take_checkpoint() {
  if (!done_ || !loading()) throw StreamError("no checkpoint to take");
  return std::move(ckpt_);
}

}  // namespace io::detail
