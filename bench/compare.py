#!/usr/bin/env python3
"""attograd against PyTorch, side by side: every config and dropout, attograd on
--threads threads and PyTorch on 1 and on 2 threads (compared with its better one), run
interleaved for --rounds rounds so both see the same machine, medians over rounds.

usage: compare.py [--attograd build/attograd] [--configs tiny,small,base]
                  [--dropouts 0,0.1] [--rounds 3] [--steps 20] [--threads 2] [--json OUT]

Prints one table: ms/step, tokens/s, the speed ratio (PyTorch best ms / attograd ms),
GFLOP/s, peak RSS and its ratio; then the cblas_sgemm peak on 2 threads and the base
config's share of it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attograd", default=os.path.join(HERE, "..", "build", "attograd"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--configs", default="tiny,small,base")
    ap.add_argument("--dropouts", default="0,0.1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="also write every measurement here")
    a = ap.parse_args()

    rows, raw = [], []
    for config in a.configs.split(","):
        for dropout in a.dropouts.split(","):
            common = ["--config", config, "--dropout", dropout, "--steps", str(a.steps), "--json"]
            ours, theirs = [], {1: [], 2: []}
            for _ in range(a.rounds):
                ours += run_json([a.attograd, "bench", "--threads", str(a.threads)] + common)
                for t in (1, 2):
                    theirs[t] += run_json([a.python, os.path.join(HERE, "torch_reference.py"),
                                           "--threads", str(t)] + common)
            raw += ours + theirs[1] + theirs[2]
            med = lambda xs, k: statistics.median(x[k] for x in xs)
            torch_t = min((1, 2), key=lambda t: med(theirs[t], "ms_per_step"))
            o_ms, t_ms = med(ours, "ms_per_step"), med(theirs[torch_t], "ms_per_step")
            o_rss, t_rss = med(ours, "peak_rss_mb"), med(theirs[torch_t], "peak_rss_mb")
            rows.append(dict(config=config, dropout=float(dropout), ours_ms=o_ms, torch_ms=t_ms,
                             torch_threads=torch_t, speedup=t_ms / o_ms,
                             ours_tok=med(ours, "tokens_per_s"),
                             torch_tok=med(theirs[torch_t], "tokens_per_s"),
                             ours_gflops=med(ours, "gflops"), ours_rss=o_rss, torch_rss=t_rss,
                             torch_1t_ms=med(theirs[1], "ms_per_step"),
                             torch_2t_ms=med(theirs[2], "ms_per_step")))
            print(f"measured {config} dropout {dropout}", file=sys.stderr)

    micro = run_json([a.attograd, "bench", "--micro", "--threads", "2", "--json"])
    peak = next(m["gflops"] for m in micro if m["kernel"].startswith("cblas_sgemm"))

    print(f"{'config':7} {'drop':>4} | {'attograd ms':>11} {'torch ms':>9} {'(1t/2t)':>15} | "
          f"{'speedup':>7} | {'tok/s ours':>10} {'tok/s torch':>11} | {'GFLOP/s':>7} | "
          f"{'RSS MB ours':>11} {'torch':>7} {'ratio':>6}")
    for r in rows:
        print(f"{r['config']:7} {r['dropout']:4.1f} | {r['ours_ms']:11.2f} {r['torch_ms']:9.2f} "
              f"({r['torch_1t_ms']:6.1f}/{r['torch_2t_ms']:6.1f}) | {r['speedup']:6.2f}x | "
              f"{r['ours_tok']:10.0f} {r['torch_tok']:11.0f} | {r['ours_gflops']:7.1f} | "
              f"{r['ours_rss']:11.1f} {r['torch_rss']:7.1f} {r['ours_rss'] / r['torch_rss']:6.2f}")
    for r in rows:
        if r["config"] == "base":
            print(f"base dropout {r['dropout']}: {r['ours_gflops']:.1f} GFLOP/s = "
                  f"{100 * r['ours_gflops'] / peak:.0f}% of the 2-thread cblas_sgemm peak "
                  f"({peak:.0f} GFLOP/s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(rows=rows, raw=raw, sgemm_peak_gflops=peak), f, indent=1)


if __name__ == "__main__":
    main()
