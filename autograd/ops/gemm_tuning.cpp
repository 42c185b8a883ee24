#include "autograd/ops/gemm_tuning.h"

#include <cblas.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_map>

namespace ag::detail {

namespace {

constexpr GemmKernel kKernels[] = {GemmKernel::openblas_f32,
                                   GemmKernel::onednn_f32,
                                   GemmKernel::onednn_bf16,
                                   GemmKernel::widened_openblas,
                                   GemmKernel::widened_onednn,
                                   GemmKernel::attention_fma,
                                   GemmKernel::attention_bf16,
                                   GemmKernel::attention_onednn,
                                   GemmKernel::attention_f32,
                                   GemmKernel::onednn_f32_large,
                                   GemmKernel::onednn_f32_packed,
                                   GemmKernel::onednn_f32_large_packed,
                                   GemmKernel::onednn_bf16_large,
                                   GemmKernel::onednn_bf16_packed,
                                   GemmKernel::onednn_bf16_large_packed};
// Version 2: bf16 classes are also weighed against float32 (bf16_pays), attention classes
// have a float32 candidate. Version 3: an attention class says whether a head size is odd
// (AC or AF, ACO or AFO). Version 4: oneDNN's block layouts are candidates (onednn_*_large,
// _packed, _large_packed), which a version 3 binary would skip and measure again. Version 5:
// oneDNN's blocks run on dense copies of strided operands (gemm.cpp's DenseBlock), so its
// candidates' rates changed (most, on AMX: their brgemm kernels now run). An older file
// keeps its name (the name hashes the header), so older binaries keep theirs, and this one never
// reads their entries.
constexpr char kHeader[] = "attograd-gemm-kernels 5";
constexpr off_t kMaxFileBytes = 1 << 20;
constexpr size_t kMaxLineBytes = 400;
// How long a run waits for another process's lock on the file (tests shorten it).
std::atomic<double> g_lock_wait_seconds{10};
constexpr int kMaxLog = 40;  // 2^40 rows: beyond anything a line of ours holds

bool parse_kernel(const std::string& name, GemmKernel& out) {
  for (GemmKernel k : kKernels)
    if (name == kernel_name(k)) return out = k, true;
  return false;
}

uint8_t log2_ceil(int64_t v) {
  return static_cast<uint8_t>(std::bit_width(static_cast<uint64_t>(std::max<int64_t>(v, 1) - 1)));
}

uint64_t class_key(const GemmClass& c) {
  return uint64_t(c.bf16) | uint64_t(c.ta) << 1 | uint64_t(c.tb) << 2 | uint64_t(c.attention) << 3 |
         uint64_t(c.odd) << 4 | uint64_t(c.log_m) << 8 | uint64_t(c.log_n) << 16 |
         uint64_t(c.log_k) << 24;
}

// "model name", "cpu family", "model", "stepping" and "flags" of the first processor
std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, out;
  for (int seen = 0; seen < 5 && std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    if (key == "model name" || key == "cpu family" || key == "model" || key == "stepping" ||
        key == "flags")
      out += key + "=" + line.substr(std::min(line.size(), colon + 2)) + "; ", ++seen;
  }
  return out;
}

// A line as the file holds it: printable ASCII only (the signature is read from the system)
std::string printable(std::string s) {
  for (char& ch : s)
    if (ch < 0x20 || ch > 0x7e) ch = '?';
  return s;
}

// A class's layout field: N or T for each GEMM operand; AC or AF (causal or full) for an
// attention class, then O where a head size is odd
std::string layout_field(const GemmClass& c) {
  if (c.attention) return std::string(c.ta ? "AC" : "AF") + (c.odd ? "O" : "");
  return {c.ta ? 'T' : 'N', c.tb ? 'T' : 'N'};
}

bool parse_layout(const std::string& layout, GemmClass& c) {
  if (layout == "AC" || layout == "AF" || layout == "ACO" || layout == "AFO") {
    c.attention = true, c.ta = layout[1] == 'C', c.tb = false, c.odd = layout.size() == 3;
    return true;
  }
  if (layout.size() != 2) return false;
  for (char ch : layout)
    if (ch != 'N' && ch != 'T') return false;
  c.ta = layout[0] == 'T', c.tb = layout[1] == 'T';
  return true;
}

std::string entry_line(const TunedEntry& e) {
  std::string line =
      fmt::format("{} {} {} {} {} {}", e.cls.bf16 ? "bf16" : "f32", layout_field(e.cls),
                  e.cls.log_m, e.cls.log_n, e.cls.log_k, kernel_name(e.kernel));
  for (const auto& [k, gflops] : e.gflops)
    line += fmt::format(" {}={:.1f}", kernel_name(k), gflops);
  return line + "\n";
}

bool parse_log(const std::string& s, uint8_t& out) {
  if (s.empty() || s.size() > 2 || !std::all_of(s.begin(), s.end(), ::isdigit)) return false;
  const int v = std::stoi(s);
  if (v > kMaxLog) return false;
  out = static_cast<uint8_t>(v);
  return true;
}

// One entry line; false (the line is skipped) where anything in it is not ours
bool parse_entry(const std::string& line, TunedEntry& e) {
  std::istringstream in(line);
  std::string precision, layout, m, n, k, kernel, extra;
  if (!(in >> precision >> layout >> m >> n >> k >> kernel)) return false;
  if (precision != "f32" && precision != "bf16") return false;
  e = {};
  e.cls.bf16 = precision == "bf16";
  if (!parse_layout(layout, e.cls)) return false;
  if (!parse_log(m, e.cls.log_m) || !parse_log(n, e.cls.log_n) || !parse_log(k, e.cls.log_k) ||
      !parse_kernel(kernel, e.kernel))
    return false;
  while (in >> extra) {  // name=GFLOP/s, for bench --tune to show
    const size_t eq = extra.find('=');
    GemmKernel candidate;
    if (eq == std::string::npos || !parse_kernel(extra.substr(0, eq), candidate)) return false;
    char* end = nullptr;
    const double g = std::strtod(extra.c_str() + eq + 1, &end);
    if (end == extra.c_str() + eq + 1 || *end != '\0' || !std::isfinite(g) || g < 0 || g > 1e7)
      return false;
    e.gflops.emplace_back(candidate, g);
  }
  return true;
}

std::string cache_folder() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/attograd";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') return std::string(home) + "/.cache/attograd";
  return "";
}

