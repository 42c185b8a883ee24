#include "base/choice.h"

#include "base/utf8.h"

namespace base {

std::string quoted_alternatives(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? " or " : ", ";
    text += "'" + names[i] + "'";
  }
  return text;
}

std::string choice_error(const char* key, const std::vector<std::string>& names,
                         std::string_view text) {
  const std::string shown = text.size() > 64 ? "..." : printable(std::string(text));
  return fmt::format("{} must be {}, got '{}'", key, quoted_alternatives(names), shown);
}

}  // namespace base
