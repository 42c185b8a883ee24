// The key/value-cached decoder (nn/inference.h) against GPT::forward: the logits of every
// position, after a prefill of any length, for batches of different rows, on the default
// and base configs. Agreement is to float32 rounding: the decoder's GEMVs and the
// forward's GEMMs add the same products in other orders; the tolerance is 1e-5 of the
// largest logit.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <map>
#include <new>
#include <utility>

#include "decode_support.h"
#include "nn/inference_kernels.h"

using ag::Tensor;

// Every `new` of the test program is counted, so that a test can show a stretch of code
// allocates nothing. Every unaligned form is replaced, so that each `delete` meets the
// `new` it belongs to (a sanitizer's own `new (std::nothrow)` freed by our `delete` is an
// alloc-dealloc mismatch); aligned forms are not replaced and not counted (the decoder has
// none).
namespace {
std::atomic<int64_t> g_news{0};
void* counted_new(std::size_t n) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* counted_new_or_throw(std::size_t n) {
  if (void* p = counted_new(n)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) {
  return counted_new_or_throw(n);
}
void* operator new[](std::size_t n) {
  return counted_new_or_throw(n);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return counted_new(n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return counted_new(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace {

// The tolerance of a comparison with full logits: 1e-5 of their largest magnitude (84
// float32 epsilons; measured: up to 3e-6 of it on the base config).
double tolerance(const Tensor& full) {
  double largest = 0;
  for (double x : full.to_vector()) largest = std::max(largest, std::abs(x));
  return 1e-5 * largest;
}

// The largest |cached - full| over the positions from `from` on of a row's window, with
// the cached logits made by a prefill of `from` positions and then one step per position,
// as a fraction of tolerance().
double max_step_error(const nn::GPT& model, const std::vector<int64_t>& row, int64_t from,
                      nn::WeightFormat format = nn::WeightFormat::fp32) {
  const int64_t T = static_cast<int64_t>(row.size()), V = model.config().vocab_size;
  const Tensor full = ag_test::forward_logits(model, row);  // [T, V]
  nn::CachedInference dec(model, 1, format);
  std::span<const float> logits =
      dec.prefill(std::span<const int64_t>(row.data(), static_cast<size_t>(from)), from);
  double worst = 0;
  for (int64_t t = from - 1; t < T; ++t) {
    if (t > from - 1) logits = dec.step(std::span<const int64_t>(&row[t], 1));
    REQUIRE(dec.length() == t + 1);
    for (int64_t v = 0; v < V; ++v) worst = std::max(worst, std::abs(logits[v] - full.at({t, v})));
  }
  return worst / tolerance(full);
}

// Every position's logits of row, a prefill of one position then a step each, with the
// decoder on `threads` threads under `policy`.
std::vector<float> step_logits(const nn::GPT& model, const std::vector<int64_t>& row, int threads,
                               nn::CachedInference::Threads policy,
                               nn::WeightFormat format = nn::WeightFormat::fp32) {
  const int before = ag::num_threads();
  ag::set_num_threads(threads);
  nn::CachedInference dec(model, 1, format);
  dec.set_threads(policy);
  std::vector<float> out;
  std::span<const float> l = dec.prefill(std::span<const int64_t>(row.data(), 1), 1);
  out.insert(out.end(), l.begin(), l.end());
  for (size_t t = 1; t < row.size(); ++t) {
    l = dec.step(std::span<const int64_t>(&row[t], 1));
    out.insert(out.end(), l.begin(), l.end());
  }
  ag::set_num_threads(before);
  return out;
}

}  // namespace

TEST_CASE("cached decoding gives the full forward's logits at every position", "[decode]") {
  for (const auto& [name, cfg] : ag_test::decode_configs()) {
    INFO(name);
    const auto model_ptr = ag_test::sharp_model(cfg, 7);
    const nn::GPT& model = *model_ptr;
    const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 3);
    for (int64_t from : {int64_t{1}, cfg.context_length / 2 + 1, cfg.context_length}) {
      INFO("prefill of " << from << " positions");
      CHECK(max_step_error(model, row, from) < 1.0);
    }
  }
}

TEST_CASE("bfloat16 weights: cached decoding gives the rounded model's full forward", "[decode]") {
  // The steps read bfloat16 copies of the rounded matrices, the prefills and GPT::forward
  // their float32 values: the same numbers, so the same tolerance as float32 decoding.
  for (const auto& [name, cfg] : ag_test::decode_configs()) {
    INFO(name);
    const auto model_ptr = ag_test::sharp_model(cfg, 7);
    nn::round_weights_to_bfloat16(*model_ptr);
    const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 3);
    for (int64_t from : {int64_t{1}, cfg.context_length / 2 + 1}) {
      INFO("prefill of " << from << " positions");
      CHECK(max_step_error(*model_ptr, row, from, nn::WeightFormat::bf16) < 1.0);
    }
  }
}

TEST_CASE("bfloat16 rounding covers the matrices a step reads, and nothing else", "[decode]") {
  const nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  const auto model_ptr = ag_test::sharp_model(cfg, 2);
  nn::GPT& model = *model_ptr;
  // unrounded weights are refused: the copies would not be the numbers the prefills use
  CHECK_THROWS_WITH(nn::CachedInference(model, 1, nn::WeightFormat::bf16),
                    Catch::Contains("rounded to bfloat16 first"));
  std::map<std::string, std::vector<double>> before;
  for (const auto& [name, p] : model.named_parameters()) before[name] = p.to_vector();
  nn::round_weights_to_bfloat16(model);
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name);
    const auto &was = before.at(name), now = p.to_vector();
    const bool streamed = p.dim() == 2 && name != "pos_emb.weight";  // tok_emb: the tied head
    for (size_t i = 0; i < now.size(); ++i) {
      const auto f = static_cast<float>(was[i]);
      REQUIRE(static_cast<float>(now[i]) == (streamed ? ag::bf16_rounded(f) : f));
    }
  }
  CHECK_NOTHROW(nn::CachedInference(model, 1, nn::WeightFormat::bf16));
  // the copies are counted: 2 bytes a weight beside float32 read in place (a model above the
  // panels' size), and fewer than a small model's float32 panels, 4 bytes a weight
  nn::GPTConfig wide = cfg;
  wide.d_model = 512, wide.n_heads = 8, wide.n_layers = 3;
  REQUIRE_FALSE(nn::keeps_weight_panels(wide, nn::WeightFormat::fp32));
  CHECK(nn::CachedInference::memory_bytes(wide, 1, 2, nn::WeightFormat::bf16) >
        nn::CachedInference::memory_bytes(wide, 1, 2));
  CHECK(nn::CachedInference::memory_bytes(cfg, 1, 2, nn::WeightFormat::bf16) <
        nn::CachedInference::memory_bytes(cfg, 1, 2));
}

TEST_CASE(
    "Q8_0 weights by float32 activations: cached decoding gives the rounded model's full "
    "forward",
    "[decode]") {
  // The steps read the Q8_0 blocks (a GEMV over the blocks), the prefills and GPT::forward
  // the float32 values the blocks hold: the same numbers, so the same tolerance.
  for (const auto& [name, cfg] :
       {ag_test::decode_configs()[1], ag_test::llama_family_configs().front()}) {
    INFO(name);
    const auto model_ptr = ag_test::sharp_model(cfg, 7);
    nn::round_weights_to_q8_0(*model_ptr);
    const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 3);
    for (int64_t from : {int64_t{1}, cfg.context_length / 2 + 1}) {
      INFO("prefill of " << from << " positions");
      CHECK(max_step_error(*model_ptr, row, from, nn::WeightFormat::q8_0_f32) < 1.0);
    }
  }
}

