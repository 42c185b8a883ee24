#!/usr/bin/env python3
"""GPT-2 124M's training step at llm.c's CPU shape, side by side, in one run: attograd
(fp32 and --precision bf16), PyTorch at its best, and llm.c's train_gpt2.c.

The shape is train_gpt2.c's: GPT-2 124M (vocab 50257, 1024 positions, d_model 768, 12 heads,
12 layers, q/k/v biases, tied head), batches of B 4 sequences of T 64 tokens, AdamW, on
--threads threads (OMP_NUM_THREADS for llm.c). Every row is its own process, so its peak RSS
is its own:
  attograd fp32, bf16  `attograd bench --config gpt2` (median ms/step of --steps steps after
                       3 untimed ones: forward, backward, clip_grad_norm, AdamW)
  PyTorch fp32, bf16   bench/torch_reference.py --config gpt2 (the same step), with the
                       fastest of threads 1 or 2 x kernels (the environment as given, which
                       may pin OPENBLAS_CORETYPE; OpenBLAS's own choice; AVX-512 forced) for
                       each precision, found by a short probe of every variant (as
                       bench/compare.py finds them)
  llm.c                train_gpt2.c, built by its own Makefile in a checkout named by --llmc
                       (nothing of llm.c is kept in this repository), run unchanged on inputs
                       this script writes to a temporary folder: a gpt2_124M.bin of random
                       weights in llm.c's format (header 20240326, version 3, fp32, vocab
                       padded to 50304, as its train_gpt2.py write_model writes it) and token
                       files of random ids in its data format (header 20240520, version 1,
                       uint16). Its own "step N ... (took X ms)" lines are read: the median of
                       steps 1..--steps (step 0 warms up); it is stopped after them (before
                       its sampling at step 20). Its AdamW has weight decay 0 (as
                       train_gpt2.c calls it), attograd's and PyTorch's 0.1 on the matrices:
                       the same work.
Peak RSS: ru_maxrss of the process for attograd and PyTorch (as they report it), VmHWM read
from /proc just before llm.c is stopped. attograd's is also given against its memory plan
(train/memory_plan.h: 16 bytes per parameter for the weights, gradients and AdamW's two
moments, plus the activations the layers declare for B T tokens), the issue's target being
at most 1.2x.

Then the memory of a checkpoint save (unless --skip-save), two ways:
  bench   the fp32 run above saves its model and AdamW state after its steps
          (`attograd bench --save-checkpoint`, into a temporary folder): the RSS at the
          save's start and the highest during it (VmHWM, reset before the save)
  train   `attograd train` at this shape (context 64, so 123.7M parameters; a byte tokenizer
          with --vocab-size 50257 on a text of random base64), --train-steps steps, ending
          with its save: the peak while training (VmHWM as the last step's line arrives, just
          before the save) and over the whole run (the process's ru_maxrss)
each against the state written (weights and AdamW's moments, 12 bytes per parameter); the
issue asks that a save add at most 25% of it to the peak.

usage: gpt2_scale.py [--attograd build/attograd] [--python /usr/bin/python3]
                     [--llmc DIR] [--steps 10] [--threads 2] [--torch-probe-steps 3]
                     [--skip-torch] [--skip-save] [--train-steps 3] [--json OUT]
"""
import argparse
import base64
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402  (KERNELS, run_json, torch_cmd)

V, VP, MAX_T, L, H, C = 50257, 50304, 1024, 12, 12, 768
B, T = 4, 64


def attograd_row(a, precision, save_to=None):
    """The bench's step; with save_to, also the save it made there (its JSON row)."""
    rows = compare.run_json([a.attograd, "bench", "--config", "gpt2", "--threads",
                             str(a.threads), "--precision", precision, "--steps", str(a.steps),
                             "--json"] + (["--save-checkpoint", save_to] if save_to else []))
    row = rows[0]
    plan = row["plan_state_mb"] + row["plan_activations_mb"]
    return dict(name=f"attograd {precision}", ms_per_step=row["ms_per_step"],
                tokens_per_s=row["tokens_per_s"], peak_rss_mb=row["peak_rss_mb"],
                gflops=row["gflops"], plan_mb=plan, rss_of_plan=row["peak_rss_mb"] / plan,
                note=f"{a.threads} threads, {row['gflops']:.0f} GFLOP/s, peak RSS "
                     f"{row['peak_rss_mb'] / plan:.2f}x the plan ({plan:.0f} MB)"), rows[1:]


