#include "autograd/ops/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops/gemm_tuning.h"
#include "autograd/parallel.h"
#include "autograd/profile.h"
#include "autograd/threading.h"

namespace ag::detail {

bool gemm_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc, GemmOperand& out) {
  if ((sc == 1 || cols == 1) && (rows == 1 || sr >= std::max<int64_t>(cols, 1))) {
    out = {false, rows == 1 ? std::max<int64_t>(cols, 1) : sr};
    return true;
  }
  if ((sr == 1 || rows == 1) && (cols == 1 || sc >= std::max<int64_t>(rows, 1))) {
    out = {true, cols == 1 ? std::max<int64_t>(rows, 1) : sc};
    return true;
  }
  return false;
}

GemmOperand gemm_operand(Tensor& x) {
  const int64_t r = x.dim();
  GemmOperand op;
  if (!gemm_layout(x.shape()[r - 2], x.shape()[r - 1], x.strides()[r - 2], x.strides()[r - 1],
                   op)) {
    x = x.detach().contiguous();
    gemm_layout(x.shape()[r - 2], x.shape()[r - 1], x.strides()[r - 2], x.strides()[r - 1], op);
  }
  return op;
}

namespace {

CBLAS_TRANSPOSE blas_trans(const GemmOperand& o) {
  return o.trans ? CblasTrans : CblasNoTrans;
}

int64_t rows_grain(int64_t N) {
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(N, 1));
}

// rows_done over the whole of C [M, N], in chunks of rows on all threads
template <typename T>
void finish_rows(int64_t M, int64_t N, const GemmEpilogue<T>& e) {
  if (e.rows_done)
    parallel_for_items(M, rows_grain(N), N,
                       [&](int64_t r0, int64_t r1) { e.rows_done(r0, r1 - r0); });
}

// C [rows, N] (leading dimension ldc) set to the bias, for a GEMM that then adds onto it
template <typename T>
void fill_with_bias(T* C, int64_t rows, int64_t N, int64_t ldc, const T* bias) {
  parallel_for_items(rows, rows_grain(N), N, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) std::memcpy(C + r * ldc, bias, N * sizeof(T));
  });
}

// The beta a library GEMM that knows no bias is called with once C holds the bias
template <typename T>
T beta_after_bias(T beta, T* C, int64_t rows, int64_t N, int64_t ldc, const T* bias) {
  if (bias == nullptr) return beta;
  if (beta != 0) throw std::logic_error("gemm: a bias with beta 1 (accumulate) is not supported");
  fill_with_bias(C, rows, N, ldc, bias);
  return 1;
}

// C [m, n] (leading dimension ldc) = A B (+ bias) by OpenBLAS's sgemm: gemm_openblas, and a
// block onednn_blocks falls back to
void sgemm_block(const GemmOperand& oa, const GemmOperand& ob, int64_t m, int64_t n, int64_t K,
                 const float* a, const float* b, float* c, int64_t ldc, float beta,
                 const float* bias) {
  beta = beta_after_bias(beta, c, m, n, ldc, bias);
  const OpenBlasCallThreads blas_threads;
  cblas_sgemm(CblasRowMajor, blas_trans(oa), blas_trans(ob), m, n, K, 1.0f, a, oa.ld, b, ob.ld,
              beta, c, ldc);
}

// ATTOGRAD_F32_GEMM: auto (measured, or the rule), openblas or onednn
std::optional<F32Backend> forced_f32_backend() {
  static const int forced = [] {
    const char* v = std::getenv("ATTOGRAD_F32_GEMM");
    if (v == nullptr || std::string(v) == "auto") return 0;
    if (std::string(v) == "openblas") return 1;
    if (std::string(v) == "onednn") return 2;
    throw std::invalid_argument("ATTOGRAD_F32_GEMM must be auto, openblas or onednn, got '" +
                                std::string(v).substr(0, 64) + "'");
  }();
  if (forced == 0) return std::nullopt;
  return forced == 1 ? F32Backend::openblas : F32Backend::onednn;
}

// ATTOGRAD_BF16_GEMM: onednn or openblas (widened), whatever the CPU or the measurements say
std::optional<Bf16Backend> forced_bf16_backend() {
  static const std::optional<Bf16Backend> forced = []() -> std::optional<Bf16Backend> {
    const char* v = std::getenv("ATTOGRAD_BF16_GEMM");
    if (v == nullptr) return std::nullopt;
    if (std::string(v) == "onednn") return Bf16Backend::onednn;
    if (std::string(v) == "openblas") return Bf16Backend::openblas;
    throw std::invalid_argument("ATTOGRAD_BF16_GEMM must be onednn or openblas, got '" +
                                std::string(v).substr(0, 64) + "'");
  }();
  return forced;
}

}  // namespace

void sgemm_nt_here(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                   int64_t ldb, float beta, float* C, int64_t ldc) {
  if (openblas_split_keeps_bits())
    return sgemm_block({false, lda}, {true, ldb}, M, N, K, A, B, C, ldc, beta, nullptr);
  const OmpThreadsScope one_thread(1);
  if (dnnl_sgemm('N', 'T', M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc) != dnnl_success)
    throw std::runtime_error("gemm: oneDNN's sgemm failed");
}

