#include "interop/json_stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <iterator>
#include <vector>

#include "base/json.h"
#include "base/utf8.h"
#include "interop/model_files.h"

namespace interop {

namespace {

using json = nlohmann::json;

constexpr uint64_t kPiece = uint64_t{1} << 20;  // what is read from the file at once

// The text, a MiB at a time, with the length of the string being read: a string over the
// bound is refused while it is read, before nlohmann's lexer holds it whole.
class StreamedText {
 public:
  StreamedText(const InputBytes& in, uint64_t offset, uint64_t length, size_t max_string)
      : in_(in), offset_(offset), length_(length), max_string_(max_string) {}
  uint64_t length() const { return length_; }

  char at(uint64_t pos) {
    if (pos < start_ || pos >= start_ + piece_.size()) {
      start_ = pos;
      piece_.resize(std::min(kPiece, length_ - pos));
      in_.read(offset_ + pos, piece_.data(), piece_.size(), "the JSON text");
    }
    const char c = piece_[pos - start_];
    // nlohmann's lexer takes a NUL for the end of the text; no JSON text holds one
    if (c == '\0')
      throw JsonStreamError(fmt::format("not valid JSON: a NUL byte at offset {}", pos));
    return c;
  }

  void passed(char c) {
    if (!in_string_) {
      in_string_ = c == '"', string_bytes_ = 0;
      return;
    }
    if (escaped_) {
      escaped_ = false;
    } else if (c == '\\') {
      escaped_ = true;
    } else if (c == '"') {
      in_string_ = false;
      return;
    }
    if (++string_bytes_ > max_string_)
      throw JsonStreamError(fmt::format("a string of more than {} bytes", max_string_));
  }

 private:
  const InputBytes& in_;
  uint64_t offset_, length_;
  size_t max_string_;
  std::vector<char> piece_;
  uint64_t start_ = 0;
  bool in_string_ = false, escaped_ = false;
  size_t string_bytes_ = 0;
};

struct TextIterator {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  StreamedText* text;
  uint64_t pos;
  char operator*() const { return text->at(pos); }
  TextIterator& operator++() {
    text->passed(text->at(pos));
    ++pos;
    return *this;
  }
  bool operator==(const TextIterator& o) const { return pos == o.pos; }
  bool operator!=(const TextIterator& o) const { return pos != o.pos; }
};

// A container being read: streamed through its reader, built as a kept tree, or skipped.
struct Frame {
  JsonReader::Action action = JsonReader::Action::skip;
  JsonReader* reader = nullptr;  // stream: whose container this is
  bool object = false;
  size_t index = 0;         // stream: the next element's index
  JsonReader::Use pending;  // stream: what to do with the coming value
  std::string key;          // stream: the coming value's key
  std::vector<json*> open;  // keep: the tree's open containers
  json tree;                // keep: the tree
  size_t budget = 0;        // keep: values still allowed
  std::string tree_key;     // keep: the key of the next value in the open object
  size_t limit = 0;         // keep: the budget it started with
  std::string where;        // keep: its key (or [index]), for messages
  size_t depth = 0;         // the nesting at which it opened
};

class Dispatcher final : public nlohmann::json_sax<json> {
 public:
  explicit Dispatcher(JsonReader& top) : top_(top) {}

  bool null() override { return scalar(nullptr); }
  bool boolean(bool v) override { return scalar(v); }
  bool number_integer(number_integer_t v) override { return scalar(v); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(v); }
  bool number_float(number_float_t v, const string_t&) override { return scalar(v); }
  bool string(string_t& v) override { return scalar(std::move(v)); }
  bool binary(binary_t&) override { return scalar(nullptr); }  // never in JSON text
  bool start_object(std::size_t) override { return start(true); }
  bool start_array(std::size_t) override { return start(false); }
  bool end_object() override { return end(); }
  bool end_array() override { return end(); }
  bool key(string_t& k) override;
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // nlohmann's message ends quoting the bytes last read ("; last read: '...'"): a file
    // from elsewhere (or a secret one a link points to) is named, never quoted
    std::string what = e.what();
    what = what.substr(0, what.find("; last read"));
    throw JsonStreamError("not valid JSON: " + base::printable(what));
  }

 private:
  bool scalar(json&& v);
  bool start(bool object);
  bool end();
  void place(Frame& f, json&& v, bool container);
  void deliver(Frame& f, json&& v);
  void depth_check() const;