TEST_CASE("Q8_0 rounding is a fixed point of the decoder's packing, on any thread count",
          "[decode]") {
  const nn::GPTConfig cfg = ag_test::llama_family_configs().front().second;
  const auto model_ptr = ag_test::sharp_model(cfg, 2);
  nn::GPT& model = *model_ptr;
  // unrounded weights are refused: the blocks would not hold the numbers the prefills use
  CHECK_THROWS_WITH(nn::CachedInference(model, 1, nn::WeightFormat::q8_0),
                    Catch::Contains("rounded to Q8_0 first"));
  nn::round_weights_to_q8_0(model);
  std::map<std::string, std::vector<double>> once;
  for (const auto& [name, p] : model.named_parameters()) once[name] = p.to_vector();
  nn::round_weights_to_q8_0(model);  // rounding again changes nothing
  for (const auto& [name, p] : model.named_parameters()) CHECK(p.to_vector() == once.at(name));
  const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 8);
  using P = nn::CachedInference::Threads;
  for (const auto format : {nn::WeightFormat::q8_0_f32, nn::WeightFormat::q8_0}) {
    auto all_logits = [&](int threads, nn::CachedInference::Threads policy) {
      return step_logits(model, row, threads, policy, format);
    };
    const std::vector<float> one = all_logits(1, P::kTimed);
    CHECK(one == all_logits(2, P::kTeam));
    CHECK(one == all_logits(2, P::kOne));
  }
  // the blocks take 34 bytes per 32 weights beside the float32 values
  CHECK(nn::CachedInference::memory_bytes(cfg, 1, 2, nn::WeightFormat::q8_0) <
        nn::CachedInference::memory_bytes(cfg, 1, 2, nn::WeightFormat::bf16));
}

namespace {

// The largest |a - b| over two [T, V] sets of logits, and at how many positions their
// likeliest tokens are the same.
std::pair<double, int64_t> logits_apart(const std::vector<double>& a, const std::vector<double>& b,
                                        int64_t T, int64_t V) {
  double worst = 0;
  int64_t same = 0;
  for (int64_t t = 0; t < T; ++t) {
    const auto at = static_cast<ptrdiff_t>(t * V);
    for (int64_t v = 0; v < V; ++v)
      worst = std::max(worst,
                       std::abs(a[static_cast<size_t>(at + v)] - b[static_cast<size_t>(at + v)]));
    same += std::max_element(a.begin() + at, a.begin() + at + V) - a.begin() ==
            std::max_element(b.begin() + at, b.begin() + at + V) - b.begin();
  }
  return {worst, same};
}

// The model rounded by `round` and decoded in `format`, whose steps round each matrix's input
// to 8 bits, as llama.cpp does: the logits move by that rounding, far more than by float32's,
// and about as far as the weights' own rounding moves them; most greedy tokens stay.
void check_activations_rounding(const nn::GPTConfig& cfg, void (*round)(nn::GPT&),
                                nn::WeightFormat format) {
  const auto model_ptr = ag_test::sharp_model(cfg, 7);
  const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 3);
  const std::vector<double> unrounded = ag_test::forward_logits(*model_ptr, row).to_vector();
  round(*model_ptr);
  const std::vector<double> rounded = ag_test::forward_logits(*model_ptr, row).to_vector();
  const std::vector<float> stepped =
      step_logits(*model_ptr, row, 1, nn::CachedInference::Threads::kTimed, format);
  const std::vector<double> steps(stepped.begin(), stepped.end());
  const int64_t T = cfg.context_length, V = cfg.vocab_size;
  double largest = 0;
  for (double v : rounded) largest = std::max(largest, std::abs(v));
  const auto [by_activations, same_tokens] = logits_apart(steps, rounded, T, V);
  const auto [by_weights, same_unrounded] = logits_apart(rounded, unrounded, T, V);
  INFO("the activations' rounding moves the logits "
       << by_activations << ", the weights' " << by_weights << " (largest logit " << largest
       << "); greedy tokens the same: " << same_tokens << " and " << same_unrounded << " of " << T);
  CHECK(by_activations > 1e-5 * largest);  // the activations were rounded
  CHECK(by_activations < 1.5 * by_weights);
  CHECK(same_tokens >= T - T / 8);
}

}  // namespace