// The folder that must be there already for the cache folder to be made in it: $HOME (a
// missing home is never made), or the one $XDG_CACHE_HOME is in.
std::string cache_root() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') {
    std::string path(xdg);
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    return path.substr(0, std::max<size_t>(path.rfind('/'), 1));
  }
  const char* home = std::getenv("HOME");
  return home != nullptr && home[0] == '/' ? home : "";
}

// mkdir -p for the cache folder below its root (private to the user where we make it)
bool make_folder(const std::string& path) {
  const std::string root = cache_root();
  struct stat root_st;
  if (root.empty() || ::stat(root.c_str(), &root_st) != 0 || !S_ISDIR(root_st.st_mode))
    return false;
  for (size_t slash = root.size() + 1; slash <= path.size(); ++slash) {
    if (slash != path.size() && path[slash] != '/') continue;
    const std::string part = path.substr(0, slash);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The cache file, made with O_EXCL when missing; one already there is opened without
// O_CREAT or following a link (the caller checks what it is before writing a byte).
int open_cache_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd >= 0 || errno != EEXIST) return fd;
  return ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
}

// Whether the file is empty or begins with our header line: a table of ours
bool starts_with_header(int fd) {
  const std::string head = std::string(kHeader) + "\n";
  std::string bytes(head.size(), '\0');
  const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), 0);
  return n == 0 || (n == static_cast<ssize_t>(head.size()) && bytes == head);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// The table, its file, and the lock that serialises both within the process
