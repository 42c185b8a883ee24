#pragma once
// A word for a POSIX shell, so that a command printed for a person to paste (`resume
// --checkpoint 'my run.h5'`) runs as printed whatever the path holds.
#include <string>

namespace base {

// Bare when it holds only characters no shell treats specially, else in single quotes
// (a quote inside as '\'').
std::string shell_quote(const std::string& word);

}  // namespace base
