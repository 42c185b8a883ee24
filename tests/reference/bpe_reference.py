#!/usr/bin/env python3
"""attograd's BPE against an independent byte-level BPE written here from the algorithm's
definition (the naive form: every pair recounted before each merge), on a real text.

    bpe_reference.py ATTOGRAD VOCAB_SIZE TEXT_FILE...

The files are concatenated; `attograd prepare --tokenizer bpe` learns VOCAB_SIZE tokens
from the first 90% of the characters (docs/model.md's split). This script learns its own merges
from the same training text and checks:
  1. the merges are the same list (both break ties by the smallest (left, right) pair);
  2. compression (tokens per byte) of the held-out 10%, each tokenizer encoding it, agrees
     within 1%;
  3. attograd's val.bin holds exactly the ids this script's encoder gives the held-out text
     with attograd's merges, then <|endoftext|> (the document's end: docs/data.md).
Exit 77 (skipped) when Python's `regex` module (Debian: python3-regex), needed for \\p{L}
and possessive quantifiers, is missing.
"""
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

try:
    import regex
except ImportError:
    print("skipped: the Python module 'regex' (python3-regex) is not installed")
    sys.exit(77)


def pieces_of(text, pattern):
    return [m.encode("utf-8") for m in regex.findall(pattern, text)]


def train(text, pattern, vocab_size):
    """Most frequent adjacent pair (overlaps counted, as each position is a pair) merged
    next, left to right and non-overlapping within each piece; ties: smallest pair."""
    words = {tuple(p): c for p, c in Counter(pieces_of(text, pattern)).items()}
    merges = []
    for new_id in range(256, vocab_size):
        counts = Counter()
        for word, c in words.items():
            for pair in zip(word, word[1:]):
                counts[pair] += c
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        words = {merge_word(w, best, new_id): c for w, c in words.items()}
    return merges


def merge_word(word, pair, new_id):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def encode(text, pattern, merges):
    """Within each piece, the lowest-numbered applicable merge first, until none applies."""
    rank = {tuple(p): 256 + i for i, p in enumerate(merges)}
    ids = []
    for piece in pieces_of(text, pattern):
        word = tuple(piece)
        while len(word) > 1:
            pairs = [p for p in zip(word, word[1:]) if p in rank]
            if not pairs:
                break
            best = min(pairs, key=lambda p: rank[p])
            word = merge_word(word, best, rank[best])
        ids.extend(word)
    return ids


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    attograd, vocab = sys.argv[1], int(sys.argv[2])
    text = "".join(open(f, encoding="utf-8").read() for f in sys.argv[3:])
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "text.txt"), os.path.join(tmp, "prepared")
        with open(src, "w", encoding="utf-8") as f:
            f.write(text)
        subprocess.run([attograd, "prepare", "--data", src, "--tokenizer", "bpe",
                        "--vocab-size", str(vocab), "--val-fraction", "0.1", "--no-sync",
                        "--out", out], check=True, stdout=subprocess.DEVNULL)
        tok = json.load(open(os.path.join(out, "tokenizer.json")))
        meta = json.load(open(os.path.join(out, "meta.json")))
        val_bin = open(os.path.join(out, "val.bin"), "rb").read()
    ours = [tuple(m) for m in tok["merges"]]
    pattern = tok["split_pattern"]
    cut = len(text) - int(len(text) * 0.1)  # characters: floor(units * val_fraction) held out
    assert cut == meta["split"]["units"] - meta["split"]["val_units"], "split disagrees"
    train_text, held_out = text[:cut], text[cut:]

    # the reserved <|endoftext|> takes the vocabulary's last id; it follows the document (the
    # one file), in val.bin, which holds its end
    end = meta["tokenizer"].get("end_of_text")
    ref = train(train_text, pattern, vocab - (1 if end is not None else 0))
    same = next((i for i, (a, b) in enumerate(zip(ours, ref)) if a != b), min(len(ours), len(ref)))
    print(f"merges: attograd {len(ours)}, reference {len(ref)}, identical for the first {same}")

    n_bytes = len(held_out.encode("utf-8"))
    ours_ids, ref_ids = encode(held_out, pattern, ours), encode(held_out, pattern, ref)
    ours_tpb, ref_tpb = len(ours_ids) / n_bytes, len(ref_ids) / n_bytes
    print(f"held-out {n_bytes} bytes: attograd {ours_tpb:.4f} tokens/byte, "
          f"reference {ref_tpb:.4f} ({100 * (ours_tpb / ref_tpb - 1):+.2f}%)")
    width = 2 if meta["dtype"] == "uint16" else 4
    stored = [int.from_bytes(val_bin[i:i + width], "little") for i in range(0, len(val_bin), width)]
    failures = []
    if same != len(ours) or len(ours) != len(ref):
        failures.append(f"merge {same} differs: attograd {ours[same:same + 1]}, "
                        f"reference {ref[same:same + 1]}")
    if abs(ours_tpb / ref_tpb - 1) > 0.01:
        failures.append("compression differs by more than 1%")
    if stored != ours_ids + ([end] if end is not None else []):
        failures.append("val.bin is not the held-out text encoded with attograd's merges")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
