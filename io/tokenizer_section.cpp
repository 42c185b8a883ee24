#include "io/tokenizer_section.h"

#include <fmt/format.h>

#include "data/bpe.h"

namespace io {

std::unique_ptr<data::Tokenizer> make_tokenizer(const TokenizerSection& section) {
  if (section.type == "char") return std::make_unique<data::CharTokenizer>(section.vocab);
  if (section.type == "byte") return std::make_unique<data::ByteTokenizer>();
  if (section.type == "bpe")
    return std::make_unique<data::BpeTokenizer>(section.merges, section.split_pattern);
  throw std::runtime_error(fmt::format("unsupported tokenizer type '{}'", section.type));
}

TokenizerSection tokenizer_section(const data::Tokenizer& tok) {
  TokenizerSection s;
  s.type = tok.type();
  if (auto* ct = dynamic_cast<const data::CharTokenizer*>(&tok)) s.vocab = ct->code_points();
  if (auto* bt = dynamic_cast<const data::BpeTokenizer*>(&tok)) {
    s.merges = bt->merges();
    s.split_pattern = bt->split_pattern();
  }
  return s;
}

}  // namespace io
