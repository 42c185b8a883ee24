// attograd_prepare_bench: the speed and memory of preparing a corpus, and of opening and
// sampling the result (run by hand, not by ctest).
//
//   attograd_prepare_bench --out DIR [--tokenizer char|byte|bpe] [--vocab 4096]
//                          [--val-fraction 0.1] [--chunk-mb 16] [--no-sync] SOURCE...
//
// Prints MB/s of text prepared, the peak RSS of the prepare, the time open_prepared takes,
// and the resident memory after drawing 100,000 training batches of 16 x 64 from the map.
#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "data/data.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

// VmRSS of /proc/self/status, in MB: resident now (ru_maxrss is the peak).
double rss_now_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

data::PrepareOptions parse(int argc, char** argv) {
  data::PrepareOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--out") o.out_dir = value();
    else if (a == "--tokenizer") o.tokenizer = value();
    else if (a == "--vocab") o.vocab_size = std::stoll(value());
    else if (a == "--val-fraction") o.val_fraction = std::stod(value());
    else if (a == "--chunk-mb") o.chunk_bytes = std::stoull(value()) << 20;
    else if (a == "--no-sync") o.sync = false;
    else o.sources.push_back(a);
  }
  return o;
}

void sample(const data::PreparedData& d) {
  data::BatchSampler sampler(&d.train, 16, 64);
  ag::Generator gen(1);
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < 100000; ++step) sampler.next(gen);
  std::printf("sample: 100000 batches of 16 x 64 in %.2f s; resident now %.0f MB\n",
              seconds_since(t0), rss_now_mb());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    data::PrepareOptions o = parse(argc, argv);
    double last = 0;
    o.progress = [&](const data::PrepareProgress& p) {
      const double f = p.all_total ? static_cast<double>(p.all_done) / p.all_total : 0;
      if (f - last < 0.1 && p.bytes_done != 0) return;
      last = f;
      std::fprintf(stderr, "  pass %d/%d %-16s %5.1f%%\n", p.pass, p.passes,
                   std::string(p.stage).c_str(), 100 * f);
    };
    const auto t0 = std::chrono::steady_clock::now();
    const data::PrepareResult r = data::prepare(o);
    const double s = seconds_since(t0);
    std::printf("prepare %s: %.1f MB in %.2f s = %.0f MB/s; %llu + %llu tokens (%s); peak RSS "
                "%.0f MB\n",
                o.tokenizer.c_str(), r.meta.total_bytes / 1e6, s, r.meta.total_bytes / 1e6 / s,
                static_cast<unsigned long long>(r.meta.train.tokens),
                static_cast<unsigned long long>(r.meta.val.tokens),
                std::string(data::dtype_name(r.meta.dtype)).c_str(), peak_rss_mb());
    const auto t1 = std::chrono::steady_clock::now();
    const data::PreparedData d = data::open_prepared(o.out_dir);
    std::printf("open_prepared: %.2f ms (%zu + %zu tokens mapped), resident %.0f MB\n",
                seconds_since(t1) * 1e3, d.train.size(), d.val.size(), rss_now_mb());
    sample(d);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
