#pragma once
// Internal: which kernel multiplies a GEMM, chosen by measuring the candidates on this CPU
// (no fixed rule is right on every CPU: docs/performance.md, "Kernel choice"), and
// likewise which tile kernels take the fused attention's bf16 products.
// gemm.cpp (attention.cpp) asks tuned_kernel() once per size class and runs the answer; this
// file keeps the answers: in the process, and in a small cache file per CPU signature
// under $XDG_CACHE_HOME/attograd/ (else ~/.cache/attograd/), shared by every process of the
// user on the machine.
//
// Why the answers cannot change results with the thread count: every candidate splits a
// GEMM into the same pieces whatever the team (gemm.h), so candidates are timed on one
// piece, on one thread, and the thread count is not part of the signature; a class decided
// once is never decided again (first writer wins, under a lock on the file), so two runs on
// one machine, with any thread counts, use the same kernels.
//
// ATTOGRAD_TUNE=off uses the fixed rules (gemm.h's f32_backend and bf16_backend) and
// touches no file; ATTOGRAD_TUNE=fresh measures every class again and rewrites the file.
// The file is data from elsewhere: made with O_EXCL when missing; one already there is read
// (and written) only if it is a regular file of ours with one name (a hard link planted
// there is ignored) under 1 MiB, never through a symbolic link; fresh rewrites only a file
// that starts with our header; a line that does not parse is skipped; one for another
// signature makes the whole file ignored.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ag::detail {

enum class GemmKernel : uint8_t {
  openblas_f32,      // OpenBLAS's sgemm on float32 operands
  onednn_f32,        // oneDNN's float32 matmul, one call per output block
  onednn_bf16,       // oneDNN's bfloat16 matmul (AMX or AVX-512 BF16, as oneDNN picks)
  widened_openblas,  // bfloat16 operands widened to float32, then OpenBLAS's sgemm
  widened_onednn,    // bfloat16 operands widened to float32, then oneDNN's float32 matmul
  // oneDNN's matmuls cut another way (gemm.h's OneDnnLayout): fewer, larger blocks; B
  // reordered once into oneDNN's blocked layout and shared by the blocks; or both
  onednn_f32_large,
  onednn_f32_packed,
  onednn_f32_large_packed,
  onednn_bf16_large,
  onednn_bf16_packed,
  onednn_bf16_large_packed,
  // the fused attention's bf16 products (an attention class, below)
  attention_fma,     // on FMAs over float32 holding bfloat16 values (ops/tile_kernels.h)
  attention_bf16,    // on the CPU's BF16 dot products (ops/tile_kernels_bf16.h)
  attention_onednn,  // on oneDNN's bfloat16 matmuls (ops/attention_onednn.h: AMX where present)
  attention_f32,     // the attention in float32 (an f32 attention class's one candidate)
};
const char* kernel_name(GemmKernel kernel);
// Whether a bf16 class's kernel widens its operands to float32 (widened_openblas, _onednn)
constexpr bool is_widened(GemmKernel k) {
  return k == GemmKernel::widened_openblas || k == GemmKernel::widened_onednn;
}

// A GEMM's size class: precision, layouts, and M, N, K each rounded up to a power of two
// (so a sampling run whose window grows by a token meets a few classes, not a class a
// token).
struct GemmClass {
  bool bf16, ta, tb;
  uint8_t log_m, log_n, log_k;
  // An attention class instead: the fused attention's products for T queries (m), S keys
  // (n) and head dimension D (k), causal where ta; odd where a head size (D or Dv) is odd,
  // which no kernel on the BF16 units takes (they pair values along the sums)
  bool attention = false;
  bool odd = false;
  bool operator==(const GemmClass&) const = default;
};
GemmClass gemm_class(bool bf16, bool ta, bool tb, int64_t M, int64_t N, int64_t K);
// (bf16; the same with bf16 false: the attention in float32, timed to weigh bf16 against)
GemmClass attention_class(bool causal, int64_t T, int64_t S, int64_t D, bool odd_head_size);
// "bf16 NT 2048x1024x256", "bf16 attention causal 64x64 d64", "... d16 odd"
std::string describe(const GemmClass& c);

