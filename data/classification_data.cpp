// The classify task's file (docs/finetuning.md, "Classification"): a TSV or CSV of text and
// label, read whole under a size cap, records bounded, every refusal a one-line DataError
// naming the file, the line and the field.
//
// Format: a tab in the first line makes the file TSV (fields split at tabs, no quoting);
// otherwise CSV as RFC 4180 writes it (fields split at commas; a field in double quotes may
// hold commas, newlines and quotes written twice). A UTF-8 byte-order mark is skipped, a
// line may end in CRLF, empty lines are skipped.
//
// Columns: the first record is a header when exactly one of its fields names a text column
// (text, sentence, message, review, content, document, body, sms, email, input, tweet,
// description, comment_text, and v2 as Kaggle's SMS spam CSV has it) and exactly one a
// label column (label, class, category, target, sentiment, class index, v1), ignoring case
// and surrounding spaces; the columns are then found by name, in any order, and any others
// ignored. Without a header the layout is detected: the label is the column with the fewest
// different values (the SMS Spam Collection's own file is label<TAB>text), the text the
// longest of the others, and the rest ignored; a file whose label column would have more
// values than a quarter of its rows is refused (name the columns instead). Either way the
// layout is said in one line (TaskExamples::layout), which a run prints.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string_view>

#include "base/posix_file.h"
#include "base/utf8.h"
#include "data/data_error.h"
#include "data/examples.h"

namespace data {

namespace {

constexpr int64_t kMaxFileBytes = int64_t{1} << 30;  // 1 GiB of text
constexpr size_t kMaxRecordBytes = size_t{1} << 20;  // 1 MiB per record
constexpr size_t kMaxLabels = size_t{1} << 16;       // nn::config_fields' num_classes bound
constexpr size_t kLabelsListed = 20;                 // in an unknown label's message

struct Record {
  int64_t line = 0;  // where it starts (1-based)
  std::vector<std::string> fields;
};
using RecordSink = std::function<void(Record&)>;

class Reader {
 public:
  Reader(std::string path, std::string text) : path_(std::move(path)), text_(std::move(text)) {}

  [[noreturn]] void fail(int64_t line, const std::string& what) const {
    throw DataError(fmt::format("'{}' line {}: {}", base::printable(path_), line, what));
  }

  // Every record in file order; empty lines skipped.
  void records(const RecordSink& sink) {
    if (text_.starts_with("\xEF\xBB\xBF")) pos_ = 3;
    const size_t first_end = std::min(text_.find('\n', pos_), text_.size());
    const bool tsv = text_.find('\t', pos_) < first_end;
    while (pos_ < text_.size()) {
      Record r;
      r.line = line_;
      tsv ? tsv_record(r) : csv_record(r);
      if (r.fields.size() == 1 && r.fields[0].empty()) continue;  // an empty line
      sink(r);
    }
  }

 private:
  // One line, cut at tabs; its newline (and a CR before it) consumed.
  void tsv_record(Record& r) {
    size_t end = std::min(text_.find('\n', pos_), text_.size());
    if (end - pos_ > kMaxRecordBytes) fail(line_, "a line longer than 1 MiB (the limit)");
    std::string_view line(text_.data() + pos_, end - pos_);
    if (line.ends_with('\r')) line.remove_suffix(1);
    for (size_t a = 0;;) {
      const size_t tab = std::min(line.find('\t', a), line.size());
      r.fields.emplace_back(line.substr(a, tab - a));
      if (tab == line.size()) break;
      a = tab + 1;
    }
    pos_ = end + 1;
    ++line_;
  }

