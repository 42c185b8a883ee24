#pragma once
// A model's weights as Hugging Face saves them: one model.safetensors, or, past a size,
// shards model-00001-of-0000N.safetensors with model.safetensors.index.json naming each
// tensor's shard ({"metadata": {"total_size": bytes}, "weight_map": {tensor: file}}).
//
//   interop::write_safetensors_model("out/", tensors, StoredType::bf16, parse_shard_size("5GB"));
//
// Shards are cut as huggingface_hub's split_state_dict_into_shards cuts them, so an export
// and transformers' save_pretrained of the same weights make the same files: the tensors in
// the order given, a shard closed when the next tensor would take it past the limit, and a
// tensor larger than the limit alone in a shard of its own. One shard is model.safetensors
// with no index. Each file is streamed as write_safetensors writes it: memory is the
// largest tensor, never a shard.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "interop/safetensors.h"

namespace interop {

// save_pretrained's default limit, 5 GB: a Llama-3.2-1B in float32 (4.9 GB) is one file.
inline constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000;

// "5GB", "500MB", "2GiB", "100KB" or a count of bytes ("1000000") as bytes. KB, MB, GB, TB
// are powers of 1000 in any case, the number a decimal that may have a fraction ("1.5GB"),
// as huggingface_hub's parse_size_to_int reads what save_pretrained is given; KiB, MiB,
// GiB, TiB (powers of 1024, as transformers' older reader took them) are read too. At least
// 1 byte, at most 2^60; anything else is std::invalid_argument naming `option` and the text.
uint64_t parse_shard_size(const std::string& text, const std::string& option);

// The tensors' indices in each shard, in order (at least one shard when there are tensors).
std::vector<std::vector<size_t>> plan_shards(const std::vector<SafetensorsTensor>& tensors,
                                             StoredType dtype, uint64_t max_shard_bytes);

// Writes the weights into the existing folder as planned: model.safetensors, or the shards
// and their index (its keys sorted, two spaces, as transformers writes it). Every shard
// carries metadata.
void write_safetensors_model(const std::string& folder,
                             const std::vector<SafetensorsTensor>& tensors, StoredType dtype,
                             uint64_t max_shard_bytes,
                             const std::map<std::string, std::string>& metadata = {});

}  // namespace interop
