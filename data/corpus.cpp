#include "data/corpus.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

#include "autograd/generator.h"

namespace data {

namespace {

constexpr std::array<const char*, 8> kNames = {"alice", "bruno", "chloe", "dmitri",
                                               "elena", "farid", "greta", "hugo"};
constexpr std::array<const char*, 8> kAdjectives = {"red", "blue", "green", "small",
                                                    "big", "old",  "new",   "odd"};
constexpr std::array<const char*, 8> kNouns = {"cat", "dog", "fox", "owl",
                                               "box", "cup", "map", "hat"};
constexpr std::array<const char*, 4> kVerbs = {"likes", "sees", "finds", "loses"};
constexpr std::array<const char*, 8> kWords = {"sun",  "moon", "star", "rain",
                                               "wind", "snow", "sky",  "sea"};

// Draws uniformly among n options and adds ln n to the running entropy.
struct Chooser {
  ag::Generator gen;
  double entropy = 0;
  size_t pick(size_t n) {
    entropy += std::log(static_cast<double>(n));
    return static_cast<size_t>(gen.next_u64() % n);
  }
  template <typename List>
  const char* pick_from(const List& list) {
    return list[pick(list.size())];
  }
};

}  // namespace

Corpus builtin_corpus(uint64_t seed, size_t min_chars) {
  Chooser c{ag::Generator(seed)};
  std::string text;
  text.reserve(min_chars + 64);
  while (text.size() < min_chars) {
    switch (c.pick(3)) {
      case 0: {
        const char* name = c.pick_from(kNames);
        const char* adjective = c.pick_from(kAdjectives);
        const char* noun = c.pick_from(kNouns);
        const char* verb = c.pick_from(kVerbs);
        text += fmt::format("{} has the {} {}. {} {} the {}.\n", name, adjective, noun, name, verb,
                            noun);
        break;
      }
      case 1: {
        std::string letters;
        for (int i = 0; i < 5; ++i) letters += static_cast<char>('a' + c.pick(26));
        text += fmt::format("code {} is {}.\n", letters, letters);
        break;
      }
      default: {
        const size_t count = 1 + c.pick(4);
        std::string words;
        for (size_t i = 0; i < count; ++i) {
          if (i > 0) words += ' ';
          words += c.pick_from(kWords);
        }
        text += "(" + words + ")\n";
        break;
      }
    }
  }
  Corpus corpus;
  corpus.ideal_loss = c.entropy / static_cast<double>(text.size());
  corpus.text = std::move(text);
  corpus.description = fmt::format(
      "built-in corpus: stories with repeated names and nouns, copied codes and bracketed "
      "lists (seed {}, {} characters, ideal loss {:.4f} nats/char)",
      seed, corpus.text.size(), corpus.ideal_loss);
  return corpus;
}

}  // namespace data
