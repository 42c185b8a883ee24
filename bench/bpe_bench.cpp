// attograd_bpe_bench: the speed of BPE training and encoding on a text file (not a test).
//
//   attograd_bpe_bench TEXT [--train-mb 10] [--vocab 4096] [--chunk-kb 0]
//
// Trains on the first --train-mb megabytes (in --chunk-kb pieces when > 0, as a stream),
// then encodes the rest of the file (the held-out text) on 1 and 2 threads, reporting
// seconds, MB/s, bytes per token on held-out text, and the peak RSS.
#include <omp.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>

#include "data/bpe.h"
#include "io/files.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

// The longest prefix of at most n bytes that ends at a character boundary.
size_t char_boundary(const std::string& text, size_t n) {
  n = std::min(n, text.size());
  while (n > 0 && n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return n;
}

data::BpeTokenizer train(const std::string& text, int64_t vocab, size_t chunk) {
  const double rss_before = peak_rss_mb();
  data::BpeTrainer trainer;
  const auto t0 = std::chrono::steady_clock::now();
  if (chunk == 0) chunk = text.size();
  for (size_t pos = 0; pos < text.size(); pos += chunk)
    trainer.add_text(std::string_view(text).substr(pos, chunk));
  trainer.end_text();
  const double counted = seconds_since(t0);
  data::BpeTokenizer tok = trainer.train(vocab);
  std::printf(
      "train: %.2f MB to %lld tokens in %.2f s (pieces counted in %.2f s), %zu distinct "
      "pieces, piece counts %.1f MB, peak RSS %.0f MB (+%.0f MB while training)\n",
      text.size() / 1e6, static_cast<long long>(tok.vocab_size()), seconds_since(t0), counted,
      trainer.distinct_pieces(), trainer.memory_bytes() / 1e6, peak_rss_mb(),
      peak_rss_mb() - rss_before);
  return tok;
}

void time_encode(const data::BpeTokenizer& tok, const std::string& text, int threads) {
  omp_set_num_threads(threads);
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 2);
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    ids.clear();
    const auto t0 = std::chrono::steady_clock::now();
    tok.encode_append(text, ids);
    best = std::min(best, seconds_since(t0));
  }
  std::printf("encode, %d thread%s: %.2f MB in %.3f s = %.1f MB/s, %zu tokens, %.3f bytes/token\n",
              threads, threads == 1 ? "" : "s", text.size() / 1e6, best, text.size() / 1e6 / best,
              ids.size(), static_cast<double>(text.size()) / ids.size());
  const std::vector<int64_t> wide(ids.begin(), ids.end());
  if (tok.decode(wide) != text) throw std::runtime_error("decode(encode(text)) != text");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TEXT [--train-mb 10] [--vocab 4096] [--chunk-kb 0]\n", argv[0]);
    return 2;
  }
  double train_mb = 10;
  int64_t vocab = 4096;
  size_t chunk_kb = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--train-mb")
      train_mb = std::stod(argv[i + 1]);
    else if (flag == "--vocab")
      vocab = std::stoll(argv[i + 1]);
    else if (flag == "--chunk-kb")
      chunk_kb = std::stoull(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  try {
    const std::string text = base::read_input_file(argv[1], "text file");
    const size_t split = char_boundary(text, static_cast<size_t>(train_mb * 1e6));
    const data::BpeTokenizer tok = train(text.substr(0, split), vocab, chunk_kb * 1024);
    const std::string held_out = split < text.size() ? text.substr(split) : text;
    for (const int threads : {1, 2}) time_encode(tok, held_out, threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