TEST_CASE(
    "Q8_0 weights by Q8_0 activations move the logits about as much as the weights' "
    "rounding does",
    "[decode]") {
  // (block_gemv.h; measured: the GPT-2-shaped model 0.30 and 0.34 of a largest logit of 7.2,
  // 19 and 12 greedy tokens of 256 changed; the Llama-shaped 0.080 and 0.099 of 4.3, 0 and 1
  // of 48)
  for (const auto& [name, cfg] :
       {ag_test::decode_configs()[1], ag_test::llama_family_configs().front()}) {
    INFO(name);
    check_activations_rounding(
        cfg, [](nn::GPT& m) { nn::round_weights_to_q8_0(m); }, nn::WeightFormat::q8_0);
  }
}

namespace {

// A Llama-family shape whose rows are 256 and 768 weights wide (Q4_K blocks) beside the
// default config's 64 (Q8_0 blocks under --weights q4_k).
nn::GPTConfig q4_k_llama() {
  nn::GPTConfig c = ag_test::llama_family_configs().front().second;
  c.d_model = 256, c.n_heads = 8;
  return c;
}

}  // namespace

TEST_CASE(
    "Q4_K weights by float32 activations: cached decoding gives the rounded model's full "
    "forward",
    "[decode]") {
  // The steps read the Q4_K blocks (dequantized in registers, ag::quant::dot_q4_k), the
  // prefills and GPT::forward the float32 values the blocks hold: the same numbers.
  auto configs = ag_test::llama_family_configs();
  configs.resize(1);
  configs.push_back(ag_test::decode_configs()[1]);
  configs.emplace_back("llama 256", q4_k_llama());
  for (const auto& [name, cfg] : configs) {
    INFO(name);
    const auto model_ptr = ag_test::sharp_model(cfg, 7);
    CHECK(nn::round_weights_to_q4_k(*model_ptr) <= 3);
    const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 3);
    for (int64_t from : {int64_t{1}, cfg.context_length / 2 + 1}) {
      INFO("prefill of " << from << " positions");
      CHECK(max_step_error(*model_ptr, row, from, nn::WeightFormat::q4_k_f32) < 1.0);
    }
  }
}

TEST_CASE("Q4_K rounding is a fixed point of the decoder's packing, on any thread count",
          "[decode]") {
  const nn::GPTConfig cfg = q4_k_llama();
  const auto model_ptr = ag_test::sharp_model(cfg, 2);
  nn::GPT& model = *model_ptr;
  for (const auto format : {nn::WeightFormat::q4_k_f32, nn::WeightFormat::q4_k})
    CHECK_THROWS_WITH(nn::CachedInference(model, 1, format),
                      Catch::Contains("rounded to Q4_K first"));
  const ag::Tensor first = model.streamed_matrices().front().weight;
  const std::vector<double> before = first.to_vector();
  nn::round_weights_to_q4_k(model);
  CHECK(first.to_vector() != before);  // rounded
  std::map<std::string, std::vector<double>> once;
  for (const auto& [name, p] : model.named_parameters()) once[name] = p.to_vector();
  CHECK(nn::round_weights_to_q4_k(model) == 1);  // and rounding again changes nothing
  for (const auto& [name, p] : model.named_parameters()) CHECK(p.to_vector() == once.at(name));
  const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 8);
  using P = nn::CachedInference::Threads;
  for (const auto format : {nn::WeightFormat::q4_k_f32, nn::WeightFormat::q4_k}) {
    const std::vector<float> one = step_logits(model, row, 1, P::kTimed, format);
    CHECK(one == step_logits(model, row, 2, P::kTeam, format));
    CHECK(one == step_logits(model, row, 2, P::kOne, format));
  }
}

TEST_CASE(
    "Q4_K weights by 8-bit activations move the logits about as much as the weights' rounding "
    "does",
    "[decode]") {
  // (Q8_K activations for the Q4_K matrices, Q8_0 for the others: unpack_kernels.h; measured:
  // 0.37 against 3.4 of a largest logit of 7.3, 46 and 28 greedy tokens of 48 the same)
  check_activations_rounding(
      q4_k_llama(), [](nn::GPT& m) { nn::round_weights_to_q4_k(m); }, nn::WeightFormat::q4_k);
}

TEST_CASE("one wrong cached position moves the logits far beyond the tolerance", "[decode]") {
  // What the comparison above catches: a cache holding another token's key and value at
  // one position, or every position shifted by one, moves the logits by hundreds of
  // times the tolerance (mutating the decoder that way makes the test above fail).
  const nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  const auto model_ptr = ag_test::sharp_model(cfg, 7);
  const nn::GPT& model = *model_ptr;
  const int64_t n = 9, V = cfg.vocab_size;
  const std::vector<int64_t> row = ag_test::random_tokens(n + 1, V, 3);
  const Tensor full = ag_test::forward_logits(model, row);
  auto last_error = [&](const std::vector<int64_t>& fed, int64_t full_position) {
    nn::CachedInference dec(model, 1);
    std::span<const float> logits = dec.prefill(std::span<const int64_t>(fed.data(), 1), 1);
    for (size_t t = 1; t < fed.size(); ++t) logits = dec.step(std::span<const int64_t>(&fed[t], 1));
    double worst = 0;
    for (int64_t v = 0; v < V; ++v)
      worst = std::max(worst, std::abs(logits[v] - full.at({full_position, v})));
    return worst / tolerance(full);
  };
  CHECK(last_error(row, n) < 1.0);
  std::vector<int64_t> other = row;
  other[2] = (row[2] + 1) % V;
  CHECK(last_error(other, n) > 100.0);
  const std::vector<int64_t> shifted(row.begin() + 1, row.end());  // positions one lower
  CHECK(last_error(shifted, n) > 100.0);
}

