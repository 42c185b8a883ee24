#pragma once
// A setting that takes one of a few names (a run's precision, its reduction, a tokenizer's
// kind) held as an enum: one table of names per enum type, read once where text comes in
// (the command line, config files, a checkpoint's config JSON) and written back where text
// goes out, so that code past that edge compares values, never names.
//
//   template <> struct base::ChoiceNames<Fruit> {
//     static constexpr const char* key = "fruit";
//     static constexpr std::array<std::pair<Fruit, const char*>, 2> rows = {
//         {{Fruit::apple, "apple"}, {Fruit::pear, "pear"}}};
//   };
//   Fruit f = base::parse_choice<Fruit>("pear");     // std::invalid_argument otherwise
//   fmt::format("{}", f);                              // "pear"
#include <fmt/format.h>

#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace base {

template <typename E>
struct ChoiceNames;  // specialised per enum: key and rows, as above

template <typename E>
concept Choice = requires {
  ChoiceNames<E>::key;
  ChoiceNames<E>::rows;
};

template <Choice E>
const char* choice_name(E value) {
  for (const auto& [v, name] : ChoiceNames<E>::rows)
    if (v == value) return name;
  return "?";  // not a row: a value no parse made
}

template <Choice E>
std::vector<std::string> choice_names() {
  std::vector<std::string> names;
  for (const auto& row : ChoiceNames<E>::rows) names.emplace_back(row.second);
  return names;
}

template <Choice E>
std::optional<E> find_choice(std::string_view text) {
  for (const auto& [v, name] : ChoiceNames<E>::rows)
    if (text == name) return v;
  return std::nullopt;
}

// "'a', 'b' or 'c'"
std::string quoted_alternatives(const std::vector<std::string>& names);
// "{key} must be 'a', 'b' or 'c', got '{text}'" (text cut at 64 bytes, escaped)
std::string choice_error(const char* key, const std::vector<std::string>& names,
                         std::string_view text);

template <Choice E>
E parse_choice(std::string_view text) {
  if (const std::optional<E> v = find_choice<E>(text)) return *v;
  throw std::invalid_argument(choice_error(ChoiceNames<E>::key, choice_names<E>(), text));
}

}  // namespace base

// A choice formats as its name: fmt::format("{}", ag::Precision::bf16) is "bf16".
template <base::Choice E>
struct fmt::formatter<E> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(E value, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(base::choice_name(value), ctx);
  }
};
