#!/usr/bin/env python3
"""Measured kernel choice against the fixed rules, and bf16 against fp32, interleaved.

For every config and precision, `attograd bench` runs with ATTOGRAD_TUNE=off (the fixed
rules: autograd/ops/gemm.h's f32_backend and bf16_backend, what attograd ran before it
measured kernels) and with the kernels measured (a cache folder of its own, filled first
by `bench --tune`), in alternating rounds so both see the same machine. Prints the median
ms/step of each, the ratio measured/rules (measuring must never lose to the rules beyond
noise on a CPU without AMX: docs/performance.md) and bf16 against fp32 with the measured
kernels (never more than 3% slower).

usage: tune_compare.py [--attograd build/attograd] [--configs tiny,small,base,gpt2]
                       [--rounds 3] [--steps 10] [--threads 2] [--json OUT]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def bench(a, config, precision, env):
    cmd = [a.attograd, "bench", "--config", config, "--precision", precision, "--steps",
           str(a.steps if config != "gpt2" else max(3, a.steps // 2)), "--threads",
           str(a.threads), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout.splitlines()[-1])["ms_per_step"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attograd", default="build/attograd")
    ap.add_argument("--configs", default="tiny,small,base,gpt2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="attograd-tune-")
    measured = dict(os.environ, XDG_CACHE_HOME=cache, ATTOGRAD_TUNE="on")
    rules = dict(os.environ, ATTOGRAD_TUNE="off")
    subprocess.run([a.attograd, "bench", "--tune", "--config", "all"], env=measured,
                   check=True, capture_output=True)
    rows = []
    for config in a.configs.split(","):
        ms = {(p, k): [] for p in ("fp32", "bf16") for k in ("rules", "measured")}
        for _ in range(a.rounds):
            for p in ("fp32", "bf16"):
                ms[(p, "rules")].append(bench(a, config, p, rules))
                ms[(p, "measured")].append(bench(a, config, p, measured))
        med = {k: statistics.median(v) for k, v in ms.items()}
        row = dict(config=config, **{f"{p}_{k}_ms": v for (p, k), v in med.items()})
        row["fp32_ratio"] = med[("fp32", "measured")] / med[("fp32", "rules")]
        row["bf16_ratio"] = med[("bf16", "measured")] / med[("bf16", "rules")]
        row["bf16_vs_fp32"] = med[("bf16", "measured")] / med[("fp32", "measured")]
        rows.append(row)
        print(f"measured {config}", file=sys.stderr)
    print(f"{'config':7} | {'fp32 rules':>10} {'measured':>9} {'ratio':>6} | "
          f"{'bf16 rules':>10} {'measured':>9} {'ratio':>6} | {'bf16/fp32':>9}")
    for r in rows:
        print(f"{r['config']:7} | {r['fp32_rules_ms']:10.2f} {r['fp32_measured_ms']:9.2f} "
              f"{r['fp32_ratio']:6.3f} | {r['bf16_rules_ms']:10.2f} {r['bf16_measured_ms']:9.2f} "
              f"{r['bf16_ratio']:6.3f} | {r['bf16_vs_fp32']:9.3f}")
    table = subprocess.run([a.attograd, "bench", "--tune", "--config", "all"], env=measured,
                           check=True, capture_output=True, text=True).stdout
    print("\n" + table)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "table": table}, f, indent=1)


if __name__ == "__main__":
    main()
