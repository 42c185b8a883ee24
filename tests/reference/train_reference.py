#!/usr/bin/env python3
"""Holds `attograd train` against the same training run in PyTorch (tests/reference/
spec_gpt.py: the model of docs/model.md, written from that page alone, AdamW with its
parameter groups, global-norm clipping, warm-up then cosine to min_lr, its split and
evaluation windows).

usage: train_reference.py ATTOGRAD DATA_FILE [--mode lockstep|independent] [--steps N]
                          [--threads K] [attograd train options as --key value ...]

lockstep (the ctest, reference.training_vs_torch): dropout 0; torch starts from
  attograd's step-0 weights (read by name from its checkpoint) and draws the very same
  batches (attograd's xoshiro256** generator, re-implemented here), so the two runs are
  one computation in two implementations. Every step's training loss must agree to
  LOSS_RTOL relative (they drift apart only by float32 rounding) and the final
  validation loss to VAL_RTOL.
independent (what a user would compare): each side initialises and samples on its own,
  with the same hyperparameters, steps and dropout; the final validation losses must be
  within INDEPENDENT_RTOL (3%) of each other.

Exit status 0 when they agree, 1 when they do not, 77 when torch/h5py are unavailable.
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import time

SKIP = 77
try:
    import h5py
    import numpy as np
    import torch
    from spec_gpt import GPT, adamw_for_spec, init_spec_, warmup_cosine
except Exception as e:  # not only ImportError: a half-installed torch raises others
    print(f"skipped: torch/numpy/h5py unavailable for {sys.executable}: {e!r}")
    sys.exit(SKIP)

LOSS_RTOL = 1e-4          # per-step training loss, lockstep
VAL_RTOL = 1e-4           # final validation loss, lockstep
INDEPENDENT_RTOL = 0.03   # final validation loss, independent runs

MASK = (1 << 64) - 1


class Xoshiro256:
    """attograd's ag::Generator: xoshiro256** seeded through splitmix64."""

    def __init__(self, seed):
        x, self.s = seed & MASK, []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & MASK
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
            self.s.append(z ^ (z >> 31))

    def next_u64(self):
        s = self.s
        rotl = lambda v, k: ((v << k) | (v >> (64 - k))) & MASK
        result = (rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result


def parse_args(argv):
    if len(argv) < 3:
        print(__doc__)
        sys.exit(2)
    binary, data = argv[1], argv[2]
    opts = {"mode": "lockstep", "steps": "200", "threads": "1"}
    rest = argv[3:]
    for i in range(0, len(rest), 2):
        if not rest[i].startswith("--") or i + 1 >= len(rest):
            sys.exit(f"expected --key value pairs, got {rest[i:]}")
        opts[rest[i][2:]] = rest[i + 1]
    return binary, data, opts


def run_attograd(binary, args):
    proc = subprocess.run([binary] + args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"attograd {' '.join(args)} exited {proc.returncode}:\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc.stdout


def spec_data(text, val_fraction):
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    ids = np.array([index[c] for c in text], dtype=np.int64)
    n_val = int(math.floor(len(ids) * val_fraction))
    return vocab, ids[:len(ids) - n_val], ids[len(ids) - n_val:]


@torch.no_grad()
def evaluate(model, ids, T, batch=16):
    """docs/model.md's evaluation windows: starts 0, T, 2T, ... with T+1 ids; mean over
    every target."""
    model.eval()
    starts = list(range(0, len(ids) - T, T))
    total, count = 0.0, 0
    for i in range(0, len(starts), batch):
        chunk = starts[i:i + batch]
        x = torch.from_numpy(np.stack([ids[s:s + T] for s in chunk]))
        y = torch.from_numpy(np.stack([ids[s + 1:s + T + 1] for s in chunk]))
        _, loss = model(x, y)
        total += loss.item() * y.numel()
        count += y.numel()
    model.train()
    return total / count


def train_torch(cfg, train_ids, val_ids, steps, hp, batches, init_state=None, seed=0):
    torch.manual_seed(seed)
    model = GPT(cfg)
    if init_state is None:
        init_spec_(model, cfg["n_layers"])
    else:
        model.load_state_dict(init_state, strict=True)
    opt = adamw_for_spec(model, hp["lr"], (hp["beta1"], hp["beta2"]), hp["eps"], hp["weight_decay"])
    losses = []
    model.train()
    for step in range(1, steps + 1):
        lr = warmup_cosine(step, hp["lr"], hp["min_lr"], hp["warmup_steps"], hp["steps"])
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batches()
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        if hp["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), hp["grad_clip"])
        opt.step()
        losses.append(loss.item())
    return losses, evaluate(model, val_ids, cfg["context_length"])


def main():
    binary, data_file, opts = parse_args(sys.argv)
    mode, steps, threads = opts.pop("mode"), int(opts.pop("steps")), int(opts.pop("threads"))
    torch.set_num_threads(threads)
    if mode == "lockstep":
        opts["dropout"] = "0"
    train_args = ["train", "--data", data_file, "--steps", str(steps), "--threads", str(threads),
                  "--sample-tokens", "0", "--eval-interval", "0", "--log-interval", "1"]
    for k, v in opts.items():
        train_args += [f"--{k}", v]

    with tempfile.TemporaryDirectory(prefix="attograd_train_ref_") as tmp:
        init_path, run_path = os.path.join(tmp, "init.h5"), os.path.join(tmp, "run.h5")
        metrics_path = os.path.join(tmp, "m.jsonl")
        # step 0: attograd's initial weights and its whole resolved configuration
        run_attograd(binary, train_args + ["--steps", "0", "--out", init_path])  # last wins
        with h5py.File(init_path, "r") as f:
            config = json.loads(f.attrs["config"])
            init_state = {k: torch.from_numpy(f["model"][k][()]) for k in f["model"].keys()}
        t0 = time.time()
        run_attograd(binary, train_args + ["--out", run_path, "--metrics", metrics_path])
        ours_seconds = time.time() - t0
        with open(metrics_path) as f:
            # step lines only: the run record and the sample are events
            rows = [r for r in map(json.loads, f) if "event" not in r]
    ours_losses = [r["loss"] for r in rows]
    ours_val = [r["val_loss"] for r in rows if "val_loss" in r][-1]

    cfg = {k: config[k] for k in ("vocab_size", "context_length", "d_model", "n_heads",
                                  "n_layers", "d_ff", "qkv_bias", "tie_weights", "dropout")}
    cfg["norm"] = config.get("norm", "layernorm")  # a variant at its default is not written
    for key in ("norm_eps", "linear_bias", "n_kv_heads", "head_dim", "qk_norm", "mlp",
                "position", "rope_theta", "rope_scaling", "rope_factor", "rope_low_freq_factor",
                "rope_high_freq_factor", "rope_original_context"):
        if key in config:  # the Llama family's keys, likewise
            cfg[key] = config[key]
    hp = {k: config[k] for k in ("lr", "min_lr", "warmup_steps", "steps", "beta1", "beta2",
                                 "eps", "weight_decay", "grad_clip")}
    hp["steps"] = steps  # init.h5 was written by a run of 0 steps
    with open(data_file, encoding="utf-8") as f:
        text = f.read()
    vocab, train_ids, val_ids = spec_data(text, config["val_fraction"])
    assert len(vocab) == cfg["vocab_size"], (len(vocab), cfg["vocab_size"])
    T, B = cfg["context_length"], config["batch_size"]

    if mode == "lockstep":
        gen = Xoshiro256(config["seed"] + 2)  # attograd's data generator

        def batches():
            starts = [gen.next_u64() % (len(train_ids) - T) for _ in range(B)]
            x = np.stack([train_ids[s:s + T] for s in starts])
            y = np.stack([train_ids[s + 1:s + T + 1] for s in starts])
            return torch.from_numpy(x), torch.from_numpy(y)
        state = init_state
    else:
        rng = np.random.default_rng(config["seed"] + 12345)

        def batches():
            starts = rng.integers(0, len(train_ids) - T, size=B)
            x = np.stack([train_ids[s:s + T] for s in starts])
            y = np.stack([train_ids[s + 1:s + T + 1] for s in starts])
            return torch.from_numpy(x), torch.from_numpy(y)
        state = None

    t0 = time.time()
    torch_losses, torch_val = train_torch(cfg, train_ids, val_ids, steps, hp, batches, state,
                                          seed=config["seed"])
    torch_seconds = time.time() - t0

    print(f"{mode}: {steps} steps, model {cfg}, batch {B}, data {data_file} "
          f"({len(train_ids)} train / {len(val_ids)} val tokens)")
    print(f"attograd: val loss {ours_val:.4f}  ({ours_seconds:.1f} s with startup)")
    print(f"torch:    val loss {torch_val:.4f}  ({torch_seconds:.1f} s)")
    failures = []
    if mode == "lockstep":
        worst = max(range(steps), key=lambda i: abs(ours_losses[i] - torch_losses[i]) / torch_losses[i])
        rel = abs(ours_losses[worst] - torch_losses[worst]) / torch_losses[worst]
        print(f"per-step training loss: worst relative difference {rel:.2e} at step {worst + 1} "
              f"(attograd {ours_losses[worst]:.6f}, torch {torch_losses[worst]:.6f})")
        if os.environ.get("ATTOGRAD_REF_VERBOSE"):
            for i in range(steps):
                print(f"  step {i + 1:5d}: {ours_losses[i]:.6f} {torch_losses[i]:.6f} {(ours_losses[i]-torch_losses[i])/torch_losses[i]:+.2e}")
        for i in (0, 1, steps // 2, steps - 1):
            print(f"  step {i + 1:5d}: attograd {ours_losses[i]:.6f}  torch {torch_losses[i]:.6f}")
        if not rel <= LOSS_RTOL:
            failures.append(f"training loss differs by {rel:.2e} > {LOSS_RTOL} at step {worst + 1}")
        tol = VAL_RTOL
    else:
        tol = INDEPENDENT_RTOL
    val_rel = abs(ours_val - torch_val) / torch_val
    print(f"final validation loss: relative difference {val_rel:.2e} (tolerance {tol})")
    if not val_rel <= tol:
        failures.append(f"validation loss {ours_val:.4f} vs torch {torch_val:.4f}: {val_rel:.2e} > {tol}")
    for line in failures:
        print("FAIL " + line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
