#include "cli/command_support.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "base/error_text.h"
#include "base/json.h"
#include "base/posix_file.h"
#include "base/utf8.h"
#include "data/data_error.h"
#include "data/gpt2_tokenizer.h"
#include "data/prepared.h"
#include "data/tokenizer_file.h"
#include "interop/model_files.h"
#include "interop/tokenizer_json.h"
#include "io/checkpoint.h"
#include "io/tokenizer_section.h"
#include "report/metrics_log.h"
#include "train/config.h"
#include "train/console.h"

namespace cli {

bool is_bad_input(const std::exception& e) {
  if (dynamic_cast<const io::CheckpointWriteError*>(&e) ||
      dynamic_cast<const data::DataSystemError*>(&e))
    return false;  // the machine's: the disk, the file system
  return dynamic_cast<const UsageError*>(&e) || dynamic_cast<const std::invalid_argument*>(&e) ||
         dynamic_cast<const io::CheckpointError*>(&e) || dynamic_cast<const data::DataError*>(&e) ||
         dynamic_cast<const report::MetricsError*>(&e) ||
         dynamic_cast<const base::JsonError*>(&e) || dynamic_cast<const interop::InteropError*>(&e);
}

int usage_error(const std::string& command, const std::string& what) {
  return report_failure(command, 2, what);
}

bool wants_help(const po::variables_map& vm, const std::string& command,
                const po::options_description& desc, const std::string& operands) {
  if (!vm.count("help")) return false;
  std::cout << "usage: attograd " << command << (operands.empty() ? "" : " ") << operands
            << " [options]\n\n"
            << desc << "\n";
  return true;
}

std::string default_checkpoint(const std::string& command, const std::string& when_none) {
  const std::string path = train::RunConfig{}.out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !when_none.empty())
    throw UsageError(
        fmt::format("{} (there is no {} here, train's default output)", when_none, path));
  if (!std::filesystem::exists(path, ec))
    throw UsageError(fmt::format(
        "no checkpoint given, and no {} (train's default output) here: name one, 'attograd {} "
        "FILE.h5' or --checkpoint FILE.h5",
        path, command));
  if (train::World::current().root())
    train::noticef("attograd {}: using {} (no checkpoint given; train's default output)\n", command,
                   path);
  return path;
}

std::string config_file(const po::variables_map& vm) {
  return vm.count("config") ? vm["config"].as<std::string>() : std::string();
}

void require_file(const std::string& path, const char* what) {
  try {
    base::regular_file_size(path, what);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

void check_threads(int threads) {
  if (threads < 1 || threads > train::kMaxThreads)
    throw UsageError(
        fmt::format("--threads must be between 1 and {}, got {}", train::kMaxThreads, threads));
}

void require_data(const std::string& path) {
  if (!data::is_prepared_folder(path)) require_file(path, "data file");
}

io::NamedPaths with_data_files(io::NamedPaths inputs, const std::string& data_path,
                               const std::string& name) {
  if (data_path.empty() || !data::is_prepared_folder(data_path)) {
    inputs.emplace_back(name, data_path);
    return inputs;
  }
  for (const char* file : {data::kMetaFile, data::kTokenizerFile, data::kTrainFile, data::kValFile})
    inputs.emplace_back(fmt::format("{}'s {}", name, file), data_path + "/" + file);
  return inputs;
}

std::unique_ptr<io::ClaimedOutputs> claim_outputs(const std::vector<io::Output>& outputs,
                                                  const io::NamedPaths& inputs,
                                                  const io::OutputClaim& claim) {
  try {
    return std::make_unique<io::ClaimedOutputs>(outputs, inputs, claim);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

void add_overwrite_option(po::options_description& desc, bool& overwrite) {
  desc.add_options()("overwrite", po::bool_switch(&overwrite),
                     "replace what is at the output (a checkpoint, a model file, a folder of "
                     "files); refused otherwise");
}

int report_failure(const std::string& command, int code, const std::string& message) {
  train::World& world = train::World::current();
  if (!world.distributed()) {
    train::noticef("attograd {}: error: {}\n", command,
                   base::printable(base::without_error_prefix(message)));
    return code;
  }
  if (!world.setup_agreed()) {  // every rank reaches this point or the end of set-up once
    const train::World::Failure f = world.agree_setup(code, message);
    if (world.root()) report_peer_failure(command, train::PeerFailure(f.code, f.rank, f.message));
    return f.code;
  }
  train::noticef("attograd {}: error on rank {}: {}\n", command, world.rank(),
                 base::printable(base::without_error_prefix(message)));
  world.abort(code);
}

int report_peer_failure(const std::string& command, const train::PeerFailure& e) {
  if (train::World::current().root())
    train::noticef("attograd {}: error: {}{}\n", command,
                   base::printable(base::without_error_prefix(e.what())),
                   e.rank == 0 ? "" : fmt::format(" (rank {})", e.rank));
  return e.code;
}

namespace {

// attograd's tokenizer file (it names its format in its first line), else Hugging Face's
// tokenizer.json.
std::unique_ptr<data::Tokenizer> read_any_tokenizer_json(const std::string& path) {
  struct stat st {};
  const base::UniqueFd fd = base::open_regular(path, "tokenizer file", &st);
  std::string start(256, '\0');
  start.resize(static_cast<size_t>(
      std::max<ssize_t>(0, base::read_full(fd.get(), start.data(), start.size()))));
  if (start.find(data::kTokenizerFileFormat) != std::string::npos)
    return data::read_tokenizer_file(path);
  return io::make_tokenizer(interop::read_hf_tokenizer_json(path));
}

}  // namespace

std::unique_ptr<data::Tokenizer> load_tokenizer(const std::string& path, const char* option) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    // a Hugging Face model folder may hold GPT-2's files beside its own tokenizer.json,
    // which says more (Qwen2's added tokens and NFC): tokenizer.json first
    const std::string file = path + "/" + data::kTokenizerFile;
    const bool prepared = data::is_prepared_folder(path);
    if (!prepared && std::filesystem::exists(file, ec)) return read_any_tokenizer_json(file);
    if (!prepared)
      for (const char* gpt2_file : {"vocab.json", "merges.txt", "encoder.json", "vocab.bpe"})
        if (std::filesystem::exists(path + "/" + gpt2_file, ec))
          return data::read_gpt2_tokenizer_files(path);
    if (std::filesystem::exists(file, ec)) return data::read_tokenizer_file(file);
    throw UsageError(
        fmt::format("{} '{}' is a folder without a {}: not a prepared folder, nor one of "
                    "GPT-2's tokenizer files (vocab.json + merges.txt, or encoder.json + "
                    "vocab.bpe)",
                    option, base::printable(path), data::kTokenizerFile));
  }
  require_file(path, option);
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0)
    return read_any_tokenizer_json(path);
  const io::Checkpoint ckpt = io::load_checkpoint(path);
  if (io::tokenizer_kind(ckpt.tokenizer) == data::TokenizerKind::none)
    throw std::runtime_error(
        fmt::format("'{}' holds no tokenizer (a gradient dump)", base::printable(path)));
  return io::make_tokenizer(ckpt.tokenizer);
}

}  // namespace cli
