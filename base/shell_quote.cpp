#include "base/shell_quote.h"

#include <string_view>

namespace base {

std::string shell_quote(const std::string& word) {
  auto plain = [](unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_-./:=@%+,").find(static_cast<char>(c)) != std::string_view::npos;
  };
  bool bare = !word.empty();
  for (unsigned char c : word) bare = bare && plain(c);
  if (bare) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace base
