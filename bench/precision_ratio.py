#!/usr/bin/env python3
"""--precision bf16 against fp32, step by step, for one or more builds of attograd.

docs/mixed-precision.md's rule: a bf16 step is never slower than an fp32 step by more than
3%. This runs `attograd bench --config C --precision P --json` for every build x config x
precision, interleaved round by round so that all see the same machine, and prints the median ms/step
of each and the ratio bf16 / fp32 per build (below 1.03 keeps the rule), and the same for
the CPU time per step (all threads): on a machine other processes share, wall time follows
the load while CPU time still measures the work. Comparing two builds of attograd
(--attograd OLD NEW) gives before/after figures from one run.

usage: precision_ratio.py [--attograd build/attograd ...] [--configs tiny,small,base,gpt2]
                          [--rounds 3] [--steps 10] [--threads 2]
"""
import argparse
import json
import statistics
import subprocess
import sys


def step_ms(binary, config, precision, steps, threads):
    cmd = [binary, "bench", "--config", config, "--precision", precision, "--steps",
           str(steps), "--threads", str(threads), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return rows[-1]["ms_per_step"], rows[-1]["cpu_ms_per_step"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--attograd", nargs="+", default=["build/attograd"])
    p.add_argument("--configs", default="tiny,small,base,gpt2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    configs = a.configs.split(",")
    times = {}  # (binary, config, precision) -> [(wall ms, CPU ms) per round]
    for r in range(a.rounds):
        for config in configs:
            for binary in a.attograd:
                for precision in ("fp32", "bf16"):
                    ms, cpu = step_ms(binary, config, precision, a.steps, a.threads)
                    times.setdefault((binary, config, precision), []).append((ms, cpu))
                    print(f"round {r + 1} {config} {precision} {binary}: {ms:.2f} ms "
                          f"(CPU {cpu:.2f} ms)", file=sys.stderr)
    print("| config | build | fp32 ms | bf16 ms | bf16 / fp32 | CPU ms fp32 / bf16 | CPU ratio |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for config in configs:
        for binary in a.attograd:
            f = [statistics.median(x) for x in zip(*times[(binary, config, "fp32")])]
            b = [statistics.median(x) for x in zip(*times[(binary, config, "bf16")])]
            print(f"| {config} | {binary} | {f[0]:.2f} | {b[0]:.2f} | {b[0] / f[0]:.3f} "
                  f"| {f[1]:.1f} / {b[1]:.1f} | {b[1] / f[1]:.3f} |")


if __name__ == "__main__":
    main()