  JsonReader& top_;
  std::deque<Frame> frames_;
  size_t depth_ = 0;  // every open container, streamed, kept or skipped
};

void Dispatcher::depth_check() const {
  if (depth_ > static_cast<size_t>(base::kMaxJsonDepth))
    throw JsonStreamError(fmt::format("JSON nested deeper than {} levels", base::kMaxJsonDepth));
}

// A value for the streamed container on top: to its reader (kept, or not a container where
// a stream was asked for), or dropped.
void Dispatcher::deliver(Frame& f, json&& v) {
  if (f.pending.action != JsonReader::Action::skip)
    f.reader->value(f.key, f.object ? 0 : f.index, std::move(v));
  if (!f.object) ++f.index;
}

// A value into the kept tree on top, within its budget.
void Dispatcher::place(Frame& f, json&& v, bool container) {
  if (f.budget-- == 0)
    throw JsonStreamError(fmt::format("{} holds more than the {} values it may", f.where, f.limit));
  json* at = nullptr;
  if (f.open.empty()) {
    f.tree = std::move(v);
    at = &f.tree;
  } else if (json& into = *f.open.back(); into.is_object()) {
    auto [it, fresh] = into.get_ref<json::object_t&>().emplace(f.tree_key, std::move(v));
    if (!fresh)
      throw JsonStreamError(
          fmt::format("the key '{}' appears twice in one object", excerpt(f.tree_key)));
    at = &it->second;
  } else {
    auto& array = into.get_ref<json::array_t&>();
    array.push_back(std::move(v));
    at = &array.back();
  }
  if (container) f.open.push_back(at);
}

bool Dispatcher::scalar(json&& v) {
  if (frames_.empty()) throw JsonStreamError(fmt::format("is {}", base::json_kind(v)));
  Frame& f = frames_.back();
  if (f.action == JsonReader::Action::skip) return true;
  if (f.action == JsonReader::Action::keep) return place(f, std::move(v), false), true;
  if (!f.object) f.pending = f.reader->use("", f.index);
  deliver(f, std::move(v));
  return true;
}

bool Dispatcher::key(string_t& k) {
  Frame& f = frames_.back();
  if (f.action == JsonReader::Action::keep) f.tree_key = std::move(k);
  if (f.action != JsonReader::Action::stream) return true;
  f.pending = f.reader->use(k, 0);
  f.key = std::move(k);
  return true;
}

bool Dispatcher::start(bool object) {
  ++depth_;
  depth_check();
  if (frames_.empty()) {
    Frame root;
    root.action = JsonReader::Action::stream, root.reader = &top_;
    root.object = object, root.depth = depth_;
    frames_.push_back(std::move(root));
    top_.open(object);
    return true;
  }
  Frame& f = frames_.back();
  if (f.action == JsonReader::Action::skip) return true;
  if (f.action == JsonReader::Action::keep)
    return place(f, object ? json::object() : json::array(), true), true;
  if (!f.object) f.pending = f.reader->use("", f.index);
  const JsonReader::Use use = f.pending;
  Frame child;
  child.action = use.action, child.object = object, child.depth = depth_;
  if (use.action == JsonReader::Action::stream) {
    child.reader = &f.reader->nested(f.object ? f.key : "", f.index);
    child.reader->open(object);
  }
  if (use.action == JsonReader::Action::keep) {
    child.budget = child.limit = use.budget;
    child.where = f.object ? "'" + excerpt(f.key) + "'" : fmt::format("[{}]", f.index);
  }
  frames_.push_back(std::move(child));
  // placed where it stays: a deque's elements never move as frames come and go
  if (use.action == JsonReader::Action::keep)
    place(frames_.back(), object ? json::object() : json::array(), true);
  return true;
}

bool Dispatcher::end() {
  Frame& f = frames_.back();
  if (depth_-- != f.depth) {  // a container inside a kept or skipped value
    if (f.action == JsonReader::Action::keep) f.open.pop_back();
    return true;
  }
  if (f.action == JsonReader::Action::stream) f.reader->close();
  json tree = std::move(f.tree);
  const JsonReader::Action action = f.action;
  frames_.pop_back();
  if (frames_.empty()) return true;
  Frame& parent = frames_.back();
  if (action == JsonReader::Action::keep)
    deliver(parent, std::move(tree));
  else if (!parent.object)
    ++parent.index;
  return true;
}

}  // namespace

void read_json(const InputBytes& in, uint64_t offset, uint64_t length, JsonReader& top,
               size_t max_string_bytes) {
  StreamedText text(in, offset, length, max_string_bytes);
  Dispatcher dispatcher(top);
  json::sax_parse(TextIterator{&text, 0}, TextIterator{&text, text.length()}, &dispatcher,
                  json::input_format_t::json, true);
}

}  // namespace interop
