#pragma once
// The evaluation loss: the mean cross-entropy over the targets a rule of windows counts
// (data/scoring_windows.h: during training, the full windows at 0, T, 2T, ...; `eval` also
// the last partial one, or sliding windows with a stride), dropout off, no graph recorded;
// and the same loss in bits per byte of the text the counted targets stand for, which
// compares across tokenizers. The ids are read from their stores a batch of windows at a
// time, or from a text file a chunk at a time (evaluate_text), so any length evaluates in
// bounded memory.
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "data/scoring_windows.h"
#include "data/text_ids.h"
#include "data/token_store.h"
#include "nn/gpt.h"

namespace train {

struct EvalResult {
  double loss = 0;                  // nats per counted target token (mean)
  int64_t tokens = 0, windows = 0;  // targets counted, windows scored
  int64_t bytes = 0;                // bytes of text the counted targets encode (0 when not counted)
  int64_t ids = 0;                  // evaluate_text: the ids the text holds
  // total nats / bytes / ln 2
  double bits_per_byte() const {
    return bytes > 0 ? loss * static_cast<double>(tokens) / static_cast<double>(bytes) / M_LN2
                     : NAN;
  }
};

// token_bytes[id]: the bytes of text id stands for (data::token_byte_lengths); empty: bytes
// not counted. max_windows 0 means all. cancelled, asked between batches, abandons the
// evaluation (an EvalResult with no tokens). Ids that cannot be read (damaged data: an id
// outside the vocabulary, a file cut short, a read error) are a data::DataError naming the
// file and the offset, thrown on every rank once the evaluation's gathering is done (under
// mpirun the ranks agree on it), so no rank is left waiting for another.
// Windows a forward pass evaluates at most. A training run's evaluation takes no more than
// its batch's sequences (RunConfig::batch_size): a forward of 16 windows beside a LoRA run
// of 4 sequences held more than the run's planned activations.
inline constexpr int64_t kEvalWindowsPerForward = 16;
// evaluate: the evaluation during training, the full windows of the model's context.
EvalResult evaluate(nn::GPT& model, const data::TokenStore& ids,
                    std::span<const uint32_t> token_bytes, int64_t max_windows = 0,
                    const std::function<bool()>& cancelled = {},
                    int64_t windows_per_forward = kEvalWindowsPerForward);

// The loss over `rule`'s windows (data/scoring_windows.h) of the ids of `parts` one after
// the other, at most max_windows of them (0: all); with grads_path, d loss / d parameter for
// every parameter is written there as an HDF5 file whose /model/<name> datasets hold the
// gradients, named as the checkpoint's weights.
EvalResult evaluate_stores(nn::GPT& model, std::vector<const data::TokenStore*> parts,
                           std::span<const uint32_t> token_bytes, const data::ScoringWindows& rule,
                           const std::string* grads_path,
                           const std::function<bool()>& cancelled = {}, int64_t max_windows = 0,
                           int64_t windows_per_forward = kEvalWindowsPerForward);

// The same loss on a text file's ids (data::TextIds), read and encoded a chunk at a time
// while the windows are evaluated: memory does not grow with the text. Under mpirun every
// process reads the text and evaluates its share of the batches.
EvalResult evaluate_text(nn::GPT& model, data::TextIds& text, std::span<const uint32_t> token_bytes,
                         const data::ScoringWindows& rule, const std::string* grads_path);

}  // namespace train
