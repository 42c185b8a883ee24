#pragma once
// `sample --chat`: replies of a chat model (train --task chat, or an import whose
// tokenizer_config.json names a chat template), in the checkpoint's chat format
// (data/chat_format.h). Only the replies are printed; each ends at the format's end of
// turn, at any other of its special tokens, or at a stop id of the checkpoint (an import's
// generation_config.json eos_token_id list).
//   --chat MESSAGE   one user turn (after --system's, if any), one reply
//   --chat alone     a conversation: user lines read from standard input (a "> " prompt on
//                    a terminal), each answered; the oldest turns are dropped when the
//                    conversation outgrows the context (said once)
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/chat_format.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "nn/generation.h"

namespace cli {

struct ChatRequest {
  std::optional<std::string> message;      // nullopt: a conversation read from standard input
  std::string system;                      // --system: the system turn first, when not empty
  std::optional<data::ChatFormat> format;  // --chat-format: instead of the checkpoint's
};

// How the checkpoint's model chats: the format named, else the checkpoint's; a model that
// has none is a UsageError saying how to name one.
struct ChatModel {
  data::ChatFormat format = data::ChatFormat::chatml;
  std::vector<int64_t> stop_ids;
};
ChatModel chat_model_of(const io::Checkpoint& ckpt, const std::optional<data::ChatFormat>& named);

// Runs the request (printing the replies to standard output); the statistics of the last
// reply's generation. A message the format or the tokenizer cannot take is a UsageError
// naming its option (one-shot) or said on standard error and skipped (a conversation).
nn::GenerationStats run_chat(const nn::GPT& model, const data::Tokenizer& tokenizer,
                             const ChatModel& chat, const ChatRequest& request,
                             const nn::GenerationOptions& generation,
                             const std::vector<std::string>& stops);

}  // namespace cli
