#include "bench/micro.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "autograd/ops/gemm.h"
#include "autograd/quant/block_formats.h"
#include "autograd/quant/unpack_kernels.h"
#include "nn/inference.h"
#include "nn/inference_kernels.h"

namespace bench {

double median_ms(const std::function<void()>& fn, int reps) {
  fn();
  fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

namespace {

struct Row {
  std::string kernel, shape;
  double ms, gflops, gbytes;  // gflops or gbytes may be 0 when not meaningful
};

// The GEMMs of one training step of each bench config (rows = batch x context; width C,
// d_ff 4C, vocab 65): forward (x W^T) and backward (dx = dh W, dW = dh^T x), each by
// OpenBLAS's sgemm and oneDNN on float32, and oneDNN on bfloat16. Which backend is faster
// per shape is what autocast's backend choice and the float32 path rest on (ops/gemm.h).
void gemm_backend_rows(ag::Generator& gen, std::vector<Row>& rows) {
  using ag::detail::GemmOperand;
  struct Shape {
    std::string name;
    int64_t M, N, K;
    bool ta, tb;
  };
  std::vector<Shape> shapes;
  for (auto [config, BT, C] :
       {std::tuple{"tiny", 1024, 64}, {"small", 2048, 128}, {"base", 2048, 256}})
    for (auto [layer, N] : {std::pair{"qkv", 3 * C}, {"fc1", 4 * C}, {"fc2", C}, {"head", 65}}) {
      const int64_t K = std::string(layer) == "fc2" ? 4 * C : C;
      const std::string at = std::string(config) + " " + layer;
      shapes.push_back({at + " x W^T", BT, N, K, false, true});
      shapes.push_back({at + " dh W", BT, K, N, false, false});
      shapes.push_back({at + " dh^T x", N, K, BT, true, false});
    }
  for (const Shape& s : shapes) {
    const GemmOperand oa{s.ta, s.ta ? s.M : s.K}, ob{s.tb, s.tb ? s.K : s.N};
    ag::Tensor a = ag::randn({s.M * s.K}, gen), b = ag::randn({s.K * s.N}, gen);
    ag::Tensor ab = ag::to_bfloat16(a), bb = ag::to_bfloat16(b), c = ag::empty({s.M, s.N});
    const double flop = 2.0 * s.M * s.N * s.K;
    const std::string shape = fmt::format("{} {}x{}x{}", s.name, s.M, s.N, s.K);
    const float *pa = a.data<float>(), *pb = b.data<float>();
    float* pc = c.data<float>();
    const double blas =
        median_ms([&] { ag::detail::gemm_openblas(oa, ob, s.M, s.N, s.K, pa, pb, pc); });
    const double dnnl =
        median_ms([&] { ag::detail::gemm_onednn(oa, ob, s.M, s.N, s.K, pa, pb, pc); });
    const double bf16 = median_ms([&] {
      ag::detail::gemm_onednn(oa, ob, s.M, s.N, s.K, ab.data<ag::bfloat16>(),
                              bb.data<ag::bfloat16>(), pc);
    });
    rows.push_back({"gemm OpenBLAS f32", shape, blas, flop / blas / 1e6, 0});
    rows.push_back({"gemm oneDNN f32", shape, dnnl, flop / dnnl / 1e6, 0});
    rows.push_back({"gemm oneDNN bf16", shape, bf16, flop / bf16 / 1e6, 0});
  }
}

// One line (or JSON object) per row, with the share of the sgemm peak (rows[0]).
void print_rows(const std::vector<Row>& rows, int threads, bool json) {
  const double peak = rows[0].gflops;
  for (const auto& r : rows) {
    if (json) {
      std::cout << nlohmann::json{{"kernel", r.kernel},
                                  {"shape", r.shape},
                                  {"threads", threads},
                                  {"ms", r.ms},
                                  {"gflops", r.gflops},
                                  {"gbytes_per_s", r.gbytes},
                                  {"fraction_of_sgemm_peak", r.gflops / peak}}
                       .dump()
                << "\n";
    } else {
      fmt::print("{:<30} {:<28} {:8.3f} ms", r.kernel, r.shape, r.ms);
      if (r.gflops > 0)
        fmt::print("  {:7.1f} GFLOP/s ({:3.0f}% of sgemm peak)", r.gflops, 100 * r.gflops / peak);
      if (r.gbytes > 0) fmt::print("  {:7.1f} GB/s", r.gbytes);
      fmt::print("\n");
    }
  }
}

// The sizes of the micro-benchmarks: a base-like layer's tokens, widths and heads.
constexpr int64_t BT = 2048, C = 256, F = 1024, V = 65, B = 8, H = 8, T = 256, D = 32;

// The machine's GEMM peak: a square sgemm big enough to reach it.
Row sgemm_peak_row(ag::Generator& gen) {
  const int n = 1024;
  ag::Tensor a = ag::randn({n, n}, gen), b = ag::randn({n, n}, gen), c = ag::zeros({n, n});
  const double ms = median_ms([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n,
                b.data<float>(), n, 0.0f, c.data<float>(), n);
  });
  return {"cblas_sgemm peak", "1024x1024x1024", ms, 2.0 * n * n * n / ms / 1e6, 0};
}

// The MLP's fc1 through ag::matmul, forward and backward.
Row matmul_row(ag::Generator& gen) {
  ag::Tensor x = ag::randn({BT, C}, gen).requires_grad_(),
             w = ag::randn({F, C}, gen).requires_grad_();
  const double ms = median_ms([&] {
    x.zero_grad(), w.zero_grad();
    ag::sum(ag::matmul(x, w.t())).backward();
  });
  return {"matmul fwd+bwd (x W^T)", fmt::format("[{}, {}] x [{}, {}]^T", BT, C, F, C), ms,
          3 * 2.0 * BT * C * F / ms / 1e6, 0};
}

// The fused causal attention of one layer, forward and backward.
Row attention_row(ag::Generator& gen) {
  ag::Tensor q = ag::randn({B, H, T, D}, gen).requires_grad_(),
             k = ag::randn({B, H, T, D}, gen).requires_grad_(),
             v = ag::randn({B, H, T, D}, gen).requires_grad_();
  ag::Generator drop(3);
  const double ms = median_ms([&] {
    q.zero_grad(), k.zero_grad(), v.zero_grad();
    ag::sum(ag::scaled_dot_product_attention(q, k, v, true, 0.0, &drop)).backward();
  });
  // causal: half of the T x T score matrix is computed; 2 matmuls forward, 4 backward
  const double flops = 6 * 2.0 * B * H * (T * (T + 1) / 2.0) * D;
  return {"attention fwd+bwd (causal)", fmt::format("[{}, {}, {}, {}]", B, H, T, D), ms,
          flops / ms / 1e6, 0};
}

// LayerNorm forward and backward: memory bound, so GB/s (x and dy read, y and dx written).
Row layer_norm_row(ag::Generator& gen) {
  ag::Tensor x = ag::randn({BT, C}, gen).requires_grad_(), w = ag::ones({C}).requires_grad_(),
             b = ag::zeros({C}).requires_grad_();
  const double ms = median_ms([&] {
    x.zero_grad(), w.zero_grad(), b.zero_grad();
    ag::sum(ag::layer_norm(x, w, b)).backward();
  });
  return {"layer_norm fwd+bwd", fmt::format("[{}, {}]", BT, C), ms, 0, 4.0 * 4 * BT * C / ms / 1e6};
}

// Cross-entropy over the head's logits, forward and backward.
Row cross_entropy_row(ag::Generator& gen) {
  ag::Tensor logits = ag::randn({BT, V}, gen).requires_grad_();
  std::vector<int64_t> t(BT);
  for (auto& id : t) id = static_cast<int64_t>(gen.next_u64() % V);
  ag::Tensor targets = ag::from_vector(t, {BT});
  const double ms = median_ms([&] {
    logits.zero_grad();
    ag::cross_entropy(logits, targets).backward();
  });
  return {"cross_entropy fwd+bwd", fmt::format("[{}, {}]", BT, V), ms, 0,
          2.0 * 4 * BT * V / ms / 1e6};
}

// GELU forward and backward.
Row gelu_row(ag::Generator& gen) {
  ag::Tensor x = ag::randn({BT, F}, gen).requires_grad_();
  const double ms = median_ms([&] {
    x.zero_grad();
    ag::sum(ag::gelu(x)).backward();
  });
  return {"gelu fwd+bwd", fmt::format("[{}, {}]", BT, F), ms, 0, 4.0 * 4 * BT * F / ms / 1e6};
}

// The decoder's vector kernel on a server's step of 8 sequences (serve: every row's sums in
// the order of its step alone): the base layer's fc1 and fc2 on 8 rows.
void decoder_rows(ag::Generator& gen, std::vector<Row>& rows) {
  for (const auto& shape : {std::pair{C, F}, std::pair{F, C}}) {
    const int64_t in = shape.first, out = shape.second;  // (clang 14 captures no bindings)
    const ag::Tensor x = ag::randn({8, in}, gen), w = ag::randn({out, in}, gen);
    std::vector<float> y(static_cast<size_t>(8 * out));
    nn::inference::Weights weights;
    weights.f32 = w.data<float>();
    const double ms =
        median_ms([&] {
          for (int repeat = 0; repeat < 100; ++repeat)
            nn::inference::linear(x.data<float>(), 8, in, weights, nullptr, out, out, y.data(), out,
                                  false, nn::CachedInference::kStepRowsAtOnce);
        }) /
        100;
    rows.push_back({"decoder linear, 8 rows (serve)",
                    fmt::format("[8, {}] x [{}, {}]^T", in, out, in), ms,
                    2.0 * 8 * in * out / ms / 1e6, 0});
  }
}

// Unpacking a frozen base's blocks (autograd/quant/unpack_kernels.h) on one thread: 4 M
// weights of Q4_K and of Q8_0 to float32 and to bfloat16, by the reference (ggml's scalar
// arithmetic) and by the AVX2 and AVX-512 kernels where the CPU has them; GB/s of blocks read, and
// the weights a second in the shape column. The decoder's Q4_K dot product beside them.
void unpack_rows(ag::Generator& gen, std::vector<Row>& rows) {
  using ag::quant::UnpackKernel;
  constexpr int64_t n = int64_t{1} << 22;
  std::vector<float> x(static_cast<size_t>(n)), f32(static_cast<size_t>(n));
  for (auto& v : x) v = static_cast<float>(gen.normal());
  std::vector<ag::bfloat16> bf16(static_cast<size_t>(n));
  std::vector<UnpackKernel> kernels{UnpackKernel::reference};
  for (UnpackKernel fast : {UnpackKernel::avx2, UnpackKernel::avx512})
    if (ag::quant::can_run(fast)) kernels.push_back(fast);
  for (const auto format : {ag::quant::BlockFormat::q4_k, ag::quant::BlockFormat::q8_0}) {
    const ag::quant::BlockLayout& l = ag::quant::layout(format);
    std::vector<uint8_t> blocks(static_cast<size_t>(ag::quant::row_bytes(l, n)));
    ag::quant::quantize_rows(l, x.data(), 1, n, blocks.data());
    const bool q4 = format == ag::quant::BlockFormat::q4_k;
    for (const UnpackKernel k : kernels) {
      const char* by = k == UnpackKernel::avx512 ? "AVX-512"
                       : k == UnpackKernel::avx2 ? "AVX2"
                                                 : "reference";
      auto row = [&](const std::string& what, double ms) {
        rows.push_back({fmt::format("{} {}", what, by),
                        fmt::format("4M weights, {:.2f} G weights/s", n / ms / 1e6), ms, 0,
                        static_cast<double>(blocks.size()) / ms / 1e6});
      };
      row(fmt::format("unpack {} f32", l.name), median_ms([&] {
            q4 ? ag::quant::unpack_q4_k(blocks.data(), n, f32.data(), k)
               : ag::quant::unpack_q8_0(blocks.data(), n, f32.data(), k);
          }));
      row(fmt::format("unpack {} bf16", l.name), median_ms([&] {
            q4 ? ag::quant::unpack_q4_k(blocks.data(), n, bf16.data(), k)
               : ag::quant::unpack_q8_0(blocks.data(), n, bf16.data(), k);
          }));
      if (q4) {
        volatile float sink = 0;
        row("dot q4_k (decoder)", median_ms([&] {
              for (int64_t r = 0; r < n / 2048; ++r)
                sink = sink +
                       ag::quant::dot_q4_k(x.data(), blocks.data() + r * 2048 / 256 * 144, 2048, k);
            }));
      }
    }
  }
}

}  // namespace

int run_micro(int threads, bool json) {
  ag::set_num_threads(threads);
  ag::Generator gen(1);
  std::vector<Row> rows;
  for (Row (*measure)(ag::Generator&) :
       {sgemm_peak_row, matmul_row, attention_row, layer_norm_row, cross_entropy_row, gelu_row})
    rows.push_back(measure(gen));
  gemm_backend_rows(gen, rows);
  decoder_rows(gen, rows);
  unpack_rows(gen, rows);
  print_rows(rows, threads, json);
  return 0;
}

}  // namespace bench
