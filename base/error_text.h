#pragma once
// One "error:" per error line: a message as it follows "attograd <command>: error: ", with
// the "error: " a library put at its start removed (std::filesystem's "filesystem error:
// cannot ...", a wrapped "Error: ..."), so that no line says error twice.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace base {

inline std::string without_error_prefix(std::string_view message) {
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (std::string_view prefix : {"filesystem error: ", "error: "}) {
      const bool match =
          message.size() >= prefix.size() &&
          std::equal(prefix.begin(), prefix.end(), message.begin(), [](char a, char b) {
            return a == std::tolower(static_cast<unsigned char>(b));
          });
      if (match) message.remove_prefix(prefix.size()), stripped = true;
    }
  }
  return std::string(message);
}

}  // namespace base
