#pragma once
// What each fuzz target does with one input, shared by the libFuzzer mains in fuzz/ and
// by tests/test_fuzz_regressions.cpp, which replays every input a fuzzer ever crashed on
// (fuzz/regressions/<target>/) in the ordinary test suite. Expected failures (clean
// exceptions naming the problem) are caught; anything else -- a crash, a sanitizer report,
// an unexpected exception type, a broken round trip (std::abort) -- is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "cli/cli.h"
#include "cli/options.h"
#include "data/data.h"
#include "io/checkpoint.h"
#include "io/tokenizer_section.h"
#include "train/train.h"

namespace fuzz {

// Any bytes as a checkpoint file, taken as far as `sample` would take them. The file is read
// as the program reads it (in a child, whose crashes the fuzzer cannot see), then, unless
// libhdf5 crashed or hung there, parsed again in this process, so the fuzzer sees and is
// guided by the reading code itself; both must come to the same result.
inline void checkpoint(const std::string& bytes) {
  io::Checkpoint ckpt;
  std::string error;
  try {
    ckpt = io::load_checkpoint_image(bytes, "fuzz.h5");
  } catch (const io::CheckpointError& e) {
    error = e.what();
  }
  if (error.find("is damaged: the HDF5 library") != std::string::npos) return;
  try {
    const io::Checkpoint again = io::parse_checkpoint_in_process(bytes, "fuzz.h5");
    if (!error.empty() || again.model.size() != ckpt.model.size() || again.config != ckpt.config)
      std::abort();
  } catch (const io::CheckpointError& e) {
    if (error != e.what()) std::abort();
  }
  if (!error.empty()) return;
  try {
    auto tokenizer = io::make_tokenizer(ckpt.tokenizer);
    if (tokenizer->vocab_size() > 0) tokenizer->decode({0});
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
  }
  try {
    train::RunConfig cfg = train::RunConfig::from_json(ckpt.config);
    if (cfg.model.vocab_size == 0) return;
    cfg.validate();
    // only small models: the loader must be safe, not allocate whatever a file asks for
    if (cfg.model.num_parameters() < (1 << 20)) train::model_from_checkpoint(ckpt);
  } catch (const std::invalid_argument&) {
  } catch (const io::CheckpointError&) {
  }
}

// Any bytes as text: valid UTF-8 round-trips through a char tokenizer built from it, any
// bytes through the byte tokenizer; invalid UTF-8 is a std::invalid_argument.
inline void tokenizer(const std::string& text) {
  data::ByteTokenizer bytes;
  if (bytes.decode(bytes.encode(text)) != text) std::abort();
  try {
    const size_t n_chars = data::utf8_decode(text).size();
    auto tok = data::CharTokenizer::from_text(text);
    if (tok.decode(tok.encode(text)) != text) std::abort();
    // a vocabulary from a prefix: unknown characters are named, or replaced when asked
    auto prefix = data::CharTokenizer::from_text(text.substr(0, text.find('\n')));
    try {
      prefix.encode(text);
    } catch (const std::invalid_argument&) {
    }
    if (prefix.vocab_size() > 0) {
      prefix.set_replacement(prefix.code_points().front());
      if (prefix.encode(text).size() != n_chars) std::abort();
    }
  } catch (const std::invalid_argument&) {
  }
}

// Any bytes as a `--config` file of `attograd train`.
inline void config(const std::string& bytes) {
  const int fd = memfd_create("config", MFD_CLOEXEC);  // a file that lives in memory
  if (fd < 0) return;
  if (write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    close(fd);
    return;
  }
  train::RunConfig cfg;
  try {
    auto desc = cli::run_options(cfg);
    cli::parse_options({"--config", "/proc/self/fd/" + std::to_string(fd)}, desc);
    cfg.validate();
  } catch (const cli::UsageError&) {
  } catch (const std::invalid_argument&) {
  }
  close(fd);
}

}  // namespace fuzz