namespace {
std::atomic<int64_t> g_gemms{0};  // gemm_count(): the products gemm() has run

// A GEMM's row of the step's breakdown (profile.h): its size class and kernel, 2MNK flops
void describe_gemm(profile::Timer& timer, bool bf16, const GemmOperand& oa, const GemmOperand& ob,
                   int64_t M, int64_t N, int64_t K, const char* kernel) {
  if (!timer.on()) return;
  timer.describe("GEMM " + describe(gemm_class(bf16, oa.trans, ob.trans, M, N, K)), kernel,
                 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K));
}

// Which kernel runs a GEMM: the override, else the measured choice for its class
// (gemm_tuning.h), else the rule (f32_backend, bf16_backend). Defined with the timers below.
GemmKernel f32_kernel(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
                      const float* A, const float* B);
GemmKernel bf16_kernel(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N,
                       int64_t K, const bfloat16* A, const bfloat16* B);
std::optional<OneDnnLayout> onednn_layout(GemmKernel k);
}  // namespace

F32Backend f32_backend(const GemmOperand& oa, int64_t M, int64_t N, int64_t K) {
  const double macs = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const bool blas = macs < kOneDnnMinWork || (oa.trans && M * N >= kBlasWeightGradOutputs);
  return forced_f32_backend().value_or(blas ? F32Backend::openblas : F32Backend::onednn);
}

void gemm(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
          const float* A, const float* B, float* C, float beta, const GemmEpilogue<float>& e) {
  g_gemms.fetch_add(1, std::memory_order_relaxed);
  profile::Timer timer("GEMM");
  const GemmKernel kernel = f32_kernel(oa, ob, M, N, K, A, B);
  describe_gemm(timer, false, oa, ob, M, N, K, kernel_name(kernel));
  if (const auto layout = onednn_layout(kernel))
    return gemm_onednn(oa, ob, M, N, K, A, B, C, beta, e, *layout);
  gemm_openblas(oa, ob, M, N, K, A, B, C, beta, e);
}

void gemm(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
          const double* A, const double* B, double* C, double beta, const GemmEpilogue<double>& e) {
  g_gemms.fetch_add(1, std::memory_order_relaxed);
  profile::Timer timer("GEMM");
  describe_gemm(timer, false, oa, ob, M, N, K, "openblas_f64");
  beta = beta_after_bias(beta, C, M, N, N, e.bias);
  const OpenBlasCallThreads blas_threads;
  cblas_dgemm(CblasRowMajor, blas_trans(oa), blas_trans(ob), M, N, K, 1.0, A, oa.ld, B, ob.ld, beta,
              C, N);
  finish_rows(M, N, e);
}

// ---- oneDNN

namespace {

// One oneDNN matmul: its shape, operand layouts and type, whether it adds onto C, and
// whether it reads B in the layout oneDNN prefers (packed_b) rather than as given.
struct MatmulKey {
  int64_t m, n, k, lda, ldb, ldc;
  bool ta, tb, accumulate, f32_operands, bias;
  bool packed_b = false;
  bool operator==(const MatmulKey&) const = default;
};

struct MatmulKeyHash {
  size_t operator()(const MatmulKey& k) const {
    size_t h = 0;
    for (int64_t v :
         {k.m, k.n, k.k, k.lda, k.ldb, k.ldc,
          int64_t(k.ta) | int64_t(k.tb) << 1 | int64_t(k.accumulate) << 2 |
              int64_t(k.f32_operands) << 3 | int64_t(k.bias) << 4 | int64_t(k.packed_b) << 5})
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

struct Matmul {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c, bias, scratchpad;
  // packed_b: the reorder from B as given (plain_b) into `b`, the layout the kernel reads
  dnnl::memory::desc plain_b;
  std::optional<dnnl::reorder> pack_b;
};

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::memory::desc matrix_desc(int64_t rows, int64_t cols, bool trans, int64_t ld,
                               dnnl::memory::data_type type) {
  const dnnl::memory::dims strides = trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
  return dnnl::memory::desc({rows, cols}, type, strides);
}

// A oneDNN matmul for the key, made for one thread (so it never splits K) with a scratchpad
// we provide; null where oneDNN has only its reference implementation for this CPU (or,
// packed_b, no reorder into the layout it prefers).
std::shared_ptr<const Matmul> make_matmul(const MatmulKey& k) {
  using dt = dnnl::memory::data_type;
  const dt operands = k.f32_operands ? dt::f32 : dt::bf16;
  auto a = matrix_desc(k.m, k.k, k.ta, k.lda, operands);
  const auto plain_b = matrix_desc(k.k, k.n, k.tb, k.ldb, operands);
  auto b = k.packed_b ? dnnl::memory::desc({k.k, k.n}, operands, dnnl::memory::format_tag::any)
                      : plain_b;
  auto c = matrix_desc(k.m, k.n, false, k.ldc, dt::f32);
  auto bias = k.bias ? matrix_desc(1, k.n, false, k.n, dt::f32) : dnnl::memory::desc();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (k.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  try {
    OmpThreadsScope one_thread(1);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, bias, c), attr, cpu_engine());
    if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
    std::optional<dnnl::reorder> pack_b;  // none where the kernel reads B as given
    if (k.packed_b && pd.weights_desc() != plain_b)
      pack_b.emplace(
          dnnl::reorder::primitive_desc(cpu_engine(), plain_b, cpu_engine(), pd.weights_desc()));
    return std::make_shared<const Matmul>(Matmul{dnnl::matmul(pd), a, pd.weights_desc(), c, bias,
                                                 pd.scratchpad_desc(), plain_b, std::move(pack_b)});
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// Matmuls made once per key and kept: a training step meets the same few shapes every
// time. A process that keeps meeting new shapes (sampling with a growing window) starts
// afresh past kMaxCached, so the cache stays bounded; callers hold what they use.
class MatmulCache {
 public:
  static constexpr size_t kMaxCached = 4096;
  std::shared_ptr<const Matmul> get(const MatmulKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      if (cache_.size() >= kMaxCached) cache_.clear();
      it = cache_.emplace(key, make_matmul(key)).first;
      ++stats_.made;
    } else {
      ++stats_.hits;
    }
    return it->second;
  }
  OneDnnCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  std::mutex mutex_;
  OneDnnCacheStats stats_;
  std::unordered_map<MatmulKey, std::shared_ptr<const Matmul>, MatmulKeyHash> cache_;
};

MatmulCache& matmul_cache() {
  static MatmulCache cache;
  return cache;
}

// Runs one cached matmul on the calling thread, with a per-thread scratchpad that grows to
// the largest one needed and is then reused; bias only where the matmul was made with one.
void run_matmul(const Matmul& mm, const void* A, const void* B, float* C, const float* bias) {
  thread_local dnnl::stream stream(cpu_engine());
  thread_local std::vector<uint8_t> scratch;
  const size_t bytes = mm.scratchpad.get_size();
  if (scratch.size() < bytes) scratch.resize(bytes);
  auto& e = cpu_engine();
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(mm.a, e, const_cast<void*>(A))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(mm.b, e, const_cast<void*>(B))},
      {DNNL_ARG_DST, dnnl::memory(mm.c, e, C)},
      {DNNL_ARG_SCRATCHPAD, dnnl::memory(mm.scratchpad, e, scratch.data())}};
  if (bias != nullptr)
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(mm.bias, e, const_cast<float*>(bias)));
  // One thread at execution too: oneDNN's gemm-based matmuls (gemm:jit, what it runs for
  // strided operands and where its ISA is capped below AVX-512) take their threads when
  // they run, and split K among them: a 2-thread run's sums differed from a 1-thread
  // run's under ONEDNN_MAX_CPU_ISA=AVX2 (cli.bf16_parity_without_bf16_units)
  const OmpThreadsScope one_thread(1);
  mm.primitive.execute(stream, args);
  stream.wait();
}

