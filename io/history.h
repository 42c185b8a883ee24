#pragma once
// A run's metrics kept inside its checkpoint: the root attribute `history`
// (docs/checkpoint.md#history), one row per report line of train, growing with the run and
// carried over by resume, so that `report --checkpoint FILE` draws the curves of any
// training checkpoint without a --metrics file.
//
// The text is a table a person or numpy reads as it is: a header line naming the columns,
// then one line per row, fields separated by one space, numbers as `%.7g` ("nan": not
// measured at that row). A reader ignores columns it does not know; `step` is required
// and ascends strictly. It is data from elsewhere: bounded in bytes by the root
// attribute's limit and in rows by kMaxHistoryRows before anything is kept.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace io {

struct HistoryRow {
  int64_t step = 0;
  double loss = NAN;  // the mean training loss over the steps since the previous row
  double val_loss = NAN, val_bits_per_byte = NAN;  // at evaluations only
  double lr = NAN, grad_norm = NAN, tokens_per_s = NAN;
  double elapsed_s = NAN;  // the run's training time so far, summed over its sessions
};

// At most this many rows are kept (a long run thins its older rows, thin_history) and read.
inline constexpr size_t kMaxHistoryRows = 100000;
// The root attribute's byte limit: kMaxHistoryRows rows of the widest numbers fit in it.
inline constexpr size_t kMaxHistoryBytes = size_t{16} << 20;

// The columns in the order they are written.
const std::vector<std::string>& history_columns();

std::string history_text(const std::vector<HistoryRow>& rows);

// Throws CheckpointError("'SOURCE': root attribute 'history' line N: ...").
std::vector<HistoryRow> parse_history(std::string_view text, const std::string& source);

// Adds a row, dropping any rows at or after its step first (a resumed run repeats none,
// but a caller may); over kMaxHistoryRows, thin_history halves the older resolution.
void append_history(std::vector<HistoryRow>& rows, const HistoryRow& row);

// Every other row without a validation loss is dropped (evaluations are all kept); if
// that is not enough, every other row. The first and last rows always stay.
void thin_history(std::vector<HistoryRow>& rows);

}  // namespace io