TEST_CASE("decoding rows side by side equals decoding each alone", "[decode]") {
  // 3 rows (a step's own vector kernel) and 6 (BLAS's GEMM), one of them repeated
  const nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  const auto model_ptr = ag_test::sharp_model(cfg, 11);
  const nn::GPT& model = *model_ptr;
  const int64_t T = cfg.context_length, V = cfg.vocab_size, n = 5;
  for (int64_t B : {3, 6}) {
    std::vector<std::vector<int64_t>> rows;
    for (int64_t b = 0; b < B; ++b) rows.push_back(ag_test::random_tokens(T, V, 1 + b));
    rows[2] = rows[0];  // a repeated row is copied, not recomputed: same logits
    std::vector<int64_t> prompt;
    for (const auto& r : rows) prompt.insert(prompt.end(), r.begin(), r.begin() + n);
    nn::CachedInference together(model, B);
    together.prefill(prompt, n);
    std::vector<int64_t> next(static_cast<size_t>(B));
    std::span<const float> logits;
    for (int64_t t = n; t < T; ++t) {
      for (int64_t b = 0; b < B; ++b) next[b] = rows[b][t];
      logits = together.step(next);
    }
    for (int64_t b = 0; b < B; ++b) {
      const Tensor full = ag_test::forward_logits(model, rows[b]);
      for (int64_t v = 0; v < V; ++v)
        CHECK(std::abs(logits[b * V + v] - full.at({T - 1, v})) < tolerance(full));
    }
  }
}

// Weights read by 8-bit activations: a step of more rows than the vector kernel's usual four
// (sample --num-samples 6) still rounds every row's activations, so each row has the bits of
// a decoder of that row alone (before, such a step summed the rounded weights by float32
// activations, and a sample's text depended on how many were drawn beside it).
TEST_CASE("a step of many rows reads 8-bit activations as a step of one does", "[decode]") {
  const nn::GPTConfig cfg = q4_k_llama();
  for (const nn::WeightFormat format : {nn::WeightFormat::q8_0, nn::WeightFormat::q4_k}) {
    INFO((format == nn::WeightFormat::q8_0 ? "q8_0" : "q4_k"));
    const auto model_ptr = ag_test::sharp_model(cfg, 13);
    if (format == nn::WeightFormat::q8_0) nn::round_weights_to_q8_0(*model_ptr);
    if (format == nn::WeightFormat::q4_k) CHECK(nn::round_weights_to_q4_k(*model_ptr) <= 3);
    const int64_t V = cfg.vocab_size, B = 6, n = 3, steps = 4;
    std::vector<std::vector<int64_t>> rows;
    std::vector<int64_t> prompt;
    for (int64_t b = 0; b < B; ++b) {
      rows.push_back(ag_test::random_tokens(n + steps, V, 40 + b));
      prompt.insert(prompt.end(), rows[b].begin(), rows[b].begin() + n);
    }
    nn::CachedInference together(*model_ptr, B, format);
    together.prefill(prompt, n);
    std::vector<float> last;
    for (int64_t t = n; t < n + steps; ++t) {
      std::vector<int64_t> next;
      for (const auto& r : rows) next.push_back(r[t]);
      const auto l = together.step(next);
      last.assign(l.begin(), l.end());
    }
    for (int64_t b = 0; b < B; ++b) {
      nn::CachedInference one(*model_ptr, 1, format);
      one.prefill(std::span<const int64_t>(rows[b].data(), n), n);
      std::span<const float> l;
      for (int64_t t = n; t < n + steps; ++t)
        l = one.step(std::span<const int64_t>(&rows[b][t], 1));
      CHECK(std::equal(l.begin(), l.end(), last.begin() + b * V));
    }
  }
}

// Independent sequences in one decoder's rows (a server's slots): each row at a length of its
// own, stepped together in any order and grouping, gives the bits of a decoder of that row
// alone (the learned positions of GPT-2's shape and Llama's RoPE).
TEST_CASE("rows at lengths of their own, stepped together, equal each row decoded alone",
          "[decode]") {
  for (const nn::GPTConfig& cfg :
       {ag_test::decode_configs().front().second, ag_test::llama_family_configs().front().second}) {
    const auto model_ptr = ag_test::sharp_model(cfg, 12);
    const int64_t T = cfg.context_length, V = cfg.vocab_size, B = 6;
    std::vector<std::vector<int64_t>> rows;
    for (int64_t b = 0; b < B; ++b) rows.push_back(ag_test::random_tokens(T, V, 20 + b));
    std::vector<std::vector<float>> alone(B);  // each row's logits at each step, alone
    for (int64_t b = 0; b < B; ++b) {
      nn::CachedInference one(*model_ptr, 1);
      const int64_t n = 1 + b;  // prompts of different lengths
      auto l = one.prefill(std::span<const int64_t>(rows[b].data(), n), n);
      alone[b].assign(l.begin(), l.end());
      for (int64_t t = n; t < T; ++t) {
        l = one.step(std::span<const int64_t>(&rows[b][t], 1));
        alone[b].insert(alone[b].end(), l.begin(), l.end());
      }
    }
    nn::CachedInference together(*model_ptr, B);
    std::vector<size_t> seen(B, 0);
    for (int64_t b = B - 1; b >= 0; --b) {  // slots filled out of order
      auto l = together.prefill_slot(b, std::span<const int64_t>(rows[b].data(), 1 + b));
      CHECK(std::equal(l.begin(), l.end(), alone[b].begin()));
      seen[b] = 1;
    }
    for (;;) {
      std::vector<int64_t> slots, ids;  // every row not yet full, the last first
      for (int64_t b = B - 1; b >= 0; --b)
        if (together.slot_length(b) < T) {
          slots.push_back(b);
          ids.push_back(rows[b][together.slot_length(b)]);
        }
      if (slots.empty()) break;
      const auto l = together.step_slots(slots, ids);
      for (size_t i = 0; i < slots.size(); ++i) {
        const auto b = static_cast<size_t>(slots[i]);
        CHECK(
            std::equal(l.begin() + i * V, l.begin() + (i + 1) * V, alone[b].begin() + seen[b] * V));
        ++seen[b];
      }
    }
    const std::vector<int64_t> full{0}, id{1};
    CHECK_THROWS_WITH(together.step_slots(full, id), Catch::Contains("full"));
  }
}

