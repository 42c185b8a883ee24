#pragma once
// Assembles what the reader (checkpoint_reader.h) finds into a Checkpoint and a
// VerifyReport (internal to io/). It is also the receiving end of the forked reader's
// stream, so it takes nothing on trust: a tensor's values must match the shape it began
// with, every string and tensor counts against a budget set by the file's size, and
// nothing may come twice or after the end. It adds the checks that need the values: the
// config's JSON (nesting and string lengths bounded as it is parsed), NaN or infinite
// weights, and optimiser state out of its range (optim::check_state_values' rules: a
// negative second moment, a step count that is not a whole number >= 0).
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "io/checkpoint_reader.h"
#include "io/root_attributes.h"

namespace io::detail {

// A stream no correct reader sends (values without their tensor, more of them than its
// shape holds, a second config, more data than the file could hold, ...): whoever sent it
// is not to be trusted further.
struct StreamError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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
  void root_text(size_t row, const std::string& value) override;
  void root_integer(size_t row, int64_t value) override;
  void begin_tensor(Section section, const std::string& name,
                    const std::vector<uint64_t>& dims) override;
  void tensor_data(const void* values, size_t count) override;
  void end_tensor() override;
  void optimizer(const std::string& type) override;
  void optimizer_scalar(const std::string& key, double value) override;
  void tokenizer(const TokenizerSection& tokenizer) override;
  void rng(const std::string& name, const std::array<uint64_t, 4>& words) override;
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
  struct OpenTensor {
    Section section;
    std::string name;
    ag::Tensor tensor;
    uint64_t numel = 0, filled = 0;
    bool keep = false;  // false once the load has failed: values are checked, then dropped
  };

  bool loading() const { return request_.load && load_error_.empty() && fatal_.empty(); }
  void expect_open(const char* what) const;
  const RootAttribute& root_row_once(size_t row, bool integer);
  void charge(uint64_t bytes, const char* what);
  void check_finite(const OpenTensor& t);
  void check_bpe(const TokenizerSection& t);

  std::string source_;
  LoadOptions options_;
  ReadRequest request_;
  uint64_t budget_, used_ = 0;
  bool done_ = false, tokenizer_seen_ = false;
  std::array<bool, kRootAttributes.size()> roots_seen_ = {};
  std::string fatal_, load_error_;
  Checkpoint ckpt_;
  std::optional<OpenTensor> open_;
  VerifyReport report_;
};

}  // namespace io::detail
