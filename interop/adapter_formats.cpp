#include "interop/adapter_formats.h"

#include <fmt/format.h>

#include "base/atomic_file.h"
#include "interop/gguf_lora.h"
#include "interop/lora_adapter.h"
#include "interop/model_files.h"
#include "interop/peft.h"
#include "train/config.h"

namespace interop {

namespace {

struct AdapterFormat {
  const char* name;
  bool folder;
  bool (*recognise)(const std::string& path);
  // whether the model can be written, refused naming `out` (a folder is written under a
  // staging name, which its writer's messages would name); null: the writer checks
  void (*check)(const nn::GPTConfig& c, const std::string& out);
  void (*write)(const LoraAdapter& adapter, const std::string& out, StoredType dtype);
  LoraAdapter (*read)(const std::string& path, const nn::GPTConfig& base);
};

const AdapterFormat kAdapterFormats[] = {
    {"peft", true, is_peft_folder, check_peft_expressible, write_peft, read_peft},
    {"gguf-lora", false, is_gguf_adapter, nullptr, write_gguf_lora, read_gguf_lora},
};

const AdapterFormat& adapter_format(const std::string& name) {
  for (const auto& f : kAdapterFormats)
    if (name == f.name) return f;
  throw std::invalid_argument(fmt::format("'{}' is not an adapter format", name));
}

}  // namespace

std::vector<std::string> adapter_formats() {
  std::vector<std::string> names;
  for (const auto& f : kAdapterFormats) names.emplace_back(f.name);
  return names;
}

bool is_adapter_format(const std::string& format) {
  for (const auto& f : kAdapterFormats)
    if (format == f.name) return true;
  return false;
}

bool adapter_writes_folder(const std::string& format) {
  return adapter_format(format).folder;
}

void export_adapter(const io::Checkpoint& ckpt, const std::string& format, const std::string& out,
                    StoredType dtype, bool replace) {
  const AdapterFormat& f = adapter_format(format);
  const LoraAdapter adapter = adapter_of(ckpt);
  if (f.check) f.check(adapter.config, out);
  if (!f.folder) return f.write(adapter, out, dtype);
  base::write_folder_atomically(
      out, [&](const std::string& folder) { f.write(adapter, folder, dtype); }, replace);
}

bool is_adapter(const std::string& path) {
  for (const auto& f : kAdapterFormats)
    if (f.recognise(path)) return true;
  return false;
}

io::Checkpoint import_adapter(const std::string& path, const io::Checkpoint& base) {
  const nn::GPTConfig config = train::RunConfig::from_json(base.config).model;
  for (const auto& f : kAdapterFormats)
    if (f.recognise(path)) return attach_adapter(base, f.read(path, config));
  throw InteropError(fmt::format(
      "{}: not an adapter attograd reads (a peft folder with adapter_config.json, or a GGUF "
      "LoRA adapter)",
      path));
}

}  // namespace interop
