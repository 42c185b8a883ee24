#pragma once
// Models to and from the formats other tools keep them in: the map of interop/. Every
// format is read into, and written from, one in-memory form (interop::ModelFiles: a
// GPTConfig, the weights under attograd's names in nn::Linear's [out, in] layout, and the
// tokenizer), so a format is one reader and one writer beside the others, and `attograd
// import` / `attograd export` (cli/interop_commands.cpp) only pick one.
//
//   model_files.h   ModelFiles, check_weights (what every reader ends with)
//   input_bytes.h   a hostile file read at the offsets its header states, every read
//                   bounded by the file's size (InputBytes, Cursor); bytes in memory alike
//   hub_cache.h     Hugging Face's hub cache (a repo folder read as refs/main's snapshot),
//                   and the one link rule: only a snapshot's link into its repo's blobs/
//   json_stream.h   JSON read as it streams past, keeping only the members a reader asks
//                   for (safetensors headers, config.json, the shards' index)
//   import_memory.h the import's memory plan, checked against available memory and
//                   ulimit -v before any tensor is read
//   float_codec.h   float32 weights to and from F32, BF16 and F16 (rounded to nearest even)
//   llmc.h          llm.c's checkpoint (gpt2_124M.bin): read_llmc_weights, write_llmc
//   llmc_tokenizer.h  llm.c's gpt2_tokenizer.bin, written beside an llm.c export of a model
//                   with GPT-2's tokenizer
//   gguf_format.h   the GGUF v3 container: keys, tensor infos, aligned data
//   gguf.h          a GPT as llama.cpp's gpt2 architecture in GGUF, and the Llama family as
//                   its llama, qwen2, qwen3 (gguf_llama.h): read_gguf, write_gguf
//                   (gguf_tokenizer.h: the tokenizer as tokenizer.ggml.* keys; gguf_model.h:
//                   what the architectures share)
//   safetensors.h   the safetensors format: a checked reader (every dtype of the format in
//                   a header; pread into float32 from F32, F16, BF16, F64, F8) and a
//                   streamed writer (F32, F16, BF16)
//   safetensors_shards.h  a model's weights as save_pretrained cuts them: model.safetensors,
//                   or shards and model.safetensors.index.json past --max-shard-size
//   hf_folder.h     what every Hugging Face folder shares: config.json streamed, its keys
//                   with defaults, model.safetensors or the shards its index names
//   hf_gpt2.h       Hugging Face's GPT-2: config.json, HF's names and Conv1D layout; a
//                   folder (or a .safetensors file) read and written
//   hf_llama.h      Hugging Face's Llama, Qwen2 and Qwen3: config.json in each family's
//                   layout, HF's names (the layout is attograd's); read and written
//   tokenizer_files.h  a folder's tokenizer files (GPT-2's, or tokenizer.json), read and
//                   written
//   tokenizer_json.h   Hugging Face tokenizers' tokenizer.json read back (every kind
//                   export writes, GPT-2's own, and Llama 3's, Qwen2/3's and SmolLM2's as
//                   the hf kind)
//   formats.h       the table of formats import_model and export_model pick from (found by
//                   content), and the checkpoint an import writes (checkpoint_of,
//                   model_files_of)
//   lora_adapter.h  LoRA adapters apart from their base: a checkpoint's (adapter_of), put on
//                   a base (attach_adapter), joined into and split from another tool's fused
//                   tensors (GPT-2's c_attn / attn_qkv) exactly
//   peft.h          peft's adapter folder (adapter_model.safetensors, adapter_config.json)
//   gguf_lora.h     llama.cpp's LoRA adapter GGUF (general.type adapter)
//   adapter_formats.h  the table of adapter formats export and import --base pick from
//
// Every file read here comes from elsewhere: lengths and offsets are bounded before any
// allocation or read, and errors name the file and the field (InteropError), never
// quoting the file's bytes (a name from it through excerpt(), printable and cut short). A reader
// keeps only what the model will hold: what it does not use is read past, never stored.
#include "interop/model_files.h"
