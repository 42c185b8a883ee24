#pragma once
// Differentiable ops. Each is implemented with its backward beside its forward, one file
// per family under autograd/ops/. Elementwise binary ops broadcast as NumPy/PyTorch do;
// mixing float32 and float64 is an error (convert with .to()).
#include <limits>
#include <vector>

#include "autograd/tensor.h"

namespace ag {

// ---- elementwise (ops/elementwise.cpp)
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor pow(const Tensor& a, double exponent);
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor gelu(const Tensor& a);  // tanh approximation, as GPT-2
Tensor silu(const Tensor& a);  // x sigmoid(x): SwiGLU's gate (Llama, Qwen)
// silu(gate) * up for gate and up of one shape: SwiGLU's gating as one op (ops/swiglu.cpp)
Tensor swiglu(const Tensor& gate, const Tensor& up);
void add_(Tensor& a, const Tensor& b);  // in place, not recorded: gradient accumulation

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator*(double a, const Tensor& b);

// ---- reductions (ops/reduce.cpp); an empty dims list reduces over every dim
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& a);  // over all elements
Tensor max(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);  // int64, first of ties
// Sums a broadcast gradient back down to `shape` (the reverse of broadcasting).
Tensor sum_to(const Tensor& a, const Shape& shape);

// ---- matmul (ops/matmul.cpp): 1-D, 2-D and batched N-D with batch broadcasting, GEMM via
// CBLAS; transposed operands are passed to BLAS as flags instead of being copied. Under a
// bf16 autocast scope (autograd/autocast.h), float32 matmul and linear multiply bfloat16
// operands on oneDNN with float32 accumulation, forward and backward.
Tensor matmul(const Tensor& a, const Tensor& b);
// y = act(x W^T + b) for x [..., in], weight [out, in] (PyTorch's layout), bias [out] or
// undefined: one GEMM with the bias already in its output, the activation applied in the
// same pass that reads it, one node in the graph. Backward: dh = g act'(h), db = sum dh,
// dx = dh W, dW = dh^T x.
enum class Activation { None, Gelu };
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              Activation activation = Activation::None);
// Several projections of one input as one: the weights [N_i, in] stacked along the outputs
// (the biases [N_i] likewise: one per weight, or none), y [..., sum N_i]. One GEMM forward
// and two backward for all the parts together, in one node whose inputs are x, the
// weights, then the biases, so that each part gets its own gradient.
Tensor linear(const Tensor& x, const std::vector<Tensor>& weights,
              const std::vector<Tensor>& biases = {});

// ---- LoRA (ops/lora.cpp)
// One adapter of lora_add: scale (x A^T) B^T, A [rank, in] and B [out, rank], added to the
// output's columns [col, col + out).
struct LoraTerm {
  Tensor a, b;
  double scale = 1.0;
  int64_t col = 0;
};
// y + the terms (in increasing, non-overlapping columns) for x [..., in] and y [..., out]
// alike but in their last dimension, float32 or float64 (under bf16 autocast too, float32:
// an adapter is small), one node. The terms share x: one pass over it computes every
// term's u = scale x A^T, kept for backward (dB = g^T u, du = scale g B, dA = du^T x,
// dx = du A; y's gradient is g).
Tensor lora_add(const Tensor& y, const Tensor& x, const std::vector<LoraTerm>& terms);

// ---- joining and splitting (ops/join.cpp)
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim);
std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim);

// ---- masking and softmax (ops/softmax.cpp)
// Where mask (broadcast to a's shape, any dtype, nonzero = masked) is set, value.
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);
// Max-subtracted. A row that is -inf everywhere (fully masked) gives zeros from softmax
// and -inf from log_softmax, with zero gradient, instead of NaN.
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);
// Fused log-softmax + negative log-likelihood over the last dim of logits [..., C] with
// int64 targets [...]; mean over targets that are not ignore_index (0 when all are).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

// ---- the head's loss without its logits (ops/linear_cross_entropy.cpp)
// cross_entropy(linear(x, weight), targets, ignore_index) for x [..., K], weight [V, K]
// (float, or packed: a frozen base's, quant/packed_weight.h) and targets [...], computed
// chunk_rows rows of x at a time (0: linear_cross_entropy_rows(V)): the [rows, V] logits and
// their gradient are never held whole. Recorded, the gradients of x and a trainable weight
// are computed by forward, chunk by chunk, and backward scales them by the loss's gradient.
// With one chunk every result equals the unfused ops' bit for bit; with more, dW sums the
// chunks' products (a float rounding apart), the loss and dx are the same sums per row.
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets,
                            int64_t ignore_index = -100, int64_t chunk_rows = 0);
