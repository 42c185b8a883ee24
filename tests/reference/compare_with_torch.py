#!/usr/bin/env python3
"""Holds attograd's ops against PyTorch, an independent implementation.

usage: compare_with_torch.py PATH/TO/attograd_op_driver

The cases are the op table's (autograd/op_cases.h): the driver runs every case that
PyTorch checks, in float64 and in float32, and writes each case's PyTorch expression,
tolerances, inputs and upstream gradients beside attograd's outputs and the gradient of
sum(output * upstream) with respect to every float input (op_driver.cpp describes the
file). Here each expression is evaluated in torch, in float64, over the same inputs
(x[0], x[1], ...; torch, F, math and inf in scope), with no code of its own per op, and:

  attograd float64 vs torch float64:     |got - want| <= torch_atol + torch_rtol * |want|
  attograd float32 vs attograd float64:  |got - want| <= f32_rtol * |want| + f32_atol * scale
                                         scale = max(1, largest finite |want| in that tensor)

with the case's tolerances (stated once, in op_cases.h). Non-finite values (-inf from a
masked log_softmax) must match exactly; shapes must match.

Exit status: 0 when everything agrees, 1 on any mismatch or driver failure, 77 (ctest's
SKIP_RETURN_CODE) when torch or numpy cannot be imported.
"""
import math
import os
import subprocess
import sys
import tempfile
import time

SKIP = 77
try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except Exception as e:  # not only ImportError: a half-installed torch raises others
    print(f"skipped: torch/numpy unavailable for {sys.executable}: {e!r}")
    sys.exit(SKIP)


# ------------------------------------------------------------------ the driver's file

def parse_tensor(tokens):
    rank = int(tokens[0])
    shape = tuple(int(t) for t in tokens[1:1 + rank])
    return np.array([float(t) for t in tokens[1 + rank:]], dtype=np.float64).reshape(shape)


class Case:
    def __init__(self, name):
        self.name = name
        self.row = self.torch = None
        self.tolerance = None  # torch_atol, torch_rtol, f32_atol, f32_rtol
        self.inputs = []  # (kind, ndarray | None), kind f, i, b or none
        self.upstream = []
        self.results = {}  # dtype name -> {"outs": [...], "grads": [...], "error": str | None}

    def describe(self):
        return " ".join("none" if a is None else f"{kind}{list(a.shape)}"
                        for kind, a in self.inputs)


def read_cases(path):
    cases, case, result = [], None, None
    with open(path) as lines:
        for line in lines:
            word, _, rest = line.rstrip("\n").partition(" ")
            if word == "case":
                case = Case(rest)
                cases.append(case)
            elif word == "row":
                case.row = rest
            elif word == "torch":
                case.torch = rest
            elif word == "tolerance":
                case.tolerance = [float(t) for t in rest.split()]
            elif word == "input":
                kind, _, tensor = rest.partition(" ")
                case.inputs.append((kind, None if kind == "none" else parse_tensor(tensor.split())))
            elif word == "upstream":
                case.upstream.append(parse_tensor(rest.split()))
            elif word == "dtype":
                result = case.results[rest] = {"outs": [], "grads": [], "error": None}
            elif word == "out":
                result["outs"].append(parse_tensor(rest.split()))
            elif word == "grad":
                result["grads"].append(None if rest == "none" else parse_tensor(rest.split()))
            elif word == "error":
                result["error"] = rest
            elif word != "end":
                raise ValueError(f"{path}: unknown record {word!r}")
    return cases


# ------------------------------------------------------------------ torch

def run_torch(case):
    """The case's outputs and float-input gradients from its expression, in float64."""
    x, leaves = [], []
    for kind, arr in case.inputs:
        if kind == "none":
            x.append(None)
        elif kind == "f":
            leaves.append(torch.tensor(arr, dtype=torch.float64, requires_grad=True))
            x.append(leaves[-1])
        elif kind == "i":
            x.append(torch.tensor(arr.astype(np.int64)))
        else:
            x.append(torch.tensor(arr.astype(bool)))
    out = eval(case.torch, {"torch": torch, "F": F, "math": math, "inf": math.inf, "x": x})
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    float_outs = [o for o in outs if o.is_floating_point()]
    if len(float_outs) != len(case.upstream):
        raise ValueError(f"torch gives {len(float_outs)} float outputs, the driver "
                         f"{len(case.upstream)} upstream gradients")
    grads = [None] * len(leaves)
    if float_outs and leaves:
        grads = torch.autograd.grad(float_outs, leaves, [torch.tensor(u) for u in case.upstream],
                                    allow_unused=True)
    return ([o.detach().double().numpy() for o in outs],
            [np.zeros(tuple(t.shape)) if g is None else g.numpy() for t, g in zip(leaves, grads)])


