// Runs are reproducible: the same seed gives the same bits, and so does any thread count,
// because every parallel reduction has a fixed order (chunks cut by problem size, not by
// threads) and OpenBLAS splits GEMMs over rows and columns, never over the inner dim.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "autograd/allocator.h"
#include "autograd/autograd.h"
#include "nn/gpt.h"
#include "optim/optim.h"
#include "support.h"

namespace {

// The thread count for one scope, restored however the scope ends.
struct ThreadCount {
  int saved = ag::num_threads();
  explicit ThreadCount(int n) { ag::set_num_threads(n); }
  ~ThreadCount() { ag::set_num_threads(saved); }
};

// A few full training steps (dropout on, so the masks are part of what must repeat) at
// a size where every kernel takes its parallel path; returns every parameter's bytes.
// odd_threads > 0: the odd steps run on that many threads instead (the team changing
// between steps, as ag::AdaptiveThreads changes it).
std::vector<std::vector<float>> train_steps(int threads, int steps, int odd_threads = 0) {
  ThreadCount use(threads);
  const nn::GPTConfig cfg = ag_test::gpt_config(50, 64, 64, 4, 2, 0.1);
  nn::GPT model(cfg, 11);
  optim::AdamW opt(optim::decay_groups(model.named_parameters(), 0.1), 1e-3);
  ag::Generator gen(5);
  const int64_t B = 16, T = 64;
  for (int s = 0; s < steps; ++s) {
    if (odd_threads > 0) ag::set_num_threads(s % 2 ? odd_threads : threads);
    std::vector<int64_t> x(B * T), y(B * T);
    for (auto& id : x) id = static_cast<int64_t>(gen.next_u64() % cfg.vocab_size);
    for (auto& id : y) id = static_cast<int64_t>(gen.next_u64() % cfg.vocab_size);
    opt.zero_grad();
    auto out = model.forward(ag::from_vector(x, {B, T}), ag::from_vector(y, {B, T}));
    out.loss.backward();
    optim::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
  }
  std::vector<std::vector<float>> bytes;
  for (const auto& p : model.parameters()) {
    const float* d = p.data<float>();
    bytes.emplace_back(d, d + p.numel());
  }
  return bytes;
}

bool bit_identical(const std::vector<std::vector<float>>& a,
                   const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), 4 * a[i].size()) != 0)
      return false;
  return true;
}

}  // namespace

TEST_CASE("the same seed trains to the same bits") {
  REQUIRE(bit_identical(train_steps(2, 3), train_steps(2, 3)));
}

TEST_CASE("a team of threads that changes between steps trains to the same bits") {
  REQUIRE(bit_identical(train_steps(2, 4, 1), train_steps(2, 4)));
  REQUIRE(bit_identical(train_steps(1, 4, 2), train_steps(1, 4)));
}

TEST_CASE("one and two threads train to the same bits") {
  // on every BLAS kernel: OpenBLAS's AVX2 sgemm, whose own threads round differently, runs
  // one thread a block there (ag::openblas_split_keeps_bits)
  INFO("OpenBLAS kernel " << ag::blas_kernel_name());
  REQUIRE(bit_identical(train_steps(1, 3), train_steps(2, 3)));
}

TEST_CASE("our own kernels give the same bits on one and two threads") {
  // Every kernel of a training step but the GEMMs, at sizes past their parallel
  // thresholds, forward and backward, then an AdamW step and gradient clipping: these
  // must repeat bits whatever BLAS kernel the machine has.
  auto run = [](int threads) {
    ThreadCount use(threads);
    ag::Generator gen(21);
    const int64_t B = 8, T = 128, C = 256, H = 4, V = 96;
    auto x = ag::randn({B, T, C}, gen).requires_grad_();
    auto w = ag::randn({C}, gen).requires_grad_(), b = ag::randn({C}, gen).requires_grad_();
    auto qkv = ag::randn({B, T, 3 * C}, gen).requires_grad_();
    auto table = ag::randn({V, C}, gen).requires_grad_();
    std::vector<int64_t> ids(B * T), targets(B * T);
    for (auto& id : ids) id = static_cast<int64_t>(gen.next_u64() % V);
    for (auto& id : targets) id = static_cast<int64_t>(gen.next_u64() % V);
    ag::Generator drop(3);
    auto h = ag::add(x, ag::embedding(table, ag::from_vector(ids, {B, T})));
    h = ag::gelu(ag::layer_norm(h, w, b));
    h = ag::dropout(h, 0.1, true, drop);
    h = ag::add(h, ag::causal_self_attention(qkv, H, 0.1, &drop));
    auto logits = h.narrow(2, 0, V);  // [B, T, V], not contiguous
    auto loss =
        ag::add(ag::cross_entropy(logits.reshape({B * T, V}), ag::from_vector(targets, {B * T})),
                ag::mean(ag::softmax(h, -1)));
    loss.backward();
    std::vector<ag::Tensor> params{x, w, b, qkv, table};
    optim::clip_grad_norm(params, 1.0);
    optim::AdamW opt(
        optim::decay_groups({{"x", x}, {"w", w}, {"b", b}, {"qkv", qkv}, {"table", table}}, 0.1),
        1e-3);
    opt.step();
    std::vector<std::vector<float>> bytes;
    for (const auto& p : params) {
      bytes.emplace_back(p.data<float>(), p.data<float>() + p.numel());
      bytes.emplace_back(p.grad().data<float>(), p.grad().data<float>() + p.numel());
    }
    return bytes;
  };
  REQUIRE(bit_identical(run(1), run(2)));
}

