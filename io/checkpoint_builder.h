#pragma once
// Assembles what the reader (checkpoint_reader.h) finds into a Checkpoint and a
// VerifyReport (internal to io/). It is also the receiving end of the forked reader's
// stream, so it takes nothing on trust: every item must exist in its section's layout
// (read_protocol.h) and keep its row's bounds, a dataset's values must match the shape it
// began with, every string and dataset counts against a budget set by the file's size, and
// nothing may come twice or after the end. It adds the checks that need the values: the
// config's JSON (nesting and string lengths bounded as it is parsed), NaN or infinite
// weights, and optimiser state out of its range (optim::check_state_values' rules: a
// negative second moment, a step count that is not a whole number >= 0).
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/quant/packed_weight.h"
#include "io/checkpoint.h"
#include "io/item_sections.h"
#include "io/read_protocol.h"
#include "io/root_attributes.h"

namespace io::detail {

// No string in the config JSON longer than this (base::parse_json bounds its nesting).
constexpr size_t kMaxJsonString = 1 << 20;

// Parses the config attribute with base::parse_json: nesting and string lengths are checked
// as it is parsed, so a config nested 100,000 deep is an error, not a stack overflow.
// CheckpointError naming source and the attribute.
nlohmann::json parse_config_json(const std::string& text, const std::string& source);

class CheckpointBuilder final : public ReadSink {
 public:
  CheckpointBuilder(std::string source, LoadOptions options, ReadRequest request,
                    uint64_t file_bytes);

  void progress(uint64_t) override {}
  void fatal(const std::string& message) override;
  void load_error(const std::string& message) override;
  void attribute(Section section, size_t row, const std::string& name,
                 const Scalar& value) override;
  void begin_dataset(Section section, size_t row, const std::string& name,
                     const std::vector<uint64_t>& dims) override;
  void dataset_data(const void* values, size_t bytes) override;
  void end_dataset() override;
  void end_section(Section section) override;
  void verdict(Verdict verdict, const std::string& path, const std::string& why) override;
  void done() override;
  bool wants_more() const override {
    return fatal_.empty() && (request_.verify || load_error_.empty());
  }

  bool finished() const { return done_; }
  // Why the file cannot be read at all, or "".
  const std::string& fatal_error() const { return fatal_; }
  // Why it does not load (the message load_checkpoint throws), or "".
  const std::string& load_failure() const { return load_error_; }
  // After done(), when it loaded.
  Checkpoint take_checkpoint();
  VerifyReport take_report() { return std::move(report_); }

 private:
  // A dataset begun and not yet ended: float32 into its tensor, integers into `integers`.
  struct OpenDataset {
    Section section;
    size_t row;
    std::string name;
    std::vector<uint64_t> dims;
    ag::Tensor tensor;
    std::vector<uint64_t> integers;
    uint64_t numel = 0, filled = 0;
    bool keep = false;  // false once the load has failed: values are checked, then dropped
  };

  ag::Tensor given_tensor(const std::string& name, const ag::Shape& shape) const;
  bool loading() const { return request_.load && load_error_.empty() && fatal_.empty(); }
  void expect_open(const char* what) const;
  void charge(uint64_t bytes, const char* what);
  void root_attribute(size_t row, const Scalar& value);
  const RootAttribute& root_row_once(size_t row);
  void root_text_value(size_t row, const std::string& value);
  void optimizer_attribute(size_t row, const std::string& name, const Scalar& value);
  void tokenizer_item(size_t row);
  void take_item(const ItemSection& s, size_t row, const std::string& name, const ItemValue& value);
  void take_integers(const void* values, size_t count);
  void end_integers(OpenDataset& d);
  void end_float_dataset(OpenDataset& t);
  void packed_format(const std::string& name, const std::string& format);
  uint64_t begin_packed(const std::string& name, const std::vector<uint64_t>& dims);
  void end_packed(OpenDataset& t);
  void check_finite(const OpenDataset& t);
  void check_finite_packed(const OpenDataset& t);
  void refuse_non_finite(const OpenDataset& t, uint64_t nan, uint64_t inf, uint64_t first);
  void check_bpe(const TokenizerSection& t);

  std::string source_;
  LoadOptions options_;
  ReadRequest request_;
  uint64_t budget_, used_ = 0;
  bool done_ = false;
  std::array<bool, kRootAttributes.size()> roots_seen_ = {};
  std::array<bool, kSectionCount> sections_ended_ = {};
  std::vector<bool> tokenizer_items_seen_;
  std::set<std::string> items_seen_;  // the paths of items of sections of items alone
  std::string fatal_, load_error_;
  Checkpoint ckpt_;
  std::optional<OpenDataset> open_;
  // the format just sent for the packed dataset that follows: (parameter, format)
  std::optional<std::pair<std::string, const ag::quant::PackedFormat*>> packed_next_;
  VerifyReport report_;
};

}  // namespace io::detail
