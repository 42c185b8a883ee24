// The sections of items alone (item_sections.h), one row each: how a Checkpoint keeps them.
#include "io/item_sections.h"

#include <algorithm>

namespace io::detail {

namespace {

// /rng: one dataset of four uint64 words per generator, by the generator's name.
bool rng_held(const Checkpoint& c) {
  return !c.rng.empty();
}

void rng_items(const Checkpoint& c, const ItemVisitor& visit) {
  const size_t row = any_name_row(Section::rng, ItemKind::dataset);
  for (const auto& [name, state] : c.rng)
    visit(row, name, Integers{{state.size()}, {state.begin(), state.end()}});
}

std::string rng_take(Checkpoint& c, size_t, const std::string& name, const ItemValue& value) {
  const std::vector<uint64_t>& w = std::get<Integers>(value).values;  // four, by its row
  if (std::all_of(w.begin(), w.end(), [](uint64_t word) { return word == 0; }))
    return "is all zeros, not a valid generator state";
  c.rng.emplace_back(name, ag::Generator::State{w[0], w[1], w[2], w[3]});
  return "";
}

const ItemSection kItemSections[] = {
    {Section::rng, rng_held, rng_items, rng_take},
};

}  // namespace

std::span<const ItemSection> item_sections() {
  return kItemSections;
}

const ItemSection* item_section(Section section) {
  for (const ItemSection& s : kItemSections)
    if (s.section == section) return &s;
  return nullptr;
}

}  // namespace io::detail