// The bfloat16 GEMM on float32 kernels: the operands widened (exactly) into float32
// temporaries from the caching allocator, then a float32 GEMM of their shape. What the
// openblas backend runs, and where oneDNN has no bfloat16 kernel for a shape.
Tensor widened(const bfloat16* src, int64_t rows, int64_t cols, int64_t ld) {
  Tensor out = empty({rows, cols});
  float* dst = out.data<float>();
  parallel_for_items(rows, rows_grain(cols), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) from_bfloat16(src + r * ld, dst + r * cols, cols);
  });
  return out;
}

// A [M, K] and B [K, N], as oa and ob lay them out, widened, with their new layouts
struct WidenedOperands {
  Tensor a, b;
  GemmOperand oa, ob;
};

WidenedOperands widened_operands(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N,
                                 int64_t K, const bfloat16* A, const bfloat16* B) {
  const int64_t a_cols = oa.trans ? M : K, b_cols = ob.trans ? K : N;
  return {widened(A, oa.trans ? K : M, a_cols, oa.ld),
          widened(B, ob.trans ? N : K, b_cols, ob.ld),
          {oa.trans, a_cols},
          {ob.trans, b_cols}};
}

// Output blocks: the longer of M and N cut into `count` pieces of `size` (the last may be
// shorter). At least kBlockWork multiply-adds a block, at most kMaxBlocks, a power of two
// of them (so that two or four threads get equal shares of the usual power-of-two sizes),
// sizes rounded to 32; all from the problem's size alone. Large blocks (OneDnnLayout):
// kLargeBlockWork and kMaxLargeBlocks, but at least two where the standard cut has two or
// more, so that two threads still share the GEMM.
constexpr double kBlockWork = 1 << 21, kLargeBlockWork = 1 << 23;
constexpr int64_t kMaxBlocks = 16, kMaxLargeBlocks = 4;

struct Blocks {
  bool along_m;
  int64_t size, count;
};

int64_t blocks_wanted(double work, bool large) {
  const auto count = [work](double block_work, int64_t least, int64_t most) {
    return std::clamp<int64_t>(static_cast<int64_t>(work / block_work), least, most);
  };
  const int64_t standard = count(kBlockWork, 1, kMaxBlocks);
  const int64_t wanted =
      large ? count(kLargeBlockWork, std::min<int64_t>(standard, 2), kMaxLargeBlocks) : standard;
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(wanted)));
}

Blocks output_blocks(int64_t M, int64_t N, int64_t K, bool large = false) {
  const bool along_m = M >= N;
  const int64_t len = along_m ? M : N;
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const int64_t wanted = blocks_wanted(work, large);
  const int64_t size = std::max<int64_t>(32, (len + wanted - 1) / wanted + 31) / 32 * 32;
  return {along_m, size, (len + size - 1) / size};
}

