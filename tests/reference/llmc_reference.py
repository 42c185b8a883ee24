#!/usr/bin/env python3
"""llm.c checkpoints read and written by a reader and a writer of its own, in numpy, from
llm.c's layout (train_gpt2.c's fill_in_parameter_sizes, train_gpt2.py's write_model):
a header of 256 int32 (20240326, version 3 float32 / 5 bfloat16, maxT, V, L, NH, C, Vp),
then wte [Vp, C], wpe [maxT, C], and per kind over the L layers ln1w, ln1b, qkvw [3C, C],
qkvb [3C], attprojw [C, C], attprojb, ln2w, ln2b, fcw [4C, C], fcb [4C], fcprojw [C, 4C],
fcprojb, then lnfw, lnfb.

usage: llmc_reference.py PATH/TO/attograd

A small model with qkv biases and a tied head (GPT-2's shape) is trained a few steps, so
that gains and biases are no longer ones and zeros; then
  - `export --format llmc` (float32): every parameter equals the checkpoint's bit for bit,
    the padding rows V..Vp-1 are zeros and Vp is V rounded up to a multiple of 128;
  - `export --format llmc --dtype bf16`: every parameter is the checkpoint's rounded to the
    nearest bfloat16, ties to even (computed here in integers);
  - a file written here (Vp not a multiple of 128, padding rows of garbage) is imported with
    a tokenizer folder by `attograd import`: the imported checkpoint's /model equals the
    source's bit for bit, and `attograd sample` runs on it;
  - a file whose header lies (V > Vp) is refused: exit 2, one line naming the file and the
    field, no output file;
  - a model with a GPT-2 tokenizer (256 bytes, three merges, <|endoftext|>, written here as
    vocab.json + merges.txt) exported to llm.c gets gpt2_tokenizer.bin beside it, read here as
    llm.c's llmc/tokenizer.h reads it (a header of 256 int32: 20240328, 2, the number of
    tokens, the end-of-text id; then a length byte and the bytes of each token): every
    token's bytes are vocab.json's, decoded through bytes_to_unicode.

Exit status: 0 when all agree, 1 on a mismatch (printed), 77 (ctest's SKIP_RETURN_CODE)
when numpy or h5py cannot be imported.
"""
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
try:
    import h5py
    import numpy as np
except Exception as e:
    print(f"skipped: numpy/h5py unavailable for {sys.executable}: {e!r}")
    sys.exit(SKIP)

TRAIN = ["train", "--tokenizer", "byte", "--steps", "3", "--context-length", "16",
         "--d-model", "32", "--n-heads", "4", "--n-layers", "2", "--batch-size", "4",
         "--qkv-bias", "true", "--eval-windows", "1", "--sample-tokens", "0", "--threads", "2"]
KINDS = ["ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b",
         "fcw", "fcb", "fcprojw", "fcprojb"]


def run(binary, args, expect=0):
    proc = subprocess.run([binary] + args, capture_output=True, text=True, errors="replace")
    if proc.returncode != expect:
        raise RuntimeError(f"attograd {' '.join(args)} exited {proc.returncode} (wanted {expect}):"
                           f"\n{proc.stdout}{proc.stderr}")
    return proc


def llmc_parts(model, L):
    """Each llm.c tensor (in file order) as the checkpoint's arrays it stacks."""
    def layer(l, kind):
        b = f"blocks.{l}."
        qkv = lambda s: [model[b + f"attn.{w}.{s}"] for w in ("W_query", "W_key", "W_value")]
        return {"ln1w": [model[b + "ln1.weight"]], "ln1b": [model[b + "ln1.bias"]],
                "qkvw": qkv("weight"), "qkvb": qkv("bias"),
                "attprojw": [model[b + "attn.out_proj.weight"]],
                "attprojb": [model[b + "attn.out_proj.bias"]],
                "ln2w": [model[b + "ln2.weight"]], "ln2b": [model[b + "ln2.bias"]],
                "fcw": [model[b + "mlp.fc1.weight"]], "fcb": [model[b + "mlp.fc1.bias"]],
                "fcprojw": [model[b + "mlp.fc2.weight"]], "fcprojb": [model[b + "mlp.fc2.bias"]],
                }[kind]
    parts = [("wte", [model["tok_emb.weight"]]), ("wpe", [model["pos_emb.weight"]])]
    for kind in KINDS:
        parts.append((kind, [p for l in range(L) for p in layer(l, kind)]))
    parts += [("lnfw", [model["ln_f.weight"]]), ("lnfb", [model["ln_f.bias"]])]
    return [(name, np.concatenate([a.reshape(-1) for a in arrays])) for name, arrays in parts]