class Tuner {
 public:
  GemmKernel kernel(const GemmClass& c, std::span<const GemmKernel> candidates, GemmKernel rule,
                    double macs, const TimeCandidate& time);
  std::vector<TunedEntry> entries() {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_;
  }
  // A class's kept kernel and the GFLOP/s it reached when measured (0 where the entry has
  // no figure for it), without copying the entry: asked once per linear per step
  std::optional<std::pair<GemmKernel, double>> kept(const GemmClass& c) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = table_.find(class_key(c));
    if (it == table_.end()) return std::nullopt;
    const TunedEntry& e = order_[it->second];
    for (const auto& [k, gflops] : e.gflops)
      if (k == e.kernel) return std::pair(e.kernel, gflops);
    return std::pair(e.kernel, 0.0);
  }
  std::string file_state() {
    std::lock_guard<std::mutex> lock(mutex_);
    return state_.empty() ? "not opened yet (no GEMM has been tuned in this process)" : state_;
  }
  std::string text();
  void adopt(const std::string& text);
  void set_measuring(bool on) {
    std::lock_guard<std::mutex> lock(mutex_);
    measuring_ = on;
  }
  void load() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const int fd = open_locked(); fd >= 0) ::close(fd);
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    table_.clear(), order_.clear(), state_.clear();
    measuring_ = true, truncated_ = false, ignored_ = false;
  }

 private:
  // The cache file opened and locked (-1 where there is none or it is ignored); entries
  // another process wrote since are merged in.
  int open_locked();
  bool read_file(int fd);
  void append(int fd, const TunedEntry& e);
  TunedEntry measure(const GemmClass& c, std::span<const GemmKernel> candidates, GemmKernel rule,
                     double macs, const TimeCandidate& time);
  void insert(const TunedEntry& e) {
    if (table_.emplace(class_key(e.cls), order_.size()).second) order_.push_back(e);
  }

  std::mutex mutex_;
  std::unordered_map<uint64_t, size_t> table_;  // a class's entry in order_
  std::vector<TunedEntry> order_;
  bool measuring_ = true, truncated_ = false, ignored_ = false;
  std::string state_;
};

Tuner& tuner() {
  static Tuner t;
  return t;
}

}  // namespace

const char* kernel_name(GemmKernel kernel) {
  switch (kernel) {
    case GemmKernel::openblas_f32: return "openblas_f32";
    case GemmKernel::onednn_f32: return "onednn_f32";
    case GemmKernel::onednn_bf16: return "onednn_bf16";
    case GemmKernel::widened_openblas: return "widened_openblas";
    case GemmKernel::widened_onednn: return "widened_onednn";
    case GemmKernel::onednn_f32_large: return "onednn_f32_large";
    case GemmKernel::onednn_f32_packed: return "onednn_f32_packed";
    case GemmKernel::onednn_f32_large_packed: return "onednn_f32_large_packed";
    case GemmKernel::onednn_bf16_large: return "onednn_bf16_large";
    case GemmKernel::onednn_bf16_packed: return "onednn_bf16_packed";
    case GemmKernel::onednn_bf16_large_packed: return "onednn_bf16_large_packed";
    case GemmKernel::attention_fma: return "attention_fma";
    case GemmKernel::attention_bf16: return "attention_bf16";
    case GemmKernel::attention_onednn: return "attention_onednn";
    case GemmKernel::attention_f32: return "attention_f32";
  }
  return "?";
}

GemmClass gemm_class(bool bf16, bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  return {bf16, ta, tb, log2_ceil(M), log2_ceil(N), log2_ceil(K)};
}

GemmClass attention_class(bool causal, int64_t T, int64_t S, int64_t D, bool odd_head_size) {
  return {true, causal, false, log2_ceil(T), log2_ceil(S), log2_ceil(D), true, odd_head_size};
}

