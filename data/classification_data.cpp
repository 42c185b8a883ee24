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
// (text, sentence, message, review, content, document, body, sms, email, input) and exactly
// one a label column (label, class, category, target, sentiment), ignoring case and
// surrounding spaces; the columns are then found by name, in either order, and any others
// ignored. Without a header every record is text then label.
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

// Where the text and the label are, and what the messages call them.
struct Columns {
  size_t text = 0, label = 1, count = 2;
  std::string text_name = "text", label_name = "label";
  bool header = false;
};

// The header rule of the file comment: one text name, one label name, any other columns.
Columns columns_of(const Record& first) {
  static const std::set<std::string> text_names{"text",    "sentence", "message", "review",
                                                "content", "document", "body",    "sms",
                                                "email",   "input"};
  static const std::set<std::string> label_names{"label", "class", "category", "target",
                                                 "sentiment"};
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
  return c;
}

struct LabelledText {
  int64_t line;
  std::string text, label;
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

// The file's rows, each with a text and a label checked.
std::vector<LabelledText> read_rows(const std::string& path) {
  std::string text;
  try {
    text = base::read_input_file(path, "classification file", kMaxFileBytes);
  } catch (const base::FileError& e) {
    throw DataError(e.what());
  }
  Reader reader(path, std::move(text));
  std::vector<LabelledText> rows;
  bool first = true;
  Columns c;
  reader.records([&](Record& r) {
    if (first) {
      first = false;
      c = columns_of(r);
      if (c.header) return;
    }
    if (r.fields.size() != c.count) {
      if (r.fields.size() == 1)
        reader.fail(r.line, "no label column: a row is text<TAB>label (or text,label in a CSV)");
      reader.fail(r.line, c.header ? fmt::format("{} fields, but the header names {} columns",
                                                 r.fields.size(), c.count)
                                   : fmt::format("{} fields; a row is text then label (a header "
                                                 "line naming the columns allows others)",
                                                 r.fields.size()));
    }
    std::string label(trimmed(r.fields[c.label]));
    for (const auto& [name, value] :
         {std::pair{c.text_name, &r.fields[c.text]}, std::pair{c.label_name, &label}}) {
      if (value->empty())
        reader.fail(r.line, fmt::format("field '{}' is empty", base::printable(name)));
      check_field_utf8(reader, r.line, name, *value);
    }
    rows.push_back({r.line, std::move(r.fields[c.text]), std::move(label)});
  });
  if (rows.empty())
    throw DataError(
        fmt::format("'{}' has no rows (expected lines of text<TAB>label)", base::printable(path)));
  return rows;
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
  const std::vector<LabelledText> rows = read_rows(path);
  TaskExamples out;
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
  for (const LabelledText& r : read_rows(path)) {
    out += r.text;
    out += '\n';
  }
  return out;
}

}  // namespace data
