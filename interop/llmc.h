#pragma once
// llm.c's checkpoint (train_gpt2.c, gpt2_124M.bin): see interop.h for the map and
// docs/interop.md for the layout. A header of 256 int32 (magic 20240326, version 3 for
// float32 or 5 for bfloat16, maxT, V, L, NH, C, Vp), then every parameter in llm.c's order:
// wte [Vp, C] (rows V..Vp-1 are padding), wpe [maxT, C], and per kind over the L layers
// ln1w, ln1b, qkvw [3C, C], qkvb, attprojw [C, C], attprojb, ln2w, ln2b, fcw [4C, C], fcb,
// fcprojw [C, 4C], fcprojb; then lnfw, lnfb. Matrices are in nn::Linear's [out, in] layout.
// llm.c's GPT-2 is fixed: biases everywhere, a tied head, LayerNorm (eps 1e-5), d_ff = 4C.
//
//   interop::ModelFiles m = interop::read_llmc("gpt2_124M.bin", "gpt2-tokenizer/");
//   interop::write_llmc(m, "out.bin", ag::Precision::bf16);
#include <string>

#include "autograd/autocast.h"
#include "interop/float_codec.h"
#include "interop/input_bytes.h"
#include "interop/model_files.h"

namespace interop {

inline constexpr int32_t kLlmcMagic = 20240326;
inline constexpr int32_t kLlmcVersionF32 = 3;
inline constexpr int32_t kLlmcVersionBf16 = 5;
inline constexpr int64_t kLlmcHeaderInts = 256;
inline constexpr int64_t kLlmcVocabMultiple = 128;  // llm.c pads V up to a multiple of this

// The weights and config of an llm.c checkpoint (no tokenizer: llm.c keeps none in it). The
// header is checked field by field and the file's size against what the header needs before
// anything is allocated; the padding rows of wte are dropped (noted in `dropped`). Errors
// are InteropErrors naming the file and the header field or tensor. The import's memory plan
// (import_memory.h, with tokenizer_bytes for a tokenizer read beside it) is checked before
// any tensor is allocated.
ModelFiles read_llmc_weights(const InputBytes& in, int64_t tokenizer_bytes = 0);

// read_llmc_weights of the file at path, with GPT-2's tokenizer from the files in
// tokenizer_folder (vocab.json + merges.txt, or encoder.json + vocab.bpe), whose vocabulary
// must be the header's V. llm.c keeps no tokenizer in its checkpoint, so an empty folder is
// refused, naming --tokenizer: the ids alone do not say what text they are.
ModelFiles read_llmc(const std::string& path, const std::string& tokenizer_folder);

// The reason llm.c cannot hold this model exactly ("" when it can): llm.c's GPT-2 has qkv
// biases, a tied head, LayerNorm and d_ff = 4 d_model, and nothing else.
std::string llmc_cannot_express(const nn::GPTConfig& config);

// The checkpoint's bytes, to out: float32 (version 3) or bfloat16 (version 5, every tensor
// rounded to nearest even), the vocabulary padded with zero rows to a multiple of 128. A
// model llm.c cannot express is an InteropError giving the reason. The tokenizer is not
// written (llm.c keeps it in a file of its own).
void write_llmc(const ModelFiles& model, ag::Precision dtype, const ByteSink& out);
// The same into the file at path, replaced whole (atomically) or left as it was.
void write_llmc(const ModelFiles& model, const std::string& path, ag::Precision dtype);

}  // namespace interop
