#!/usr/bin/env python3
"""Holds attograd's GPT against an independent PyTorch implementation of
docs/model.md (spec_gpt.py, written from that page alone, not from nn/*.cpp).

usage: gpt_reference.py PATH/TO/attograd_gpt_driver

For each config the driver builds nn::GPT with dropout 0, runs one forward and backward
pass on a random batch in float32 and again in float64, and writes the weights, the
batch, the logits, the loss and every parameter's gradient to an HDF5 file
(gpt_driver.cpp describes it). Here the reference module (spec_gpt.py, written from
docs/model.md alone) is built from the same config, the weights are loaded with
load_state_dict(strict=True) -- so the parameter names and shapes must be identical --
and the same pass is run in torch, in each precision:

  logits:    max |ours - torch| / max(1, max |torch|)   float32 <= 1e-5, float64 <= 1e-10
  loss:      |ours - torch| / |torch|                   float32 <= 1e-5, float64 <= 1e-10
  gradient:  ||ours - torch|| / ||torch||               float32 <= 1e-4, float64 <= 1e-10
             per parameter (norms over all its elements)

The logits bound is absolute while they are O(1) (docs/model.md's init keeps them ~0.1) and
relative beyond, since float32 rounding is relative: perturbed models reach |logits| ~6.

A gradient that is zero in exact arithmetic (the W_key bias: adding the same vector to
every key shifts a row of scores by a constant, which softmax ignores) has a norm of
pure rounding noise, so a relative error means nothing. Such gradients are recognised
by torch's float64 norm being below ZERO_BELOW times the model's largest gradient norm
gmax, and are held to ||ours - torch|| / (ZERO_FLOOR * gmax) instead: ours must be ~0
too. (Real gradients are far above: the smallest, W_query/W_key at init, are ~2e-4 gmax.)

Exit status: 0 when every config agrees, 1 on any mismatch or driver failure (the
tensor, the config and the error are printed), 77 (ctest's SKIP_RETURN_CODE) when
torch, numpy or h5py cannot be imported.
"""
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
    from spec_gpt import GPT
except Exception as e:  # not only ImportError: a half-installed torch raises others
    print(f"skipped: torch/numpy/h5py unavailable for {sys.executable}: {e!r}")
    sys.exit(SKIP)

TOL = {  # precision -> (logits atol, loss rtol, gradient relative norm)
    "float32": (1e-5, 1e-5, 1e-4),
    "float64": (1e-10, 1e-10, 1e-10),
}
ZERO_BELOW = 1e-9
ZERO_FLOOR = 1e-2

# The configs: each one moves one thing away from the tiny default, then one mixes all.
# Each runs twice: with docs/model.md's initialisation as the driver makes it (whose
# statistics are checked too), and with every parameter perturbed by N(0, PERTURB)
# noise, because at the GPT-2 init the activations are so small that attention is nearly
# uniform and GELU nearly linear, and e.g. a wrong score scale or the erf GELU would pass.
BASE = dict(vocab_size=11, context_length=8, d_model=16, n_heads=2, n_layers=2, d_ff=0,
            qkv_bias=0, tie_weights=1, batch=3, T=8, seed=1234, perturb=0.0)
SHAPES = [
    ("tiny", {}),
    ("qkv_bias", dict(qkv_bias=1, seed=7)),
    ("untied_head", dict(tie_weights=0, seed=8)),
    ("d_ff_24_4_heads", dict(d_ff=24, n_heads=4, seed=9)),
    ("T_5_of_8", dict(T=5, seed=10)),
    ("mixed", dict(vocab_size=37, context_length=16, d_model=32, n_heads=4, n_layers=3,
                   d_ff=80, qkv_bias=1, tie_weights=0, batch=2, T=13, seed=11)),
]
PERTURB = 0.3
CONFIGS = [(name, over) for name, over in SHAPES] + \
          [(name + "+noise", dict(over, perturb=PERTURB)) for name, over in SHAPES]


# ------------------------------------------------------------------ comparison

def check_init(cfg, state):
    """docs/model.md's GPT-2 initialisation, statistically: weights N(0, 0.02), the residual
    projections N(0, 0.02 / sqrt(2 n_layers)), biases 0, LayerNorm weight 1 and bias 0.
    Bounds are 6 standard errors, so a fixed seed passing them is no accident while a
    wrong distribution (torch's default U(+-1/sqrt(in)), N(0, 1), a missing scale) fails."""
    errors = []
    for k, v in state.items():
        v = v.double()
        if k.endswith("bias") or (".ln" in k or k.startswith("ln_f")):
            want = 1.0 if (k.endswith("weight")) else 0.0
            if not torch.all(v == want):
                errors.append(f"init of {k}: expected all {want}, got range "
                              f"[{v.min().item():.3g}, {v.max().item():.3g}]")
            continue
        std = 0.02
        if k.endswith("attn.out_proj.weight") or k.endswith("mlp.fc2.weight"):
            std = 0.02 / math.sqrt(2 * cfg["n_layers"])
        n = v.numel()
        mean, sd = v.mean().item(), v.std().item()
        if abs(mean) > 6 * std / math.sqrt(n) or abs(sd / std - 1) > 6 / math.sqrt(2 * n):
            errors.append(f"init of {k}: mean {mean:.3g} std {sd:.3g}, expected N(0, {std:.3g})")
    return errors


def run_driver(driver, cfg, out_dir):
    args = [driver, out_dir] + [f"{k}={v!r}" for k, v in cfg.items()]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"driver failed (exit {proc.returncode}): {' '.join(args)}\n"
                           f"{proc.stdout}{proc.stderr}")


