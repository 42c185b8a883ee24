#pragma once
// The built-in corpus: text generated from a seed by a small grammar whose every random
// choice is counted, so the best loss any model can reach on it is known exactly.
//
// Lines, each kind chosen uniformly (ln 3):
//   story    "greta has the odd hat. greta finds the hat."   name, adjective, noun (ln 8
//            each) and verb (ln 4) are drawn once; the second sentence repeats the name
//            and the noun from ~25 characters back.
//   copy     "code qxvtr is qxvtr."    five random letters (5 ln 26), then copied.
//   brackets "(sun rain sky)"          1 to 4 words (ln 4 + ln 8 each), then ")".
// Everything else (spaces, "has the", the copies, the closing bracket, newlines) is
// determined by what came before. A bigram model, seeing one character, cannot know
// which name, noun or letters to repeat; attention over the line can, so a transformer
// can approach ideal_loss while a bigram stays far above it.
#include <cstdint>
#include <string>

namespace data {

struct Corpus {
  std::string text;
  double ideal_loss = 0;  // nats per character: total entropy of the choices / characters
  std::string description;
};

Corpus builtin_corpus(uint64_t seed = 0, size_t min_chars = 200000);

}  // namespace data
