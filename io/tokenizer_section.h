#pragma once
// A tokenizer as a checkpoint's /tokenizer group holds it, and back.
//
//   io::Checkpoint ckpt = io::load_checkpoint("run.h5");
//   auto tok = io::make_tokenizer(ckpt.tokenizer);   // the run's own vocabulary
//   ckpt.tokenizer = io::tokenizer_section(*tok);
#include <memory>

#include "data/tokenizer.h"
#include "io/checkpoint.h"

namespace io {

// The tokenizer a section describes; an unknown type is an error naming it, and so are bpe
// merges or a pattern that BpeTokenizer refuses (std::invalid_argument; a loaded checkpoint
// was checked on load).
std::unique_ptr<data::Tokenizer> make_tokenizer(const TokenizerSection& section);
TokenizerSection tokenizer_section(const data::Tokenizer& tok);

}  // namespace io
