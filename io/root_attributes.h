#pragma once
// A checkpoint's root attributes in one table (internal to io/). The writer
// (checkpoint.cpp) writes them in its order, the reader (checkpoint_reader.cpp, in the
// forked child) reads and checks them by it, the stream (read_frames.cpp) names them by
// their row, and the builder (checkpoint_builder.cpp) checks them again and fills the
// Checkpoint by it. Adding an integer attribute is its field in io::Checkpoint and one row
// here (with its bounds), plus its test; nothing else changes.
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <variant>

#include "io/checkpoint.h"
#include "io/history.h"
#include "io/read_protocol.h"

namespace io::detail {

struct RootAttribute {
  enum class Presence : uint8_t {
    required,   // always written; a file without it is refused
    defaulted,  // always written; a file without it reads as Checkpoint{}'s value
    optional,   // written unless it holds Checkpoint{}'s value, which a file without it means
  };
  // What it holds: a value every attograd checkpoint has (text or integer), or the
  // Checkpoint field it fills (the config is JSON text, parsed by the builder).
  using Value = std::variant<const char*, int64_t, nlohmann::json Checkpoint::*,
                             std::string Checkpoint::*, int64_t Checkpoint::*>;
  // Integers: at least `at_least`, and at least the value of the integer row named
  // `at_least_of` (an earlier row), `why` saying why. Text: at most max_bytes.
  struct Limits {
    int64_t at_least = std::numeric_limits<int64_t>::min();
    const char* at_least_of = nullptr;
    const char* why = nullptr;
    size_t max_bytes = 64 << 10;
  };

  const char* name;
  Presence presence;
  Value value;
  Limits limits = {};

  bool integer() const {
    return std::holds_alternative<int64_t>(value) ||
           std::holds_alternative<int64_t Checkpoint::*>(value);
  }
};

using Presence = RootAttribute::Presence;

inline const std::array<RootAttribute, 9> kRootAttributes = {{
    {"format", Presence::required, kFormatName},
    {"format_version", Presence::required, kFormatVersion},
    {"config", Presence::required, &Checkpoint::config, {.max_bytes = kMaxConfigBytes}},
    {"step", Presence::defaulted, &Checkpoint::step, {.at_least = 0}},
    {"data_identity", Presence::optional, &Checkpoint::data_identity},
    {"micro_batches",
     Presence::optional,
     &Checkpoint::micro_batches,
     {.at_least_of = "step", .why = "every step takes at least one micro-batch"}},
    {"run_id", Presence::optional, &Checkpoint::run_id, {.max_bytes = 64}},
    {"run_name", Presence::optional, &Checkpoint::run_name, {.max_bytes = 1024}},
    {"history", Presence::optional, &Checkpoint::history, {.max_bytes = kMaxHistoryBytes}},
}};

// What a Checkpoint holds for the row: its fixed value, or its field (the config as JSON
// text). Of Checkpoint{}: what a file without the row means.
int64_t integer_in(const RootAttribute& a, const Checkpoint& c);
std::string text_in(const RootAttribute& a, const Checkpoint& c);

// The row of the attribute `name` (std::invalid_argument when there is none).
size_t root_row(std::string_view name);

// Why a file's root attribute `row` holding `value` is refused, in a message naming the
// file (source) and the attribute, or "". Integer rows are checked against their bounds,
// an earlier row's value taken from `so_far`; rows of a fixed value against it.
std::string root_integer_problem(size_t row, int64_t value, const Checkpoint& so_far,
                                 const std::string& source);
std::string root_text_problem(size_t row, const std::string& value, const std::string& source);

// The message for a file without the required attribute `row`.
std::string missing_root_attribute(size_t row, const std::string& source);

}  // namespace io::detail
