#include "train/run_data.h"

#include <fmt/format.h>

#include <limits>

#include "io/files.h"
#include "io/tokenizer_section.h"

namespace train {

int64_t text_bytes_of(const RunConfig& cfg) {
  if (cfg.data.empty())
    return static_cast<int64_t>(data::builtin_corpus(cfg.corpus_seed).text.size());
  return io::regular_file_size(cfg.data, "data file");
}

namespace {

std::string read_text(const RunConfig& cfg, RunData& d) {
  if (!cfg.data.empty()) {
    std::string text =
        io::read_input_file(cfg.data, "data file", std::numeric_limits<int64_t>::max());
    d.source = fmt::format("{} ({} bytes)", cfg.data, text.size());
    return text;
  }
  data::Corpus corpus = data::builtin_corpus(cfg.corpus_seed);
  d.ideal_loss = corpus.ideal_loss;
  d.source =
      fmt::format("built-in corpus (seed {}, {} chars)", cfg.corpus_seed, corpus.text.size());
  return std::move(corpus.text);
}

std::unique_ptr<data::Tokenizer> choose_tokenizer(const RunConfig& cfg,
                                                  const io::TokenizerSection* saved,
                                                  const std::string& text) {
  if (saved) return io::make_tokenizer(*saved);
  if (cfg.tokenizer == "byte") return std::make_unique<data::ByteTokenizer>();
  return std::make_unique<data::CharTokenizer>(data::CharTokenizer::from_text(text));
}

}  // namespace

RunData load_run_data(const RunConfig& cfg, const io::TokenizerSection* saved,
                      const std::function<void(const std::string&)>& check_identity) {
  RunData d;
  std::string text = read_text(cfg, d);
  d.identity = data::text_identity(text);
  if (check_identity) check_identity(d.identity);  // before the text meets the tokenizer
  d.text_bytes = static_cast<int64_t>(text.size());
  std::vector<int64_t> ids;
  try {  // text problems (bad UTF-8, unknown characters) name the file
    d.tokenizer = choose_tokenizer(cfg, saved, text);
    ids = d.tokenizer->encode(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(
        fmt::format("{}: {}", cfg.data.empty() ? "corpus" : cfg.data, e.what()));
  }
  std::string().swap(text);  // the ids replace the text
  data::Split split = data::split_tokens(std::move(ids), cfg.val_fraction);
  d.train = std::move(split.train);
  d.val = std::move(split.val);
  return d;
}

}  // namespace train