std::atomic<bool> g_fallback_only{false};  // force_gemm_fallback_for_tests

// fn(b0, b1) over [0, count) blocks: on all threads (parallel_for_items: a block is
// kBlockWork multiply-adds or more), or, inside a parallel region (run_pair's tasks), as
// one task per block that any idle thread of the team takes.
template <typename F>
void for_each_block(int64_t count, F&& fn) {
  if (!omp_in_parallel() || omp_get_num_threads() == 1)
    return parallel_for_items(count, 1, kBlockWork / kMacsPerElement, fn);
  const uint64_t n = static_cast<uint64_t>(count);  // (clang's taskloop counts unsigned)
#pragma omp taskloop grainsize(1)
  for (uint64_t i = 0; i < n; ++i) fn(static_cast<int64_t>(i), static_cast<int64_t>(i) + 1);
}

// B [K, N] reordered into the layout a packed_b matmul reads (OneDnnLayout::packed_b): the
// copy, from the caching allocator, and that layout. nullopt where oneDNN has no such
// matmul or it reads B as given (a copy would gain nothing). A reorder only moves values,
// so its bits do not depend on the threads it runs on.
struct PackedB {
  Tensor storage;
  dnnl::memory::desc layout;
};

std::optional<PackedB> packed_b(const MatmulKey& block, const void* B) {
  const auto mm = matmul_cache().get(block);
  if (!mm || !mm->pack_b) return std::nullopt;
  const auto floats = static_cast<int64_t>((mm->b.get_size() + sizeof(float) - 1) / sizeof(float));
  PackedB packed{empty({floats}), mm->b};
  thread_local dnnl::stream stream(cpu_engine());
  auto& e = cpu_engine();
  dnnl::memory from(mm->plain_b, e, const_cast<void*>(B));
  dnnl::memory to(mm->b, e, packed.storage.data<float>());
  mm->pack_b->execute(stream, from, to);
  stream.wait();
  return packed;
}

// oneDNN 2.6 runs its brgemm kernels (AMX's and the BF16 units' among them) only where a
// matmul's operands are dense: one strided operand sends it to gemm:jit. On an AMX Xeon
// (bf16, one thread) a 64x256x2048 block whose A is read transposed out of a wider matrix
// ran 383 GFLOP/s there against 518 dense, a block writing every fourth column of C 337
// against 763 (ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16: 59 against 95). So a block's strided
// operands are copied dense first (their rows memcpy'd, the orientation kept), and C, where
// strided, is made in a dense copy and written back. A copy moves values only: the bits
// depend on the block alone, as before.
// rows x cols from src (leading dimension from_ld) to dst (leading dimension to_ld)
template <typename T>
void copy_rows(const T* src, int64_t from_ld, T* dst, int64_t to_ld, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * to_ld, src + r * from_ld, static_cast<size_t>(cols) * sizeof(T));
}

template <typename T>
struct DenseBlock {
  int64_t m, n, K;
  bool ta, tb;

  int64_t lda() const { return ta ? m : K; }
  int64_t ldb() const { return tb ? K : n; }

  // rows x cols of src (leading dimension ld) as a dense array, in `keep` where copied
  static const T* dense(const T* src, int64_t rows, int64_t cols, int64_t ld, Tensor& keep) {
    if (ld == cols || rows <= 1) return src;
    const int64_t floats = (rows * cols * static_cast<int64_t>(sizeof(T)) + 3) / 4;
    keep = empty({floats});
    T* out = reinterpret_cast<T*>(keep.data<float>());
    copy_rows(src, ld, out, cols, rows, cols);
    return out;
  }
  const T* a(const T* src, int64_t ld, Tensor& keep) const {
    return dense(src, ta ? K : m, ta ? m : K, ld, keep);
  }
  const T* b(const T* src, int64_t ld, Tensor& keep) const {
    return dense(src, tb ? n : K, tb ? K : n, ld, keep);
  }
};

// Runs a block's matmul (made for dense A and C; B dense, or packed) on operands that may
// be strided: copies made dense where they are not (DenseBlock); C of leading dimension ldc.
template <typename T>
void run_dense_block(const Matmul& mm, const DenseBlock<T>& shape, const T* a, int64_t lda,
                     const void* b, float* c, int64_t ldc, bool accumulate, const float* bias) {
  Tensor a_copy, c_copy;
  const T* dense_a = shape.a(a, lda, a_copy);
  if (ldc == shape.n) return run_matmul(mm, dense_a, b, c, bias);
  c_copy = empty({shape.m, shape.n});
  float* dense_c = c_copy.data<float>();
  if (accumulate) copy_rows(c, ldc, dense_c, shape.n, shape.m, shape.n);
  run_matmul(mm, dense_a, b, dense_c, bias);
  copy_rows<float>(dense_c, shape.n, c, ldc, shape.m, shape.n);
}