def bf16_round(a):
    """float32 -> nearest bfloat16 (ties to even), as float32; no NaN here."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def read_llmc(path):
    raw = open(path, "rb").read()
    header = np.frombuffer(raw[:1024], dtype="<i4")
    values = raw[1024:]
    if header[1] == 3:
        flat = np.frombuffer(values, dtype="<f4")
    else:
        flat = (np.frombuffer(values, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return header, flat


def write_llmc(path, header, parts, V, Vp, C, rng):
    with open(path, "wb") as f:
        f.write(np.asarray(header, dtype="<i4").tobytes())
        for name, flat in parts:
            f.write(flat.astype("<f4").tobytes())
            if name == "wte":  # llm.c's padding: garbage here, which a reader must drop
                f.write(rng.standard_normal((Vp - V) * C).astype("<f4").tobytes())


def check_export(path, model, cfg, bf16, failures):
    header, flat = read_llmc(path)
    V, C, L = cfg["vocab_size"], cfg["d_model"], cfg["n_layers"]
    Vp = (V + 127) // 128 * 128
    want = [20240326, 5 if bf16 else 3, cfg["context_length"], V, L, cfg["n_heads"], C, Vp]
    if list(header[:8]) != want or any(header[8:]):
        failures.append(f"{path}: header {list(header[:8])}, wanted {want} then zeros")
        return
    at = 0
    for name, expected in llmc_parts(model, L):
        n = expected.size
        got = flat[at:at + n]
        exp = bf16_round(expected) if bf16 else expected
        if got.size != n or not np.array_equal(got.view(np.uint32), exp.view(np.uint32)):
            failures.append(f"{path}: tensor {name} differs from the checkpoint")
        at += n
        if name == "wte":
            if np.any(flat[at:at + (Vp - V) * C] != 0):
                failures.append(f"{path}: the padding rows of wte are not zeros")
            at += (Vp - V) * C
    if at != flat.size:
        failures.append(f"{path}: {flat.size} values after the header, llm.c's layout has {at}")


def byte_chars():
    """GPT-2's bytes_to_unicode: each byte's printable stand-in in vocab.json."""
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return chars


def write_tokenizer_folder(folder):
    """GPT-2's files for 256 byte tokens in byte order, no merges (bytes_to_unicode) and
    <|endoftext|> last, as the byte tokenizer the model trained with reserves it (257 ids)."""
    chars = byte_chars()
    os.makedirs(folder)
    vocab = {chars[b]: b for b in range(256)}
    vocab["<|endoftext|>"] = 256
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")


def check_tokenizer_export(binary, tmp, model, cfg, failures):
    """A GPT-2 tokenizer (bytes, three merges, <|endoftext|>) goes out beside an llm.c export
    as gpt2_tokenizer.bin, read back here as llm.c's llmc/tokenizer.h reads it."""
    chars = byte_chars()
    vocab = {chars[b]: i for i, b in enumerate(
        [b for b in range(256) if chars[b] == chr(b)] + [b for b in range(256) if chars[b] != chr(b)])}
    for merged in ("\u0120t", "he", "\u0120the"):
        vocab[merged] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    folder = os.path.join(tmp, "gpt2_tokenizer_files")
    os.makedirs(folder)
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n\u0120 t\nh e\n\u0120t he\n")
    V, C, L = len(vocab), cfg["d_model"], cfg["n_layers"]
    grown = dict(model)
    extra = np.random.default_rng(1).standard_normal((V - cfg["vocab_size"], C)).astype(np.float32)
    grown["tok_emb.weight"] = np.concatenate([model["tok_emb.weight"], extra])
    header = [20240326, 3, cfg["context_length"], V, L, cfg["n_heads"], C, V] + [0] * 248
    source = os.path.join(tmp, "gpt2_vocab.bin")
    write_llmc(source, header, llmc_parts(grown, L), V, V, C, np.random.default_rng(2))
    ckpt = os.path.join(tmp, "gpt2_vocab.h5")
    run(binary, ["import", source, "--out", ckpt, "--tokenizer", folder])
    out_dir = os.path.join(tmp, "llmc_out")
    os.makedirs(out_dir)
    run(binary, ["export", ckpt, "--format", "llmc", "--out", os.path.join(out_dir, "model.bin")])
    path = os.path.join(out_dir, "gpt2_tokenizer.bin")
    if not os.path.exists(path):
        failures.append("an llm.c export of a GPT-2-tokenized model wrote no gpt2_tokenizer.bin")
        return
    raw = open(path, "rb").read()
    head = np.frombuffer(raw[:1024], dtype="<i4")
    want = [20240328, 2, V, vocab["<|endoftext|>"]]
    if list(head[:4]) != want or any(head[4:]):
        failures.append(f"gpt2_tokenizer.bin header {list(head[:4])}, wanted {want} then zeros")
    unicode_to_byte = {c: b for b, c in chars.items()}
    expected = [None] * V
    for text, i in vocab.items():
        expected[i] = text.encode() if text == "<|endoftext|>" else bytes(
            unicode_to_byte[c] for c in text)
    at, tokens = 1024, []
    while at < len(raw):
        n = raw[at]
        tokens.append(raw[at + 1:at + 1 + n])
        at += 1 + n
    if tokens != expected:
        bad = next((i for i in range(min(len(tokens), V)) if tokens[i] != expected[i]), len(tokens))
        failures.append(f"gpt2_tokenizer.bin: {len(tokens)} tokens; token {bad} differs from "
                        f"vocab.json's (or the count, {V})")