# ------------------------------------------------------------------ comparing

def mismatch(got, want, tol):
    """None when got agrees with want, else a description of the worst element."""
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, want {list(want.shape)}"
    if got.size == 0:
        return None
    with np.errstate(invalid="ignore"):
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        excess = np.where(same, -1.0, np.abs(got - want) - tol(want))
    excess = np.nan_to_num(excess, nan=np.inf)  # a nan on one side only
    idx = np.unravel_index(int(np.argmax(excess)), got.shape)
    if excess[idx] <= 0:
        return None
    return (f"worst element {list(idx)}: got {got[idx]!r}, want {want[idx]!r}, "
            f"|diff| {abs(got[idx] - want[idx]):.3g} > tol {tol(want)[idx]:.3g}")


def compare(got, want_outs, want_grads, tol):
    """Yields a description per disagreement of one driver result with the wanted values."""
    if got["error"] is not None:
        yield f"attograd threw: {got['error']}"
        return
    if len(got["outs"]) != len(want_outs) or len(got["grads"]) != len(want_grads):
        yield (f"{len(got['outs'])} outputs and {len(got['grads'])} gradients, "
               f"want {len(want_outs)} and {len(want_grads)}")
        return
    for k, (g, w) in enumerate(zip(got["outs"], want_outs)):
        if (m := mismatch(g, w, tol)) is not None:
            yield f"output {k} {m}"
    for k, (g, w) in enumerate(zip(got["grads"], want_grads)):
        g = np.zeros(w.shape) if g is None else g  # no gradient at all means zeros
        if (m := mismatch(g, w, tol)) is not None:
            yield f"gradient of float input {k} {m}"


def problems(case):
    torch_atol, torch_rtol, f32_atol, f32_rtol = case.tolerance

    def tol64(want):
        return torch_atol + torch_rtol * np.abs(want)

    def tol32(want):
        finite = np.abs(want[np.isfinite(want)])
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        return f32_rtol * np.abs(want) + f32_atol * scale

    r64, r32 = case.results.get("float64"), case.results.get("float32")
    if r64 is None or r32 is None:
        return ["no result from the driver"]
    if r64["error"] is not None:
        return [f"[float64] attograd threw: {r64['error']}"]
    try:
        want_outs, want_grads = run_torch(case)
    except Exception as e:
        return [f"torch failed on {case.torch!r}: {e!r}"]
    found = [f"[float64 vs torch] {p}" for p in compare(r64, want_outs, want_grads, tol64)]
    grads64 = [np.zeros(w.shape) if g is None else g for g, w in zip(r64["grads"], want_grads)]
    return found + [f"[float32 vs float64] {p}" for p in compare(r32, r64["outs"], grads64, tol32)]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 1
    driver = sys.argv[1]
    if not os.access(driver, os.X_OK):
        print(f"FAIL: driver {driver} is not an executable file")
        return 1
    start = time.monotonic()
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead

    with tempfile.TemporaryDirectory(prefix="attograd_ref_") as tmp:
        results_path = os.path.join(tmp, "results.txt")
        run = subprocess.run([driver, results_path], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAIL: {driver} exited with {run.returncode}\n{run.stdout}{run.stderr}")
            return 1
        cases = read_cases(results_path)
    if not cases:
        print("FAIL: the driver ran no case")
        return 1

    per_row, failures = {}, 0
    for case in cases:
        found = problems(case)
        for p in found:
            print(f"FAIL {case.name} ({case.describe()}): {p}")
        failures += bool(found)
        ok, total = per_row.get(case.row, (0, 0))
        per_row[case.row] = (ok + (not found), total + 1)
    for row, (ok, total) in per_row.items():
        print(f"{row}: {total} cases ok" if ok == total else
              f"{row}: {total - ok} of {total} cases FAILED")

    elapsed = time.monotonic() - start
    if failures:
        print(f"FAILED: {failures} of {len(cases)} cases over {len(per_row)} rows disagree "
              f"({elapsed:.1f}s)")
        return 1
    print(f"OK: {len(cases)} cases over {len(per_row)} rows of the op table agree with torch "
          f"in float64 and with float64 in float32, within each case's tolerances "
          f"({elapsed:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