// fn(m, n, a, b, c, bias) on each output block of C (output_blocks, cut as `large` says):
// the blocks shared among the threads (for_each_block), each followed by rows_done on its
// rows while they are in cache (blocks of columns: on all of C afterwards). The blocks come
// from the problem's size alone, so each is the same call on any thread count.
template <typename T, typename Fn>
void for_each_output_block(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N,
                           const Blocks& blocks, const T* A, const T* B, float* C,
                           const GemmEpilogue<float>& e, Fn&& fn) {
  for_each_block(blocks.count, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      const int64_t start = i * blocks.size;
      const int64_t len = std::min(blocks.size, (blocks.along_m ? M : N) - start);
      const int64_t m = blocks.along_m ? len : M, n = blocks.along_m ? N : len;
      const T* a = A;
      const T* b = B;
      float* c = C;
      const float* bias = e.bias;
      if (blocks.along_m)
        a += oa.trans ? start : start * oa.ld, c += start * N;
      else
        b += ob.trans ? start * ob.ld : start, c += start, bias += bias ? start : 0;
      fn(m, n, a, b, c, bias);
      if (blocks.along_m && e.rows_done) e.rows_done(start, len);
    }
  });
  if (!blocks.along_m) finish_rows(M, N, e);
}

// C = A B (+ C) (+ bias) by oneDNN, block by block (for_each_output_block), each block one
// single-threaded oneDNN call; under packed_b, blocks along M read B reordered once (a
// block whose matmul prefers another layout reads it plain). Where oneDNN has no kernel for
// a block, `fallback(m, n, a, b, c, bias)` computes it.
template <typename T, typename Fallback>
void onednn_blocks(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
                   const T* A, const T* B, float* C, float beta, const GemmEpilogue<float>& e,
                   OneDnnLayout layout, Fallback&& fallback) {
  if (M == 0 || N == 0) return;
  const Blocks blocks = output_blocks(M, N, K, layout.large_blocks);
  // every block's matmul reads dense operands (DenseBlock); a packed one's key keeps B's
  // own leading dimension, which its reorder reads
  const auto key = [&](int64_t m, int64_t n, const float* bias, bool packed) {
    const DenseBlock<T> dense{m, n, K, oa.trans, ob.trans};
    return MatmulKey{m,
                     n,
                     K,
                     dense.lda(),
                     packed ? ob.ld : dense.ldb(),
                     n,
                     oa.trans,
                     ob.trans,
                     beta != 0,
                     std::is_same_v<T, float>,
                     bias != nullptr,
                     packed};
  };
  const bool onednn = K > 0 && !g_fallback_only;
  std::optional<PackedB> packed;
  if (onednn && layout.packed_b && blocks.along_m)
    packed = packed_b(key(std::min(blocks.size, M), N, e.bias, true), B);
  for_each_output_block(
      oa, ob, M, N, blocks, A, B, C, e,
      [&](int64_t m, int64_t n, const T* a, const T* b, float* c, const float* bias) {
        std::shared_ptr<const Matmul> mm =
            packed ? matmul_cache().get(key(m, n, bias, true)) : nullptr;
        if (mm && mm->b != packed->layout) mm = nullptr;
        if (!mm && onednn) mm = matmul_cache().get(key(m, n, bias, false));
        if (!mm) return fallback(m, n, a, b, c, bias);
        const DenseBlock<T> dense{m, n, K, oa.trans, ob.trans};
        Tensor b_copy;
        run_dense_block(*mm, dense, a, oa.ld,
                        mm->pack_b ? packed->storage.data<float>()
                                   : static_cast<const void*>(dense.b(b, ob.ld, b_copy)),
                        c, N, beta != 0, bias);
      });
}

// ---- measured kernel choice (gemm_tuning.h): the candidates timed on one output block

// The oneDNN kernels and how each cuts a GEMM (OneDnnLayout); nullopt for another kernel
// (OpenBLAS's, a widened one: those cut nothing or run the standard cut on float32)
std::optional<OneDnnLayout> onednn_layout(GemmKernel k) {
  using G = GemmKernel;
  switch (k) {
    case G::onednn_f32:
    case G::onednn_bf16: return OneDnnLayout{false, false};
    case G::onednn_f32_large:
    case G::onednn_bf16_large: return OneDnnLayout{true, false};
    case G::onednn_f32_packed:
    case G::onednn_bf16_packed: return OneDnnLayout{false, true};
    case G::onednn_f32_large_packed:
    case G::onednn_bf16_large_packed: return OneDnnLayout{true, true};
    default: return std::nullopt;
  }
}

// The problem a class is timed on: the GEMM's first output block (output_blocks, cut the
// standard way or in large blocks), its long side cut to at most kSampleWork multiply-adds,
// so a class costs milliseconds to decide.
constexpr double kSampleWork = 1 << 26;

struct Sample {
  int64_t m, n;
  double macs;
};

Sample sample_of(int64_t M, int64_t N, int64_t K, bool large = false) {
  const Blocks blocks = output_blocks(M, N, K, large);
  int64_t m = blocks.along_m ? std::min(blocks.size, M) : M;
  int64_t n = blocks.along_m ? N : std::min(blocks.size, N);
  int64_t& long_side = blocks.along_m ? m : n;
  const double other = static_cast<double>(blocks.along_m ? n : m) * static_cast<double>(K);
  const int64_t fits = static_cast<int64_t>(kSampleWork / std::max(other, 1.0)) / 32 * 32;
  long_side = std::min(long_side, std::max<int64_t>(32, fits));
  return {m, n, static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(K)};
}