  // One RFC 4180 record: quoted fields may span lines.
  void csv_record(Record& r) {
    const size_t start = pos_;
    std::string field;
    bool quoted = false, was_quoted = false;
    for (;;) {
      if (pos_ - start > kMaxRecordBytes)
        fail(r.line, "a record longer than 1 MiB (the limit; is a quote left open?)");
      if (pos_ == text_.size()) {
        if (quoted) fail(r.line, "a quoted field is not closed before the end of the file");
        r.fields.push_back(std::move(field));
        return;
      }
      const char c = text_[pos_++];
      if (quoted) {
        if (c == '\n') ++line_;
        if (c != '"') {
          field += c;
        } else if (pos_ < text_.size() && text_[pos_] == '"') {
          field += '"';
          ++pos_;
        } else {
          quoted = false;
        }
        continue;
      }
      if (c == ',' || c == '\n' || (c == '\r' && pos_ < text_.size() && text_[pos_] == '\n')) {
        r.fields.push_back(std::move(field));
        field.clear();
        was_quoted = false;
        if (c == ',') continue;
        if (c == '\r') ++pos_;
        ++line_;
        return;
      }
      if (was_quoted)
        fail(line_, fmt::format("'{}' after a closing quote (a quote inside a quoted field is "
                                "written twice: \"\")",
                                base::printable(std::string(1, c))));
      if (c == '"' && field.empty()) {
        quoted = was_quoted = true;
        continue;
      }
      field += c;  // a quote inside an unquoted field is taken as it is
    }
  }

