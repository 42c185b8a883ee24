#pragma once
// attograd's core: tensors, reverse-mode autodiff and differentiable ops.
//
//   #include "autograd/autograd.h"
//   ag::Generator gen(0);
//   ag::Tensor x = ag::randn({4, 3}, gen, ag::DType::Float64);
//   ag::Tensor w = ag::randn({3, 2}, gen, ag::DType::Float64).requires_grad_();
//   ag::Tensor loss = ag::mean(ag::pow(ag::matmul(x, w), 2.0));
//   loss.backward();                       // w.grad(): d loss / d w
//   auto check = ag::gradcheck([](const std::vector<ag::Tensor>& in) {
//     return ag::mean(ag::pow(ag::matmul(in[0], in[1]), 2.0));
//   }, {x, w});                            // check.ok, check.message
//
// The map:
//   dtype.h        DType (float32, float64, int64, bool, bfloat16) and dispatch to kernels
//   bfloat16.h     the bfloat16 storage type and its rounding (to nearest, ties to even)
//   shape.h        shapes, strides, broadcasting rules
//   tensor.h       Tensor: storage, views, creation, element access, printing
//   generator.h    the seeded random generator every random op takes explicitly
//   engine.h       graph Nodes, backward(), NoGradGuard
//   ops.h          the differentiable ops (implementations in ops/, one file per family)
//   gradcheck.h    float64 finite-difference checks of any function's gradient
//   threading.h    one thread count for OpenMP loops and BLAS (kernel_libraries.h: which ones)
//   adaptive_threads.h  fewer threads for the steps while another program holds a core
//   autocast.h     mixed precision: bfloat16 GEMM operands, float32 accumulation (the
//                  attention's on the BF16 units, ops/tile_kernels_bf16.h, or on oneDNN,
//                  ops/attention_onednn.h, where measured faster); the bfloat16 copies the
//                  ops producing a linear's input write beside their output
//   profile.h      bench --breakdown's timers: where a step's time goes, by kernel class
//   anomaly.h      detect_anomaly: the first non-finite value named by op and module
//   test_hooks.h   for tests only, not included here: NaN injection, the attention mask replay,
//                  the attention's bf16 products forced onto one kernel, producers' copies off
#include "autograd/anomaly.h"
#include "autograd/autocast.h"
#include "autograd/bfloat16.h"
#include "autograd/dtype.h"
#include "autograd/engine.h"
#include "autograd/generator.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/shape.h"
#include "autograd/tensor.h"
#include "autograd/threading.h"