double seconds_of(const std::function<void()>& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

constexpr double kNoKernel = std::numeric_limits<double>::infinity();

// One timed run of oneDNN cut as `layout` says, on that layout's own sample (its first
// block), on the calling thread, in seconds scaled to the class's sample `s` (whose
// multiply-adds GFLOP/s count); under packed_b with the block's share (its rows of M) of
// reordering B. +inf without a kernel, and where the sample cannot tell the layout from
// another candidate (not timed twice, so noise cannot pick it): packed_b where the blocks
// run along N (they share no B: they run plain), large blocks where the sample is the
// standard one (the GEMM is cut the same, or both first blocks are cut to kSampleWork).
template <typename T>
double time_onednn(OneDnnLayout layout, const GemmOperand& oa, const GemmOperand& ob, int64_t M,
                   int64_t N, int64_t K, const Sample& s, const T* A, const T* B,
                   std::vector<float>& C) {
  const Sample own = sample_of(M, N, K, layout.large_blocks);
  if (layout.packed_b && !output_blocks(M, N, K).along_m) return kNoKernel;
  if (layout.large_blocks && own.m == s.m && own.n == s.n) return kNoKernel;
  // C as the step leaves it: blocks along N write a strided part of it (twice as wide here)
  const bool c_strided = !output_blocks(M, N, K, layout.large_blocks).along_m && own.n < N;
  const int64_t ldc = c_strided ? std::min(N, 2 * own.n) : own.n;
  C.resize(static_cast<size_t>(own.m * ldc));
  OmpThreadsScope one_thread(1);
  const DenseBlock<T> dense{own.m, own.n, K, oa.trans, ob.trans};
  const MatmulKey key{
      own.m, own.n,          K,        dense.lda(), layout.packed_b ? ob.ld : dense.ldb(),
      own.n, oa.trans,       ob.trans, false,       std::is_same_v<T, float>,
      false, layout.packed_b};
  const auto mm = matmul_cache().get(key);
  if (!mm) return kNoKernel;
  std::optional<PackedB> packed;
  const double pack_seconds = layout.packed_b ? seconds_of([&] { packed = packed_b(key, B); }) : 0;
  if (layout.packed_b && !packed) return kNoKernel;
  const double seconds = seconds_of([&] {
                           Tensor b_copy;
                           const void* b =
                               packed ? static_cast<const void*>(packed->storage.data<float>())
                                      : dense.b(B, ob.ld, b_copy);
                           run_dense_block(*mm, dense, A, oa.ld, b, C.data(), ldc, false, nullptr);
                         }) +
                         pack_seconds * static_cast<double>(own.m) / static_cast<double>(M);
  return seconds * s.macs / own.macs;
}

// One timed run of a float32 kernel on the sample, on the calling thread; +inf without one
double time_f32(GemmKernel k, const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N,
                int64_t K, const Sample& s, const float* A, const float* B, std::vector<float>& C) {
  if (const auto layout = onednn_layout(k))
    return time_onednn(*layout, oa, ob, M, N, K, s, A, B, C);
  C.resize(static_cast<size_t>(s.m * s.n));
  OmpThreadsScope one_thread(1);
  return seconds_of([&] { sgemm_block(oa, ob, s.m, s.n, K, A, B, C.data(), s.n, 0, nullptr); });
}

double time_bf16(GemmKernel k, const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N,
                 int64_t K, const Sample& s, const bfloat16* A, const bfloat16* B,
                 std::vector<float>& C) {
  if (const auto layout = onednn_layout(k))
    return time_onednn(*layout, oa, ob, M, N, K, s, A, B, C);
  OmpThreadsScope one_thread(1);
  double gemm_seconds = 0;
  const double widen_seconds = seconds_of([&] {
    const WidenedOperands w = widened_operands(oa, ob, s.m, s.n, K, A, B);
    const GemmKernel f32 =
        k == GemmKernel::widened_onednn ? GemmKernel::onednn_f32 : GemmKernel::openblas_f32;
    gemm_seconds = time_f32(f32, w.oa, w.ob, M, N, K, s, w.a.data<float>(), w.b.data<float>(), C);
  });
  return std::isfinite(gemm_seconds) ? widen_seconds : gemm_seconds;
}

// Whether a GEMM of this size is ever measured: not one too small to make a kernel for, not
// under the fallback test hook
bool tunable(int64_t M, int64_t N, int64_t K) {
  return static_cast<double>(M) * N * K >= kOneDnnMinWork && K != 0 && !g_fallback_only;
}

// The kernel for this GEMM's class (tuned_kernel), its candidates timed by
// time(kernel, sample, scratch) on the GEMM's sample; the output scratch is made only when
// a class is measured, never on the GEMMs that find their class decided. The rule where
// measuring does not apply: an override, a GEMM too small to make a kernel for, the
// fallback test hook.
template <typename Time>
GemmKernel measured_or_rule(bool bf16, bool forced, const GemmOperand& oa, const GemmOperand& ob,
                            int64_t M, int64_t N, int64_t K, std::span<const GemmKernel> candidates,
                            GemmKernel rule, const Time& time) {
  if (forced || !tunable(M, N, K)) return rule;
  struct Timing {  // captured by one pointer: the std::function holds it without allocating
    Sample s;
    std::vector<float> scratch;
    const Time& time;
  } timing{sample_of(M, N, K), {}, time};
  return tuned_kernel(gemm_class(bf16, oa.trans, ob.trans, M, N, K), candidates, rule,
                      timing.s.macs,
                      [t = &timing](GemmKernel k) { return t->time(k, t->s, t->scratch); });
}

// The float32 and bfloat16 choices, their candidates timed by time(kernel, sample, C):
// the libraries, and oneDNN cut each way (OneDnnLayout)
template <typename Time>
GemmKernel f32_kernel_timed(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N,
                            int64_t K, const Time& time) {
  const GemmKernel rule = f32_backend(oa, M, N, K) == F32Backend::onednn ? GemmKernel::onednn_f32
                                                                         : GemmKernel::openblas_f32;
  static constexpr GemmKernel kCandidates[] = {
      GemmKernel::onednn_f32, GemmKernel::openblas_f32, GemmKernel::onednn_f32_large,
      GemmKernel::onednn_f32_packed, GemmKernel::onednn_f32_large_packed};
  return measured_or_rule(false, forced_f32_backend().has_value(), oa, ob, M, N, K, kCandidates,
                          rule, time);
}

template <typename Time>
GemmKernel bf16_kernel_timed(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N,
                             int64_t K, const Time& time) {
  // the widened operands' layouts (packed) as the float32 rule sees them
  const GemmOperand woa{oa.trans, oa.trans ? M : K};
  const GemmKernel widened_rule = f32_backend(woa, M, N, K) == F32Backend::onednn
                                      ? GemmKernel::widened_onednn
                                      : GemmKernel::widened_openblas;
  const GemmKernel rule =
      bf16_backend() == Bf16Backend::onednn ? GemmKernel::onednn_bf16 : widened_rule;
  static constexpr GemmKernel kCandidates[] = {
      GemmKernel::onednn_bf16,        GemmKernel::widened_onednn,
      GemmKernel::widened_openblas,   GemmKernel::onednn_bf16_large,
      GemmKernel::onednn_bf16_packed, GemmKernel::onednn_bf16_large_packed};
  return measured_or_rule(true, forced_bf16_backend().has_value(), oa, ob, M, N, K, kCandidates,
                          rule, time);
}

GemmKernel f32_kernel(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
                      const float* A, const float* B) {
  return f32_kernel_timed(oa, ob, M, N, K,
                          [&](GemmKernel k, const Sample& s, std::vector<float>& C) {
                            return time_f32(k, oa, ob, M, N, K, s, A, B, C);
                          });
}

GemmKernel bf16_kernel(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N,
                       int64_t K, const bfloat16* A, const bfloat16* B) {
  return bf16_kernel_timed(oa, ob, M, N, K,
                           [&](GemmKernel k, const Sample& s, std::vector<float>& C) {
                             return time_bf16(k, oa, ob, M, N, K, s, A, B, C);
                           });
}

// Operands for timing a class before any real operand exists (bf16_pays): the largest
// sample's A and B (the large blocks' first), packed, zeros (the time does not depend on
// the values), made only when a class is measured
class MadeUpOperands {
 public:
  MadeUpOperands(bool ta, bool tb, const Sample& s, int64_t K)
      : a_{ta, ta ? s.m : K}, b_{tb, tb ? K : s.n}, a_size_(s.m * K), b_size_(s.n * K) {}
  const GemmOperand& oa() const { return a_; }
  const GemmOperand& ob() const { return b_; }
  const float* a32() { return zeros(a32_, a_size_); }
  const float* b32() { return zeros(b32_, b_size_); }
  const bfloat16* a16() { return zeros(a16_, a_size_); }
  const bfloat16* b16() { return zeros(b16_, b_size_); }

 private:
  template <typename T>
  static const T* zeros(std::vector<T>& v, int64_t n) {
    if (v.empty()) v.resize(static_cast<size_t>(n));
    return v.data();
  }
  GemmOperand a_, b_;
  int64_t a_size_, b_size_;
  std::vector<float> a32_, b32_;
  std::vector<bfloat16> a16_, b16_;
};

bool bf16_measured_to_pay(bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  if (!bf16_fallback_enabled() || forced_bf16_backend() || !tunable(M, N, K)) return true;
  MadeUpOperands ops(ta, tb, sample_of(M, N, K, true), K);
  bf16_kernel_timed(ops.oa(), ops.ob(), M, N, K,
                    [&](GemmKernel k, const Sample& s, std::vector<float>& C) {
                      return time_bf16(k, ops.oa(), ops.ob(), M, N, K, s, ops.a16(), ops.b16(), C);
                    });
  f32_kernel_timed(ops.oa(), ops.ob(), M, N, K,
                   [&](GemmKernel k, const Sample& s, std::vector<float>& C) {
                     return time_f32(k, ops.oa(), ops.ob(), M, N, K, s, ops.a32(), ops.b32(), C);
                   });
  return bf16_class_pays(gemm_class(true, ta, tb, M, N, K));
}

}  // namespace