std::string describe(const GemmClass& c) {
  if (c.attention)
    return fmt::format("{} attention {} {}x{} d{}{}", c.bf16 ? "bf16" : "f32",
                       c.ta ? "causal" : "full", int64_t{1} << c.log_m, int64_t{1} << c.log_n,
                       int64_t{1} << c.log_k, c.odd ? " odd" : "");
  return fmt::format("{} {}{} {}x{}x{}", c.bf16 ? "bf16" : "f32", c.ta ? 'T' : 'N',
                     c.tb ? 'T' : 'N', int64_t{1} << c.log_m, int64_t{1} << c.log_n,
                     int64_t{1} << c.log_k);
}

namespace {

std::atomic<int> g_mode{-1};  // a TuneMode once ATTOGRAD_TUNE was read

// The index in `values` of environment variable `name`'s value, 0 where it is unset or
// empty; throws, naming the variable and what it may be, on anything else
int env_choice(const char* name, std::initializer_list<const char*> values, const char* allowed) {
  const char* v = std::getenv(name);
  const std::string s = v == nullptr ? "" : v;
  if (s.empty()) return 0;
  int index = 0;
  for (const char* value : values) {
    if (s == value) return index;
    ++index;
  }
  throw std::invalid_argument(
      fmt::format("{} must be {}, got '{}'", name, allowed, printable(s.substr(0, 64))));
}

}  // namespace

TuneMode tune_mode() {
  int mode = g_mode.load(std::memory_order_relaxed);
  if (mode < 0) {  // TuneMode's order
    mode = env_choice("ATTOGRAD_TUNE", {"on", "off", "fresh"}, "on, off or fresh");
    g_mode.store(mode, std::memory_order_relaxed);
  }
  return static_cast<TuneMode>(mode);
}

std::string tuning_signature() {
  static const std::string signature = [] {
    const dnnl_version_t* v = dnnl_version();
    return printable(fmt::format("{}oneDNN {}.{}.{} isa {}; {} {}", cpu_description(), v->major,
                                 v->minor, v->patch,
                                 static_cast<int>(dnnl::get_effective_cpu_isa()),
                                 openblas_get_config(), openblas_get_corename()));
  }();
  return signature;
}

std::string tuning_file() {
  const std::string folder = cache_folder();
  if (folder.empty()) return "";
  return fmt::format("{}/gemm-{:016x}.txt", folder,
                     fnv1a(std::string(kHeader) + "\n" + tuning_signature()));
}

std::string tuning_file_state() {
  return tune_mode() == TuneMode::off ? "not used (ATTOGRAD_TUNE=off)" : tuner().file_state();
}

GemmKernel tuned_kernel(const GemmClass& c, std::span<const GemmKernel> candidates, GemmKernel rule,
                        double multiply_adds, const TimeCandidate& time) {
  if (tune_mode() == TuneMode::off) return rule;
  return tuner().kernel(c, candidates, rule, multiply_adds, time);
}

std::vector<TunedEntry> tuned_entries() {
  return tuner().entries();
}

namespace {
std::atomic<int> g_fallback{-1};  // 0 or 1 once ATTOGRAD_BF16_FALLBACK was read or forced
}  // namespace

bool bf16_fallback_enabled() {
  int on = g_fallback.load(std::memory_order_relaxed);
  if (on < 0) {
    on = env_choice("ATTOGRAD_BF16_FALLBACK", {"on", "off"}, "on or off") == 0;
    g_fallback.store(on, std::memory_order_relaxed);
  }
  return on == 1;
}

void set_bf16_fallback(std::optional<bool> on) {
  g_fallback = on ? int(*on) : -1;
}

