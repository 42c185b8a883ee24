#pragma once
// What a run trained on, as a name that survives moving or renaming the file: a checkpoint
// stores it (root attribute `data_identity`), and `resume` compares it with the text it is
// given, so a run never continues on other data by mistake.
#include <string>
#include <string_view>

namespace data {

// "sha256:" followed by the 64 hex digits of SHA-256 over the bytes.
std::string text_identity(std::string_view bytes);

}  // namespace data
