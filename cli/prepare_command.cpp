// `prepare`: text files tokenized once, in bounded memory, into a folder that `train --data`
// and `eval --data` map (data/prepared.h).
#include <fmt/format.h>
#include <unistd.h>

#include <system_error>

#include "autograd/threading.h"
#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "data/prepared.h"
#include "train/memory_plan.h"
#include "train/stop_signals.h"

namespace cli {

namespace {

struct PrepareCommandOptions {
  std::vector<std::string> sources;
  data::TokenizerKind tokenizer = data::TokenizerKind::chars;
  std::string out, tokenizer_from;
  int64_t vocab_size = 0;
  double val_fraction = 0.1;
  int threads = ag::kDefaultThreads;
  bool overwrite = false;
};

po::options_description prepare_options(PrepareCommandOptions& o) {
  po::options_description desc("prepare options");
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("data", po::value(&o.sources)->multitoken()->composing()->required(),
      "UTF-8 text files, or folders (every *.txt below them), in corpus order (repeat, or "
      "name several)");
  add("tokenizer", value_with_default(&o.tokenizer, o.tokenizer), "char, byte or bpe");
  add("tokenizer-from", po::value(&o.tokenizer_from),
      "use this tokenizer instead of making one (GPT-2's: a folder of its files, or a "
      "checkpoint, a tokenizer .json file or a prepared folder)");
  add("vocab-size", po::value(&o.vocab_size)->default_value(0),
      "bpe: the vocabulary to learn (256 byte tokens + merges + <|endoftext|>)");
  add("val-fraction", value_with_default(&o.val_fraction, 0.1),
      "the last fraction of the corpus held out for validation");
  add("out", po::value(&o.out)->required(),
      "the folder to write (new or empty; a prepared folder to replace with --overwrite)");
  add("no-recursive", "in folders, only their own *.txt, not their subfolders'");
  add("no-sync", "skip fsync before the files are renamed into place (faster, not crash-safe)");
  add("threads", po::value(&o.threads)->default_value(ag::kDefaultThreads), "threads");
  add("config", po::value<std::string>(), "read options from an INI file");
  add_overwrite_option(desc, o.overwrite);
  return desc;
}

// One line redrawn in place on a terminal: the whole run's share done and its speed.
class ProgressBar {
 public:
  explicit ProgressBar(bool tty) : tty_(tty) {}
  void operator()(const data::PrepareProgress& p) {
    if (!tty_) return;
    const double share =
        p.all_total ? static_cast<double>(p.all_done) / static_cast<double>(p.all_total) : 0;
    const int width = 24, filled = static_cast<int>(width * share);
    const double mb_s = p.seconds > 0 ? static_cast<double>(p.all_done) / 1e6 / p.seconds : 0;
    fmt::print(stderr, "\r[{}{}] pass {}/{} {:<15} {:5.1f}% {:7.1f} MB/s\033[K",
               std::string(filled, '#'), std::string(width - filled, '.'), p.pass, p.passes,
               p.stage, 100 * share, mb_s);
    drawn_ = true;
  }
  void end() const {
    if (drawn_) fmt::print(stderr, "\r\033[K");
  }

 private:
  bool tty_, drawn_ = false;
};

void print_summary(const data::PrepareResult& r, const std::string& out, double seconds) {
  const data::PreparedMeta& m = r.meta;
  fmt::print("prepared {}: {} source file{}, {} of text in {:.1f} s ({:.0f} MB/s)\n",
             base::printable(out), m.sources.size(), m.sources.size() == 1 ? "" : "s",
             train::format_bytes(static_cast<int64_t>(m.total_bytes)), seconds,
             seconds > 0 ? static_cast<double>(m.total_bytes) / 1e6 / seconds : 0);
  fmt::print("tokenizer {} ({} ids) | {} | train {} tokens ({:.3f} per byte) | val {} tokens\n",
             m.tokenizer_kind, m.vocab_size, data::dtype_name(m.dtype), m.train.tokens,
             m.train.text_bytes ? static_cast<double>(m.train.tokens) / m.train.text_bytes : 0.0,
             m.val.tokens);
  fmt::print("data_identity {}\n", r.identity);
}

}  // namespace

int prepare_command(const Args& args) {
  return guarded("prepare", [&] {
    PrepareCommandOptions o;
    auto desc = prepare_options(o);
    auto vm = parse_options(args, desc);
    if (wants_help(vm, "prepare", desc)) return 0;
    if (o.threads < 1) throw UsageError(fmt::format("--threads must be >= 1, got {}", o.threads));
    ag::set_num_threads(o.threads);
    data::PrepareOptions p;
    p.sources = o.sources;
    p.recursive = !vm.count("no-recursive");
    p.tokenizer = o.tokenizer;
    p.vocab_size = o.vocab_size;
    if (vm.count("tokenizer-from")) {
      for (const char* option : {"tokenizer", "vocab-size"})
        if (!vm[option].defaulted())
          throw UsageError(fmt::format(
              "--{} makes a tokenizer, but --tokenizer-from gives one; use one or the other",
              option));
      p.existing = load_tokenizer(o.tokenizer_from, "--tokenizer-from");
      p.tokenizer = p.existing->kind();
    }
    io::NamedPaths inputs = {{"--tokenizer-from", o.tokenizer_from}};
    for (const std::string& source : o.sources) inputs.emplace_back("--data", source);
    const auto claim = claim_outputs({{"--out", o.out, io::OutputKind::folder}}, inputs,
                                     {.overwrite = o.overwrite});
    p.val_fraction = o.val_fraction;
    p.out_dir = o.out;
    p.sync = !vm.count("no-sync");
    ProgressBar bar(isatty(STDERR_FILENO));
    train::StopSignals signals;  // Ctrl-C stops between chunks, leaving the folder as it was
    p.progress = [&bar](const data::PrepareProgress& progress) {
      if (train::StopSignals::requested())
        throw std::runtime_error(fmt::format("{}: stopped; the folder is left as it was",
                                             train::signal_name(train::StopSignals::first())));
      bar(progress);
    };
    const auto start = std::chrono::steady_clock::now();
    data::PrepareResult r;
    try {
      r = data::prepare(p);
    } catch (const std::system_error& e) {  // a thread or a mapping the system refused
      bar.end();
      throw std::runtime_error(fmt::format(
          "{} (prepare needs about 100 MB of memory and 500 MB of address space: is a limit such "
          "as ulimit -v set too low?)",
          e.what()));
    } catch (...) {
      bar.end();
      throw;
    }
    bar.end();
    print_summary(r, o.out,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return 0;
  });
}

}  // namespace cli
