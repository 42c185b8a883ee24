#pragma once
// The training loop and what surrounds it: data loading, evaluation with the spec's
// windows, checkpoints with every piece of state needed to resume exactly, signals.
#include <memory>
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
};

// Reads cfg.data (or builds the built-in corpus) and tokenizes it; with a checkpoint's
// tokenizer section the same vocabulary is reused, otherwise it is built from the text.
RunData load_run_data(const RunConfig& cfg, const io::TokenizerSection* saved = nullptr);
std::unique_ptr<data::Tokenizer> make_tokenizer(const io::TokenizerSection& section);
io::TokenizerSection tokenizer_section(const data::Tokenizer& tok);

// The spec's evaluation loss: windows at 0, T, 2T, ... with T+1 ids, mean cross-entropy
// over every target, dropout off. max_windows 0 means all. Returns {loss, tokens}.
std::pair<double, int64_t> evaluate(nn::GPT& model, const std::vector<int64_t>& ids,
                                    int64_t max_windows = 0, int64_t batch = 16);

struct EvalResult {
  double loss = 0;
  int64_t tokens = 0, windows = 0;
};
// The same loss with windows of T tokens (0: the model's context_length); with
// grads_path, d loss / d parameter for every parameter is written there as an HDF5 file
// whose /model/<name> datasets hold the gradients, named as the checkpoint's weights.
EvalResult evaluate_with_grads(nn::GPT& model, const std::vector<int64_t>& ids, int64_t T,
                               const std::string* grads_path);

// Trains from scratch (resume_path empty) or continues a checkpoint. Returns the exit code.
int run_training(RunConfig cfg, const std::string& resume_path);

// Builds a GPT from a checkpoint's config and loads its weights (float32).
std::unique_ptr<nn::GPT> model_from_checkpoint(const io::Checkpoint& ckpt);

}  // namespace train
