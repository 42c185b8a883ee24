#!/usr/bin/env python3
"""The speed and memory of `attograd sample`, against PyTorch at its best, side by side.

For each config (default: the default model, train's own defaults, and the base config, T 256, d 256,
8 heads, 6 layers) a checkpoint of the untrained model is made (`attograd train --steps 0`;
the speed does not depend on the weights), and a prompt of --prompt-tokens characters of
its vocabulary. Then, interleaved for --rounds rounds so that all see the same machine:

  attograd           `sample` with its key/value cache (--threads, default 2; and on 1)
  attograd bf16      the same with --weights bf16 (the weight matrices in bfloat16)
  attograd no-cache  `sample --no-cache`: the whole window through GPT::forward per token
  torch cache        bench/torch_sample.py --mode cache: PyTorch with a key/value cache of
                     its own, the same window schedule, the same checkpoint
  torch full         bench/torch_sample.py --mode full: nanoGPT's generate() loop

PyTorch's best is searched first, as bench/compare.py does: threads 1 or 2 x kernels (the
environment as given, OpenBLAS's own choice with OPENBLAS_CORETYPE unset, AVX-512 forced)
x dtype (float32, or the whole model in bfloat16), one short run each; the fastest of each
mode is then the one measured. Every run is greedy
(the choice of a token costs the same either way), and the texts of attograd and PyTorch
with their caches in float32 are compared: the same tokens, or the table says so.

Tokens/s are over the generated tokens, the prompt's prefill included; medians over the
rounds. Peak RSS is the process's (wait4's ru_maxrss), against the issue's bound for
`sample`: twice the checkpoint's weights plus 64 MB. The paths without a cache are slow,
so they generate --full-tokens tokens (default 300: past the context of both configs).

usage: sample_compare.py [--attograd build/attograd] [--configs default,base] [--rounds 3]
                         [--prompt-tokens 100] [--tokens 1000] [--full-tokens 300]
                         [--threads 2] [--json OUT]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare import KERNELS, environment  # noqa: E402  the kernel variants PyTorch is tried with
CONFIGS = {
    "default": [],
    "base": ["--context-length", "256", "--d-model", "256", "--n-heads", "8", "--n-layers", "6"],
}
RATE = re.compile(r"sampled (\d+) tokens in ([\d.]+) s: (\d+) tokens/s")


def run_measured(cmd, env_changes=None, stdin=b""):
    """(stdout, stderr, peak RSS in MB, wall seconds) of one process: its own ru_maxrss,
    from wait4 (which Popen.communicate would not give). Its output goes to files, not
    pipes: a reader woken for every token would compete for the cores it runs on."""
    env = environment(env_changes)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as in_file, tempfile.TemporaryFile() as out_file, \
            tempfile.TemporaryFile() as err_file:
        in_file.write(stdin)
        in_file.seek(0)
        p = subprocess.Popen(cmd, stdin=in_file, stdout=out_file, stderr=err_file, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out_file.seek(0)
        err_file.seek(0)
        out, err = out_file.read(), err_file.read().decode(errors="replace")
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{out.decode(errors='replace')}{err}")
    return out, err, usage.ru_maxrss / 1024, time.perf_counter() - t0


def make_checkpoint(a, config, folder):
    path = os.path.join(folder, f"{config}.h5")
    run_measured([a.attograd, "train", "--steps", "0", "--out", path, "--sample-tokens", "0",
                  "--threads", "1"] + CONFIGS[config])
    out, _, _, _ = run_measured([a.attograd, "inspect", path])
    text = out.decode()
    cfg = json.loads(text[text.index("config {") + len("config "):text.index("\n}\n") + 2])
    params = sum(int(line.split()[-1]) for line in text.splitlines()
                 if re.match(r"^(tok_emb|pos_emb|blocks|ln_f|lm_head)\S* +\[", line))
    return path, cfg, params


def prompt_text(a, path, cfg):
    """--prompt-tokens characters of the vocabulary (ids drawn with a fixed seed)."""
    import random
    rng = random.Random(1)
    ids = " ".join(str(rng.randrange(cfg["vocab_size"])) for _ in range(a.prompt_tokens))
    return run_measured([a.attograd, "decode", "--tokenizer", path], stdin=ids.encode())[0].decode()


def ours(a, path, prompt, tokens, cache, threads=None, weights="fp32"):
    cmd = [a.attograd, "sample", "--checkpoint", path, "--prompt", prompt, "--tokens",
           str(tokens), "--temperature", "0", "--threads", str(threads or a.threads),
           "--weights", weights]
    out, err, rss, _ = run_measured(cmd + ([] if cache else ["--no-cache"]))
    m = RATE.search(err)
    return dict(tokens_per_s=float(m.group(1)) / float(m.group(2)), rss=rss, text=out.decode())


def theirs(a, path, prompt, tokens, mode, threads, kernels, dtype):
    cmd = [a.python, os.path.join(HERE, "torch_sample.py"), "--checkpoint", path, "--prompt",
           prompt, "--tokens", str(tokens), "--mode", mode, "--threads", str(threads),
           "--dtype", dtype]
    out, _, rss, _ = run_measured(cmd, KERNELS[kernels])
    row = json.loads(out.decode().splitlines()[-1])
    return dict(tokens_per_s=row["tokens_per_s"], rss=rss, ids=row["ids"])


def best_torch(a, path, prompt):
    """The fastest (threads, kernels, dtype) of each mode, from one short run of each."""
    best = {}
    for mode, tokens in (("cache", 200), ("full", 30)):
        timed = [(theirs(a, path, prompt, tokens, mode, t, k, d)["tokens_per_s"], t, k, d)
                 for t in (1, 2) for k in KERNELS for d in ("float32", "bfloat16")]
        best[mode] = max(timed)[1:]
    return best


def same_text(a, path, ours_text, prompt, torch_ids):
    text = run_measured([a.attograd, "decode", "--tokenizer", path],
                        stdin=" ".join(map(str, torch_ids)).encode())[0].decode()
    return ours_text == prompt + text + "\n"


def measure(a, config, folder):
    path, cfg, params = make_checkpoint(a, config, folder)
    prompt = prompt_text(a, path, cfg)
    best = best_torch(a, path, prompt)
    runs = {k: [] for k in ("ours", "ours_bf16", "ours_1t", "ours_full", "torch", "torch_full")}
    for _ in range(a.rounds):
        runs["ours"].append(ours(a, path, prompt, a.tokens, True))
        runs["ours_bf16"].append(ours(a, path, prompt, a.tokens, True, weights="bf16"))
        runs["ours_1t"].append(ours(a, path, prompt, a.tokens, True, threads=1))
        runs["ours_full"].append(ours(a, path, prompt, a.full_tokens, False))
        runs["torch"].append(theirs(a, path, prompt, a.tokens, "cache", *best["cache"]))
        runs["torch_full"].append(theirs(a, path, prompt, a.full_tokens, "full", *best["full"]))
    med = {k: statistics.median(r["tokens_per_s"] for r in v) for k, v in runs.items()}
    rss = {k: statistics.median(r["rss"] for r in v) for k, v in runs.items()}
    weights_mb = params * 4 / 2**20
    return dict(config=config, T=cfg["context_length"], d_model=cfg["d_model"],
                n_layers=cfg["n_layers"], parameters=params, weights_mb=weights_mb,
                tok_s=med, rss_mb=rss, rss_bound_mb=2 * weights_mb + 64,
                torch_cache_variant=" ".join(map(str, best["cache"])),
                torch_full_variant=" ".join(map(str, best["full"])),
                same_text=same_text(a, path, runs["ours"][0]["text"], prompt,
                                    theirs(a, path, prompt, a.tokens, "cache", 1, "avx512",
                                           "float32")["ids"]))


def print_table(a, rows, loads):
    print(f"prompt {a.prompt_tokens} tokens, {a.tokens} new tokens with a cache, "
          f"{a.full_tokens} without; attograd at {a.threads} threads and at 1; medians of "
          f"{a.rounds}; load average {loads[0]:.1f} before, {loads[1]:.1f} after")
    print(f"{'config':8} | {'attograd':>9} {'bf16 w':>7} {'1 thread':>9} {'no-cache':>9} | "
          f"{'torch kv':>9} {'nanoGPT':>8} | {'best/torch':>11} | {'RSS MB':>7} {'bf16 w':>7} "
          f"{'bound':>6} {'torch kv':>8} | same text")
    for r in rows:
        t, m = r["tok_s"], r["rss_mb"]
        ours_best = max(t["ours"], t["ours_bf16"], t["ours_1t"])
        print(f"{r['config']:8} | {t['ours']:9.0f} {t['ours_bf16']:7.0f} {t['ours_1t']:9.0f} "
              f"{t['ours_full']:9.0f} | {t['torch']:9.0f} {t['torch_full']:8.0f} | "
              f"{ours_best / t['torch']:10.2f}x | {m['ours']:7.1f} {m['ours_bf16']:7.1f} "
              f"{r['rss_bound_mb']:6.1f} {m['torch']:8.1f} | {r['same_text']}")
    for r in rows:
        print(f"  {r['config']}: {r['parameters']} parameters ({r['weights_mb']:.1f} MB); "
              f"PyTorch cache {r['torch_cache_variant']}, full {r['torch_full_variant']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attograd", default=os.path.join(HERE, "..", "build", "attograd"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--configs", default="default,base")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=100)
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--full-tokens", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="also write the rows here")
    a = ap.parse_args()
    rows, load_before = [], os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="attograd_sample_bench_") as folder:
        for config in a.configs.split(","):
            rows.append(measure(a, config, folder))
            print(f"measured {config}", file=sys.stderr)
    print_table(a, rows, (load_before, os.getloadavg()[0]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
