#include "io/root_attributes.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "io/checkpoint_reader.h"

namespace io::detail {

size_t root_row(std::string_view name) {
  for (size_t row = 0; row < kRootAttributes.size(); ++row)
    if (kRootAttributes[row].name == name) return row;
  throw std::invalid_argument(fmt::format("no root attribute '{}'", name));
}

int64_t integer_in(const RootAttribute& a, const Checkpoint& c) {
  if (const auto* field = std::get_if<int64_t Checkpoint::*>(&a.value)) return c.**field;
  return std::get<int64_t>(a.value);
}

std::string text_in(const RootAttribute& a, const Checkpoint& c) {
  if (const auto* field = std::get_if<std::string Checkpoint::*>(&a.value)) return c.**field;
  if (const auto* json = std::get_if<nlohmann::json Checkpoint::*>(&a.value))
    return (c.**json).dump();
  return std::get<const char*>(a.value);
}

std::string missing_root_attribute(size_t row, const std::string& source) {
  return fmt::format("'{}' is an HDF5 file but not an attograd checkpoint (no root attribute '{}')",
                     source, kRootAttributes[row].name);
}

namespace {

template <typename T>
std::string not_this_attograds(const RootAttribute& a, const T& value, const T& expected,
                               const std::string& source) {
  return fmt::format(
      "'{}' is not a checkpoint this attograd reads (root attribute {} {}; it reads {})", source,
      a.name, value, expected);
}

}  // namespace

std::string root_integer_problem(size_t row, int64_t value, const Checkpoint& so_far,
                                 const std::string& source) {
  const RootAttribute& a = kRootAttributes[row];
  if (const auto* fixed = std::get_if<int64_t>(&a.value))
    return value == *fixed ? "" : not_this_attograds(a, value, *fixed, source);
  int64_t least = a.limits.at_least;
  std::string bound = fmt::format("{}", least);
  if (a.limits.at_least_of) {
    const RootAttribute& of = kRootAttributes[root_row(a.limits.at_least_of)];
    least = std::max(least, so_far.*std::get<int64_t Checkpoint::*>(of.value));
    bound = fmt::format("{} {}", of.name, least);
  }
  if (value >= least) return "";
  return fmt::format("'{}': root attribute {} {} is less than {}{}", source, a.name, value, bound,
                     a.limits.why ? fmt::format(" ({})", a.limits.why) : "");
}

std::string root_text_problem(size_t row, const std::string& value, const std::string& source) {
  const RootAttribute& a = kRootAttributes[row];
  if (value.size() > a.limits.max_bytes)
    return fmt::format("'{}': root attribute '{}' holds {} bytes, more than the {} allowed", source,
                       a.name, value.size(), a.limits.max_bytes);
  const auto* fixed = std::get_if<const char*>(&a.value);
  if (!fixed || value == *fixed) return "";
  return not_this_attograds(a, fmt::format("'{}'", printable(value.substr(0, 200))),
                            fmt::format("'{}'", *fixed), source);
}

}  // namespace io::detail
