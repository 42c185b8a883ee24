// libFuzzer target: any bytes as text for the tokenizers. Valid UTF-8 must round-trip
// through a char tokenizer built from it; every byte string must round-trip through the
// byte tokenizer; anything else must be a clean std::invalid_argument.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "data/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  data::ByteTokenizer bytes;
  if (bytes.decode(bytes.encode(text)) != text) std::abort();
  try {
    auto tok = data::CharTokenizer::from_text(text);
    if (tok.decode(tok.encode(text)) != text) std::abort();
    // a vocabulary from the first half, asked to encode the whole: unknown characters
    // must be named, and with a replacement everything must encode
    auto half = data::CharTokenizer::from_text(text.substr(0, data::utf8_decode(text).empty() ? 0 : text.size() / 2));
    try {
      half.encode(text);
    } catch (const std::invalid_argument&) {
    }
    if (half.vocab_size() > 0) {
      half.set_replacement(half.code_points().front());
      if (half.encode(text).size() != data::utf8_decode(text).size()) std::abort();
    }
  } catch (const std::invalid_argument&) {  // invalid UTF-8, named by offset
  }
  return 0;
}