enum class TuneMode { on, off, fresh };
TuneMode tune_mode();  // from ATTOGRAD_TUNE (on when unset); throws on another value

// Seconds one run of a candidate takes on the class's sample problem (an output block of
// the GEMM met first, or one row of the attention's forward and backward, on the calling
// thread); +infinity where the candidate has no kernel.
using TimeCandidate = std::function<double(GemmKernel)>;

// The kernel for class c: this process's answer, else the cache file's, else the fastest
// candidate as timed by `time` (a warm-up run each, then the best of up to three), recorded
// in both. `rule` where tuning is off or this process may not measure (set_measuring), and
// where a kept answer is not one of `candidates` (a file from elsewhere names a kernel these
// shapes cannot take: it is never trusted; the rule must always be valid).
GemmKernel tuned_kernel(const GemmClass& c, std::span<const GemmKernel> candidates, GemmKernel rule,
                        double multiply_adds, const TimeCandidate& time);

// A measured answer, with the GFLOP/s each candidate reached on the sample problem.
struct TunedEntry {
  GemmClass cls;
  GemmKernel kernel;
  std::vector<std::pair<GemmKernel, double>> gflops;
};
std::vector<TunedEntry> tuned_entries();  // this process's answers, in the order made
// Whether bfloat16 pays for a bf16 class (a GEMM's or the attention's) by this process's
// answers (see gemm.h's bf16_pays): false where it and the f32 class of the same shape are
// both known and either its kept kernel is a widened one (float32's kernels after a
// widening pass) or the f32 class's kernel ran faster than the bf16 one by kTuneMargin;
// always true under ATTOGRAD_BF16_FALLBACK=off.
bool bf16_class_pays(const GemmClass& bf16_class);

// ATTOGRAD_BF16_FALLBACK: on (unset) lets --precision bf16 run a shape in float32 where
// float32 was measured faster; off keeps bfloat16 everywhere it was asked for (the numbers
// of bf16 then do not depend on which kernels this CPU has). Throws on another value.
bool bf16_fallback_enabled();
// On or off whatever this process's environment says (every rank takes rank 0's setting
// with its table: train/gemm_agreement.cpp; and tests); nullopt: the environment again
void set_bf16_fallback(std::optional<bool> on);

// A candidate replaces the rule only when it is this much faster: a difference inside the
// timing noise must not change kernels (and results) from one cache file to another.
constexpr double kTuneMargin = 1.03;

std::string tuning_signature();   // CPU model and flags, oneDNN's ISA, library versions
std::string tuning_file();        // the cache file's path ("" where there is no cache folder)
std::string tuning_file_state();  // what happened to the file: used, created, ignored (why)

// Commands whose results must not depend on the number of processes (train, eval): the
// kernels are measured only where every rank can take the answers (train's set-up, on rank
// 0); then rank 0 loads the cache file (load_tuning_file), sends its table as text
// (tuned_entries_text) and every rank, alone or one of many, adopts it
// (adopt_tuned_entries: the table replaced, nothing measured after), so a class none of
// them knows runs by the rule everywhere.
void load_tuning_file();
std::string tuned_entries_text();
void adopt_tuned_entries(const std::string& text);
void set_measuring(bool on);  // off: unknown classes run by the rule (ranks other than 0)

// Test support: forget the table and the file's state (as a new process), re-read ATTOGRAD_TUNE.
// How long a run waits for another process's lock on the cache file before it chooses
// kernels without the file (10 s; tests shorten it).
void set_tuning_lock_wait(double seconds);
void reset_tuning_for_tests();

}  // namespace ag::detail
