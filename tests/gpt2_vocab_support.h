#pragma once
// A GPT-2-style vocabulary in miniature, shared by the tests of GPT-2's tokenizer files and
// of Hugging Face's tokenizer.json: the 256 byte tokens in GPT-2's order, three merges,
// then <|endoftext|>: "Ġt" = 256, "he" = 257, "Ġthe" = 258, <|endoftext|> = 259.
#include <string>

#include "data/gpt2_tokenizer.h"

namespace ag_test {

inline data::ByteLevelVocab small_gpt2_vocab() {
  data::ByteLevelVocab v;
  for (const uint8_t b : data::Gpt2Tokenizer::gpt2_byte_order())
    v.tokens.push_back(data::byte_level_text(std::string(1, static_cast<char>(b))));
  v.merges = {{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}};
  for (const auto& [left, right] : v.merges) v.tokens.push_back(left + right);
  v.tokens.push_back("<|endoftext|>");
  v.split_pattern = std::string(data::kGpt2SplitPattern);
  v.end_of_text = 259;
  return v;
}

}  // namespace ag_test