// The float32 logits a chunk holds at most (with, under bf16, their gradient's rounded copy
// beside them: half as much again), and the rows a chunk takes for V classes.
inline constexpr int64_t kLinearCrossEntropyChunkBytes = int64_t{64} << 20;
int64_t linear_cross_entropy_rows(int64_t classes);

// ---- layers' primitives (ops/embedding.cpp, ops/layer_norm.cpp, ops/dropout.cpp)
// Rows of weight [V, C] picked by int64 ids [...] -> [..., C]; backward scatter-adds (into
// a leaf weight's gradient, row by row, when it already holds one: a tied head's).
Tensor embedding(const Tensor& weight, const Tensor& ids);
// Normalises over the last dim; weight and bias [C] are optional.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// Scales each row (the last dim) by the inverse of its root mean square, as LLaMA and T5
// do: x / sqrt(mean(x^2) + eps) * weight, no centring and no bias; weight [C] is optional.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-5);
// Inverted dropout: zeroes with probability p and scales survivors by 1/(1-p) when
// training; the identity when !training or p == 0; all zeros when p == 1.
Tensor dropout(const Tensor& a, double p, bool training, Generator& gen);

// ---- attention (ops/attention.cpp)
// softmax(q k^T * scale, causal: key j > query i hidden), dropped out, times v.
// q [..., T, D], k [..., S, D], v [..., S, Dv] with equal leading dims; scale 0 means
// 1/sqrt(D). Forward and backward are one kernel each: no [..., T, S] score or mask tensor
// is materialised, masked entries are skipped, queries are processed in tiles of 64
// (saving only each query's log-sum-exp; backward also reads the output, so do not
// modify the output in place). With dropout_p > 0 the op takes one draw from gen and
// derives every row's mask from it, so backward replays the mask instead of storing it.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    double dropout_p, Generator* gen, double scale = 0);
// The same causal attention over a packed projection: qkv [B, T, 3C] holds q, k and v side
// by side (C = num_heads * head_dim), the result is [B, T, C] with the heads side by side,
// and the gradient comes back as one [B, T, 3C] tensor: one GEMM makes q, k and v, and no
// transpose or split appears in the graph. Masks as above with rows r = b * num_heads + h.
Tensor causal_self_attention(const Tensor& qkv, int64_t num_heads, double dropout_p,
                             Generator* gen);
// Grouped-query attention (Llama's, Qwen's): qkv [B, T, (H + 2 KV) D] holds the queries of
// H = num_heads heads and the keys and values of KV = num_kv_heads heads, each shared by
// H / KV consecutive query heads (the kernels read a shared row, never a repeated copy;
// backward sums each group's key and value gradients in head order).
Tensor causal_self_attention(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads,
                             double dropout_p, Generator* gen);

// ---- rotary position embedding (ops/rope.cpp)
// RoPE in Hugging Face's rotate-half layout (Llama's, Qwen's): in each token t of x
// [B, T, W], heads [0, rotated_heads) of head_dim columns turn, column i with column
// i + head_dim / 2, by the angle whose cosine and sine are cos[t, i] and sin[t, i] (tables
// [>= T, head_dim / 2], converted to x's dtype); columns past rotated_heads * head_dim pass
// unchanged (the values, beside the queries and keys of a packed projection).
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t rotated_heads,
            int64_t head_dim);

// ---- row kernels (ops/layer_norm.cpp): layer_norm's and rms_norm's float32 forwards on raw
// pointers, rows [0, rows) of x [rows, C] into y, on the calling thread; w and b [C] are
// required, mean and rstd [rows] written where not null. The ops run these very functions
// on their float32 rows, so an inference path that calls them (the KV-cached decoder) gets
// the bits of the training forward.
namespace kernels {
void layer_norm_rows(const float* x, int64_t rows, int64_t C, const float* w, const float* b,
                     double eps, float* y, float* mean = nullptr, float* rstd = nullptr);
void rms_norm_rows(const float* x, int64_t rows, int64_t C, const float* w, double eps, float* y,
                   float* rstd = nullptr);
// rope's float32 forward (ops/rope.cpp), in place: rows [0, rows) of x (row_stride apart),
// heads [0, heads) of D columns each, row r at position first_position + r of the tables
// cos, sin [positions, D / 2].
void rope_rows(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t D,
               const float* cos, const float* sin, int64_t first_position);
}  // namespace kernels

// ---- constants
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace ag
