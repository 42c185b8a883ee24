#!/usr/bin/env python3
"""`attograd eval` of a text against the same scoring in PyTorch (spec_gpt.py, the model of
docs/model.md written from that page alone), loaded with the checkpoint's weights, in
float64.

usage: eval_reference.py PATH/TO/attograd

A small byte-level model (context 48) is trained for a few steps; then each case's loss,
token count, window count and bits per byte from `eval --json` must equal the reference's:
  - a text shorter than the context: one window over all its tokens;
  - a text whose last window is partial: windows of 48 targets side by side, the last of 20;
  - --stride on a long text: Hugging Face's sliding-window perplexity as its guide writes it
    (windows of max_length ids advancing by stride, the labels before the last
    end - prev_end set to -100, the model shifting them itself), stride 16 and 40, and with
    --context-length 32;
  - --split val and --split train of a text: the last floor(n * 0.1) bytes and the rest, the
    cut training makes.
A text is one document: its ids end with the byte tokenizer's <|endoftext|> (256), scored
as the others and counting no byte (docs/data.md), as in a folder prepared from it.
The losses agree to 1e-6 relative (attograd computes in float32).

Exit status: 0 when all agree, 1 on a mismatch (printed), 77 (ctest's SKIP_RETURN_CODE)
when torch, numpy or h5py cannot be imported.
"""
import json
import math
import os
import random
import subprocess
import sys
import tempfile

try:  # torch for the model, h5py for spec_gpt's checkpoint reader
    import h5py  # noqa: F401
    import torch
    import torch.nn.functional as F
    from spec_gpt import load_checkpoint
except Exception as e:  # not only ImportError: a half-installed torch raises others
    print(f"skipped: torch or h5py unavailable for {sys.executable}: {e!r}")
    sys.exit(77)  # ctest's SKIP_RETURN_CODE

CONTEXT = 48
TRAIN = ["train", "--tokenizer", "byte", "--steps", "40", "--context-length", str(CONTEXT),
         "--d-model", "32", "--n-heads", "4", "--n-layers", "2", "--batch-size", "8",
         "--eval-windows", "4", "--sample-tokens", "0", "--threads", "2"]
TOL = 1e-6


def attograd(binary, args):
    """The command's standard output; a failure raises, with its standard error."""
    return subprocess.run([binary] + args, check=True, capture_output=True, text=True).stdout


def text_of(n, seed):
    """n bytes of ASCII words, the same on every run."""
    rng = random.Random(seed)
    words = "the a cat sat on mat dog ran home journey starts with one step, and. of".split()
    out = ""
    while len(out) < n:
        out += rng.choice(words) + " "
    return out[:n]


def nll(model, ids, labels):
    """Summed negative log-likelihood of the labels that are not -100, shifted as a Hugging
    Face model shifts them (logits at t predict labels at t + 1; the last id's logits are
    never read, so it is not fed, which lets T + 1 ids fit a context of T), and how many
    were counted."""
    logits, _ = model(torch.tensor([ids[:-1]]))
    shift_logits, shift_labels = logits[0], torch.tensor(labels[1:])
    counted = int((shift_labels != -100).sum())
    loss = F.cross_entropy(shift_logits, shift_labels, ignore_index=-100, reduction="sum")
    return float(loss), counted


@torch.no_grad()
def side_by_side(model, ids, T):
    """Windows of T + 1 ids at 0, T, 2T, ..., every target counted; the last one partial."""
    total, counted, windows = 0.0, 0, 0
    for begin in range(0, len(ids) - 1, T):
        chunk = ids[begin:begin + T + 1]
        s, c = nll(model, chunk, list(chunk))
        total, counted, windows = total + s, counted + c, windows + 1
    return total / counted, counted, windows


@torch.no_grad()
def sliding(model, ids, max_length, stride):
    """Hugging Face's perplexity guide (docs/transformers/perplexity), line for line."""
    seq_len, prev_end, total, counted, windows = len(ids), 0, 0.0, 0, 0
    for begin in range(0, seq_len, stride):
        end = min(begin + max_length, seq_len)
        trg_len = end - prev_end  # may be different from stride on last loop
        input_ids = ids[begin:end]
        target_ids = list(input_ids)
        target_ids[:-trg_len] = [-100] * (len(target_ids) - trg_len)
        s, c = nll(model, input_ids, target_ids)
        total, counted, windows = total + s, counted + c, windows + 1
        prev_end = end
        if end == seq_len:
            break
    return total / counted, counted, windows


def main():
    binary = sys.argv[1]
    failures, cases = [], []
    with tempfile.TemporaryDirectory(prefix="attograd_eval_ref_") as tmp:
        ckpt = os.path.join(tmp, "run.h5")
        attograd(binary, TRAIN + ["--out", ckpt])
        model = load_checkpoint(ckpt)

        # the byte tokenizer reserves <|endoftext|> (256): a text is one document, and its
        # ids end with that token, which it is scored on and which counts no byte
        end_of_text = 256

        def case(name, text, extra, reference, ends_document=True):
            path = os.path.join(tmp, f"{len(cases)}.txt")
            with open(path, "w") as f:
                f.write(text)
            out = attograd(binary, ["eval", ckpt, "--data", path, "--json"] + extra)
            ours = json.loads(out.strip().splitlines()[-1])
            loss, counted, windows = reference(list(text.encode()) + [end_of_text])
            cases.append(name)
            got = (ours["tokens"], ours["windows"])
            if got != (counted, windows):
                failures.append(f"{name}: tokens, windows {got}, reference {(counted, windows)}")
            err = abs(ours["loss"] - loss) / loss
            if err > TOL:
                failures.append(f"{name}: loss {ours['loss']!r}, reference {loss!r}: {err:.3g}")
            # a byte a target, but <|endoftext|> (the last target where the part ends the text)
            bpb = loss * counted / (counted - (1 if ends_document else 0)) / math.log(2)
            if abs(ours["bits_per_byte"] - bpb) / bpb > TOL:
                failures.append(f"{name}: bits per byte {ours['bits_per_byte']}, reference {bpb}")
            print(f"{name}: loss {ours['loss']:.9f} reference {loss:.9f} ({err:.2g}), "
                  f"{counted} tokens over {windows} windows")

        case("short text (30 bytes, context 48)", text_of(30, 1), [],
             lambda ids: side_by_side(model, ids, CONTEXT))
        case("partial last window (165 bytes)", text_of(165, 2), [],
             lambda ids: side_by_side(model, ids, CONTEXT))
        long_text = text_of(700, 3)
        for stride in (16, 40):
            case(f"--stride {stride} (700 bytes)", long_text, ["--stride", str(stride)],
                 lambda ids, s=stride: sliding(model, ids, CONTEXT, s))
        case("--context-length 32 --stride 8 (700 bytes)", long_text,
             ["--context-length", "32", "--stride", "8"], lambda ids: sliding(model, ids, 32, 8))
        cut = len(long_text) - math.floor(len(long_text) * 0.1)
        case("--split val (the last 70 of 700 bytes)", long_text, ["--split", "val"],
             lambda ids: side_by_side(model, ids[cut:], CONTEXT))
        case("--split train --stride 24", long_text, ["--split", "train", "--stride", "24"],
             lambda ids: sliding(model, ids[:cut], CONTEXT, 24), ends_document=False)
    for f in failures:
        print("MISMATCH:", f)
    print(f"{len(cases)} cases compared with the PyTorch reference")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