// A server's step that carries a row's re-prefill (its window moved) against the prefill
// and the step apart: every logit the same bits, windows of 1 to T positions, on one
// thread and on the team, for the default model, the Llama family's options (RoPE at each
// row's positions, grouped keys, q/k norms, biases) and a model too large for panels (two
// passes, as before).
TEST_CASE("a prefill carried by a step gives every row the bits of the prefill and step apart",
          "[decode]") {
  nn::GPTConfig large = ag_test::decode_configs().front().second;
  large.d_model = 512, large.n_layers = 3, large.context_length = 16;  // 9.4 M weights
  auto configs = ag_test::llama_family_configs();
  configs.insert(configs.begin(), ag_test::decode_configs().front());
  configs.emplace_back("large", large);
  for (const auto& [name, cfg] : configs)
    for (const auto threads :
         {nn::CachedInference::Threads::kOne, nn::CachedInference::Threads::kTeam}) {
      INFO(name << ", team " << (threads == nn::CachedInference::Threads::kTeam));
      auto model_ptr = ag_test::sharp_model(cfg, 15, 3.0);
      ag_test::vary_gains_and_biases(*model_ptr, 6);
      const int64_t T = cfg.context_length, V = cfg.vocab_size, B = 4;
      std::vector<std::vector<int64_t>> rows;
      for (int64_t b = 0; b < B; ++b) rows.push_back(ag_test::random_tokens(T, V, 30 + b));
      nn::CachedInference apart(*model_ptr, B), carried(*model_ptr, B);
      apart.set_threads(threads), carried.set_threads(threads);
      CHECK((name == "large") == (carried.prefill_step_rows() == 0));
      // a moved window (T / 2 + 1) and 3 step rows in one pass; a whole window (T) and
      // 3 rows exceed the buffers: two passes
      if (name != "large") CHECK(carried.prefill_step_rows() == T);
      for (int64_t b = 1; b < B; ++b)  // rows 1..3 at lengths 2..4; row 0 prefilled each step
        for (auto* dec : {&apart, &carried})
          dec->prefill_slot(b, std::span<const int64_t>(rows[b].data(), 1 + b));
      const std::vector<int64_t> slots{3, 1, 2};
      const std::vector<int64_t> windows{1, 7, T / 2 + 1, T};
      for (int64_t i = 0; carried.slot_length(3) < T; ++i) {
        const int64_t w = windows[static_cast<size_t>(i) % windows.size()];
        std::vector<int64_t> ids;
        for (const int64_t b : slots) ids.push_back(rows[b][carried.slot_length(b)]);
        const std::span<const int64_t> window(rows[0].data(), w);
        const auto first = apart.prefill_slot(0, window);
        std::vector<float> want(first.begin(), first.end());
        const auto rest = apart.step_slots(slots, ids);
        want.insert(want.end(), rest.begin(), rest.end());
        const auto got = carried.prefill_and_step_slots(0, window, slots, ids);
        INFO("window " << w << ", step rows at " << carried.slot_length(1));
        REQUIRE(got.size() == want.size());
        CHECK(std::equal(got.begin(), got.end(), want.begin()));
        CHECK(carried.slot_length(0) == w);
      }
      const std::vector<int64_t> with_itself{0}, id{1};
      CHECK_THROWS_WITH(carried.prefill_and_step_slots(
                            0, std::span<const int64_t>(rows[0].data(), 1), with_itself, id),
                        Catch::Contains("both prefilled and stepped"));
    }
}

TEST_CASE("the vector kernel gives each row the bits it has alone, however many rows it runs",
          "[decode]") {
  // outputs that are no multiple of 4 (the weight rows of a pass); widths of whole lanes
  // (four rows share each weight load) and not (a row at a time); bfloat16 weights too,
  // among them rows of 4 KB (2048 weights: one row of x takes them two rows a pass)
  for (const bool bf16 : {false, true})
    for (const int64_t in : {64, 70, 2048}) {
      const int64_t out = 37, most = 9;
      ag::Generator gen(5);
      const Tensor w = ag::randn({out, in}, gen), x = ag::randn({most, in}, gen),
                   bias = ag::randn({out}, gen);
      const std::vector<ag::bfloat16> rounded(w.const_data<float>(),
                                              w.const_data<float>() + out * in);
      const nn::inference::Weights weights{w.const_data<float>(), bf16 ? rounded.data() : nullptr};
      for (bool accumulate : {false, true}) {
        std::vector<float> alone(static_cast<size_t>(most * out), 0.5f);
        for (int64_t r = 0; r < most; ++r)
          nn::inference::linear(x.const_data<float>() + r * in, 1, in, weights,
                                bias.const_data<float>(), out, out, alone.data() + r * out, out,
                                accumulate);
        for (int64_t rows = 2; rows <= most; ++rows) {
          std::vector<float> together(static_cast<size_t>(rows * out), 0.5f);
          nn::inference::linear(x.const_data<float>(), rows, in, weights, bias.const_data<float>(),
                                out, out, together.data(), out, accumulate, /*vector_rows=*/most);
          INFO("bf16 " << bf16 << " in " << in << " rows " << rows << " accumulate " << accumulate);
          CHECK(std::equal(together.begin(), together.end(), alone.begin()));
        }
      }
    }
}

