#include "io/history.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "base/utf8.h"
#include "io/checkpoint.h"

namespace io {

namespace {

using Field = double HistoryRow::*;

struct Column {
  const char* name;
  Field field;  // null: the step
};

const std::vector<Column>& columns() {
  static const std::vector<Column> c = {
      {"step", nullptr},
      {"loss", &HistoryRow::loss},
      {"val_loss", &HistoryRow::val_loss},
      {"val_bits_per_byte", &HistoryRow::val_bits_per_byte},
      {"lr", &HistoryRow::lr},
      {"grad_norm", &HistoryRow::grad_norm},
      {"tokens_per_s", &HistoryRow::tokens_per_s},
      {"elapsed_s", &HistoryRow::elapsed_s},
  };
  return c;
}

// A header names at most this many columns (later versions may add a few).
constexpr size_t kMaxColumns = 64;

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t space = line.find(' ');
    out.push_back(line.substr(0, space));
    if (space == std::string_view::npos || out.size() > kMaxColumns) return out;
    line.remove_prefix(space + 1);
  }
}

class HistoryParser {
 public:
  explicit HistoryParser(const std::string& source) : source_(source) {}
  void header(std::string_view line);
  HistoryRow row(std::string_view line, int64_t previous_step);
  void at_line(size_t n) { line_ = n; }

  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError(
        fmt::format("'{}': root attribute 'history' line {}: {}", source_, line_, what));
  }

 private:
  const std::string& source_;
  size_t line_ = 0;
  std::vector<const Column*> by_position_;  // null: a column this reader does not know
  size_t width_ = 0;
};

void HistoryParser::header(std::string_view line) {
  const auto names = split_fields(line);
  if (names.size() > kMaxColumns) fail(fmt::format("more than {} columns", kMaxColumns));
  bool has_step = false;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) fail("an empty column name");
    for (size_t j = 0; j < i; ++j)
      if (names[j] == names[i])
        fail(fmt::format("column '{}' named twice", base::printable(std::string(names[i]))));
    const auto known = std::find_if(columns().begin(), columns().end(),
                                    [&](const Column& c) { return names[i] == c.name; });
    by_position_.push_back(known == columns().end() ? nullptr : &*known);
    has_step = has_step || names[i] == "step";
  }
  if (!has_step) fail("the header names no 'step' column");
  width_ = names.size();
}

HistoryRow HistoryParser::row(std::string_view line, int64_t previous_step) {
  const auto fields = split_fields(line);
  if (fields.size() != width_)
    fail(fmt::format("{} fields, but the header names {} columns", fields.size(), width_));
  HistoryRow r;
  for (size_t i = 0; i < width_; ++i) {
    const Column* c = by_position_[i];
    if (!c) continue;
    const std::string_view f = fields[i];
    const char* end = f.data() + f.size();
    if (!c->field) {
      const auto [at, ec] = std::from_chars(f.data(), end, r.step);
      if (ec != std::errc() || at != end || r.step < 0)
        fail(fmt::format("step '{}' is not a whole number >= 0",
                         base::printable(std::string(f.substr(0, 40)))));
      continue;
    }
    double value = 0;
    const auto [at, ec] = std::from_chars(f.data(), end, value);
    if (ec != std::errc() || at != end)
      fail(fmt::format("{} '{}' is not a number", c->name,
                       base::printable(std::string(f.substr(0, 40)))));
    r.*(c->field) = value;
  }
  if (r.step <= previous_step)
    fail(fmt::format("step {} does not come after step {}", r.step, previous_step));
  return r;
}

}  // namespace

const std::vector<std::string>& history_columns() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Column& c : columns()) n.emplace_back(c.name);
    return n;
  }();
  return names;
}

std::string history_text(const std::vector<HistoryRow>& rows) {
  if (rows.empty()) return "";
  std::string out = fmt::format("{}\n", fmt::join(history_columns(), " "));
  for (const HistoryRow& r : rows) {
    out += std::to_string(r.step);
    for (const Column& c : columns())
      if (c.field) out += fmt::format(" {:.7g}", r.*(c.field));
    out += '\n';
  }
  return out;
}

std::vector<HistoryRow> parse_history(std::string_view text, const std::string& source) {
  HistoryParser parser(source);
  std::vector<HistoryRow> rows;
  size_t number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    parser.at_line(++number);
    if (number == 1) {
      parser.header(line);
      continue;
    }
    if (rows.size() == kMaxHistoryRows)
      parser.fail(fmt::format("more than {} rows", kMaxHistoryRows));
    rows.push_back(parser.row(line, rows.empty() ? -1 : rows.back().step));
  }
  return rows;
}

void append_history(std::vector<HistoryRow>& rows, const HistoryRow& row) {
  rows.erase(std::lower_bound(rows.begin(), rows.end(), row.step,
                              [](const HistoryRow& r, int64_t s) { return r.step < s; }),
             rows.end());
  rows.push_back(row);
  if (rows.size() > kMaxHistoryRows) thin_history(rows);
}

void thin_history(std::vector<HistoryRow>& rows) {
  const size_t before = rows.size();
  auto keep_every_other = [&](bool keep_evaluations) {
    std::vector<HistoryRow> kept;
    bool drop = false;
    for (size_t i = 0; i < rows.size(); ++i) {
      const bool fixed =
          i == 0 || i + 1 == rows.size() || (keep_evaluations && std::isfinite(rows[i].val_loss));
      if (fixed || !drop) kept.push_back(rows[i]);
      if (!fixed) drop = !drop;
    }
    rows = std::move(kept);
  };
  keep_every_other(true);
  if (rows.size() > before / 4 * 3) keep_every_other(false);
}

}  // namespace io