bool bf16_class_pays(const GemmClass& bf16_class) {
  if (!bf16_fallback_enabled() || tune_mode() == TuneMode::off) return true;
  GemmClass f32_class = bf16_class;
  f32_class.bf16 = false;
  const auto in_bf16 = tuner().kept(bf16_class), in_f32 = tuner().kept(f32_class);
  if (!in_bf16 || !in_f32) return true;  // not measured here: bf16, as asked
  if (!bf16_class.attention && is_widened(in_bf16->first)) return false;
  return !(in_f32->second > kTuneMargin * in_bf16->second);
}

std::string tuned_entries_text() {
  return tuner().text();
}

void adopt_tuned_entries(const std::string& text) {
  tuner().adopt(text);
}

void set_measuring(bool on) {
  tuner().set_measuring(on);
}

void load_tuning_file() {
  if (tune_mode() != TuneMode::off) tuner().load();
}

void set_tuning_lock_wait(double seconds) {
  g_lock_wait_seconds = seconds;
}

void reset_tuning_for_tests() {
  g_mode = -1;
  tuner().reset();
}

namespace {

GemmKernel Tuner::kernel(const GemmClass& c, std::span<const GemmKernel> candidates,
                         GemmKernel rule, double macs, const TimeCandidate& time) {
  std::lock_guard<std::mutex> lock(mutex_);
  // a kept answer these shapes cannot take is never run
  const auto trusted = [&](GemmKernel k) {
    return std::find(candidates.begin(), candidates.end(), k) != candidates.end() ? k : rule;
  };
  if (auto it = table_.find(class_key(c)); it != table_.end())
    return trusted(order_[it->second].kernel);
  if (!measuring_) return rule;
  const int fd = open_locked();  // holds the file's lock until closed: one measurer a class
  if (auto it = table_.find(class_key(c)); it != table_.end()) {
    if (fd >= 0) ::close(fd);
    return trusted(order_[it->second].kernel);
  }
  const TunedEntry e = measure(c, candidates, rule, macs, time);
  insert(e);
  if (fd >= 0) append(fd, e), ::close(fd);
  return e.kernel;
}

TunedEntry Tuner::measure(const GemmClass& c, std::span<const GemmKernel> candidates,
                          GemmKernel rule, double macs, const TimeCandidate& time) {
  TunedEntry e{c, rule, {}};
  double best = std::numeric_limits<double>::infinity(), rule_seconds = best;
  for (GemmKernel k : candidates) {
    double seconds = time(k);  // the warm-up: makes oneDNN's kernel, fills caches
    if (!std::isfinite(seconds)) continue;
    for (int rep = 0, reps = seconds < 0.02 ? 3 : 1; rep < reps; ++rep)
      seconds = std::min(seconds, time(k));
    e.gflops.emplace_back(k, 2 * macs / std::max(seconds, 1e-9) / 1e9);
    if (k == rule) rule_seconds = seconds;
    if (seconds < best) best = seconds, e.kernel = k;
  }
  if (best * kTuneMargin > rule_seconds) e.kernel = rule;
  return e;
}

// The process holding a flock on the file open as fd, from /proc/locks ("" when unknown).
std::string lock_holder(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return "";
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream fields(line);
    std::string number, kind, mode, access, pid, device;
    if (!(fields >> number >> kind >> mode >> access >> pid >> device) || kind != "FLOCK") continue;
    const size_t colon = device.rfind(':');
    if (colon != std::string::npos && device.substr(colon + 1) == std::to_string(st.st_ino))
      return pid;
  }
  return "";
}

