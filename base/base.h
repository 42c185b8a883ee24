#pragma once
// What data/, io/, train/, report/ and cli/ share, the map of base/: one implementation
// each of the things every reader of hostile input needs, so that a bound or a check is
// written once. It depends on nothing of attograd (autograd does not use it).
//   utf8.h   the UTF-8 decoder: decoding, validating, messages naming the offset,
//            printable() for text from elsewhere on a terminal
//   json.h   the JSON reader: one depth limit, no key twice, strings bounded on request
#include "base/json.h"
#include "base/utf8.h"
