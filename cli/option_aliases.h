#pragma once
// Other tools' names for attograd's options, as data: nanoGPT's (train.py, sample.py),
// Hugging Face's (Trainer's TrainingArguments, PEFT's LoraConfig, a model's config.json)
// and llama.cpp's (llama-cli, llama-perplexity, finetune). An unrecognised option someone
// typed from habit is answered with attograd's name ("--max_iters: did you mean
// --steps?"); nothing is accepted under another name, so a command line means one thing.
#include <string>
#include <vector>

namespace cli {

struct OptionAlias {
  const char* name;    // as the other tool spells it (compared with '_' and '-' alike)
  const char* option;  // attograd's option, without its dashes
  const char* whose;   // whose name it is, for the message
};

// Every alias, in the order tried: a name listed twice is suggested as the first of its
// options the command has (num_train_epochs: --epochs, else --steps).
const std::vector<OptionAlias>& option_aliases();

// What an unrecognised option (`given`, as typed, dashes and all) is closest to among a
// command's `options`: another tool's name for one of them (option_aliases), the same name
// with '-' for '_', or a near miss (closest_name). " (did you mean '--steps'? max_iters is
// nanoGPT's name)", or "" when none is close.
std::string option_suggestion(const std::string& given, const std::vector<std::string>& options);

}  // namespace cli