def compare(name, cfg, f):
    """Returns (list of failures, dict of max errors per kind and precision)."""
    failures, worst = [], {}

    def note(kind, prec, tensor, err, tol):
        key = f"{kind}{'32' if prec == 'float32' else '64'}"
        if err > worst.get(key, (-1, ""))[0]:
            worst[key] = (err, tensor)
        if not err <= tol:  # also catches NaN
            what = tensor if tensor in ("logits", "loss") else f"gradient of {tensor}"
            failures.append(f"{name} {prec}: {what}: {kind} error {err:.3e} > {tol:.0e}")

    for key, value in cfg.items():
        got = type(value)(f.attrs[key])
        if got != value:
            failures.append(f"{name}: attribute {key} = {got}, expected {value}")
    ids = torch.from_numpy(f["ids"][()])
    targets = torch.from_numpy(f["targets"][()])
    if ids.dtype != torch.int64 or tuple(ids.shape) != (cfg["batch"], cfg["T"]):
        failures.append(f"{name}: /ids is {ids.dtype} {tuple(ids.shape)}")
        return failures, worst
    state = {k: torch.from_numpy(f["model"][k][()]) for k in f["model"].keys()}
    if cfg["perturb"] == 0:
        failures += [f"{name}: {msg}" for msg in check_init(cfg, state)]

    zero_grads = set()  # found by the float64 pass, which therefore runs first
    for prec, suffix, tdtype in (("float64", "64", torch.float64),
                                 ("float32", "", torch.float32)):
        logits_tol, loss_tol, grad_tol = TOL[prec]
        model = GPT(cfg).to(tdtype)
        try:
            # strict: every name of docs/model.md present, no extra one, every shape identical.
            model.load_state_dict({k: v.to(tdtype) for k, v in state.items()}, strict=True)
        except RuntimeError as e:
            failures.append(f"{name}: parameter names/shapes differ from docs/model.md: {e}")
            return failures, worst
        logits, loss = model(ids, targets)
        loss.backward()

        ours_logits = torch.from_numpy(f["logits" + suffix][()])
        if ours_logits.dtype != tdtype or ours_logits.shape != logits.shape:
            failures.append(f"{name} {prec}: /logits{suffix} is {ours_logits.dtype} "
                            f"{tuple(ours_logits.shape)}, torch {tuple(logits.shape)}")
        else:
            scale = max(1.0, logits.detach().abs().max().item())
            note("logits", prec, "logits",
                 (ours_logits - logits.detach()).abs().max().item() / scale, logits_tol)
        ours_loss = float(f["loss" + suffix][()])
        note("loss", prec, "loss", abs(ours_loss - loss.item()) / abs(loss.item()), loss_tol)

        grads = {k: p.grad for k, p in model.named_parameters()}
        gmax = max(g.norm().item() for g in grads.values())
        if tdtype == torch.float64:
            zero_grads = {k for k, g in grads.items() if g.norm().item() < ZERO_BELOW * gmax}
        group = f["grad" + suffix]
        if set(group.keys()) != set(grads.keys()):
            failures.append(f"{name} {prec}: gradient names differ: "
                            f"{sorted(set(group.keys()) ^ set(grads.keys()))}")
        for k, g in grads.items():
            if k not in group:
                continue
            ours = torch.from_numpy(group[k][()])
            if ours.dtype != tdtype or ours.shape != g.shape:
                failures.append(f"{name} {prec}: grad {k} is {ours.dtype} "
                                f"{tuple(ours.shape)}, torch {tuple(g.shape)}")
                continue
            if k in zero_grads:
                note("zero_grad", prec, k, (ours - g).norm().item() / (ZERO_FLOOR * gmax),
                     grad_tol)
            else:
                note("grad", prec, k, (ours - g).norm().item() / g.norm().item(), grad_tol)
    return failures, worst


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    driver = sys.argv[1]
    torch.manual_seed(0)  # module init is overwritten by load_state_dict; fixed anyway
    start = time.time()
    all_failures, overall = [], {}
    with tempfile.TemporaryDirectory(prefix="attograd_gpt_") as tmp:
        for name, overrides in CONFIGS:
            cfg = dict(BASE, **overrides)
            out_dir = os.path.join(tmp, name)
            os.makedirs(out_dir)
            try:
                run_driver(driver, cfg, out_dir)
                with h5py.File(os.path.join(out_dir, "gpt.h5"), "r") as f:
                    failures, worst = compare(name, cfg, f)
            except Exception as e:  # a driver crash or unreadable file is a failure
                failures, worst = [f"{name}: {e}"], {}
            all_failures += failures
            for key, (err, tensor) in worst.items():
                if err > overall.get(key, (-1, "", ""))[0]:
                    overall[key] = (err, tensor, name)
            summary = "  ".join(f"{key} {err:.1e}" for key, (err, _) in sorted(worst.items()))
            print(f"{'FAIL' if failures else 'ok  '} {name:22s} "
                  f"V={cfg['vocab_size']} ctx={cfg['context_length']} C={cfg['d_model']} "
                  f"H={cfg['n_heads']} L={cfg['n_layers']} d_ff={cfg['d_ff'] or 4 * cfg['d_model']} "
                  f"bias={cfg['qkv_bias']} tied={cfg['tie_weights']} B={cfg['batch']} T={cfg['T']} "
                  f"noise={cfg['perturb']}"
                  f"  | {summary}")
            for line in failures:
                print("    " + line)
    print("max errors: " + ", ".join(f"{key} {err:.2e} ({tensor}, {cfg_name})"
                                     for key, (err, tensor, cfg_name) in sorted(overall.items())))
    print(f"{len(CONFIGS)} configs, {len(all_failures)} mismatches, {time.time() - start:.1f} s")
    return 1 if all_failures else 0


if __name__ == "__main__":
    sys.exit(main())
