#pragma once
// A model from a checkpoint, with every shape checked before anything is allocated.
#include <memory>
#include <string>

#include "io/checkpoint.h"
#include "nn/gpt.h"

namespace train {

// A gradient dump (io::is_gradient_dump) where a model is needed: a std::invalid_argument
// (a usage error) saying what the file is, rather than whatever its missing parts would
// cause further on.
void refuse_gradient_dump(const io::Checkpoint& ckpt);

// Builds a GPT from a checkpoint's config with its weights (float32), for inference: the
// model shares the checkpoint's tensors (Module::adopt_state_dict), so the two hold one
// copy of the weights (writing to the model's parameters writes to the checkpoint's). The
// config's shapes are checked against the datasets before anything is allocated. LoRA
// adapters are merged into their Linears (the decoder runs plain ones), on a copy of the
// weights: the checkpoint's tensors are left as they are. A gradient dump is refused.
std::unique_ptr<nn::GPT> model_from_checkpoint(const io::Checkpoint& ckpt);

// Folds every LoRA adapter of the model into its Linear (Linear::merge_adapter): the
// decoder runs plain Linears.
void merge_adapters(nn::GPT& model);

// `attograd merge`, `export` and a fine-tuning that changes adapters: the checkpoint with
// its LoRA adapters folded into their Linears (Linear::merge_adapter), lora_* keys at their
// defaults (rank 0), its weights only (no optimiser or RNG state: a new run starts from it
// with --init-from). A checkpoint without adapters comes back as it is, weights only.
io::Checkpoint merged_checkpoint(const io::Checkpoint& ckpt);

// A weight the file holds as blocks (io::Checkpoint::packed) must be one its own config
// freezes (lora_rank, freeze): blocks take no gradient. CheckpointError naming the file and
// the first that is not; check_weights_fit checks it first, export (which builds no model)
// calls it itself.
void refuse_trained_blocks(const io::Checkpoint& ckpt);

// Throws a CheckpointError "'<file>' <mismatch>: ..." naming the first parameter of the
// model described by model_cfg that the checkpoint lacks or holds in another shape, or the
// first dataset the model has no place for. Costs nothing: no model is built.
void check_weights_fit(const io::Checkpoint& ckpt, const nn::GPTConfig& model_cfg,
                       const std::string& mismatch = "does not fit the model");

// train --init-from: the run's head may be another than the checkpoint's (a classifier,
// num_classes > 0, fine-tuned from a language model's checkpoint, or the reverse), and so
// may its LoRA adapters (GPTConfig::same_adapters); then the head starts fresh and the
// adapters with B = 0 (an init holding other adapters is merged first: merged_checkpoint),
// and every other weight comes from the checkpoint.
bool init_head_is_fresh(const io::Checkpoint& init, const nn::GPTConfig& run_model);
// train --init-from for a task that needs ids the init's vocabulary lacks (instruct's
// end-of-text, a chat format's special tokens): the run's vocabulary is larger, and the
// embedding's and an untied head's new rows start as the mean of the init's rows.
bool init_vocab_grows(const io::Checkpoint& init, const nn::GPTConfig& run_model);
// check_weights_fit for an --init-from checkpoint: against the run's model, or, with
// another head, other adapters or a grown vocabulary, against the checkpoint's own model (its
// config checked).
void check_init_fits(const io::Checkpoint& init, const nn::GPTConfig& run_model);
// Loads an --init-from checkpoint (checked by check_init_fits; merged when its adapters
// are not the run's) into the model: every weight, less a fresh head's and fresh adapters',
// with a grown vocabulary's new rows the mean of the init's (init_vocab_grows).
// A parameter that already holds the init's tensor (reread_init_into) is left as it is.
void load_init_weights(const io::Checkpoint& init, nn::GPT& model);
// Whether the init holds LoRA adapters other than the run's (merged_checkpoint folds them).
bool init_holds_other_adapters(const io::Checkpoint& init, const nn::GPTConfig& run_model);
// --init-from's file read again (`first`, read by read_init, decided the run and has let its
// weights go), straight into the model's parameters that take an init's tensor whole (all
// but a fresh head's, fresh adapters' and a growing vocabulary's): the run holds the
// weights once, where a model drawn at random beside the checkpoint's tensors held them
// twice. CheckpointError when the file no longer says what it said or does not fit.
io::Checkpoint reread_init_into(const io::Checkpoint& first, nn::GPT& model);

struct RunConfig;
// train --init-from: the run's model is the checkpoint's. A model key the command line set
// (cfg.model_keys_given) must agree with it, except dropout and the lora_* keys, settings
// of the fine-tuning rather than of the weights (the command line's win; those it leaves
// out are the checkpoint's); a disagreement is a std::invalid_argument naming the option,
// both values and the way on.
// The tokenizer (whose ids the weights were trained on) is the checkpoint's the same way:
// --tokenizer char beside a GPT-2 checkpoint is refused, not ignored.
// The base precision, unless given, is the file's own: a file holding frozen weights as
// blocks (io::Checkpoint::packed) gives its format, and the run keeps those blocks as they
// are; given, the run converts them (dequantized, packed again) as it says.
void take_model_of(const io::Checkpoint& ckpt, RunConfig& cfg);
// The keys take_model_of holds to the checkpoint: every model key (nn::config_fields()),
// the tokenizer and the base precision. The command line records which of them it was given
// (cfg.model_keys_given).
std::vector<std::string> keys_an_init_decides();

}  // namespace train
