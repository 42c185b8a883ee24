#!/usr/bin/env python3
"""A frozen base held as blocks in a checkpoint (docs/checkpoint.md, "A frozen base held as
blocks"), read by h5py and dequantized by the numpy twin of ggml's layouts
(quant_reference.py), against the float32 values attograd gives the same weights:

  - attograd trains a LoRA run over a bf16, Q8_0 and Q4_K base (rows of 256: whole blocks)
    and saves it: each packed weight is a uint8 [rows, bytes a row] dataset (uint16
    [rows, width] for bf16) with attributes format and shape, its bytes exactly the rows'
    blocks (no inflation);
  - a run --init-from that file with --base-precision fp32 holds the same weights as
    float32 and saves them as floats: the numpy dequantization of every block equals them
    bit for bit.

usage: packed_checkpoint_reference.py PATH/TO/attograd

Exit status: 0 when all agree, 1 on a mismatch (printed), 77 without numpy or h5py.
"""
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError:
    print("skipped: numpy or h5py cannot be imported")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quant_reference import DEQUANTIZE, LAYOUTS  # noqa: E402

TINY = ["--context-length", "16", "--d-model", "256", "--n-heads", "2", "--n-layers", "1",
        "--batch-size", "2", "--eval-windows", "2", "--threads", "1", "--sample-tokens", "0",
        "--lora-rank", "4", "--steps", "2"]


def run(binary, *args):
    subprocess.run([binary, *args], check=True, stdout=subprocess.DEVNULL)


def dequantized(d):
    """The float32 weights of a dataset of blocks, from its bytes alone."""
    fmt = d.attrs["format"]
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    rows, width = (int(v) for v in d.attrs["shape"])
    raw = d[()]
    if fmt == "bf16":
        assert raw.dtype == np.uint16 and raw.shape == (rows, width), (d.name, raw.dtype, raw.shape)
        return (raw.astype(np.uint32) << 16).view(np.float32), rows * width * 2
    weights, block_bytes = LAYOUTS[fmt]
    row_bytes = width // weights * block_bytes
    assert raw.dtype == np.uint8 and raw.shape == (rows, row_bytes), (d.name, raw.dtype, raw.shape)
    blocks = raw.reshape(-1, block_bytes)
    return DEQUANTIZE[fmt](blocks).reshape(rows, width).astype(np.float32), rows * row_bytes


def check(binary, base, folder):
    packed, floats = os.path.join(folder, base + ".h5"), os.path.join(folder, base + "_f32.h5")
    run(binary, "train", *TINY, "--base-precision", base, "--out", packed)
    run(binary, "train", "--init-from", packed, "--lora-rank", "4", "--base-precision", "fp32",
        "--steps", "1", "--threads", "1", "--sample-tokens", "0", "--eval-windows", "2",
        "--out", floats)
    problems, held = [], 0
    with h5py.File(packed, "r") as p, h5py.File(floats, "r") as f:
        for name, d in p["model"].items():
            if "format" not in d.attrs:
                continue
            values, nbytes = dequantized(d)
            held += 1
            if d.size * d.dtype.itemsize != nbytes:
                problems.append(f"{base} {name}: {d.size * d.dtype.itemsize} bytes, not {nbytes}")
            want = f["model"][name][()]
            if values.shape != want.shape or values.tobytes() != want.tobytes():
                bad = np.flatnonzero(values.reshape(-1).view(np.uint32) != want.reshape(-1).view(np.uint32))
                problems.append(f"{base} {name}: {bad.size} values differ, first at {bad[:1]}")
    if held < 6:
        problems.append(f"{base}: only {held} weights held as blocks")
    print(f"{base}: {held} weights held as blocks, dequantized by numpy as attograd reads them")
    return problems


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    problems = []
    with tempfile.TemporaryDirectory() as folder:
        for base in ("bf16", "q8_0", "q4_k"):
            problems += check(sys.argv[1], base, folder)
    for p in problems:
        print("MISMATCH", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
