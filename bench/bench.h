#pragma once
// `attograd bench`: the speed and memory of full training steps (forward, backward,
// clip, AdamW) on the three configs of the performance issue and GPT-2 124M's (gpt2: B 4,
// T 64), and microbenchmarks of the hot kernels against the machine's cblas_sgemm peak.
// bench/torch_reference.py runs the identical step in PyTorch; bench/compare.py runs both,
// interleaved, as a table; bench/gpt2_scale.py adds llm.c's train_gpt2.c at gpt2;
// bench/lora_scale.py compares a LoRA step (--lora-rank) with a full one at gpt2.
// --background-load runs the steps beside a busy process pinned to one core
// (background_load.h); compare.py --background-load does the same for both sides.
// memory_bench.h: the step's memory plan beside its peak RSS, and what a checkpoint save
// adds to the resident memory (--save-checkpoint; gpt2_scale.py reports both at gpt2).
// --tune prints the measured GEMM kernel table (tune_table.h); --decode the cached decoder
// against its read-bandwidth bound (decode_bound.h); --breakdown where the timed steps' time
// went, by kernel class (breakdown.h). --base-precision bf16|q8_0|q4_k holds a LoRA step's
// frozen base packed (nn/frozen_base.h; docs/quantization.md has the Llama-3.2-1B figures);
// --batch and --tokens replace a config's B and T.
//
//   attograd bench --config base --dropout 0.1 --steps 20 --threads 2 --json
//   attograd bench --config base --background-load
//   attograd bench --config gpt2 --save-checkpoint /tmp/gpt2.h5
//   attograd bench --tune
//   attograd bench --micro
//   attograd bench --decode --config qwen2.5-0.5b
//   attograd bench --config llama3.2-1b --lora-rank 8 --precision bf16 --base-precision q8_0
#include <string>
#include <vector>

namespace bench {

int bench_command(const std::vector<std::string>& args);

}  // namespace bench
