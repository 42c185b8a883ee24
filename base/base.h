#pragma once
// What nn/, data/, io/, train/, report/ and cli/ share, the map of base/: one implementation
// each of the things every reader of hostile input needs, so that a bound or a check is
// written once. It depends on nothing of attograd (autograd does not use it).
//   utf8.h   the UTF-8 decoder: decoding, validating, messages naming the offset,
//            printable() for text from elsewhere on a terminal
//   json.h   the JSON reader: one depth limit, no key twice, strings bounded on request
//   posix_file.h  the POSIX file layer: inputs opened only when regular files and read to
//            their end under a size cap, files created exclusively, errno messages (their
//            paths escaped)
//   atomic_file.h  a file replaced whole (temporary file, fsync, rename, fsync the folder)
//   partial_outputs.h  what was begun and not finished, removed even on a fatal signal
//   abandoned_partials.h  what a writer killed outright left: found, and removed
//   hash.h   FNV-1a fingerprints of names and values (32 and 64 bits)
//   error_text.h  one "error:" per line: a library's own prefix dropped from a message
//   choice.h  settings that take one of a few names, as enums: names read once at the edge
//   shell_quote.h  a word quoted for a POSIX shell (commands printed for a person to paste)
#include "base/abandoned_partials.h"
#include "base/atomic_file.h"
#include "base/choice.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/partial_outputs.h"
#include "base/posix_file.h"
#include "base/shell_quote.h"
#include "base/utf8.h"
