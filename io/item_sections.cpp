// The sections of items alone (item_sections.h), one row each: how a Checkpoint keeps them.
#include "io/item_sections.h"

#include <algorithm>
#include <cmath>

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

// /best_validation: four attributes, each in its row.
bool best_held(const Checkpoint& c) {
  return c.best_validation.has_value();
}

void best_items(const Checkpoint& c, const ItemVisitor& visit) {
  if (!c.best_validation) return;  // asked of every checkpoint (the writer's size bound)
  const BestValidation& b = *c.best_validation;
  const Section s = Section::best_validation;
  visit(row_of(s, "metric"), "", b.metric);
  visit(row_of(s, "value"), "", b.value);
  visit(row_of(s, "step"), "", b.step);
  visit(row_of(s, "evaluations_since"), "", b.evaluations_since);
}

std::string best_take(Checkpoint& c, size_t row, const std::string&, const ItemValue& value) {
  BestValidation& b = c.best_validation ? *c.best_validation : c.best_validation.emplace();
  const Section s = Section::best_validation;
  if (row == row_of(s, "metric")) {
    b.metric = std::get<std::string>(value);
    return b.metric.empty() ? "is empty, not a metric's name" : "";
  }
  if (row == row_of(s, "value")) {
    b.value = std::get<double>(value);
    return std::isfinite(b.value) ? "" : "is not finite";
  }
  const int64_t count = std::get<int64_t>(value);
  (row == row_of(s, "step") ? b.step : b.evaluations_since) = count;
  return count >= 0 ? "" : "is negative";
}

const ItemSection kItemSections[] = {
    {Section::rng, rng_held, rng_items, rng_take},
    {Section::best_validation, best_held, best_items, best_take},
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
