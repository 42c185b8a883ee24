#pragma once
// Internal: keeps a loaded vector in a register where several multiply-adds use it, for the
// register-blocked kernels of the attention (ops/tile_kernels.h), LoRA (ops/lora.cpp) and the
// decoder's panel GEMV (nn/panel_gemv.cpp). On AVX2 GCC folds the load into each
// multiply-add that uses the vector, and a kernel whose vectors serve 2 to 4 rows then waits
// on its loads, not on its multiply-adds: an AMD EPYC Zen 3 takes two 32-byte loads a cycle,
// and the decoder's 4-row panel tile ran at half the FMA units' rate (20.6 against 37.9 G
// multiply-adds a second held). The empty asm changes no value, so no bit of a result. (With
// AVX-512 GCC kept the vectors of the attention's and LoRA's kernels in registers; not
// measured there.)

namespace ag::detail {

template <typename V>
inline void hold_in_register(V& v) {
#if defined(__AVX2__) && !defined(__AVX512F__)
  asm("" : "+x"(v));
#else
  (void)v;
#endif
}

}  // namespace ag::detail
