#pragma once
// The GEMM kernels a run uses, the same on every rank (autograd/ops/gemm_tuning.h): kernels
// are chosen by measurement, and ranks that chose apart would compute gradients and losses
// no single process computes. So `train` measures only in its set-up, on rank 0
// (TrainingRun::decide_step_kernels: one micro-batch), and then, after set-up agreed, every
// process, alone or one of many, takes rank 0's table (its cache file and what it just
// measured) and measures nothing more, and with it rank 0's ATTOGRAD_BF16_FALLBACK (where
// bf16 runs in float32 is decided from the table); `eval` takes the table without
// measuring. A class nobody knows runs by the fixed rule on every rank.
#include <string>
#include <utility>
#include <vector>

#include "train/world.h"

namespace train {

// Called by every rank at the same point, after World::setup_done.
void agree_gemm_kernels(const World& world);

// The environment that forces kernels or their measurement (ATTOGRAD_TUNE,
// ATTOGRAD_F32_GEMM, ATTOGRAD_BF16_GEMM, ATTOGRAD_ATTENTION_BF16, ATTOGRAD_KEEP_BLAS_KERNEL,
// ONEDNN_MAX_CPU_ISA) as (name, value) settings every rank must be given alike: each is read
// where it acts, on its own rank, so one set on some ranks only would make them compute
// apart (World::agree_setup refuses that). ATTOGRAD_BF16_FALLBACK is not among them: every
// rank takes rank 0's with its table.
std::vector<std::pair<std::string, std::string>> kernel_environment();

// Where the set-up of a command that must compute alike on any number of processes ends:
// World::setup_done (a failed rank fails them all), then agree_gemm_kernels.
void end_setup(World& world);

}  // namespace train
