// attograd_prepare_bench: the speed and memory of preparing a corpus, and of opening and
// sampling the result (run by hand, not by ctest).
//
//   attograd_prepare_bench --out DIR [--tokenizer char|byte|bpe] [--vocab 4096]
//                          [--val-fraction 0.1] [--chunk-mb 16] [--no-sync]
//                          [--generate-mb N] [--batches N] [--open-only] SOURCE...
//
// --generate-mb N first writes N MB of generated text (English-like words, a few percent
// of them accented, Greek, CJK or emoji) to the first SOURCE, unless it already has that
// size. The prepare runs in a child process, so its peak RSS is its own; then this process
// opens the folder and draws batches of 16 x 64 from the mapped training ids, reporting
// the time per batch and how much its resident memory grew, reading the ids (pread) and
// mapping them (mmap). --open-only skips the prepare (a folder prepared before).
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "data/data.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// VmRSS of /proc/self/status, in MB: resident now (ru_maxrss is the peak).
double rss_now_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

struct Options {
  data::PrepareOptions prepare;
  int64_t generate_mb = 0;
  int64_t batches = 20000;
  bool open_only = false;  // the folder is there: open and sample it, no prepare
};

Options parse(int argc, char** argv) {
  Options o;
  data::PrepareOptions& p = o.prepare;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--out")
      p.out_dir = value();
    else if (a == "--tokenizer")
      p.tokenizer = base::parse_choice<data::TokenizerKind>(value());
    else if (a == "--vocab")
      p.vocab_size = std::stoll(value());
    else if (a == "--val-fraction")
      p.val_fraction = std::stod(value());
    else if (a == "--chunk-mb")
      p.chunk_bytes = std::stoull(value()) << 20;
    else if (a == "--no-sync")
      p.sync = false;
    else if (a == "--generate-mb")
      o.generate_mb = std::stoll(value());
    else if (a == "--batches")
      o.batches = std::stoll(value());
    else if (a == "--open-only")
      o.open_only = true;
    else
      p.sources.push_back(a);
  }
  if (p.sources.empty() || p.out_dir.empty())
    throw std::invalid_argument("need --out and a SOURCE");
  return o;
}

// N MB of text from a fixed seed: lines of 5 to 20 words.
void generate(const std::string& path, int64_t mb) {
  struct stat st {};
  const uint64_t bytes = static_cast<uint64_t>(mb) << 20;
  if (stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == bytes) return;
  static constexpr std::array<const char*, 48> kWords = {
      "the",  "of",    "and",   "to",    "in",    "is",     "was",   "that",  "for",   "it",
      "with", "as",    "his",   "on",    "be",    "at",     "by",    "had",   "are",   "but",
      "from", "or",    "have",  "they",  "which", "one",    "you",   "were",  "her",   "all",
      "time", "world", "great", "years", "water", "people", "state", "house", "never", "under",
      "1984", "42",    "(see",  "it's",  "well,", "night.", "back;", "way:"};
  static constexpr std::array<const char*, 8> kOther = {"café", "naïve",  "Ελλάδα", "日本語",
                                                        "😀",    "Straße", "año",    "Москва"};
  ag::Generator gen(12345);
  std::string text;
  text.reserve(bytes + 256);
  while (text.size() < bytes) {
    const uint64_t n = 5 + gen.next_u64() % 16;
    for (uint64_t w = 0; w < n; ++w) {
      const uint64_t r = gen.next_u64();
      text += r % 32 == 0 ? kOther[(r >> 8) % kOther.size()] : kWords[(r >> 8) % kWords.size()];
      text += w + 1 < n ? ' ' : '\n';
    }
  }
  while ((static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) text[bytes] = 'x';
  text.resize(bytes);
  std::ofstream(path, std::ios::binary).write(text.data(), static_cast<std::streamsize>(bytes));
  std::printf("generated %s: %lld MB\n", path.c_str(), static_cast<long long>(mb));
}

// Runs the prepare in a child, whose peak RSS is the prepare's alone.
void prepare_in_child(data::PrepareOptions o) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    double shown = -1, pass_start = 0;
    int pass = 0;
    o.progress = [&](const data::PrepareProgress& p) {
      const double f = p.all_total ? static_cast<double>(p.all_done) / p.all_total : 0;
      if (p.pass != pass) {
        if (pass > 0) std::fprintf(stderr, "  pass %d took %.2f s\n", pass, p.seconds - pass_start);
        pass = p.pass, pass_start = p.seconds;
      }
      if (f - shown < 0.2 && p.bytes_done != 0) return;
      shown = f;
      // MB/s of corpus: the fraction of the whole run done, as corpus bytes, per second
      std::fprintf(stderr, "  pass %d/%d %-16s %5.1f%%  %6.0f MB/s\n", p.pass, p.passes,
                   std::string(p.stage).c_str(), 100 * f,
                   p.seconds > 0 ? f * p.bytes_total / 1e6 / p.seconds : 0.0);
    };
    try {
      const auto t0 = std::chrono::steady_clock::now();
      const data::PrepareResult r = data::prepare(o);
      const double s = seconds_since(t0);
      std::printf("prepare %s: %.1f MB in %.2f s = %.0f MB/s; %llu + %llu tokens (%s)\n",
                  base::choice_name(o.tokenizer), r.meta.total_bytes / 1e6, s,
                  r.meta.total_bytes / 1e6 / s,
                  static_cast<unsigned long long>(r.meta.train.tokens),
                  static_cast<unsigned long long>(r.meta.val.tokens),
                  std::string(data::dtype_name(r.meta.dtype)).c_str());
      std::fflush(stdout);
      _exit(0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      _exit(1);
    }
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("prepare failed");
  std::printf("prepare peak RSS: %.0f MB\n", usage.ru_maxrss / 1024.0);
}

void sample(const data::PreparedData& d, int64_t batches, const char* how) {
  data::BatchSampler sampler(&d.train, 16, 64);
  ag::Generator gen(1);
  const double before = rss_now_mb();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < batches; ++step) sampler.next(gen);
  const double s = seconds_since(t0);
  std::printf(
      "sample (%s): %lld batches of 16 x 64 in %.2f s (%.1f us each); resident %.0f MB "
      "-> %.0f MB\n",
      how, static_cast<long long>(batches), s, s / batches * 1e6, before, rss_now_mb());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (o.generate_mb > 0) generate(o.prepare.sources.front(), o.generate_mb);
    if (!o.open_only) prepare_in_child(o.prepare);
    using Access = data::TokenStore::FileAccess;
    for (const Access access : {Access::kRead, Access::kMap}) {
      const char* how = access == Access::kRead ? "read" : "map";
      const auto t1 = std::chrono::steady_clock::now();
      const data::PreparedData d = data::open_prepared(o.prepare.out_dir, access);
      std::printf("open_prepared (%s): %.2f ms (%zu + %zu tokens), resident %.0f MB\n", how,
                  seconds_since(t1) * 1e3, d.train.size(), d.val.size(), rss_now_mb());
      if (o.batches > 0) sample(d, o.batches, how);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