def check_import(binary, tmp, model, cfg, failures):
    V, C, L = cfg["vocab_size"], cfg["d_model"], cfg["n_layers"]
    Vp = V + 3  # not llm.c's multiple of 128: the header says, the reader follows
    header = [20240326, 3, cfg["context_length"], V, L, cfg["n_heads"], C, Vp] + [0] * 248
    rng = np.random.default_rng(0)
    source = os.path.join(tmp, "written_here.bin")
    write_llmc(source, header, llmc_parts(model, L), V, Vp, C, rng)
    tokenizer = os.path.join(tmp, "tokenizer")
    write_tokenizer_folder(tokenizer)
    back = os.path.join(tmp, "imported.h5")
    run(binary, ["import", source, "--out", back, "--tokenizer", tokenizer])
    with h5py.File(back, "r") as f:
        imported = {k: f["model"][k][()] for k in f["model"].keys()}
        config = json.loads(f.attrs["config"])
    for key in ("vocab_size", "context_length", "d_model", "n_heads", "n_layers",
                "qkv_bias", "tie_weights"):
        if config[key] != cfg[key]:
            failures.append(f"imported config {key} = {config[key]}, the source's {cfg[key]}")
    if sorted(imported) != sorted(model):
        failures.append(f"imported tensors {sorted(imported)} != {sorted(model)}")
    for name, array in model.items():
        if name in imported and not np.array_equal(imported[name].view(np.uint32),
                                                   array.view(np.uint32)):
            failures.append(f"imported tensor {name} differs from the source")
    run(binary, ["sample", "--checkpoint", back, "--prompt", "Hi", "--tokens", "5"])
    # a header that lies: V above Vp
    lie = os.path.join(tmp, "lie.bin")
    header[7] = V - 1
    write_llmc(lie, header, llmc_parts(model, L), V, V, C, rng)
    out = os.path.join(tmp, "lie.h5")
    proc = run(binary, ["import", lie, "--out", out, "--tokenizer", tokenizer], expect=2)
    message = proc.stderr.strip()
    if lie not in message or "header[7]" not in message or "\n" in message:
        failures.append(f"the lying header's error is not one line naming file and field: {message!r}")
    if os.path.exists(out):
        failures.append("a refused import left its output file")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        with open(text, "w") as f:
            f.write("The quick brown fox jumps over the lazy dog. " * 40)
        ckpt = os.path.join(tmp, "run.h5")
        run(binary, TRAIN + ["--data", text, "--out", ckpt])
        with h5py.File(ckpt, "r") as f:
            model = {k: f["model"][k][()] for k in f["model"].keys()}
            cfg = json.loads(f.attrs["config"])
        for bf16 in (False, True):
            out = os.path.join(tmp, "bf16.bin" if bf16 else "f32.bin")
            run(binary, ["export", "--checkpoint", ckpt, "--format", "llmc", "--out", out]
                + (["--dtype", "bf16"] if bf16 else []))
            check_export(out, model, cfg, bf16, failures)
        check_import(binary, tmp, model, cfg, failures)
        check_tokenizer_export(binary, tmp, model, cfg, failures)
    for f in failures:
        print("MISMATCH:", f)
    if not failures:
        print("llm.c: float32 and bfloat16 exports match llm.c's layout bit for bit; "
              "an independently written file imports exactly; a lying header is refused; "
              "GPT-2's tokenizer goes out as the gpt2_tokenizer.bin llm.c reads")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