def torch_rows(a):
    """PyTorch's fastest variant per precision (a short probe of each), then measured."""
    probe = ["--config", "gpt2", "--steps", str(a.torch_probe_steps), "--warmup", "1", "--json"]
    full = ["--config", "gpt2", "--steps", str(a.steps), "--json"]
    rows = []
    for precision in ("fp32", "bf16"):
        timed = []
        for threads in sorted({1, a.threads}):
            for kernels, env in compare.KERNELS.items():
                r = compare.run_json(compare.torch_cmd(a, probe, threads, precision), env)[0]
                timed.append((r["ms_per_step"], threads, kernels))
        _, threads, kernels = min(timed)
        r = compare.run_json(compare.torch_cmd(a, full, threads, precision),
                             compare.KERNELS[kernels])[0]
        rows.append(dict(name=f"PyTorch {precision}", ms_per_step=r["ms_per_step"],
                         tokens_per_s=r["tokens_per_s"], peak_rss_mb=r["peak_rss_mb"],
                         note=f"{threads} threads, kernels {kernels}, torch {r['torch_version']}"))
    return rows


# ------------------------------------------------------------------ a save's memory
def hwm_mb(pid):
    """VmHWM of a running process in MB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def train_save_row(a, work):
    """`attograd train` at this shape for --train-steps steps, then its save: the peaks."""
    text = os.path.join(work, "random.txt")
    with open(text, "wb") as f:  # random base64: a byte tokenizer's ids, 50257 rows kept
        f.write(base64.encodebytes(np.random.default_rng(3).bytes(1 << 18)))
    cmd = [a.attograd, "train", "--data", text, "--tokenizer", "byte", "--vocab-size", str(V),
           "--context-length", str(T), "--d-model", str(C), "--n-heads", str(H),
           "--n-layers", str(L), "--qkv-bias", "--batch-size", str(B), "--dropout", "0",
           "--steps", str(a.train_steps), "--eval-windows", "4", "--sample-tokens", "0",
           "--log-interval", "1", "--threads", str(a.threads),
           "--out", os.path.join(work, "train.h5")]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    training_peak, lines = 0.0, []
    for line in p.stdout:
        lines.append(line)
        if line.startswith(f"step {a.train_steps:>5}/"):
            training_peak = hwm_mb(p.pid)  # the last step is done; the save comes next
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0 or not training_peak:
        sys.exit(f"{' '.join(cmd)} failed ({status}):\n{''.join(lines[-20:])}")
    state_mb = 12 * int(re.search(r"(\d+) parameters", lines[0]).group(1)) / 2**20
    whole = usage.ru_maxrss / 1024.0
    return dict(name="attograd train + save", training_peak_mb=training_peak,
                save_peak_mb=whole, added_mb=max(0.0, whole - training_peak),
                state_mb=state_mb, note=f"{a.train_steps} steps, context {T}, then the save; "
                                        "peaks: while training, over the whole run")


def save_rows(a):
    with tempfile.TemporaryDirectory(prefix="gpt2_scale_save_") as work:
        step, saves = attograd_row(a, "fp32", os.path.join(work, "bench.h5"))
        s = saves[0]
        rows = [dict(name="attograd bench + save", training_peak_mb=s["rss_before_save_mb"],
                     save_peak_mb=s["save_peak_rss_mb"], added_mb=s["save_added_mb"],
                     state_mb=s["state_mb"], note=f"save {s['save_ms']:.0f} ms; RSS at its "
                                                  "start, the highest during it")]
        rows.append(train_save_row(a, work))
    return step, rows


def print_save_table(rows):
    print("\nA checkpoint save: what it adds to the resident memory (target: <= 25% of the state)")
    print(f"{'':22} {'before MB':>10} {'with save MB':>12} {'added MB':>9} {'state MB':>9} "
          f"{'of state':>8}  note")
    for r in rows:
        print(f"{r['name']:22} {r['training_peak_mb']:10.1f} {r['save_peak_mb']:12.1f} "
              f"{r['added_mb']:9.1f} {r['state_mb']:9.1f} "
              f"{100 * r['added_mb'] / r['state_mb']:7.1f}%  {r['note']}")


# ------------------------------------------------------------------ llm.c's inputs
def write_llmc_model(path, seed=0):
    """Random GPT-2 124M weights in llm.c's checkpoint format (train_gpt2.py write_model):
    256 int32 header, then every tensor in fp32 in train_gpt2.c's order."""
    header = np.zeros(256, dtype=np.int32)
    header[:8] = [20240326, 3, MAX_T, V, L, H, C, VP]
    rng = np.random.default_rng(seed)
    normal = lambda n: (rng.standard_normal(n, dtype=np.float32) * 0.02)
    ones, zeros = lambda n: np.ones(n, np.float32), lambda n: np.zeros(n, np.float32)
    tensors = [normal(VP * C), normal(MAX_T * C),              # wte (padded rows), wpe
               ones(L * C), zeros(L * C),                      # ln1 w, b
               normal(L * 3 * C * C), zeros(L * 3 * C),        # qkv w, b
               normal(L * C * C), zeros(L * C),                # attention projection w, b
               ones(L * C), zeros(L * C),                      # ln2 w, b
               normal(L * 4 * C * C), zeros(L * 4 * C),        # fc w, b
               normal(L * C * 4 * C), zeros(L * C),            # fc projection w, b
               ones(C), zeros(C)]                              # ln_f w, b
    tensors[0][V * C:] = 0  # the padding rows llm.c never reads
    with open(path, "wb") as f:
        header.tofile(f)
        for t in tensors:
            t.tofile(f)