TEST_CASE("the decoder refuses misuse with a clear error", "[decode]") {
  const nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  const auto model_ptr = ag_test::sharp_model(cfg, 1);
  const nn::GPT& model = *model_ptr;
  nn::CachedInference dec(model, 1);
  const std::vector<int64_t> one{1}, bad{cfg.vocab_size};
  CHECK_THROWS_WITH(dec.step(one), Catch::Contains("prefill first"));
  CHECK_THROWS_WITH(dec.prefill(bad, 1), Catch::Contains("outside the vocabulary"));
  const std::vector<int64_t> too_long(static_cast<size_t>(cfg.context_length + 1), 1);
  CHECK_THROWS_WITH(dec.prefill(too_long, cfg.context_length + 1),
                    Catch::Contains("context_length"));
  std::vector<int64_t> full(static_cast<size_t>(cfg.context_length), 1);
  dec.prefill(full, cfg.context_length);
  CHECK_THROWS_WITH(dec.step(one), Catch::Contains("again past the context"));
  nn::GPT wide(cfg, 1);
  wide.to(ag::DType::Float64);
  CHECK_THROWS_WITH(nn::CachedInference(wide, 1), Catch::Contains("float32"));
}

TEST_CASE("a step gives the same logits on one thread and on two", "[decode]") {
  // each output is computed by one thread in the same order: the thread count (and the
  // pace's choice, step by step) changes no bit, so a seeded sample is the same on any
  const nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  const auto model_ptr = ag_test::sharp_model(cfg, 4);
  const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 8);
  auto all_logits = [&](int threads, nn::CachedInference::Threads policy) {
    return step_logits(*model_ptr, row, threads, policy);
  };
  using P = nn::CachedInference::Threads;
  const std::vector<float> one = all_logits(1, P::kTimed);
  CHECK(one == all_logits(2, P::kTeam));
  CHECK(one == all_logits(2, P::kOne));
  CHECK(one == all_logits(2, P::kTimed));
}

TEST_CASE("a prefill gives the same logits on one, two and three threads", "[decode]") {
  // a prefill shares every matrix's outputs among the team as a step does; its longer
  // passes go through BLAS, whose sums must not depend on the share a thread gets
  for (const auto& [name, cfg] : ag_test::decode_configs()) {
    const auto model_ptr = ag_test::sharp_model(cfg, 4);
    const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 9);
    for (const int64_t n : {int64_t{6}, cfg.context_length / 2 + 1}) {
      auto logits = [&](int threads) {
        const int before = ag::num_threads();
        ag::set_num_threads(threads);
        nn::CachedInference dec(*model_ptr, 1);
        dec.set_threads(nn::CachedInference::Threads::kTeam);
        const auto l = dec.prefill(std::span<const int64_t>(row.data(), n), n);
        std::vector<float> out(l.begin(), l.end());
        ag::set_num_threads(before);
        return out;
      };
      INFO(name << ", a prefill of " << n);
      const std::vector<float> one = logits(1);
      CHECK(one == logits(2));
      CHECK(one == logits(3));
    }
  }
}

TEST_CASE("the pace runs steps on the faster of one thread and the team", "[decode]") {
  auto run = [](double one, double team, int steps) {
    nn::inference::StepPace pace;
    int threaded = 0;
    for (int i = 0; i < steps; ++i) {
      const bool t = pace.threaded();
      threaded += t;
      pace.record(t, t ? team : one);
    }
    return threaded;
  };
  // the team twice as fast: nearly every step on it, one trial of one thread in 64 or so
  const int fast_team = run(2.0, 1.0, 1000);
  CHECK(fast_team > 950);
  CHECK(fast_team < 1000);
  // the team ten times slower (busy cores): one thread, the team tried about every 320
  const int slow_team = run(1.0, 10.0, 1000);
  CHECK(slow_team >= 2);
  CHECK(slow_team < 10);
  // one slow step at the start (the team's first timed one, 10x: a page fault, another
  // process) does not settle the choice: the team from the start's end
  nn::inference::StepPace pace;
  int team_steps = 0, team_after_start = 0;
  for (int i = 0; i < 100; ++i) {
    const bool t = pace.threaded();
    team_steps += t;
    team_after_start += t && i >= 6;
    pace.record(t, t ? (team_steps == 2 ? 10.0 : 1.0) : 2.0);
  }
  CHECK(team_after_start >= 90);
}

TEST_CASE("the pace is not decided by the team waking up or by one slow step", "[decode]") {
  // the team's first step after steps on one thread pays for waking its threads (10x): a
  // trial's first step is not timed, so the team, twice as fast, is found again
  nn::inference::StepPace woken;
  bool last_threaded = false;
  int team_steps = 0;
  for (int i = 0; i < 1000; ++i) {
    const bool t = woken.threaded();
    team_steps += t && i >= 500;
    woken.record(t, t ? (last_threaded ? 1.0 : 10.0) : 2.0);
    last_threaded = t;
  }
  CHECK(team_steps > 480);
  // the team in use, one step of it 10x slower (another process took the core): the team
  // stays, but for the trials of one thread (2 steps in about 64)
  nn::inference::StepPace steady;
  int one_thread_after = 0;
  for (int i = 0; i < 200; ++i) {
    const bool t = steady.threaded();
    one_thread_after += !t && i > 100 && i <= 130;
    steady.record(t, t ? (i == 100 ? 10.0 : 1.0) : 2.0);
  }
  CHECK(one_thread_after <= 2);
}

