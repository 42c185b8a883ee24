#!/usr/bin/env python3
"""The training step of `attograd bench`, in PyTorch: the same model (tests/reference/
spec_gpt.py, the reference GPT), the same configs, the same step (forward, backward,
clip_grad_norm_ to 1.0, AdamW with the reference's decay groups), timed the same way (median
ms/step over --steps steps after --warmup untimed ones), one config per process so that
peak RSS belongs to that config alone.

usage: torch_reference.py --config tiny|small|base|gpt2 [--dropout P] [--steps N]
                          [--warmup W] [--threads K] [--precision fp32|bf16] [--json]

--precision bf16 runs forward and loss under torch.autocast("cpu", dtype=torch.bfloat16),
as PyTorch's mixed-precision training on a CPU does (its matmuls in bf16 through oneDNN).
The BLAS kernel and PyTorch's own vector kernels are chosen by the environment
(OPENBLAS_CORETYPE, ATEN_CPU_CAPABILITY); bench/compare.py tries the variants.
"""
import contextlib
import argparse
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import torch  # noqa: E402
from spec_gpt import GPT, adamw_for_spec, init_spec_  # noqa: E402

CONFIGS = {  # name: (context_length, d_model, n_heads, n_layers, batch)
    "tiny": (64, 64, 4, 2, 16),
    "small": (128, 128, 4, 4, 16),
    "base": (256, 256, 8, 6, 8),
    "gpt2": (1024, 768, 12, 12, 4),
}
VOCAB = 65
# The Llama family at their Hugging Face shapes, as bench/bench.cpp's llama_family_config
# (B 4, T 256): spec_gpt's config keys
LLAMA_BASE = dict(norm="rmsnorm", mlp="swiglu", position="rope", linear_bias=False,
                  context_length=2048, qkv_bias=False, tie_weights=True)
LLAMA_FAMILY = {
    "smollm2-135m": dict(LLAMA_BASE, vocab_size=49152, d_model=576, n_heads=9, n_kv_heads=3,
                         n_layers=30, d_ff=1536, rope_theta=100000.0),
    "qwen2.5-0.5b": dict(LLAMA_BASE, vocab_size=151936, d_model=896, n_heads=14, n_kv_heads=2,
                         n_layers=24, d_ff=4864, rope_theta=1e6, norm_eps=1e-6, qkv_bias=True),
    "llama3.2-1b": dict(LLAMA_BASE, vocab_size=128256, d_model=2048, n_heads=32, n_kv_heads=8,
                        n_layers=16, d_ff=8192, rope_theta=500000.0, rope_scaling="llama3",
                        rope_factor=32.0),
}
# gpt2: GPT-2 124M as `attograd bench --config gpt2` and llm.c's train_gpt2.c run it: its
# vocabulary, q/k/v biases and 1024 positions, trained on sequences of 64 tokens
GPT2 = dict(vocab=50257, qkv_bias=True, seq=64)


def step_flops(T, C, L, B, V=VOCAB):
    """The formula of bench/bench.cpp: 6 (12 L C^2 + V C) B T + 12 L C T B T."""
    return 6 * (L * (4 * C * C + 2 * C * 4 * C) + V * C) * B * T + 12 * L * C * T * B * T


class LoRALinear(torch.nn.Module):
    """peft's LoRA on a frozen Linear: y = x W^T + b + (alpha / r) (x A^T) B^T, B zero."""

    def __init__(self, base, rank, alpha=16.0):
        super().__init__()
        self.base, self.scale = base, alpha / rank
        self.lora_A = torch.nn.Linear(base.in_features, rank, bias=False)
        self.lora_B = torch.nn.Linear(rank, base.out_features, bias=False)
        torch.nn.init.zeros_(self.lora_B.weight)

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x)) * self.scale


def add_lora(model, rank):
    """Adapters on every Linear of the blocks (attograd's default targets), the rest frozen."""
    for p in model.parameters():
        p.requires_grad_(False)
    for block in model.blocks:
        for parent in (block.attn, block.mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(parent, name, LoRALinear(child, rank))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS) + sorted(LLAMA_FAMILY))
    ap.add_argument("--lora-rank", type=int, default=0)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    if a.config in LLAMA_FAMILY:
        cfg = dict(LLAMA_FAMILY[a.config], dropout=a.dropout)
        C, L, B, T, V = cfg["d_model"], cfg["n_layers"], 4, 256, cfg["vocab_size"]
    else:
        context, C, H, L, B = CONFIGS[a.config]
        gpt2 = a.config == "gpt2"
        V, T = (GPT2["vocab"], GPT2["seq"]) if gpt2 else (VOCAB, context)
        cfg = dict(vocab_size=V, context_length=context, d_model=C, n_heads=H, n_layers=L,
                   d_ff=0, qkv_bias=gpt2, tie_weights=True, dropout=a.dropout)
    model = GPT(cfg)
    init_spec_(model, L)
    if a.lora_rank > 0:
        add_lora(model, a.lora_rank)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=3e-4) if a.lora_rank > 0 else adamw_for_spec(model, 3e-4)
    times = []
    for i in range(a.warmup + a.steps):
        ids = torch.randint(0, V, (B, T + 1))
        start = time.perf_counter()
        x, y = ids[:, :T].contiguous(), ids[:, 1:].contiguous()
        opt.zero_grad(set_to_none=True)
        autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if a.precision == "bf16"
                    else contextlib.nullcontext())
        with autocast:
            _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        elapsed = (time.perf_counter() - start) * 1e3
        if i >= a.warmup:
            times.append(elapsed)
    median = statistics.median(times)
    row = dict(impl="torch", config=a.config, dropout=a.dropout, threads=a.threads,
               precision=a.precision,
               openblas_coretype=os.environ.get("OPENBLAS_CORETYPE", "auto"),
               aten_cpu_capability=os.environ.get("ATEN_CPU_CAPABILITY", "default"),
               ms_per_step=median, tokens_per_s=B * T / (median / 1e3),
               gflops=(step_flops(T, C, L, B, V) / (median / 1e3) / 1e9
                       if a.config in CONFIGS else 0.0),
               lora_rank=a.lora_rank,
               peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
               steps=a.steps, parameters=sum(p.numel() for p in params),
               torch_version=torch.__version__)
    if a.json:
        print(json.dumps(row))
    else:
        print(f"torch {a.config} (dropout {a.dropout}, {a.threads} threads, {row['parameters']} "
              f"parameters): median {median:.2f} ms/step | {row['tokens_per_s']:.0f} tokens/s | "
              f"{row['gflops']:.1f} GFLOP/s | peak RSS {row['peak_rss_mb']:.1f} MB")


if __name__ == "__main__":
    main()
