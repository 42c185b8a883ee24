#!/usr/bin/env python3
"""A LoRA fine-tuning step against a full fine-tuning step at GPT-2 124M's shape (LoRA
must take at most 0.75x the time and 0.5x the peak RSS: docs/finetuning.md).

Both are `attograd bench --config gpt2` steps (GPT-2 124M: vocab 50257, 1024 positions,
d_model 768, 12 heads, 12 layers, q/k/v biases, tied head; batches of B 4 x T 64 random
tokens; forward, backward, clip_grad_norm, AdamW) on --threads threads in fp32:
  full   every parameter trained
  lora   --lora-rank R (default 8) adapters on attn.qkv, attn.out_proj, mlp.fc1 and
         mlp.fc2, every base weight frozen (no weight gradient, no AdamW state)
Each measurement is its own process (so its peak RSS, ru_maxrss, is its own), and the two
alternate --repeats times (full, lora, full, lora, ...) so that a machine whose load
changes slows both alike. Each process reports the median of --steps timed steps after 3
untimed ones (and its CPU time per step, user + system over every thread: on a loaded
machine, what the work costs apart from waiting for a core); the table gives the median
over the repetitions and the ratios lora / full.

usage: lora_scale.py [--attograd build/attograd] [--rank 8] [--steps 10] [--threads 2]
                     [--repeats 3] [--json OUT]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def bench_row(a, rank):
    cmd = [a.attograd, "bench", "--config", "gpt2", "--threads", str(a.threads), "--precision",
           "fp32", "--steps", str(a.steps), "--lora-rank", str(rank), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attograd", default=os.path.join(HERE, "..", "build", "attograd"))
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="also write every measurement here")
    a = ap.parse_args()

    runs = {"full": [], "lora": []}
    for i in range(a.repeats):
        for name, rank in (("full", 0), ("lora", a.rank)):
            row = bench_row(a, rank)
            runs[name].append(row)
            print(f"  repetition {i + 1}: {name:4} {row['ms_per_step']:9.1f} ms/step "
                  f"{row['peak_rss_mb']:9.1f} MB peak RSS", file=sys.stderr)
    med = {name: {k: statistics.median(r[k] for r in rows)
                  for k in ("ms_per_step", "peak_rss_mb", "forward_ms", "backward_ms",
                            "optimizer_ms", "cpu_ms_per_step")}
           for name, rows in runs.items()}
    trainable = runs["lora"][0]["parameters"]
    print(f"GPT-2 124M, B 4, T 64, fp32, {a.threads} threads, {cpu_name()}; "
          f"median of {a.repeats} interleaved processes x {a.steps} steps")
    print(f"{'':6} {'ms/step':>9} {'forward':>9} {'backward':>9} {'clip+AdamW':>11} "
          f"{'CPU ms/step':>12} {'peak RSS MB':>12}")
    for name in ("full", "lora"):
        m = med[name]
        print(f"{name:6} {m['ms_per_step']:9.1f} {m['forward_ms']:9.1f} {m['backward_ms']:9.1f} "
              f"{m['optimizer_ms']:11.1f} {m['cpu_ms_per_step']:12.1f} {m['peak_rss_mb']:12.1f}")
    time_ratio = med["lora"]["ms_per_step"] / med["full"]["ms_per_step"]
    cpu_ratio = med["lora"]["cpu_ms_per_step"] / med["full"]["cpu_ms_per_step"]
    rss_ratio = med["lora"]["peak_rss_mb"] / med["full"]["peak_rss_mb"]
    print(f"lora / full: time {time_ratio:.3f}x (target <= 0.75; CPU time {cpu_ratio:.3f}x), "
          f"peak RSS {rss_ratio:.3f}x (target <= 0.5); rank {a.rank}, {trainable} parameters "
          f"with the adapters")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(runs=runs, median=med, time_ratio=time_ratio, cpu_ratio=cpu_ratio,
                           rss_ratio=rss_ratio, cpu=cpu_name()), f, indent=1)
    return 0 if time_ratio <= 0.75 and rss_ratio <= 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