def write_llmc_tokens(path, n, seed):
    """n random token ids in llm.c's data format (256 int32 header: 20240520, 1, n; uint16)."""
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [20240520, 1, n]
    with open(path, "wb") as f:
        header.tofile(f)
        np.random.default_rng(seed).integers(0, V, n, dtype=np.uint16).tofile(f)


def llmc_row(a):
    binary = os.path.join(os.path.abspath(a.llmc), "train_gpt2")
    with tempfile.TemporaryDirectory(prefix="gpt2_scale_llmc_") as work:
        write_llmc_model(os.path.join(work, "gpt2_124M.bin"))
        data = os.path.join(work, "dev", "data", "tinyshakespeare")
        os.makedirs(data)
        write_llmc_tokens(os.path.join(data, "tiny_shakespeare_train.bin"), 1 << 16, 1)
        write_llmc_tokens(os.path.join(data, "tiny_shakespeare_val.bin"), 1 << 14, 2)
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
        p = subprocess.Popen([binary], cwd=work, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        hwm = [0]

        def watch():  # VmHWM of the running process, kept as it grows
            while p.poll() is None:
                try:
                    with open(f"/proc/{p.pid}/status") as f:
                        for line in f:
                            if line.startswith("VmHWM:"):
                                hwm[0] = max(hwm[0], int(line.split()[1]))
                except OSError:
                    return
                time.sleep(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        times, lines = [], []
        for line in p.stdout:
            lines.append(line)
            m = re.match(r"step (\d+): train loss \S+ \(took ([\d.]+) ms\)", line)
            if m and int(m.group(1)) >= 1:
                times.append(float(m.group(2)))
                if len(times) == a.steps:
                    break
        time.sleep(0.1)  # one more look at VmHWM
        p.kill()
        p.wait()
        watcher.join()
    if len(times) < a.steps:
        sys.exit(f"{binary} stopped after {len(times)} steps:\n{''.join(lines[-20:])}")
    ms = statistics.median(times)
    return dict(name="llm.c train_gpt2.c", ms_per_step=ms, tokens_per_s=B * T / (ms / 1e3),
                peak_rss_mb=hwm[0] / 1024.0, note=f"OMP_NUM_THREADS={a.threads}")


def print_table(rows):
    llmc = next((r for r in rows if r["name"].startswith("llm.c")), None)
    print(f"GPT-2 124M, B {B}, T {T}, AdamW; median of the timed steps")
    print(f"{'':20} {'ms/step':>9} {'tokens/s':>9} {'peak RSS MB':>12} {'vs llm.c':>9}  note")
    for r in rows:
        ratio = f"{llmc['ms_per_step'] / r['ms_per_step']:8.1f}x" if llmc else f"{'-':>9}"
        print(f"{r['name']:20} {r['ms_per_step']:9.1f} {r['tokens_per_s']:9.1f} "
              f"{r['peak_rss_mb']:12.1f} {ratio}  {r['note']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attograd", default=os.path.join(HERE, "..", "build", "attograd"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--llmc", help="a checkout of karpathy/llm.c with train_gpt2 built in it "
                                   "(make train_gpt2); without it the llm.c row is left out")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--torch-probe-steps", type=int, default=3)
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--skip-save", action="store_true", help="leave out the save's memory")
    ap.add_argument("--train-steps", type=int, default=3, help="steps of the train run")
    ap.add_argument("--json", help="also write the rows here")
    a = ap.parse_args()

    saves = []
    if a.skip_save:
        rows = [attograd_row(a, "fp32")[0]]
    else:
        fp32, saves = save_rows(a)
        rows = [fp32]
    rows.append(attograd_row(a, "bf16")[0])
    if not a.skip_torch:
        rows += torch_rows(a)
    if a.llmc:
        rows.append(llmc_row(a))
    print_table(rows)
    if saves:
        print_save_table(saves)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(steps=rows, saves=saves), f, indent=1)


if __name__ == "__main__":
    main()
