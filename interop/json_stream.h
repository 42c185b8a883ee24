#pragma once
// JSON from a model file read as it streams past, keeping only what the reader asks for
// (see interop.h for the map): a safetensors header, config.json, an index, tokenizer.json.
// A JSON tree costs 10 to 50 times its text (a value, a map node, a string a key), so a
// hostile 95 MB header of tiny entries took 2 GB as a tree. Here each member of an object
// (or element of an array) is decided by its key as it arrives:
//   keep    its value is built as a small tree, at most `budget` values, and handed over;
//   skip    its value is parsed and dropped: nothing of it is stored;
//   stream  its value (an object or array) is read member by member by another Reader.
// The text is read from the file a MiB at a time, never whole; a string longer than the
// bound given is refused before it is all in memory; nesting is bounded by base::kMaxJsonDepth.
// A key the reader skips is not remembered, so it is not checked for appearing twice.
//
//   struct Top : interop::JsonReader {
//     Use use(const std::string& key, size_t) override { return key == "n" ? keep(1) : skip(); }
//     void value(const std::string& key, size_t, nlohmann::json v) override { n = v; }
//   };
//   interop::read_json(in, 8, length, top, 1 << 20);   // JsonStreamError, the file unnamed
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "interop/input_bytes.h"

namespace interop {

// Not JSON, nested too deep, a string too long, a kept value over its budget: the message
// says what (quoting nothing unescaped); the caller names the file.
struct JsonStreamError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class JsonReader {
 public:
  enum class Action { keep, skip, stream };
  struct Use {
    Action action = Action::skip;
    size_t budget = 0;  // keep: the values the kept tree may hold (containers count)
  };
  static Use keep(size_t budget) { return {Action::keep, budget}; }
  static Use skip() { return {Action::skip, 0}; }
  static Use stream() { return {Action::stream, 0}; }

  virtual ~JsonReader() = default;
  // The container this reader reads opened: an object (true) or array; it may refuse.
  virtual void open(bool object) { (void)object; }
  // What to do with the member `key` (objects) or element `index` (arrays, key empty).
  virtual Use use(const std::string& key, size_t index) = 0;
  // A kept member's value (and a streamed one that turned out not to be a container).
  virtual void value(const std::string& key, size_t index, nlohmann::json v) {
    (void)key, (void)index, (void)v;
  }
  // The reader of a streamed member's container.
  virtual JsonReader& nested(const std::string& key, size_t index) {
    (void)key, (void)index;
    throw std::logic_error("JsonReader: stream() without nested()");
  }
  // The container closed.
  virtual void close() {}
};

// Reads the JSON text at [offset, offset + length) of in with `top` as the reader of its
// value, which must be an object or array (else JsonStreamError "... is a string ...").
// Throws JsonStreamError for the text, and whatever the readers throw.
void read_json(const InputBytes& in, uint64_t offset, uint64_t length, JsonReader& top,
               size_t max_string_bytes);

}  // namespace interop