TEST_CASE("passes of different sizes are paced apart", "[decode]") {
  nn::inference::PacesByRows paces;
  // 1-row steps faster on one thread, 8-row steps on the team: each size settles on its own
  // (one pace for both compared the 8-row team steps with the 1-row steps on one thread)
  int one_row_team = 0, eight_rows_team = 0;
  for (int i = 0; i < 400; ++i) {
    nn::inference::StepPace& one = paces[1];
    const bool t1 = one.threaded();
    one_row_team += t1 && i >= 20;
    one.record(t1, t1 ? 2.0 : 1.0);
    nn::inference::StepPace& eight = paces[8];
    const bool t8 = eight.threaded();
    eight_rows_team += t8 && i >= 20;
    eight.record(t8, t8 ? 5.0 : 8.0);
  }
  CHECK(one_row_team < 20);
  CHECK(eight_rows_team > 360);
  // exact up to 16 rows, then a pace per power of two
  CHECK(&paces[16] != &paces[17]);
  CHECK(&paces[17] == &paces[32]);
  CHECK(&paces[33] != &paces[32]);
  CHECK(&paces[33] == &paces[64]);
  CHECK(&paces[0] == &paces[1]);
  CHECK(&paces[int64_t{1} << 62] != &paces[int64_t{1} << 61]);
}

TEST_CASE("cached decoding covers query/key/value biases and an untied head", "[decode]") {
  nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  cfg.qkv_bias = true, cfg.tie_weights = false, cfg.d_ff = 200, cfg.n_heads = 8;
  cfg.d_model = 72;  // head_dim 9 and d_ff 200: no multiple of the vector width
  auto model_ptr = ag_test::sharp_model(cfg, 12);
  {
    ag::NoGradGuard no_grad;  // biases start at 0: give them values
    ag::Generator g(3);
    for (auto& [name, p] : model_ptr->named_parameters())
      if (p.dim() == 1 && name.find("bias") != std::string::npos)
        ag::copy_(p, ag::randn(p.shape(), g) * 0.5);
  }
  const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 5);
  CHECK(max_step_error(*model_ptr, row, 1) < 1.0);
  CHECK(max_step_error(*model_ptr, row, cfg.context_length / 2) < 1.0);
}

TEST_CASE("cached decoding runs the RMSNorm variant as its forward does", "[decode]") {
  nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  cfg.norm = nn::NormKind::rms_norm;
  auto model_ptr = ag_test::sharp_model(cfg, 13);
  {
    ag::NoGradGuard no_grad;  // norm gains start at 1: give them values
    ag::Generator g(4);
    for (auto& [name, p] : model_ptr->named_parameters())
      if (p.dim() == 1) ag::copy_(p, ag::randn(p.shape(), g) * 0.5 + 1.0);
  }
  const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 6);
  CHECK(max_step_error(*model_ptr, row, 1) < 1.0);
  CHECK(max_step_error(*model_ptr, row, cfg.context_length / 2) < 1.0);
}

TEST_CASE("cached decoding runs the Llama family's options as the forward does", "[decode]") {
  // grouped keys and values cached once per group, RoPE at each position, q/k norms, SwiGLU
  for (const auto& [name, cfg] : ag_test::llama_family_configs()) {
    INFO(name);
    auto model_ptr = ag_test::sharp_model(cfg, 14, 3.0);
    ag_test::vary_gains_and_biases(*model_ptr, 5);
    const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 7);
    CHECK(max_step_error(*model_ptr, row, 1) < 1.0);
    CHECK(max_step_error(*model_ptr, row, cfg.context_length / 2) < 1.0);
    // rows side by side: each step's rows at one position, the cache row by row
    const int64_t T = cfg.context_length, V = cfg.vocab_size, B = 3, n = 4;
    std::vector<int64_t> prompt, next(B);
    std::vector<std::vector<int64_t>> rows;
    for (int64_t b = 0; b < B; ++b) rows.push_back(ag_test::random_tokens(T, V, 20 + b));
    for (const auto& r : rows) prompt.insert(prompt.end(), r.begin(), r.begin() + n);
    nn::CachedInference together(*model_ptr, B);
    std::span<const float> logits = together.prefill(prompt, n);
    for (int64_t t = n; t < T; ++t) {
      for (int64_t b = 0; b < B; ++b) next[b] = rows[b][t];
      logits = together.step(next);
    }
    for (int64_t b = 0; b < B; ++b) {
      const Tensor full = ag_test::forward_logits(*model_ptr, rows[b]);
      for (int64_t v = 0; v < V; ++v)
        CHECK(std::abs(logits[b * V + v] - full.at({T - 1, v})) < tolerance(full));
    }
  }
}

TEST_CASE("the decoder refuses a model it cannot run as described", "[decode]") {
  nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  nn::GPT with_adapter(cfg, 1);
  ag::Generator gen(1);
  static_cast<nn::MLP&>(*(*with_adapter.blocks)[0].mlp).fc1->add_adapter(2, 2.0, gen);
  REQUIRE_THROWS_WITH(nn::CachedInference(with_adapter, 1),
                      Catch::Contains("blocks.0.mlp.fc1") && Catch::Contains("merge"));
  static_cast<nn::MLP&>(*(*with_adapter.blocks)[0].mlp).fc1->merge_adapter();
  REQUIRE_NOTHROW(nn::CachedInference(with_adapter, 1));
  nn::GPT classifier(cfg, 1);
  classifier.replace_head(std::make_shared<nn::ClassificationHead>(cfg.d_model, 2, gen),
                          "classifier");
  REQUIRE_THROWS_WITH(nn::CachedInference(classifier, 1),
                      Catch::Contains("does not predict tokens"));
}

