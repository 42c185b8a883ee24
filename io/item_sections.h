#pragma once
// Sections made of items alone (internal to io/): their rows in read_protocol.h's layout say
// all a reader needs to find and bound them, and two functions say how a Checkpoint keeps
// them: its items, one by one, and one item taken back. The writer (checkpoint.cpp), the
// reader (checkpoint_reader.cpp), its stream and the builder (checkpoint_builder.cpp) walk
// every such section the same way, so a new one (a task's state, an adapter set's names) is
// its Section value, its rows in sections.cpp and its row in item_sections.cpp; no other
// file changes. /rng is one; the root, /model, /optimizer and /tokenizer have code of their
// own (defaults, tensors streamed in pieces, items that depend on a type).
#include <functional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "io/checkpoint.h"
#include "io/read_protocol.h"

namespace io::detail {

// A dataset of integers: its dims and its values in row-major order.
struct Integers {
  std::vector<uint64_t> dims;
  std::vector<uint64_t> values;
};
// An item's value, as its row's kind says: text, integer, real or a dataset.
using ItemValue = std::variant<std::string, int64_t, double, Integers>;
// (row, name, value): `name` is "" for a row with a name of its own.
using ItemVisitor =
    std::function<void(size_t row, const std::string& name, const ItemValue& value)>;

struct ItemSection {
  Section section;
  // Whether c holds anything of the section (an optional one is not written otherwise).
  bool (*held)(const Checkpoint& c);
  // Every item of c the section holds, in its rows' order (a row's note is not an item).
  void (*items)(const Checkpoint& c, const ItemVisitor& visit);
  // One item, its shape and bounds checked by its row, into c: "" or why no correct file
  // holds that value (said after the item's path).
  std::string (*take)(Checkpoint& c, size_t row, const std::string& name, const ItemValue& value);
};

std::span<const ItemSection> item_sections();
// The section's row, or nullptr for a section with code of its own.
const ItemSection* item_section(Section section);
// The name an item has in its group: its row's, or the one it was given.
inline std::string item_name(Section section, size_t row, const std::string& name) {
  const char* own = item(section, row).name;
  return own ? own : name;
}

}  // namespace io::detail
