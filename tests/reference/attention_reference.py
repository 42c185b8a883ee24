#!/usr/bin/env python3
"""`attograd attention` against the PyTorch model of docs/model.md (spec_gpt.py,
written from that page alone), loaded with the same checkpoint's weights.

usage: attention_reference.py PATH/TO/attograd

A small byte-level model is trained for a few steps (so the heads are no longer uniform);
then, over the chapter's sentence "Your journey starts with one step":
  - every layer's and head's weights from `attention --json` equal the weights the
    reference recomputes in float64 from its own q and k (and its own blocks' outputs as
    the next layer's input): max |ours - torch| <= 1e-6 (measured: 3e-8);
  - each of our rows sums to 1 (1e-5) and every weight above the diagonal is exactly 0;
  - what `attention --layer L --head H` prints is, character for character, what PyTorch
    prints for the same values (str(torch.tensor(...)): 33 x 33 is summarised alike).

Exit status: 0 when all agree, 1 on a mismatch (printed), 77 (ctest's SKIP_RETURN_CODE)
when torch, numpy or h5py cannot be imported.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

SKIP = 77
try:
    import h5py  # noqa: F401 (spec_gpt.load_checkpoint reads with it)
    import numpy as np
    import torch
    from spec_gpt import load_checkpoint
except Exception as e:  # not only ImportError: a half-installed torch raises others
    print(f"skipped: torch/numpy/h5py unavailable for {sys.executable}: {e!r}")
    sys.exit(SKIP)

PROMPT = "Your journey starts with one step"
TRAIN = ["train", "--tokenizer", "byte", "--steps", "60", "--context-length", "48",
         "--d-model", "32", "--n-heads", "4", "--n-layers", "2", "--batch-size", "8",
         "--qkv-bias", "true", "--eval-windows", "4", "--sample-tokens", "0", "--threads", "2"]
TOL = 1e-6


def run(binary, args):
    return subprocess.run([binary] + args, check=True, capture_output=True, text=True).stdout


@torch.no_grad()
def reference_weights(model, ids):
    """Each layer's [H, T, T] softmax(q k^T / sqrt(D)) with the future masked."""
    T = len(ids)
    ids = torch.tensor(ids)
    h = model.tok_emb.weight[ids] + model.pos_emb.weight[:T]  # [T, C]
    layers = []
    for block in model.blocks:
        attn = block.attn
        a = block.ln1(h)
        H, D = attn.n_heads, attn.head_dim
        q = attn.W_query(a).view(T, H, D).transpose(0, 1)
        k = attn.W_key(a).view(T, H, D).transpose(0, 1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        layers.append(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1))
        h = block(h.unsqueeze(0)).squeeze(0)  # the reference block's own output
    return layers


def printed_matrix(text):
    """The tensor block of `attention --layer L --head H`, as printed."""
    start = text.index("tensor(")
    return text[start:].strip()


def main():
    binary = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory(prefix="attograd_attention_ref_") as tmp:
        ckpt = os.path.join(tmp, "run.h5")
        run(binary, TRAIN + ["--out", ckpt])
        ours = json.loads(run(binary, ["attention", "--checkpoint", ckpt, "--prompt", PROMPT,
                                       "--json"]))
        printed = run(binary, ["attention", "--checkpoint", ckpt, "--prompt", PROMPT,
                               "--layer", "1", "--head", "2"])
        model = load_checkpoint(ckpt)
    assert bytes(ours["ids"]) == PROMPT.encode(), ours["ids"]
    reference = reference_weights(model, ours["ids"])
    T = len(ours["ids"])
    for m in ours["maps"]:
        w = np.array(m["weights"], dtype=np.float64)
        ref = reference[m["layer"]][m["head"]].numpy()
        where = f"layer {m['layer']} head {m['head']}"
        err = np.abs(w - ref).max()
        if err > TOL:
            failures.append(f"{where}: max |ours - torch| = {err:.3g} > {TOL}")
        if np.abs(w.sum(axis=1) - 1).max() > 1e-5:
            failures.append(f"{where}: a row does not sum to 1: {w.sum(axis=1)}")
        if np.any(w[np.triu_indices(T, 1)] != 0):
            failures.append(f"{where}: a weight above the diagonal is not exactly 0")
    if len(ours["maps"]) != len(reference) * reference[0].shape[0]:
        failures.append(f"{len(ours['maps'])} maps for {len(reference)} layers")
    one = next(m for m in ours["maps"] if m["layer"] == 1 and m["head"] == 2)
    as_torch = str(torch.tensor(one["weights"], dtype=torch.float32))
    if printed_matrix(printed) != as_torch:
        failures.append(f"printed:\n{printed_matrix(printed)}\nPyTorch prints:\n{as_torch}")
    print(f"{len(ours['maps'])} maps over {T} tokens compared with the PyTorch reference")
    for f in failures:
        print("MISMATCH:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
