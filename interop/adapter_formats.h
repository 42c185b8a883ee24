#pragma once
// The formats a LoRA adapter is exported to and imported from apart from its base (peft.h:
// "peft", a folder; gguf_lora.h: "gguf-lora", one file): one table, as formats.h's for models.
//
//   interop::export_adapter(ckpt, "gguf-lora", "adapter.gguf", interop::StoredType::f32);
//   io::Checkpoint run = interop::import_adapter("adapter/", base);   // found by content
#include <string>
#include <vector>

#include "interop/float_codec.h"
#include "io/checkpoint.h"

namespace interop {

std::vector<std::string> adapter_formats();  // "peft", "gguf-lora"
bool is_adapter_format(const std::string& format);
bool adapter_writes_folder(const std::string& format);

// ckpt's adapters (interop::adapter_of) written in format to out: a folder format's out made in
// a temporary sibling and renamed into place (out must be missing or empty unless `replace`),
// a file replaced whole. InteropError for a checkpoint without adapters or a base the format's
// tool cannot hold.
void export_adapter(const io::Checkpoint& ckpt, const std::string& format, const std::string& out,
                    StoredType dtype, bool replace);

// Whether path holds an adapter of one of the formats (a folder with adapter_config.json, a
// GGUF file of general.type adapter).
bool is_adapter(const std::string& path);

// The adapter at path (its format recognised by content) attached to base (attach_adapter):
// the checkpoint `import --base` writes.
io::Checkpoint import_adapter(const std::string& path, const io::Checkpoint& base);

}  // namespace interop
