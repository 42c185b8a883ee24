#pragma once
// Mixed precision as torch.autocast("cpu", dtype=torch.bfloat16) does it: inside a bf16
// scope, the float32 matmul-like ops (matmul, linear and the fused attention's two
// products) multiply bfloat16 copies of their operands, accumulating in float32 and
// returning float32, on the CPU's BF16 units; their backward GEMMs do the same with the
// incoming gradient rounded to bfloat16. Everything else (LayerNorm, softmax and its
// statistics, GELU, the loss, the optimizer) stays float32, as do the weights themselves.
// float64 is never cast: gradient checks are unaffected.
//
//   {
//     ag::AutocastScope autocast(ag::Precision::bf16);
//     auto out = model.forward(x, y);      // GEMMs on bfloat16 operands
//     out.loss.backward();                 // so are the backward's
//   }                                      // bfloat16 weight copies released here
//   opt.step();                            // float32 master weights
//
// The scope converts each parameter (a leaf that requires grad) once, however often it is
// used, so a training step with several micro-batches rounds each weight once; it must end
// before the weights change. Scopes nest; a fp32 scope inside a bf16 one turns the casts off.
#include <memory>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace ag {

// A run's precision. Its names (fp32, bf16) are a table of the layers above that read
// text (base::ChoiceNames<ag::Precision>, train/config.h): autograd reads none.
enum class Precision { fp32, bf16 };

class Bf16WeightCopies;

class AutocastScope {
 public:
  // With `copies`, a bf16 scope converts a weight only when copies holds no copy of it yet,
  // and leaves the copies it makes there for the next scope (see Bf16WeightCopies).
  explicit AutocastScope(Precision precision, Bf16WeightCopies* copies = nullptr);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

  struct WeightCache;

 private:
  Precision saved_precision_;
  std::shared_ptr<WeightCache> saved_cache_;
};

// The bfloat16 weight copies of a training run, kept from one step to the next. Without
// them each step's scope rounds every weight again: a pass that reads all the float32
// weights (GPT-2 124M: 500 MB) just after the optimiser has written them. An optimiser
// given the copies (ElementwiseOptimizer::keep_bf16_copies) rounds each chunk of a
// parameter it has just updated, still in cache, into every copy of it, and the next
// scope given the copies uses them as they are:
//
//   ag::Bf16WeightCopies copies;
//   opt.keep_bf16_copies(&copies);
//   for (each step) {
//     { ag::AutocastScope autocast(ag::Precision::bf16, &copies); forward; backward; }
//     opt.step();                          // also refreshes the copies
//   }
//
// The copies are trusted: whatever changes a weight other than that optimiser (loading a
// state, an in-place edit) must call clear() before the next scope.
class Bf16WeightCopies {
 public:
  Bf16WeightCopies();
  // Rounds elements [begin, end) of param into every copy of it (none: nothing). Safe to
  // call from several threads at once for disjoint ranges; not during a scope.
  void refresh(const Tensor& param, int64_t begin, int64_t end) const;
  // Weights that take no gradient (LoRA's base, --freeze): a scope without this rounds
  // such a tensor at every use, since nothing tells it from an input. Their copies are
  // made at first use and kept, as nothing updates them.
  void add_frozen(const std::vector<Tensor>& weights);
  void clear();           // the frozen set included
  int64_t bytes() const;  // held by the copies

 private:
  friend class AutocastScope;
  std::shared_ptr<AutocastScope::WeightCache> cache_;
};

// The precision of the innermost scope on this thread (fp32 outside any).
Precision autocast_precision();

// What multiplies bfloat16 matrices on this CPU: "oneDNN brg:avx512_core_bf16" (its BF16
// dot products), another oneDNN kernel, or "OpenBLAS sgemm on widened operands" where oneDNN
// has only its reference code.
const char* bf16_matmul_implementation();

// A bfloat16 copy of a float32 tensor (contiguous, the same shape), rounded to nearest even.
Tensor to_bfloat16(const Tensor& t);

namespace detail {

// Whether an op on float32 operands computes in bfloat16 here.
bool autocast_to_bf16(DType operand);

// t (float32) as a bfloat16 GEMM operand: rounded, contiguous. Where t is a contiguous
// view of a tensor whose producer attached its rounded copy (attach_bf16_copy), and nothing
// has been written into it since (Storage::current_bf16_copy), that copy (a view of it):
// the same bits, without a pass over t.
Tensor bf16_operand(const Tensor& t);

// What a GEMM shape under autocast did (ops/gemm.h's bf16_pays): ran in bfloat16, or fell
// back to float32. Once shapes have fallen back and none ran in bfloat16, the producers
// below make no copies (nothing would read them).
void note_bf16_choice(bool in_bf16);
void forget_bf16_choices_for_tests();  // as a new process: nothing chosen yet

// For an op's float32 output `out`, just created (contiguous): under a bf16 scope, a
// bfloat16 tensor of its shape, attached to out's storage as its rounded copy, for the op
// to fill as it writes out (each chunk while it is in cache, with to_bfloat16); undefined
// outside one or for another dtype. The op must fill all of it before returning out, and
// take its writable pointer to out (Tensor::data) before this call: a writable pointer
// taken after it counts as a write, which retires the copy (correct, but slower). The
// producers whose outputs the model's linears read use it: LayerNorm, RMSNorm, GELU after
// a linear, SwiGLU's gating and the fused attention's output.
Tensor attach_bf16_copy(const Tensor& out);
// Elements [first, first + n) of copy (from attach_bf16_copy) = values rounded; nothing
// when copy is undefined, or for float64 values (which never have one).
void fill_bf16_copy(const Tensor& copy, const float* values, int64_t first, int64_t n);
inline void fill_bf16_copy(const Tensor&, const double*, int64_t, int64_t) {}

// The bfloat16 operand for t: cached per scope when t is a parameter, fresh otherwise.
Tensor autocast_operand(const Tensor& t);

// The parts stacked along dim 0 (one part: itself) as one bfloat16 tensor; cached per scope
// when every part is a parameter.
Tensor autocast_stacked(const std::vector<Tensor>& parts);

}  // namespace detail

}  // namespace ag
