// `inspect`: what a checkpoint holds, and with --verify whether every dataset's checksum
// holds; for a prepared folder, what it holds, and with --verify every token file hashed
// whole and every id checked. Every name and string from the file is escaped for the
// terminal.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "base/hash.h"
#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "data/prepared.h"
#include "io/checkpoint.h"
#include "io/history.h"
#include "io/tokenizer_section.h"
#include "train/config.h"
#include "train/console.h"
#include "train/freezing.h"

namespace cli {

namespace {

// Identical weights give identical hashes: how two runs are compared bit for bit.
uint64_t fnv1a(const ag::Tensor& t) {
  ag::Tensor f = t.to(ag::DType::Float32).contiguous();
  return base::fnv1a_64(
      std::string_view(static_cast<const char*>(f.raw_data()), static_cast<size_t>(f.numel()) * 4));
}

// "all checksums good" only when every dataset carries a checksum that held.
std::string verify_summary(const io::VerifyReport& r) {
  if (r.all_checked()) return fmt::format("verified {} datasets: all checksums good", r.datasets());
  std::string s = fmt::format(
      "verified {} datasets: {} checksums good, {} failed, {} without a checksum "
      "(unchecked)",
      r.datasets(), r.checked.size(), r.failures.size(), r.unchecked.size());
  if (!r.refused.empty()) s += fmt::format(", {} objects refused", r.refused.size());
  return s;
}

void print_tokenizer(const io::TokenizerSection& t) {
  const std::optional<data::TokenizerKind> kind = base::find_choice<data::TokenizerKind>(t.type);
  if (kind == data::TokenizerKind::gpt2) {
    fmt::print(
        "tokenizer gpt2 ({} ids: 256 bytes + {} merges + {} special)\nsplit_pattern {}\n"
        "special_tokens {}\n",
        256 + t.merges.size() + t.special_tokens.size(), t.merges.size(), t.special_tokens.size(),
        base::printable(t.split_pattern),
        base::printable(io::special_tokens_json(t.special_tokens)));
    return;
  }
  if (kind == data::TokenizerKind::hf) {
    fmt::print("tokenizer hf ({} ids, {} merges)\nsplit_pattern {}\nsettings {}\n",
               t.token_ends.size(), t.merges.size(), base::printable(t.split_pattern),
               base::printable(t.hf_settings.substr(0, 400)));
    return;
  }
  // byte and bpe: their reserved <|endoftext|> (none in a file written before it)
  const size_t end = t.special_tokens.empty() ? 0 : 1;
  const char* end_text = end ? " + <|endoftext|>" : "";
  if (kind == data::TokenizerKind::bytes) {
    fmt::print("tokenizer byte ({} ids: 256 bytes{})\n", 256 + end, end_text);
    return;
  }
  if (kind != data::TokenizerKind::bpe) {
    fmt::print("tokenizer {} ({} entries)\n", base::printable(t.type), t.vocab.size());
    return;
  }
  fmt::print("tokenizer bpe ({} ids: 256 bytes + {} merges{})\nsplit_pattern {}\n",
             256 + t.merges.size() + end, t.merges.size(), end_text,
             base::printable(t.split_pattern));
}

// What a run of this checkpoint trains (train/freezing.h: LoRA freezes the base weights,
// --freeze more), counted over the file's own parameters.
void print_trainable(const io::Checkpoint& ckpt) {
  nn::ShapeList shapes;
  for (const auto& [name, t] : ckpt.model) shapes.emplace_back(name, t.shape());
  train::ParameterCounts c;
  try {
    c = train::count_parameters(train::RunConfig::from_json(ckpt.config), shapes);
  } catch (const std::invalid_argument& e) {
    fmt::print("trainable: unknown ({})\n", base::printable(e.what()));
    return;
  }
  fmt::print("{:<40} {:>16} {:>12}\n{:<40} {:>16} {:>12}\n", "trainable", "", c.trainable, "frozen",
             "", c.frozen);
}

// The run it belongs to and the history it keeps (io/history.h), when a run wrote them.
void print_run(const io::Checkpoint& ckpt) {
  if (!ckpt.run_id.empty())
    fmt::print("run: {} ({})\n", base::printable(ckpt.run_name), base::printable(ckpt.run_id));
  if (ckpt.history.empty()) return;
  const auto rows = io::parse_history(ckpt.history, ckpt.source);
  if (!rows.empty())
    fmt::print("history: {} rows, steps {} to {} (report --checkpoint draws them)\n", rows.size(),
               rows.front().step, rows.back().step);
}

// The frozen weights the file holds as blocks (shown, and hashed, as their dequantized
// values), counted by format.
void print_packed(const io::Checkpoint& ckpt) {
  std::map<std::string, int> by_format;
  for (const auto& [name, format] : ckpt.packed) ++by_format[format];
  std::vector<std::string> counts;
  for (const auto& [format, n] : by_format)
    counts.push_back(fmt::format("{} parameter{} in {} blocks", n, n == 1 ? "" : "s", format));
  if (!counts.empty())
    fmt::print("held as blocks (values above dequantized): {}\n", fmt::join(counts, ", "));
}

void print_checkpoint(const io::Checkpoint& ckpt, bool sums) {
  fmt::print("checkpoint {}\nstep {}\nconfig {}\n", base::printable(ckpt.source), ckpt.step,
             base::printable(ckpt.config.dump(2), /*keep_line_breaks=*/true));
  if (!ckpt.data_identity.empty()) fmt::print("data {}\n", base::printable(ckpt.data_identity));
  if (ckpt.micro_batches >= 0) fmt::print("micro_batches {}\n", ckpt.micro_batches);
  print_run(ckpt);
  print_tokenizer(ckpt.tokenizer);
  fmt::print("\n{:<40} {:>16} {:>12}{}\n", "parameter", "shape", "count", sums ? "  fnv1a" : "");
  int64_t total = 0;
  for (const auto& [name, t] : ckpt.model) {
    fmt::print("{:<40} {:>16} {:>12}{}\n", base::printable(name), ag::shape_str(t.shape()),
               t.numel(), sums ? fmt::format("  {:016x}", fnv1a(t)) : "");
    total += t.numel();
  }
  fmt::print("{:<40} {:>16} {:>12}\n", "total", "", total);
  print_packed(ckpt);
  print_trainable(ckpt);
  fmt::print("\noptimizer: {}\n",
             ckpt.optimizer ? base::printable(ckpt.optimizer->type) : "none (weights only)");
  for (const auto& [name, s] : ckpt.rng) fmt::print("rng {}: saved\n", base::printable(name));
}

// Parses `inspect FILE [--verify] [--checksums]`; nullopt after --help.
std::optional<po::variables_map> inspect_options(const Args& args, std::string& path) {
  po::options_description desc("inspect options");
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("checkpoint", po::value(&path)->required(), "checkpoint file, or a prepared folder");
  add("verify",
      "read every dataset and report checksum failures by name (a prepared folder: hash every "
      "token file whole and check every id)");
  add("checksums", "print a 64-bit FNV-1a hash of each parameter's float32 bytes");
  po::variables_map vm = parse_options(args, desc, "checkpoint");
  if (!vm.count("help")) return vm;
  std::cout << "usage: attograd inspect FILE|PREPARED_DIR [--verify] [--checksums]\n\n"
            << desc << "\n";
  return std::nullopt;
}

// Every dataset in the same pass, so each bad one is named even when loading stops.
io::Checkpoint load_verified(const std::string& path, const io::LoadOptions& shown,
                             std::optional<io::VerifyReport>& report) {
  io::Inspection r = io::inspect_checkpoint(path, shown);
  for (const auto& f : r.report.refused) train::noticef("REFUSED {}\n", base::printable(f));
  for (const auto& f : r.report.failures) train::noticef("FAILED {}\n", base::printable(f));
  for (const auto& f : r.report.unchecked) train::noticef("UNCHECKED {}\n", base::printable(f));
  if (!r.checkpoint) {
    fmt::print("{}\n", verify_summary(r.report));
    throw io::CheckpointError(r.load_error);
  }
  report = std::move(r.report);
  return std::move(*r.checkpoint);
}

// Every id of a token file against the vocabulary, a million at a time.
void check_every_id(const data::TokenStore& ids) {
  constexpr size_t kChunk = size_t{1} << 20;
  std::vector<int64_t> buffer(kChunk);
  for (size_t at = 0; at < ids.size(); at += kChunk)
    ids.copy(at, std::min(kChunk, ids.size() - at), buffer.data());
}

// A prepared folder: its identity and token files; --verify is the full check open_prepared
// leaves to a request for token files over data::kFullCheckBytes (docs/data.md).
int inspect_folder(const std::string& path, bool verify) {
  const data::PreparedData d =
      data::open_prepared(path, data::TokenStore::FileAccess::kRead,
                          verify ? data::TokenCheck::kFull : data::TokenCheck::kAuto);
  const data::PreparedMeta& m = *d.meta;
  fmt::print("prepared folder {}\ndata_identity {}\ntokenizer {} ({} ids)\n", base::printable(path),
             d.identity, m.tokenizer_kind, m.vocab_size);
  for (const auto& [name, part, store] : {std::tuple{data::kTrainFile, m.train, &d.train},
                                          std::tuple{data::kValFile, m.val, &d.val}}) {
    const uint64_t bytes = part.tokens * data::dtype_bytes(m.dtype);
    fmt::print("{}: {} {} ids, sha256 {}\n", name, part.tokens, data::dtype_name(m.dtype),
               part.sha256.empty() ? "not recorded (prepared before hashes were)"
               : verify || bytes <= data::kFullCheckBytes
                   ? part.sha256 + " (checked)"
                   : part.sha256 + " (its sample checked; --verify hashes it whole)");
    if (verify) check_every_id(*store);
  }
  if (verify) fmt::print("every token file verified: each id is in the vocabulary\n");
  return 0;
}

}  // namespace

int inspect_command(const Args& args) {
  return guarded("inspect", [&] {
    std::string path;
    const auto vm = inspect_options(args, path);
    if (!vm) return 0;
    if (data::is_prepared_folder(path)) return inspect_folder(path, vm->count("verify") > 0);
    require_file(path, "checkpoint");
    // inspect shows a file with NaN weights (the load of any other command refuses it)
    const io::LoadOptions shown{.allow_non_finite = true};
    std::optional<io::VerifyReport> report;
    io::Checkpoint ckpt =
        vm->count("verify") ? load_verified(path, shown, report) : io::load_checkpoint(path, shown);
    for (const auto& w : ckpt.warnings)
      train::noticef("attograd inspect: warning: {}\n", base::printable(w));
    print_checkpoint(ckpt, vm->count("checksums") > 0);
    if (!report) return 0;
    fmt::print("{}\n", verify_summary(*report));
    return report->failures.empty() && report->refused.empty() ? 0 : 1;
  });
}

}  // namespace cli