// OpenBLAS on its own threads where its sums do not depend on how it splits a GEMM; else
// (its AVX2 kernels) cut into the standard output blocks, each one call on one thread, so
// that the bits do not depend on the thread count: a block is the same call on any.
void gemm_openblas(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
                   const float* A, const float* B, float* C, float beta,
                   const GemmEpilogue<float>& e) {
  if (openblas_split_keeps_bits() || M == 0 || N == 0) {
    sgemm_block(oa, ob, M, N, K, A, B, C, N, beta, e.bias);
    return finish_rows(M, N, e);
  }
  for_each_output_block(
      oa, ob, M, N, output_blocks(M, N, K), A, B, C, e,
      [&](int64_t m, int64_t n, const float* a, const float* b, float* c, const float* bias) {
        sgemm_block(oa, ob, m, n, K, a, b, c, N, beta, bias);
      });
}

bool bf16_pays(bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  const bool pays = bf16_measured_to_pay(ta, tb, M, N, K);
  note_bf16_choice(pays);
  return pays;
}

void gemm(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
          const bfloat16* A, const bfloat16* B, float* C, float beta,
          const GemmEpilogue<float>& e) {
  g_gemms.fetch_add(1, std::memory_order_relaxed);
  profile::Timer timer("GEMM");
  const GemmKernel kernel = bf16_kernel(oa, ob, M, N, K, A, B);
  describe_gemm(timer, true, oa, ob, M, N, K, kernel_name(kernel));
  if (const auto layout = onednn_layout(kernel))
    return gemm_onednn(oa, ob, M, N, K, A, B, C, beta, e, *layout);
  const WidenedOperands w = widened_operands(oa, ob, M, N, K, A, B);
  const float *a = w.a.const_data<float>(), *b = w.b.const_data<float>();
  if (kernel == GemmKernel::widened_onednn)
    return gemm_onednn(w.oa, w.ob, M, N, K, a, b, C, beta, e);
  gemm_openblas(w.oa, w.ob, M, N, K, a, b, C, beta, e);
}

