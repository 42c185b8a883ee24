// Writes the files other tools read for a tokenizer (data/gpt2_tokenizer.h), for
// reference.hf_tokenizer_json: tokenizer.json always, vocab.json + merges.txt for the
// byte-level ones.
//
//   attograd_tokenizer_files TOKENIZER OUT_DIR   # TOKENIZER as `encode --tokenizer` takes it
#include <fmt/format.h>

#include <exception>
#include <filesystem>

#include "base/atomic_file.h"
#include "cli/command_support.h"
#include "data/gpt2_tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    fmt::print(stderr, "usage: {} TOKENIZER OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    const auto tok = cli::load_tokenizer(argv[1], "TOKENIZER");
    const std::string out = argv[2];
    std::filesystem::create_directories(out);
    base::write_file_atomically(out + "/tokenizer.json", data::hf_tokenizer_json(*tok));
    if (tok->type() != "char" && tok->type() != "hf") data::write_gpt2_tokenizer_files(*tok, out);
    fmt::print("{} tokenizer of {} ids\n", tok->type(), tok->vocab_size());
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
  return 0;
}