TEST_CASE("the determinism check can fail: one more step changes the bits") {
  REQUIRE_FALSE(bit_identical(train_steps(2, 3), train_steps(2, 4)));
}

TEST_CASE("after the first training step no tensor storage comes from the system") {
  nn::GPT model(ag_test::gpt_config(30, 16, 32, 2, 2, 0.1), 3);
  optim::AdamW opt(optim::decay_groups(model.named_parameters(), 0.1), 1e-3);
  ag::Generator gen(1);
  auto step = [&] {
    std::vector<int64_t> x(4 * 16), y(4 * 16);
    for (auto& id : x) id = static_cast<int64_t>(gen.next_u64() % 30);
    for (auto& id : y) id = static_cast<int64_t>(gen.next_u64() % 30);
    opt.zero_grad();
    auto out = model.forward(ag::from_vector(x, {4, 16}), ag::from_vector(y, {4, 16}));
    out.loss.backward();
    optim::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
  };
  step();
  step();
  const auto before = ag::allocator_stats();
  for (int i = 0; i < 5; ++i) step();
  const auto after = ag::allocator_stats();
  INFO("misses " << before.misses << " -> " << after.misses << ", hits " << before.hits << " -> "
                 << after.hits);
  REQUIRE(after.hits > before.hits);       // storage was asked for...
  REQUIRE(after.misses == before.misses);  // ...and every block came from the cache
}

TEST_CASE("blocks of a size a step no longer uses go back; a step's own sizes stay cached") {
  ag::release_cached_blocks();
  const size_t once = 3 << 20, every = 5 << 20;  // bytes: distinct sizes, multiples of 64
  ag::free_block(ag::allocate_block(once), once);
  auto step = [&] { ag::free_block(ag::allocate_block(every), every); };
  step();
  ag::release_unused_blocks();  // both were used since the last call (none): they stay
  step();                       // (a hit: nothing else is given back for it)
  REQUIRE(ag::allocator_stats().cached_bytes == once + every);
  ag::release_unused_blocks();  // `once` was not used in this "step": it goes
  REQUIRE(ag::allocator_stats().cached_bytes == every);
  step();
  ag::release_unused_blocks();
  REQUIRE(ag::allocator_stats().cached_bytes == every);  // a size used every step stays
  const auto misses = ag::allocator_stats().misses;
  step();
  REQUIRE(ag::allocator_stats().misses == misses);  // ...and is handed out again
}

TEST_CASE("a size the cache lacks takes the place of blocks a step did not use") {
  ag::release_cached_blocks();
  const size_t previous = 2 << 20, other = 1 << 20, fresh = 3 << 20;  // bytes
  ag::free_block(ag::allocate_block(previous), previous);
  ag::free_block(ag::allocate_block(other), other);
  ag::release_unused_blocks();  // a step begins: both sizes were the previous step's
  REQUIRE(ag::allocator_stats().cached_bytes == previous + other);
  void* p = ag::allocate_block(fresh);  // a miss: the previous step's blocks, up to 3 MB, go
  REQUIRE(ag::allocator_stats().cached_bytes == 0);
  ag::free_block(p, fresh);
  ag::free_block(ag::allocate_block(previous), previous);  // used in this step from here on
  ag::free_block(ag::allocate_block(other), other);
  REQUIRE(ag::allocator_stats().cached_bytes == fresh + previous + other);
  void* q = ag::allocate_block(4 << 20);  // no block of the step's own sizes is taken
  REQUIRE(ag::allocator_stats().cached_bytes == fresh + previous + other);
  ag::free_block(q, 4 << 20);
  ag::release_cached_blocks();
}

TEST_CASE("with a cache budget a fresh block gives back the cached blocks beyond it") {
  ag::release_cached_blocks();
  const size_t mb = 1 << 20;
  const size_t budget = ag::allocator_stats().live_bytes + 32 * mb;
  ag::set_cache_budget(budget);
  std::vector<void*> held;
  for (int i = 0; i < 4; ++i) held.push_back(ag::allocate_block(4 * mb));
  for (void* p : held) ag::free_block(p, 4 * mb);  // 16 MB cached
  void* big = ag::allocate_block(24 * mb);         // 24 more live: over the budget
  const auto stats = ag::allocator_stats();
  INFO("cached " << stats.cached_bytes << ", live " << stats.live_bytes << ", budget " << budget);
  REQUIRE(stats.live_bytes + stats.cached_bytes <= budget + budget / 32);
  REQUIRE(stats.cached_bytes >= 4 * mb);  // only what went over: some blocks stay
  REQUIRE(stats.cached_bytes < 16 * mb);
  const size_t cached = stats.cached_bytes;
  void* again = ag::allocate_block(4 * mb);  // a hit: nothing given back for it
  REQUIRE(ag::allocator_stats().cached_bytes == cached - 4 * mb);
  ag::free_block(again, 4 * mb);
  ag::free_block(big, 24 * mb);
  ag::set_cache_budget(0);  // none: the cache keeps what it is given, as before
  ag::release_cached_blocks();
  for (int i = 0; i < 4; ++i) held[i] = ag::allocate_block(4 * mb);
  for (void* p : held) ag::free_block(p, 4 * mb);
  void* more = ag::allocate_block(40 * mb);
  REQUIRE(ag::allocator_stats().cached_bytes == 16 * mb);
  ag::free_block(more, 40 * mb);
  ag::release_cached_blocks();
}