TEST_CASE("a step and the choice of a token allocate nothing", "[decode]") {
  const nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  const auto model_ptr = ag_test::sharp_model(cfg, 2);
  nn::CachedInference dec(*model_ptr, 2);
  nn::SamplingOptions so;
  so.top_k = 10, so.top_p = 0.9;
  nn::TokenSampler sampler(cfg.vocab_size, so);
  ag::Generator gen(1);
  std::vector<int64_t> ids{1, 2};
  std::span<const float> logits = dec.prefill(ids, 1);
  const int64_t before = g_news.load();
  for (int64_t t = 1; t < cfg.context_length; ++t) {
    for (int64_t b = 0; b < 2; ++b)
      ids[b] = sampler.choose(logits.subspan(b * cfg.vocab_size, cfg.vocab_size), gen);
    logits = dec.step(ids);
  }
  CHECK(g_news.load() - before == 0);
  // the counter counts: a vector's first element is a new
  std::vector<int> probe;
  probe.push_back(1);
  CHECK(g_news.load() - before >= 1);
}

TEST_CASE("a decoder sized for a shorter window gives the same logits bit for bit", "[decode]") {
  // generate() makes its decoder hold the longest window it will use, not the context:
  // the cache's layout changes (keys transposed with the window's stride), the sums do not
  const nn::GPTConfig cfg = ag_test::decode_configs().back().second;
  const auto model_ptr = ag_test::sharp_model(cfg, 5);
  const std::vector<int64_t> row = ag_test::random_tokens(40, cfg.vocab_size, 8);
  nn::CachedInference whole(*model_ptr, 1), window(*model_ptr, 1, nn::WeightFormat::fp32, 40);
  REQUIRE(whole.capacity() == cfg.context_length);
  REQUIRE(window.capacity() == 40);
  const auto same = [](std::span<const float> a, std::span<const float> b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  };
  const auto prefix = std::span<const int64_t>(row.data(), 10);
  CHECK(same(whole.prefill(prefix, 10), window.prefill(prefix, 10)));
  for (size_t t = 10; t < row.size(); ++t)
    CHECK(same(whole.step({&row[t], 1}), window.step({&row[t], 1})));
  CHECK_THROWS_WITH(window.step({&row[0], 1}), Catch::Contains("capacity"));
  CHECK_THROWS_WITH(
      nn::CachedInference(*model_ptr, 1, nn::WeightFormat::fp32, cfg.context_length + 1),
      Catch::Contains("positions"));
}

TEST_CASE("a long prefill is scored a block of rows at a time and gives the forward's logits",
          "[decode]") {
  // 4096 positions: blocks of 1024 query rows (kPrefillScoreFloats), not one 4096 x 4096
  // score matrix per thread
  nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  cfg.context_length = 4096, cfg.d_model = 16, cfg.n_heads = 2, cfg.n_layers = 1;
  REQUIRE(nn::prefill_score_rows(cfg.context_length) == 1024);
  REQUIRE(nn::prefill_score_rows(256) == 256);  // a window this small: scored whole
  const auto model_ptr = ag_test::sharp_model(cfg, 3);
  const std::vector<int64_t> row = ag_test::random_tokens(cfg.context_length, cfg.vocab_size, 4);
  CHECK(max_step_error(*model_ptr, row, cfg.context_length - 2) < 1.0);
}

TEST_CASE("the decoder's memory grows with its window, not the square of the context", "[decode]") {
  // a 4k-parameter model of context 32768 took 8.4 GB to sample 3 tokens: two threads'
  // 32768 x 32768 float scores
  nn::GPTConfig cfg = ag_test::decode_configs().front().second;
  cfg.context_length = 32768, cfg.d_model = 8, cfg.n_heads = 1, cfg.n_layers = 1;
  CHECK(nn::CachedInference::memory_bytes(cfg, 1, 2, nn::WeightFormat::fp32, 3) <
        (int64_t{1} << 20));
  const int64_t whole = nn::CachedInference::memory_bytes(cfg, 1, 2);
  CHECK(whole < (int64_t{64} << 20));
  CHECK(whole > 2 * nn::kPrefillScoreFloats * 4);  // the two threads' blocks of scores
  // counts that would overflow saturate instead of wrapping to a small or negative size
  CHECK(nn::CachedInference::memory_bytes(cfg, int64_t{1} << 62, 2) == INT64_MAX);
  CHECK(nn::CachedInference::memory_bytes(cfg, 1, 1 << 30) > (int64_t{1} << 40));
}

TEST_CASE("a small model's float32 decoder keeps panels and counts them; a large one reads W",
          "[decode]") {
  nn::GPTConfig small = ag_test::decode_configs().front().second;
  CHECK(nn::keeps_weight_panels(small, nn::WeightFormat::fp32));
  CHECK_FALSE(nn::keeps_weight_panels(small, nn::WeightFormat::bf16));
  CHECK_FALSE(nn::keeps_weight_panels(small, nn::WeightFormat::q8_0));
  // the panels' floats (each matrix's outputs rounded up to 16) in the memory it plans
  nn::GPTConfig wide = small;
  wide.d_model = 512, wide.n_heads = 8, wide.n_layers = 2;  // 6.3 M weights: 25 MB
  REQUIRE(nn::keeps_weight_panels(wide, nn::WeightFormat::fp32));
  const int64_t with_panels = nn::CachedInference::memory_bytes(wide, 1, 1);
  wide.n_layers = 3;  // 9.4 M weights: 38 MB, above kPanelWeightBytes
  CHECK_FALSE(nn::keeps_weight_panels(wide, nn::WeightFormat::fp32));
  const int64_t without = nn::CachedInference::memory_bytes(wide, 1, 1);
  CHECK(with_panels > without);  // a third layer's cache does not make up for the copy
}