void gemm_onednn(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
                 const bfloat16* A, const bfloat16* B, float* C, float beta,
                 const GemmEpilogue<float>& e, OneDnnLayout layout) {
  onednn_blocks(
      oa, ob, M, N, K, A, B, C, beta, e, layout,
      [&](int64_t m, int64_t n, const bfloat16* a, const bfloat16* b, float* c, const float* bias) {
        const WidenedOperands w = widened_operands(oa, ob, m, n, K, a, b);
        sgemm_block(w.oa, w.ob, m, n, K, w.a.data<float>(), w.b.data<float>(), c, N, beta, bias);
      });
}

void gemm_onednn(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
                 const float* A, const float* B, float* C, float beta, const GemmEpilogue<float>& e,
                 OneDnnLayout layout) {
  onednn_blocks(oa, ob, M, N, K, A, B, C, beta, e, layout,
                [&](int64_t m, int64_t n, const float* a, const float* b, float* c,
                    const float* bias) { sgemm_block(oa, ob, m, n, K, a, b, c, N, beta, bias); });
}

bool onednn_packs_b(bool bf16, const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N,
                    int64_t K) {
  const MatmulKey key{M, N, K, oa.ld, ob.ld, N, oa.trans, ob.trans, false, !bf16, false, true};
  const auto mm = matmul_cache().get(key);
  return mm && mm->pack_b;
}

OneDnnCacheStats onednn_cache_stats() {
  return matmul_cache().stats();
}

bool onednn_matmul_here(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N,
                        int64_t K, const bfloat16* A, const bfloat16* B, float* C, int64_t ldc,
                        float beta) {
  if (M == 0 || N == 0) return true;
  const MatmulKey key{M, N, K, oa.ld, ob.ld, ldc, oa.trans, ob.trans, beta != 0, false, false};
  const auto mm = K > 0 && !g_fallback_only ? matmul_cache().get(key) : nullptr;
  if (!mm) return false;
  OmpThreadsScope one_thread(1);
  run_matmul(*mm, A, B, C, nullptr);
  return true;
}

void force_gemm_fallback_for_tests(bool on) {
  g_fallback_only = on;
}

int64_t gemm_count() {
  return g_gemms.load(std::memory_order_relaxed);
}

}  // namespace ag::detail

namespace ag {

namespace detail {

namespace {

Bf16Backend backend_for_this_cpu() {
  if (const auto forced = forced_bf16_backend()) return *forced;
  __builtin_cpu_init();
  if (dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx) return Bf16Backend::onednn;
  if (__builtin_cpu_is("amd") && __builtin_cpu_supports("avx512bf16")) return Bf16Backend::onednn;
  return Bf16Backend::openblas;
}

}  // namespace

Bf16Backend bf16_backend() {
  static const Bf16Backend backend = backend_for_this_cpu();
  return backend;
}

}  // namespace detail

const char* bf16_matmul_implementation() {
  static const std::string name = [] {
    const std::string sgemm =
        "float32 GEMMs on widened bfloat16 operands (this CPU's BF16 dot products are slower "
        "than its float32 FMAs)";
    if (detail::bf16_backend() == detail::Bf16Backend::openblas) return sgemm;
    try {
      OmpThreadsScope one_thread(1);
      using dt = dnnl::memory::data_type;
      auto a = detail::matrix_desc(256, 256, false, 256, dt::bf16);
      auto c = detail::matrix_desc(256, 256, false, 256, dt::f32);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, c), detail::cpu_engine());
      const std::string impl = pd.impl_info_str();
      return impl.rfind("ref", 0) == 0 ? sgemm : "oneDNN " + impl;
    } catch (const dnnl::error&) {
      return sgemm;
    }
  }();
  return name.c_str();
}

}  // namespace ag
