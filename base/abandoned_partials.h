#pragma once
// What writers that were killed outright (SIGKILL, the OOM killer, a power loss) leave: their
// temporary files ".NAME.partial-PID-XXXXXX" (base/atomic_file.h, prepare's files), which
// are nobody's and which the next writer removes. Defined in atomic_file.cpp, beside the rule
// that removes them next to a file output.
#include <string>

namespace base {

// Whether path is a temporary file that a writer which is gone left behind
// (".NAME.partial-PID-XXXXXX" of a dead PID, a regular file of this user that no process
// holds locked): nothing anyone had, removed by the next writer (io/output_rule.h counts a
// folder holding only such files as empty).
bool is_abandoned_partial(const std::string& path);
// Removes what is_abandoned_partial finds among folder's files; best effort, never an error.
void remove_abandoned_partials_in(const std::string& folder) noexcept;

}  // namespace base
