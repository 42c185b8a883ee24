#pragma once
// Internal to data/: what tokenizer_from_byte_level refuses and where, so that the readers of
// GPT-2's files can name the file and line instead of the token id or merge index.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace data::detail {

struct ByteLevelError : std::invalid_argument {
  enum class Part { token, merge, whole };
  ByteLevelError(Part part, size_t index, const std::string& why);
  Part part;
  size_t index;     // the token id or the merge's rank
  std::string why;  // what() without "token N: " or "merge N: "
};

// A token from a file for messages: quoted, printable, its first 60 bytes.
std::string quoted_token(std::string_view token);

}  // namespace data::detail
