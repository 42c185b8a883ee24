#pragma once
// The training loop and what surrounds it: data loading, evaluation with the spec's
// windows, checkpoints with every piece of state needed to resume exactly, signals.
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/data.h"
#include "io/checkpoint.h"
#include "nn/gpt.h"
#include "train/config.h"

namespace train {

// Token ids of a run, split as the spec says, with the tokenizer that made them.
struct RunData {
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::vector<int64_t> train, val;
  double ideal_loss = -1;  // known for the built-in corpus, else negative
  std::string source;      // the file, or a description of the built-in corpus
  std::string identity;    // data::text_identity of the text
  int64_t text_bytes = 0;
};

// The size of the text a run will read, before reading it (for the memory plan).
int64_t text_bytes_of(const RunConfig& cfg);

// Reads cfg.data (or builds the built-in corpus) and tokenizes it; with a checkpoint's
// tokenizer section the same vocabulary is reused, otherwise it is built from the text.
// check_identity sees the text's identity before it is tokenized (and may throw).
RunData load_run_data(const RunConfig& cfg, const io::TokenizerSection* saved = nullptr,
                      const std::function<void(const std::string&)>& check_identity = {});
std::unique_ptr<data::Tokenizer> make_tokenizer(const io::TokenizerSection& section);
io::TokenizerSection tokenizer_section(const data::Tokenizer& tok);

// The spec's evaluation loss: windows at 0, T, 2T, ... with T+1 ids, mean cross-entropy
// over every target, dropout off. max_windows 0 means all. Returns {loss, tokens}.
// cancelled, asked between batches, abandons the evaluation ({NaN, 0}).
std::pair<double, int64_t> evaluate(nn::GPT& model, std::span<const int64_t> ids,
                                    int64_t max_windows = 0,
                                    const std::function<bool()>& cancelled = {});

struct EvalResult {
  double loss = 0;
  int64_t tokens = 0, windows = 0;
};
// The same loss with windows of T tokens (0: the model's context_length); with
// grads_path, d loss / d parameter for every parameter is written there as an HDF5 file
// whose /model/<name> datasets hold the gradients, named as the checkpoint's weights.
EvalResult evaluate_with_grads(nn::GPT& model, std::span<const int64_t> ids, int64_t T,
                               const std::string* grads_path,
                               const std::function<bool()>& cancelled = {});

// Trains from scratch (resumed null) or continues a loaded checkpoint. Returns the exit
// code. SIGINT, SIGTERM, SIGHUP and SIGPIPE end the run after its step, saved.
int run_training(RunConfig cfg, const io::Checkpoint* resumed = nullptr);

// Builds a GPT from a checkpoint's config and loads its weights (float32). The config's
// shapes are checked against the datasets before anything is allocated.
std::unique_ptr<nn::GPT> model_from_checkpoint(const io::Checkpoint& ckpt);

// Throws a CheckpointError "'<file>' <mismatch>: ..." naming the first parameter of the
// model described by model_cfg that the checkpoint lacks or holds in another shape, or the
// first dataset the model has no place for. Costs nothing: no model is built.
void check_weights_fit(const io::Checkpoint& ckpt, const nn::GPTConfig& model_cfg,
                       const std::string& mismatch = "does not fit the model");

}  // namespace train
