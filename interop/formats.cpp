#include "interop/formats.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string_view>

#include "base/atomic_file.h"
#include "base/utf8.h"
#include "interop/adapter_formats.h"
#include "interop/gguf.h"
#include "interop/hf_classifier.h"
#include "interop/hf_folder.h"
#include "interop/hf_gpt2.h"
#include "interop/hf_llama.h"
#include "interop/hub_cache.h"
#include "interop/input_bytes.h"
#include "interop/llmc.h"
#include "interop/llmc_tokenizer.h"
#include "interop/safetensors_shards.h"
#include "interop/tokenizer_files.h"
#include "io/tokenizer_section.h"
#include "train/config.h"
#include "train/model_loading.h"
#include "train/task.h"

namespace interop {

std::vector<std::string> export_formats();

namespace {

namespace fs = std::filesystem;

// What a file starts with (16 bytes at most), for recognising its format.
std::string head_of(const std::string& path) {
  const InputBytes in = InputBytes::open(path);
  std::string head(std::min<uint64_t>(16, in.size()), '\0');
  in.read(0, head.data(), head.size(), "its first bytes");
  return head;
}

uint64_t le(std::string_view bytes, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

bool is_llmc(std::string_view head) {
  return head.size() >= 4 && le(head, 4) == 20240326;
}
bool is_gguf(std::string_view head) {
  return head.substr(0, 4) == "GGUF";
}
bool is_safetensors(std::string_view head) {
  return head.size() >= 9 && head[8] == '{';
}

// The architecture a Hugging Face folder (or a .safetensors file's folder) holds, by its
// config.json's model_type: the Llama family's, else GPT-2's (whose reader refuses the rest).
ModelFiles read_hf(const std::string& path, const std::string& tokenizer_folder) {
  std::error_code ec;
  std::string folder = fs::is_directory(path, ec) ? path : fs::path(path).parent_path().string();
  if (folder.empty()) folder = ".";
  if (has_entry(folder, "config.json")) {
    const auto j = read_hf_config((fs::path(folder) / "config.json").string(), {"model_type"});
    if (j.contains("model_type") && j["model_type"].is_string() &&
        llama_family_of(j["model_type"].get<std::string>()))
      return read_hf_llama(path, tokenizer_folder);
  }
  return read_hf_gpt2(path, tokenizer_folder);
}

void write_hf(const ModelFiles& model, const std::string& out, const ExportOptions& o) {
  const uint64_t shard = o.max_shard_bytes.value_or(kDefaultMaxShardBytes);
  if (has_llama_layout(model.config)) return write_hf_llama(model, out, o.dtype, shard);
  write_hf_gpt2(model, out, o.dtype, shard);
}

// What the hf writers would refuse of a model the Llama family or F16 cannot hold, named by
// --out (the writers see the temporary folder the output is built in).
void check_hf(const ModelFiles& model, const std::string& out, StoredType dtype) {
  if (has_llama_layout(model.config)) export_family(model.config, out);
  check_hf_classifier(model, out);
  if (dtype == StoredType::f16) check_f16_range(model, out);
}

// llm.c's files hold float32 or bfloat16.
ag::Precision precision_of(StoredType dtype, const std::string& format, const std::string& out) {
  if (dtype == StoredType::f16)
    throw InteropError(
        fmt::format("{}: --dtype f16 is written for --format hf and gguf only ({}: f32 "
                    "or bf16)",
                    out, format));
  return dtype == StoredType::bf16 ? ag::Precision::bf16 : ag::Precision::fp32;
}

// The model, then GPT-2's tokenizer as llm.c reads it beside (llmc_tokenizer.h), when the
// model has that tokenizer.
void write_llmc_file(const ModelFiles& model, const std::string& out, const ExportOptions& o) {
  write_llmc(model, out, precision_of(o.dtype, "llmc", out));
  write_llmc_tokenizer_beside(model, out);
}

// A GGUF file carries its tokenizer; --tokenizer DIR replaces it.
ModelFiles read_gguf_file(const std::string& path, const std::string& tokenizer_folder) {
  ModelFiles m = read_gguf(path);
  if (tokenizer_folder.empty()) return m;
  if (m.tokenizer) m.dropped.push_back("the file's tokenizer (--tokenizer's replaces it)");
  m.tokenizer = read_tokenizer_folder(tokenizer_folder, true);
  return m;
}

// The same keeping its quantized matrices as their blocks (import --keep-blocks).
ModelFiles read_gguf_blocks_file(const std::string& path, const std::string& tokenizer_folder) {
  ModelFiles m = read_gguf(path, true);
  if (tokenizer_folder.empty()) return m;
  if (m.tokenizer) m.dropped.push_back("the file's tokenizer (--tokenizer's replaces it)");
  m.tokenizer = read_tokenizer_folder(tokenizer_folder, true);
  return m;
}

// What write_gguf would refuse for F16, named by --out.
void check_gguf(const ModelFiles& model, const std::string& out, StoredType dtype) {
  if (dtype == StoredType::f16) check_f16_range(model, out);
}

void write_gguf_file(const ModelFiles& model, const std::string& out, const ExportOptions& o) {
  write_gguf(model, out, o.dtype);
}

void write_gguf_blocks(const ModelFiles& model, const std::string& out,
                       const ag::quant::BlockLayout& blocks) {
  check_f16_range(model, out);  // a matrix whose rows fit no block is written F16
  write_gguf(model, out, GgufDtype(blocks));
}

// A tokenizer with more ids than the model has rows would give ids the model cannot take.
void check_tokenizer_fits(const ModelFiles& m, const std::string& path) {
  if (!m.tokenizer) return;
  const int64_t ids = io::make_tokenizer(*m.tokenizer)->vocab_size();
  if (ids > m.config.vocab_size)
    throw InteropError(
        fmt::format("{}: the tokenizer has {} ids, more than the model's "
                    "vocabulary of {}",
                    path, ids, m.config.vocab_size));
}

// A format: how its files are recognised, its reader and its writer (nullptr: not built in).
struct Format {
  const char* name;
  bool (*recognise)(std::string_view head);
  bool folder;  // written as a folder of files
  ModelFiles (*read)(const std::string& path, const std::string& tokenizer_folder);
  void (*write)(const ModelFiles& model, const std::string& out, const ExportOptions& options);
  // what write would refuse, checked first so that messages name out (nullptr: nothing)
  void (*check)(const ModelFiles& model, const std::string& out, StoredType dtype);
  // why a classifier cannot be written ("" when it can: the format has a place for its head)
  const char* no_classifier;
  // the file write puts beside out, or why none (nullptr: the format has none)
  CompanionFile (*companion)(const ModelFiles& model, const std::string& out) = nullptr;
  // the writer of ggml's quantised blocks (nullptr: the format holds none)
  void (*write_blocks)(const ModelFiles& model, const std::string& out,
                       const ag::quant::BlockLayout& blocks) = nullptr;
  // the reader keeping ggml's blocks as they are (nullptr: the format holds none)
  ModelFiles (*read_blocks)(const std::string& path, const std::string& tokenizer_folder) = nullptr;
  bool sharded = false;  // its weights may be cut into shards (ExportOptions::max_shard_bytes)
};

const Format kFormats[] = {
    {"hf", is_safetensors, true, read_hf, write_hf, check_hf, "", nullptr, nullptr, nullptr, true},
    {"gguf", is_gguf, false, read_gguf_file, write_gguf_file, check_gguf,
     "GGUF's architectures (llama.cpp's) are language models, with no place for a "
     "classification head",
     nullptr, write_gguf_blocks, read_gguf_blocks_file},
    {"llmc", is_llmc, false, read_llmc, write_llmc_file, nullptr,
     "llm.c's file holds GPT-2's language model, with no place for a classification head",
     llmc_tokenizer_of},
};

// A classifier written as a language model would lose its head: refused, with the format
// that keeps it.
void check_classifier_fits(const Format& f, const ModelFiles& model, const std::string& out) {
  if (model.config.num_classes == 0 || !*f.no_classifier) return;
  throw InteropError(fmt::format(
      "{}: the model is a classifier ({} labels) and {}; --format hf writes it as transformers' "
      "sequence classifier (GPT2ForSequenceClassification or the Llama family's)",
      out, model.config.num_classes, f.no_classifier));
}

const Format* find_format(const std::string& name) {
  for (const Format& f : kFormats)
    if (name == f.name) return &f;
  return nullptr;
}

const Format& known_format(const std::string& name) {
  if (const Format* f = find_format(name)) return *f;
  throw std::invalid_argument(fmt::format("--format '{}' is not one of {} (adapters: {})",
                                          base::printable(name), fmt::join(export_formats(), ", "),
                                          fmt::join(adapter_formats(), ", ")));
}

[[noreturn]] void not_built_in(const Format& f, const std::string& path) {
  throw InteropError(
      fmt::format("{}: the {} format is not built into this attograd", path, f.name));
}

// A folder output, written whole: a new folder renamed into place (base/atomic_file.h). A
// write that fails (a full disk) stays the machine's failure, not an InteropError (the
// file's): docs/exit-codes.md.
void export_folder(const Format& f, const ModelFiles& model, const std::string& out,
                   const ExportOptions& options) {
  base::write_folder_atomically(
      out, [&](const std::string& folder) { f.write(model, folder, options); }, options.replace);
}

}  // namespace

ModelFiles import_model(const std::string& given, const std::string& given_tokenizer,
                        bool keep_blocks) {
  // a hub cache's repo folder is read as the snapshot its refs/main names
  const std::string path = hub_snapshot_of(given);
  const std::string tokenizer_folder =
      given_tokenizer.empty() ? given_tokenizer : hub_snapshot_of(given_tokenizer);
  std::error_code ec;
  const Format* format = fs::is_directory(path, ec) ? find_format("hf") : nullptr;
  const std::string head = format ? "" : head_of(path);
  for (const Format& f : kFormats)
    if (!format && f.recognise(head)) format = &f;
  if (format) {
    if (!format->read) not_built_in(*format, path);
    const bool blocks = keep_blocks && format->read_blocks;
    ModelFiles m = (blocks ? format->read_blocks : format->read)(path, tokenizer_folder);
    check_tokenizer_fits(m, path);
    return m;
  }
  throw InteropError(
      fmt::format("{}: not a model file attograd reads (a Hugging Face folder, "
                  "safetensors, llm.c or GGUF)",
                  path));
}

std::vector<std::string> export_formats() {
  std::vector<std::string> names;
  for (const Format& f : kFormats) names.push_back(f.name);
  return names;
}

bool export_writes_folder(const std::string& format) {
  return known_format(format).folder;
}

CompanionFile export_companion(const ModelFiles& model, const std::string& format,
                               const std::string& out) {
  const Format& f = known_format(format);
  return f.companion ? f.companion(model, out) : CompanionFile{};
}

void export_model(const ModelFiles& model, const std::string& format, const std::string& out,
                  const ExportOptions& options) {
  const Format* f = &known_format(format);
  if (!f->write) not_built_in(*f, out);
  check_classifier_fits(*f, model, out);
  if (options.max_shard_bytes && !f->sharded)
    throw InteropError(
        fmt::format("{}: --max-shard-size applies to --format hf (a {} export is "
                    "one file)",
                    out, f->name));
  if (options.blocks && !f->write_blocks)
    throw InteropError(
        fmt::format("{}: --dtype {} (ggml's quantised blocks) is written for "
                    "--format gguf only",
                    out, options.blocks->name));
  if (options.blocks) return f->write_blocks(model, out, *options.blocks);
  if (f->check) f->check(model, out, options.dtype);
  if (f->folder) return export_folder(*f, model, out, options);
  f->write(model, out, options);
}

namespace {

// Matrices kept as blocks (import --keep-blocks) are recorded as a --base-precision run's
// frozen base is: frozen (`freeze` names each: a file's blocks may not be what its config
// trains) and base_precision own (a run from the file keeps each as it is). A run that
// trains every weight from it converts them (train/model_loading.h).
void record_kept_blocks(const nn::StateDict& weights, train::RunConfig& cfg) {
  std::vector<std::string> packed;
  for (const auto& [name, t] : weights)
    if (t.packing()) packed.push_back(name);
  if (packed.empty()) return;
  cfg.freeze = fmt::format("{}", fmt::join(packed, ","));
  cfg.base_precision = ag::quant::BasePrecision::own;
}

}  // namespace

io::Checkpoint checkpoint_of(ModelFiles model) {
  train::RunConfig cfg;
  cfg.model = model.config;
  // the section's type, checked when it was read or made
  cfg.tokenizer =
      model.tokenizer ? io::tokenizer_kind(*model.tokenizer) : data::TokenizerKind::none;
  cfg.data = "";
  cfg.chat_format = model.chat_format;
  cfg.stop_token_ids = model.stop_ids;
  if (model.config.num_classes > 0) {  // a sequence classifier: eval and classify read it
    cfg.task = train::TaskHandle(train::task_named("classify"));
    cfg.labels = model.labels;
  }
  record_kept_blocks(model.weights, cfg);
  io::Checkpoint c;
  c.config = cfg.to_json();
  c.model = std::move(model.weights);
  if (model.tokenizer)
    c.tokenizer = std::move(*model.tokenizer);
  else
    c.tokenizer.type = base::choice_name(data::TokenizerKind::none);
  return c;
}

ModelFiles model_files_of(const io::Checkpoint& ckpt) {
  ModelFiles m;
  try {
    m.config = train::RunConfig::from_json(ckpt.config).model;
    m.config.validate();
  } catch (const std::invalid_argument& e) {
    throw InteropError(fmt::format("{}: {}", ckpt.source, e.what()));
  }
  if (m.config.lora_rank > 0) {  // other tools run plain Linears: the adapters merged in
    try {
      return model_files_of(train::merged_checkpoint(ckpt));
    } catch (const io::CheckpointError& e) {
      throw InteropError(e.what());
    }
  }
  m.labels = train::RunConfig::from_json(ckpt.config).labels;
  m.weights = ckpt.model;
  if (io::tokenizer_kind(ckpt.tokenizer) != data::TokenizerKind::none) m.tokenizer = ckpt.tokenizer;
  const train::RunConfig run = train::RunConfig::from_json(ckpt.config);  // validated above
  m.chat_format = run.chat_format;
  m.stop_ids = run.stop_token_ids;
  m.format = "attograd";
  check_weights(m, ckpt.source);
  return m;
}

}  // namespace interop
