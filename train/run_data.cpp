#include "train/run_data.h"

#include <fmt/format.h>

#include "base/utf8.h"
#include "io/files.h"
#include "io/tokenizer_section.h"
#include "train/memory_plan.h"
#include "train/task.h"

namespace train {

int64_t RunData::memory_bytes() const {
  size_t bytes = train.memory_bytes() + val.memory_bytes() + token_bytes.size() * sizeof(uint32_t);
  if (examples)
    for (const auto* split : {&examples->train, &examples->val})
      for (const data::Example& e : *split)
        bytes += sizeof e + (e.ids.size() + e.targets.size()) * sizeof(int64_t);
  return static_cast<int64_t>(bytes);
}

int64_t data_bytes_of(const RunConfig& cfg) {
  if (cfg.data.empty())
    return data_bytes_for_text(
        static_cast<int64_t>(data::builtin_corpus(cfg.corpus_seed).text.size()), cfg.tokenizer);
  if (data::is_prepared_folder(cfg.data)) return 0;  // counted once open: a few MB at most
  return data_bytes_for_text(base::regular_file_size(cfg.data, "data file"), cfg.tokenizer);
}

namespace {

// A folder is only used with the tokenizer it was prepared with: its ids mean nothing
// under another vocabulary.
void check_same_tokenizer(const data::Tokenizer& folder_tok, const io::TokenizerSection& saved,
                          const std::string& dir) {
  const auto ckpt_tok = io::make_tokenizer(saved);
  if (data::tokenizer_file_bytes(*ckpt_tok) == data::tokenizer_file_bytes(folder_tok)) return;
  throw std::invalid_argument(fmt::format(
      "'{}' was prepared with a {} tokenizer of {} ids, not the checkpoint's {} tokenizer of {} "
      "ids; prepare the text again with the checkpoint's tokenizer or train a new model",
      base::printable(dir), folder_tok.type(), folder_tok.vocab_size(), ckpt_tok->type(),
      ckpt_tok->vocab_size()));
}

RunData open_folder(const RunConfig& cfg, const io::TokenizerSection* saved,
                    const std::function<void(const std::string&)>& check_identity) {
  data::PreparedData p = data::open_prepared(cfg.data);
  if (check_identity) check_identity(p.identity);
  if (saved) check_same_tokenizer(*p.tokenizer, *saved, cfg.data);
  RunData d;
  d.prepared = true;
  d.source =
      fmt::format("{} (prepared, {} tokenizer, {:.1f} MB of text)", base::printable(cfg.data),
                  p.tokenizer->type(), static_cast<double>(p.meta->total_bytes) / 1e6);
  d.identity = std::move(p.identity);
  d.tokenizer = std::move(p.tokenizer);
  d.train = std::move(p.train);
  d.val = std::move(p.val);
  return d;
}

std::string read_text(const RunConfig& cfg, RunData& d) {
  if (!cfg.data.empty()) {
    std::string text = base::read_input_file(cfg.data, "data file");
    d.source = fmt::format("{} ({} bytes)", base::printable(cfg.data), text.size());
    return text;
  }
  data::Corpus corpus = data::builtin_corpus(cfg.corpus_seed);
  d.ideal_loss = corpus.ideal_loss;
  d.source =
      fmt::format("built-in corpus (seed {}, {} chars)", cfg.corpus_seed, corpus.text.size());
  return std::move(corpus.text);
}

RunData tokenize_text(const RunConfig& cfg, const io::TokenizerSection* saved,
                      const std::function<void(const std::string&)>& check_identity) {
  RunData d;
  std::string text = read_text(cfg, d);
  const std::string identity = data::text_identity(text);
  if (check_identity) check_identity(identity);  // before the text meets the tokenizer
  const std::string name = cfg.data.empty() ? "corpus" : base::printable(cfg.data);
  const int64_t bpe_vocab = cfg.tokenizer == data::TokenizerKind::bpe ? cfg.model.vocab_size : 0;
  if (!saved &&
      (cfg.tokenizer == data::TokenizerKind::gpt2 || cfg.tokenizer == data::TokenizerKind::hf))
    throw std::invalid_argument(fmt::format(
        "tokenizer {} is read from a model's files, not learned from the text: start "
        "from a checkpoint that holds it (--init-from, e.g. one made by 'attograd import'), or "
        "prepare the text with it ('attograd prepare --tokenizer-from DIR') and train on that "
        "folder",
        cfg.tokenizer));
  if (!saved && cfg.tokenizer == data::TokenizerKind::bpe && bpe_vocab == 0)
    throw std::invalid_argument(
        "tokenizer bpe needs vocab_size (--vocab-size): the number of tokens to learn, 256 for "
        "the bytes, <|endoftext|> and the rest merges");
  data::PreparedData p =
      saved ? data::prepare_text(text, io::make_tokenizer(*saved), cfg.val_fraction, name)
            : data::prepare_text(text, cfg.tokenizer, bpe_vocab, cfg.val_fraction, name);
  d.identity = identity;
  d.tokenizer = std::move(p.tokenizer);
  d.train = std::move(p.train);
  d.val = std::move(p.val);
  d.reading_bytes = text_reading_bytes(
      static_cast<int64_t>(text.size()), static_cast<int64_t>(d.train.size() + d.val.size()),
      static_cast<int64_t>(data::dtype_bytes(d.train.dtype())), d.tokenizer->kind());
  return d;
}

}  // namespace

data::TaskOptions task_options(const RunConfig& cfg, const data::Tokenizer& tokenizer) {
  data::TaskOptions o;
  o.context_length = cfg.model.context_length;
  o.truncate = !cfg.no_truncate;
  o.labels = cfg.labels;
  o.prompt_template = cfg.prompt_template;
  o.end_of_text = data::end_of_text_id(tokenizer);
  o.chat_format = cfg.chat_format.value_or(data::ChatFormat::chatml);
  return o;
}

RunData load_text_data(const RunConfig& cfg, const io::TokenizerSection* saved,
                       const std::function<void(const std::string&)>& check_identity) {
  return !cfg.data.empty() && data::is_prepared_folder(cfg.data)
             ? open_folder(cfg, saved, check_identity)
             : tokenize_text(cfg, saved, check_identity);
}

RunData load_run_data(const RunConfig& cfg, const io::TokenizerSection* saved,
                      const std::function<void(const std::string&)>& check_identity) {
  return cfg.task->load_data(cfg, saved, check_identity);
}

}  // namespace train