// Takes the file's lock, waiting for another process at most g_lock_wait_seconds (saying so
// once it has waited a second): "" once held, else why the file is left alone. A suspended
// attograd holding it must not stop every other one.
std::string lock_within(int fd, const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  bool said = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      return fmt::format("ignored: cannot be locked ({})", std::strerror(errno));
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // who holds it is read only when it is said
    const auto who = [fd] {
      const std::string holder = lock_holder(fd);
      return holder.empty() ? std::string("another process") : "process " + holder;
    };
    if (waited >= g_lock_wait_seconds)
      return fmt::format(
          "ignored: locked by {} for over {:.0f} s (a stopped attograd?); kernels are "
          "chosen without it",
          who(), g_lock_wait_seconds.load());
    if (waited >= 1 && !said)
      said = true,
      fmt::print(stderr, "attograd: waiting for {} to unlock the kernel cache {}\n", who(), path);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

int Tuner::open_locked() {
  if (ignored_) return -1;
  const std::string path = tuning_file();
  auto give_up = [&](const std::string& why) {
    ignored_ = true;
    state_ = path.empty() ? why : fmt::format("{}: {}", path, why);
    return -1;
  };
  if (path.empty()) return give_up("no cache folder (neither XDG_CACHE_HOME nor HOME is set)");
  if (!make_folder(cache_folder()))
    return give_up(
        fmt::format("its folder cannot be made (in {}, which must be a folder)", cache_root()));
  const int fd = open_cache_file(path);
  if (fd < 0) return give_up(fmt::format("ignored: cannot be opened ({})", std::strerror(errno)));
  if (const std::string why = lock_within(fd, path); !why.empty()) return ::close(fd), give_up(why);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      st.st_nlink != 1 || st.st_size > kMaxFileBytes) {
    ::close(fd);
    return give_up("ignored: not a regular file of this user with one name, under 1 MiB");
  }
  // measured afresh, written afresh; a file that is not a table of ours is never rewritten
  if (tune_mode() == TuneMode::fresh && !truncated_ && starts_with_header(fd)) {
    truncated_ = true;
    if (::ftruncate(fd, 0) != 0) return ::close(fd), give_up("ignored: cannot be rewritten");
    st.st_size = 0;
  }
  if (st.st_size == 0) {
    const std::string head = fmt::format("{}\nsignature {}\n", kHeader, tuning_signature());
    if (::pwrite(fd, head.data(), head.size(), 0) != static_cast<ssize_t>(head.size()))
      return ::close(fd), give_up("ignored: cannot be written");
  }
  if (!read_file(fd)) return ::close(fd), give_up("ignored: not a table for this CPU");
  if (state_.empty()) state_ = path + ": used";
  return fd;
}

// Merges the file's complete lines into the table; false where its header is not ours
bool Tuner::read_file(int fd) {
  std::string bytes(static_cast<size_t>(kMaxFileBytes), '\0');
  const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), 0);
  if (n < 0) return false;
  bytes.resize(static_cast<size_t>(n));
  std::istringstream in(bytes.substr(0, bytes.rfind('\n') + 1));  // a torn last line is skipped
  std::string header, signature;
  if (!std::getline(in, header) || header != kHeader || !std::getline(in, signature) ||
      signature != "signature " + tuning_signature())
    return false;
  for (std::string line; std::getline(in, line);) {
    TunedEntry e;
    if (line.size() <= kMaxLineBytes && parse_entry(line, e)) insert(e);
  }
  return true;
}

void Tuner::append(int fd, const TunedEntry& e) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_size + static_cast<off_t>(kMaxLineBytes) > kMaxFileBytes)
    return;  // full: the answer is kept in this process only
  std::string line = entry_line(e);
  char last = '\n';
  if (st.st_size > 0 && ::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n')
    line = "\n" + line;  // after a line a killed writer left torn
  if (::pwrite(fd, line.data(), line.size(), st.st_size) != static_cast<ssize_t>(line.size()))
    state_ = tuning_file() + ": used, but an answer could not be written";
}

std::string Tuner::text() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  for (const TunedEntry& e : order_) out += entry_line(e);
  return out;
}

void Tuner::adopt(const std::string& text) {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.clear();
  order_.clear();
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    TunedEntry e;
    if (line.size() <= kMaxLineBytes && parse_entry(line, e)) insert(e);
  }
  measuring_ = false;
}

}  // namespace

}  // namespace ag::detail
