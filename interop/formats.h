#pragma once
// The formats `attograd import` and `attograd export` choose from: one table (formats.cpp),
// a row per format with how to recognise its files and its reader and writer; and the
// checkpoint an import writes (an ordinary attograd checkpoint) and an export reads.
//
//   interop::ModelFiles m = interop::import_model("gpt2/", "");      // found by content
//   io::save_checkpoint("gpt2.h5", interop::checkpoint_of(std::move(m)));
//   interop::export_model(interop::model_files_of(ckpt), "hf", "out/", {.dtype =
//   StoredType::bf16});
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autograd/quant/block_formats.h"
#include "interop/float_codec.h"
#include "interop/model_files.h"

namespace interop {

// Reads a model from path, its format recognised by content: a folder (Hugging Face's
// config.json + model.safetensors: GPT-2, or Llama, Qwen2, Qwen3 by config.json's model_type), a
// safetensors file (with config.json beside it), an llm.c checkpoint (magic 20240326), a GGUF file
// (magic "GGUF"). tokenizer_folder, when not empty, holds GPT-2's tokenizer files. With
// keep_blocks, a format that holds ggml's blocks (GGUF) keeps its quantized matrices as them
// (read_gguf); the others read as ever. Throws InteropError.
ModelFiles import_model(const std::string& path, const std::string& tokenizer_folder,
                        bool keep_blocks = false);

// The formats export_model writes ("hf", "gguf", "llmc").
std::vector<std::string> export_formats();

// Whether format is written as a folder of files (hf) rather than one file; an unknown
// format is std::invalid_argument naming the formats.
bool export_writes_folder(const std::string& format);

// The file an export of model to out writes beside it (llmc: llm.c's gpt2_tokenizer.bin, for a
// model with GPT-2's tokenizer), or an empty path with a note saying why none.
CompanionFile export_companion(const ModelFiles& model, const std::string& format,
                               const std::string& out);

// How export_model writes: the weights' float type (F16: hf and gguf only) or, gguf only,
// ggml's quantised blocks; hf's largest shard (interop/safetensors_shards.h: save_pretrained's
// 5 GB when not given; given for another format, refused); and whether a folder output may
// replace what is there (the caller has checked that it may go: cli's output rule).
struct ExportOptions {
  StoredType dtype = StoredType::f32;
  const ag::quant::BlockLayout* blocks = nullptr;
  std::optional<uint64_t> max_shard_bytes;
  bool replace = false;
};

// Writes model in format to out (hf is GPT-2's folder, or the Llama family's for a model with
// RoPE, SwiGLU or q/k norms): the files are made in a temporary sibling and renamed into
// place, so a failed or interrupted export leaves nothing behind. A folder format's out must
// be missing or an empty folder unless options.replace; a file format's out is replaced
// whole. Throws InteropError (an unknown format: std::invalid_argument). An llm.c export
// writes GPT-2's tokenizer beside it as llm.c reads it (export_companion).
void export_model(const ModelFiles& model, const std::string& format, const std::string& out,
                  const ExportOptions& options = {});

// The checkpoint an import writes: the run configuration's defaults with this model, its
// tokenizer ("none" when the files carried none), step 0, the weights and nothing else
// (no optimizer state), so sample, eval, inspect, train --init-from and report read it as
// any other. The weights are moved, not copied.
io::Checkpoint checkpoint_of(ModelFiles model);
// A checkpoint's model as every writer takes it (its weights shared, not copied; LoRA
// adapters merged in, on a copy: train::merged_checkpoint); ends with check_weights.
ModelFiles model_files_of(const io::Checkpoint& ckpt);

}  // namespace interop