  std::string path_, text_;
  size_t pos_ = 0;
  int64_t line_ = 1;
};

// Without the spaces around it (a label written "spam " is "spam").
std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::string lowercase_trimmed(std::string_view s) {
  std::string out(trimmed(s));
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// Where the text and the label are, what the messages call them, and how they were found.
struct Columns {
  size_t text = 0, label = 1, count = 2;
  std::string text_name = "text", label_name = "label";
  bool header = false;
  std::string layout;  // one line: which column is which, and why
};

// "'name' (column 3)", or "column 3" for a header's empty name.
std::string column_named(const std::vector<std::string>& header, size_t i) {
  const std::string name(trimmed(header.empty() ? std::string_view() : header[i]));
  return name.empty() ? fmt::format("column {}", i + 1)
                      : fmt::format("'{}' (column {})", base::printable(name), i + 1);
}

// "; columns 3, 4 ignored", or "" when every column is used.
std::string ignored_columns(const Columns& c, const std::vector<std::string>& header) {
  std::vector<std::string> ignored;
  for (size_t i = 0; i < c.count; ++i)
    if (i != c.text && i != c.label) ignored.push_back(column_named(header, i));
  if (ignored.empty()) return "";
  return fmt::format("; ignored: {}", fmt::join(ignored, ", "));
}

// The header rule of the file comment: one text name, one label name, any other columns.
Columns header_columns(const std::string& path, const Record& first) {
  static const std::set<std::string> text_names{
      "text", "sentence", "message", "review", "content",     "document", "body",
      "sms",  "email",    "input",   "v2",     "description", "tweet",    "comment_text"};
  static const std::set<std::string> label_names{"label",     "class", "category",   "target",
                                                 "sentiment", "v1",    "class index"};
  Columns c;
  int texts = 0, labels = 0;
  for (size_t i = 0; i < first.fields.size(); ++i) {
    const std::string name = lowercase_trimmed(first.fields[i]);
    if (text_names.count(name)) ++texts, c.text = i, c.text_name = first.fields[i];
    if (label_names.count(name)) ++labels, c.label = i, c.label_name = first.fields[i];
  }
  if (texts != 1 || labels != 1) return Columns{};
  c.count = first.fields.size();
  c.header = true;
  c.layout = fmt::format("'{}': a header line names the columns: text {}, label {}{}",
                         base::printable(path), column_named(first.fields, c.text),
                         column_named(first.fields, c.label), ignored_columns(c, first.fields));
  return c;
}

// What a column of a headerless file holds: how many different values, how long they are.
struct ColumnStats {
  size_t distinct = 0;
  double mean_bytes = 0;
  bool all_known = true;  // every value one of the model's labels
};

std::vector<ColumnStats> column_stats(const std::vector<Record>& rows, size_t count,
                                      const std::set<std::string>& known) {
  std::vector<ColumnStats> out(count);
  for (size_t i = 0; i < count; ++i) {
    std::set<std::string_view> values;
    double bytes = 0;
    for (const Record& r : rows) {
      const std::string_view v = trimmed(r.fields[i]);
      values.insert(v);
      bytes += static_cast<double>(v.size());
      if (!known.count(std::string(v))) out[i].all_known = false;
    }
    out[i].distinct = values.size();
    out[i].mean_bytes = bytes / static_cast<double>(rows.size());
  }
  return out;
}

// Without a header: the label is the column of fewest different values, more than one when
// two columns vary (with a model's labels, the one column that holds only them); the text the
// longest of the others.
Columns detect_columns(const std::string& path, const std::vector<Record>& rows,
                       const std::vector<std::string>& labels) {
  Columns c;
  c.count = rows.front().fields.size();
  const std::set<std::string> known(labels.begin(), labels.end());
  const std::vector<ColumnStats> stats = column_stats(rows, c.count, known);
  size_t known_columns = 0;
  for (const ColumnStats& s : stats) known_columns += s.all_known;
  const bool by_known = !known.empty() && known_columns == 1;
  // a column of one value labels nothing while two others vary (a text and a label); a tie
  // goes to the later column: text then label
  size_t varying = 0;
  for (const ColumnStats& s : stats) varying += s.distinct > 1;
  const auto fewer = [&](size_t i) {
    const bool varies = stats[i].distinct > 1, label_varies = stats[c.label].distinct > 1;
    if (varying >= 2 && varies != label_varies) return varies;
    return stats[i].distinct <= stats[c.label].distinct;
  };
  for (size_t i = 0; i < c.count; ++i)
    if (by_known ? stats[i].all_known : fewer(i)) c.label = i;
  c.text = c.label == 0 ? 1 : 0;
  for (size_t i = 0; i < c.count; ++i)
    if (i != c.label && stats[i].mean_bytes > stats[c.text].mean_bytes) c.text = i;
  const size_t n = rows.size(), distinct = stats[c.label].distinct;
  if (known.empty() && distinct > 2 && distinct * 4 > n)
    throw DataError(fmt::format(
        "'{}' has no header line and no column that looks like a label: column {}, the one "
        "with the fewest different values, has {} in {} rows (a label column has at most a "
        "quarter as many values as rows); name the columns in a first line (e.g. "
        "'label<TAB>text' or 'text,label')",
        base::printable(path), c.label + 1, distinct, n));
  const std::string why = by_known ? "it holds only the model's labels"
                                   : fmt::format("{} different values in {} rows", distinct, n);
  c.layout = fmt::format(
      "'{}': no header line; column {} is the label ({}), column {} the text (the longest: {:.0f} "
      "bytes on average){}",
      base::printable(path), c.label + 1, why, c.text + 1, stats[c.text].mean_bytes,
      ignored_columns(c, {}));
  return c;
}

struct LabelledText {
  int64_t line;
  std::string text, label;
};

struct LabelledRows {
  std::vector<LabelledText> rows;
  std::string layout;  // Columns::layout
};

void check_field_utf8(const Reader& reader, int64_t line, const std::string& name,
                      const std::string& value) {
  try {
    base::check_utf8(value);
  } catch (const std::invalid_argument& e) {
    reader.fail(line, fmt::format("field '{}': {} (counted from the field's start)",
                                  base::printable(name), e.what()));
  }
}

// Every record has the columns of the first (a header's, or a headerless file's first row).
void check_field_counts(const Reader& reader, const std::vector<Record>& records, size_t count,
                        bool header) {
  for (const Record& r : records) {
    if (r.fields.size() == count) continue;
    if (r.fields.size() == 1)
      reader.fail(r.line, "no label column: a row is text<TAB>label (or text,label in a CSV)");
    reader.fail(r.line, header ? fmt::format("{} fields, but the header names {} columns",
                                             r.fields.size(), count)
                               : fmt::format("{} fields, but line {} has {} (a row's columns "
                                             "are the first row's)",
                                             r.fields.size(), records.front().line, count));
  }
}

// The file's records, a header's taken off; columns found by the header or detected.
LabelledRows read_rows(const std::string& path, const std::vector<std::string>& labels) {
  std::string text;
  try {
    text = base::read_input_file(path, "classification file", kMaxFileBytes);
  } catch (const base::FileError& e) {
    throw DataError(e.what());
  }
  Reader reader(path, std::move(text));
  std::vector<Record> records;
  reader.records([&](Record& r) { records.push_back(std::move(r)); });
  Columns c;
  if (!records.empty()) c = header_columns(path, records.front());
  if (c.header) records.erase(records.begin());
  if (records.empty())
    throw DataError(
        fmt::format("'{}' has no rows (expected lines of text<TAB>label)", base::printable(path)));
  if (!c.header) c.count = records.front().fields.size();
  if (c.count < 2)
    reader.fail(records.front().line,
                "no label column: a row is text<TAB>label (or text,label in a CSV)");
  check_field_counts(reader, records, c.count, c.header);
  if (!c.header) c = detect_columns(path, records, labels);
  LabelledRows out{{}, c.layout};
  out.rows.reserve(records.size());
  for (Record& r : records) {
    std::string label(trimmed(r.fields[c.label]));
    for (const auto& [name, value] :
         {std::pair{c.text_name, &r.fields[c.text]}, std::pair{c.label_name, &label}}) {
      if (value->empty())
        reader.fail(r.line, fmt::format("field '{}' is empty", base::printable(name)));
      check_field_utf8(reader, r.line, name, *value);
    }
    out.rows.push_back({r.line, std::move(r.fields[c.text]), std::move(label)});
  }
  return out;
}

// The labels a file's rows use, sorted in byte order; a classifier needs two.
std::vector<std::string> collect_labels(const std::string& path,
                                        const std::vector<LabelledText>& rows) {
  std::set<std::string> seen;
  for (const auto& r : rows) {
    seen.insert(r.label);
    if (seen.size() > kMaxLabels)
      throw DataError(fmt::format(
          "'{}' line {}: more than {} different labels (is the text column the label column? "
          "a header line names them)",
          base::printable(path), r.line, kMaxLabels));
  }
  if (seen.size() < 2)
    throw DataError(
        fmt::format("'{}': every row has the label '{}'; a classifier needs at "
                    "least two labels",
                    base::printable(path), base::printable(rows.front().label)));
  return {seen.begin(), seen.end()};
}

int64_t label_index(const std::string& path, const LabelledText& r,
                    const std::vector<std::string>& labels,
                    const std::map<std::string, int64_t>& index) {
  if (const auto it = index.find(r.label); it != index.end()) return it->second;
  std::vector<std::string> shown;
  for (size_t i = 0; i < std::min(labels.size(), kLabelsListed); ++i)
    shown.push_back(base::printable(labels[i]));
  throw DataError(fmt::format("'{}' line {}: unknown label '{}' (the model's labels: {}{})",
                              base::printable(path), r.line, base::printable(r.label),
                              fmt::join(shown, ", "),
                              labels.size() > kLabelsListed ? ", ..." : ""));
}

}  // namespace

TaskExamples read_classification_examples(const std::string& path, const Tokenizer& tokenizer,
                                          const TaskOptions& o) {
  if (o.context_length < 1)
    throw std::invalid_argument("read_classification_examples: context_length must be positive");
  LabelledRows read = read_rows(path, o.labels);
  const std::vector<LabelledText>& rows = read.rows;
  TaskExamples out;
  out.layout = std::move(read.layout);
  out.labels = o.labels.empty() ? collect_labels(path, rows) : o.labels;
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < out.labels.size(); ++i)
    index.emplace(out.labels[i], static_cast<int64_t>(i));
  out.examples.reserve(rows.size());
  for (const LabelledText& r : rows) {
    Example e;
    e.line = r.line;
    e.label = label_index(path, r, out.labels, index);
    try {
      e.ids = tokenizer.encode(r.text);
    } catch (const std::exception& err) {
      throw DataError(fmt::format("'{}' line {}: the text cannot be tokenized: {}",
                                  base::printable(path), r.line, err.what()));
    }
    const auto n = static_cast<int64_t>(e.ids.size());
    if (n > o.context_length) {
      if (!o.truncate)
        throw DataError(fmt::format(
            "'{}' line {}: the text is {} tokens, longer than the context of {} (--no-truncate "
            "refuses it; without it the first {} tokens are kept)",
            base::printable(path), r.line, n, o.context_length, o.context_length));
      e.ids.resize(static_cast<size_t>(o.context_length));  // the first tokens are kept
      ++out.truncated;
    }
    out.examples.push_back(std::move(e));
  }
  return out;
}

std::string classification_corpus_text(const std::string& path) {
  std::string out;
  for (const LabelledText& r : read_rows(path, {}).rows) {
    out += r.text;
    out += '\n';
  }
  return out;
}

}  // namespace data
