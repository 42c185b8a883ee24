// `import` and `export`: models to and from other tools' formats (interop/). A file from
// elsewhere that cannot be read as asked (InteropError) is a one-line error and exit 2, and
// no output is left behind: the checkpoint and the exported files are written to temporary
// siblings and renamed into place.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "interop/adapter_formats.h"
#include "interop/formats.h"
#include "interop/hub_cache.h"
#include "interop/safetensors_shards.h"
#include "io/checkpoint.h"
#include "train/config.h"
#include "train/model_loading.h"

namespace cli {

namespace {

namespace fs = std::filesystem;

// Parses args with `positional` (when not empty) taking the first bare argument; nullopt
// after --help.
std::optional<po::variables_map> parse_with(const Args& args, const po::options_description& desc,
                                            const char* positional, const std::string& usage) {
  po::variables_map vm = parse_options(args, desc, positional);
  if (!vm.count("help")) return vm;
  std::cout << "usage: " << usage << "\n\n" << desc << "\n";
  return std::nullopt;
}

// What a model path reads: the path (a folder's files are checked by the output rule), and
// a file's neighbours that an import may open, so that --out can name none of them.
io::NamedPaths import_inputs(const std::string& path, const std::string& tokenizer) {
  io::NamedPaths inputs = {{"PATH", path}, {"--tokenizer", tokenizer}};
  // a hub cache's repo folder is read as a snapshot: its files (blobs) are inputs too
  if (const std::string snapshot = interop::hub_snapshot_of(path); snapshot != path)
    inputs.emplace_back("PATH's snapshot", snapshot);
  std::error_code ec;
  if (fs::is_directory(path, ec)) return inputs;
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  for (const char* name : {"config.json", "model.safetensors", "model.safetensors.index.json",
                           "vocab.json", "merges.txt", "encoder.json", "vocab.bpe",
                           "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    inputs.emplace_back(fmt::format("PATH's {}", name), (folder / name).string());
  return inputs;
}

void print_import(const interop::ModelFiles& m, const std::string& out) {
  int64_t params = 0;
  for (const auto& [name, t] : m.weights) params += t.numel();
  fmt::print(
      "imported {} ({} model): {} parameters, {} layers, d_model {}, {} heads, context {}, "
      "vocab {}\n",
      base::printable(out), m.format, params, m.config.n_layers, m.config.d_model, m.config.n_heads,
      m.config.context_length, m.config.vocab_size);
  fmt::print("tokenizer: {}\n",
             m.tokenizer ? m.tokenizer->type
                         : "none (sample, eval and train need one: give --tokenizer DIR with "
                           "the model's tokenizer.json, or GPT-2's tokenizer files)");
  for (const auto& d : m.dropped) fmt::print("not kept: {}\n", d);
}

// --dtype: a float type, or one of ggml's block formats that GGUF export writes.
struct ExportDtype {
  interop::StoredType floats = interop::StoredType::f32;
  const ag::quant::BlockLayout* blocks = nullptr;
};

std::vector<std::string> written_block_formats() {
  std::vector<std::string> names;
  for (const auto& l : ag::quant::block_formats())
    if (l.quantize) names.emplace_back(l.name);
  return names;
}

ExportDtype parse_dtype(const std::string& s) {
  if (s == "f32") return {interop::StoredType::f32};
  if (s == "bf16") return {interop::StoredType::bf16};
  if (s == "f16") return {interop::StoredType::f16};
  const ag::quant::BlockLayout* l = ag::quant::layout_named(s);
  if (l && l->quantize) return {interop::StoredType::f32, l};
  throw UsageError(fmt::format("--dtype must be f32, bf16, f16 or (gguf) one of {}, got '{}'",
                               fmt::join(written_block_formats(), ", "), base::printable(s)));
}

// --max-shard-size, when given (interop/safetensors_shards.h).
std::optional<uint64_t> parse_max_shard_size(bool given, const std::string& text) {
  if (!given) return std::nullopt;
  try {
    return interop::parse_shard_size(text, "--max-shard-size");
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// --context N: a RoPE model's context cut to N (a Llama 3's 131072 positions would make every
// run's default window that long); its weights do not depend on it, so nothing else changes.
void shorten_context(interop::ModelFiles& m, int64_t context) {
  if (context == 0) return;
  if (m.config.position != nn::PositionKind::rope)
    throw UsageError("--context applies to a model with RoPE (learned positions are weights)");
  if (context < 1 || context > m.config.context_length)
    throw UsageError(fmt::format("--context must be 1 to the model's {}, got {}",
                                 m.config.context_length, context));
  m.dropped.push_back(fmt::format("context {} (--context {})", m.config.context_length, context));
  m.config.context_length = context;
}

// export --format peft|gguf-lora: a LoRA checkpoint's adapters alone (interop/adapter_formats.h).
int export_adapter(const std::string& path, const std::string& format, const std::string& out,
                   const ExportDtype& type, bool overwrite) {
  if (type.blocks)
    throw UsageError(
        fmt::format("--dtype {} (ggml's quantised blocks) is written for --format "
                    "gguf only; adapters are f32, f16 or bf16",
                    type.blocks->name));
  const bool folder = interop::adapter_writes_folder(format);
  const auto claim =
      claim_outputs({{"--out", out, folder ? io::OutputKind::folder : io::OutputKind::model_file}},
                    {{"--checkpoint", path}}, {.overwrite = overwrite});
  // a frozen base held as blocks stays blocks: only the adapters (float32) are written, so
  // a 1B base's 5 GB of float32 is never made (Q4_K: 0.7 GB read as it is)
  const io::Checkpoint ckpt =
      io::load_checkpoint(path, io::LoadOptions{.weights_only = true, .keep_packed = true});
  train::refuse_gradient_dump(ckpt);
  train::refuse_trained_blocks(ckpt);
  interop::export_adapter(ckpt, format, out, type.floats, overwrite);
  const nn::GPTConfig c = train::RunConfig::from_json(ckpt.config).model;
  fmt::print("exported the rank-{} LoRA adapters ({}) of {} as {} to {}\n", c.lora_rank,
             c.lora_targets, base::printable(path), format, base::printable(out));
  return 0;
}

// InteropError: the file from elsewhere is at fault, a usage error (exit 2).
template <typename Body>
int guarded_interop(const std::string& command, Body body) {
  return guarded(command, [&] {
    try {
      return body();
    } catch (const interop::InteropError& e) {
      return usage_error(command, e.what());
    }
  });
}

// import ADAPTER --base BASE.h5: the adapter attached to its base (interop/adapter_formats.h).
int import_adapter(const std::string& path, const std::string& base, const std::string& out,
                   bool overwrite) {
  require_file(base, "--base checkpoint");
  const auto claim = claim_outputs({{"--out", out, io::OutputKind::checkpoint}},
                                   {{"PATH", path}, {"--base", base}}, {.overwrite = overwrite});
  const io::Checkpoint b = io::load_checkpoint(base, io::LoadOptions{.weights_only = true});
  train::refuse_gradient_dump(b);
  const io::Checkpoint run = interop::import_adapter(path, b);
  const nn::GPTConfig c = train::RunConfig::from_json(run.config).model;
  io::save_checkpoint(out, run);
  fmt::print("imported the LoRA adapter {} onto {} as {}: rank {}, alpha {}, targets {}\n",
             base::printable(path), base::printable(base), base::printable(out), c.lora_rank,
             c.lora_alpha, c.lora_targets);
  return 0;
}

}  // namespace

int import_command(const Args& args) {
  return guarded_interop("import", [&] {
    std::string path, out, tokenizer, base;
    int64_t context = 0;
    bool overwrite = false, keep_blocks = false;
    po::options_description desc("import options");
    auto add = desc.add_options();
    add("help,h", "show this help");
    add("path", po::value(&path)->required(),
        "a Hugging Face folder (GPT-2, Llama, Qwen2, Qwen3), a .safetensors file with "
        "config.json beside it, or a model file of another format (llm.c, GGUF); with --base, "
        "a LoRA adapter (a peft folder, or llama.cpp's GGUF adapter)");
    add("out", po::value(&out)->required(), "the attograd checkpoint to write (.h5)");
    add("base", po::value(&base),
        "the attograd checkpoint (.h5) the adapter PATH was trained on: the checkpoint written "
        "is it with the adapter attached");
    add("tokenizer", po::value(&tokenizer),
        "folder with the tokenizer's files (tokenizer.json; GPT-2's vocab.json + merges.txt, "
        "or encoder.json + vocab.bpe), when PATH has none");
    add("context", po::value(&context),
        "a RoPE model's context length, shorter than its own (max_position_embeddings)");
    add("keep-blocks", po::bool_switch(&keep_blocks),
        "a quantized GGUF's matrices kept as their blocks, byte for byte (Q4_K, Q6_K, ...: no "
        "float32 copy), a frozen base that train --init-from FILE --lora-rank R holds as it is "
        "(QLoRA); every other reader dequantizes them");
    add_overwrite_option(desc, overwrite);
    const auto vm = parse_with(args, desc, "path",
                               "attograd import PATH --out FILE.h5 [--tokenizer DIR] [--context N] "
                               "[--keep-blocks] [--overwrite]\n       attograd import ADAPTER "
                               "--base BASE.h5 --out FILE.h5 [--overwrite]");
    if (!vm) return 0;
    if (!base.empty()) {
      if (!tokenizer.empty() || context != 0 || keep_blocks)
        throw UsageError(
            "--tokenizer, --context and --keep-blocks apply to a model, not to an adapter "
            "(--base)");
      return import_adapter(path, base, out, overwrite);
    }
    if (interop::is_adapter(path))
      throw UsageError(fmt::format(
          "'{}' is a LoRA adapter, not a model: give the checkpoint it was trained on with "
          "--base BASE.h5",
          base::printable(path)));
    const auto claim = claim_outputs({{"--out", out, io::OutputKind::checkpoint}},
                                     import_inputs(path, tokenizer), {.overwrite = overwrite});
    interop::ModelFiles model = interop::import_model(path, tokenizer, keep_blocks);
    shorten_context(model, context);
    print_import(model, out);
    io::save_checkpoint(out, interop::checkpoint_of(std::move(model)));
    return 0;
  });
}

int export_command(const Args& args) {
  return guarded_interop("export", [&] {
    std::string path, format, out, dtype, shard_size;
    bool overwrite = false;
    po::options_description desc("export options");
    auto add = desc.add_options();
    add("help,h", "show this help");
    add("checkpoint", po::value(&path)->required(),
        "the attograd checkpoint to export (also the first bare argument)");
    add("format", po::value(&format)->required(),
        "hf (a folder transformers loads), gguf (llama.cpp), llmc (llm.c's checkpoint); a LoRA "
        "checkpoint's adapters alone: peft (a folder peft loads), gguf-lora (llama.cpp's "
        "adapter)");
    add("out", po::value(&out)->required(),
        "where to write (hf: a folder, new or empty unless --overwrite)");
    add("dtype", po::value(&dtype)->default_value("f32"),
        "f32, bf16 or f16 (f16: hf and gguf), or for gguf ggml's quantised blocks: q8_0, q4_0, "
        "q4_1, q5_0, q5_1, q4_k, q5_k, q6_k (docs/quantization.md)");
    add("max-shard-size", po::value(&shard_size),
        "hf: the largest weights file, as save_pretrained's max_shard_size (5GB, 500MB, 2GiB or "
        "bytes; default 5GB): past it, model-00001-of-0000N.safetensors and "
        "model.safetensors.index.json");
    add_overwrite_option(desc, overwrite);
    const auto vm = parse_with(args, desc, "checkpoint",
                               "attograd export CHECKPOINT.h5 --format hf|gguf|llmc|peft|gguf-lora "
                               "--out PATH [--dtype f32|bf16|f16|q8_0|q4_k|...] "
                               "[--max-shard-size 5GB] [--overwrite]");
    if (!vm) return 0;
    const ExportDtype type = parse_dtype(dtype);
    const auto max_shard = parse_max_shard_size(vm->count("max-shard-size"), shard_size);
    require_file(path, "checkpoint");
    if (interop::is_adapter_format(format)) {
      if (max_shard) throw UsageError("--max-shard-size applies to --format hf");
      return export_adapter(path, format, out, type, overwrite);
    }
    const bool folder = interop::export_writes_folder(format);
    const auto claim = claim_outputs(
        {{"--out", out, folder ? io::OutputKind::folder : io::OutputKind::model_file}},
        {{"--checkpoint", path}}, {.overwrite = overwrite});
    const io::Checkpoint ckpt = io::load_checkpoint(path, io::LoadOptions{.weights_only = true});
    train::refuse_gradient_dump(ckpt);  // its tensors are gradients, not weights
    train::refuse_trained_blocks(ckpt);
    const interop::ModelFiles model = interop::model_files_of(ckpt);
    // a file written beside --out (llm.c's tokenizer) is an output too
    const interop::CompanionFile beside = interop::export_companion(model, format, out);
    const auto claim_beside = claim_outputs(
        {{"the file beside --out", beside.path, io::OutputKind::model_file, "--out folder"}},
        {{"--checkpoint", path}}, {.overwrite = overwrite});
    interop::export_model(model, format, out,
                          {.dtype = type.floats,
                           .blocks = type.blocks,
                           .max_shard_bytes = max_shard,
                           .replace = overwrite});
    fmt::print("exported {} as {} ({}) to {}{}\n", base::printable(path), format, dtype,
               base::printable(out),
               beside.path.empty() ? "" : " and " + base::printable(beside.path));
    if (!beside.note.empty()) fmt::print("note: {}\n", beside.note);
    return 0;
  });
}

}  // namespace cli
