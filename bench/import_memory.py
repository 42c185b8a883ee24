#!/usr/bin/env python3
"""Peak memory of `attograd import` on a GPT-2 124M-shaped Hugging Face folder (the
import must stay within 1.5x the safetensors file's size: docs/interop.md).

usage: import_memory.py ATTOGRAD [--dtype F32|BF16] [--keep DIR]

Writes config.json and model.safetensors of GPT-2 124M's shapes (vocab 50257, context 1024,
768 wide, 12 layers, with the mask buffers as transformers' older files hold them) with
random weights into a temporary folder (numpy only; nothing enters the repository), runs
`/usr/bin/time -v attograd import` on it and prints the peak resident set against the file's
size, twice: when the model has been read (the summary line import prints before it saves)
and for the whole command, whose checkpoint save (io::save_checkpoint) is measured apart.
Then `attograd export --format hf` of the checkpoint, against the model's float32 state.
Exit status 0 when the import peaks within 1.5x of the file, 1 otherwise.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

V, T, D, L = 50257, 1024, 768, 12


def tensors():
    yield "wte.weight", (V, D)
    yield "wpe.weight", (T, D)
    for i in range(L):
        h = f"h.{i}."
        yield h + "ln_1.weight", (D,)
        yield h + "ln_1.bias", (D,)
        yield h + "attn.bias", (1, 1, T, T)
        yield h + "attn.c_attn.weight", (D, 3 * D)
        yield h + "attn.c_attn.bias", (3 * D,)
        yield h + "attn.c_proj.weight", (D, D)
        yield h + "attn.c_proj.bias", (D,)
        yield h + "ln_2.weight", (D,)
        yield h + "ln_2.bias", (D,)
        yield h + "mlp.c_fc.weight", (D, 4 * D)
        yield h + "mlp.c_fc.bias", (4 * D,)
        yield h + "mlp.c_proj.weight", (4 * D, D)
        yield h + "mlp.c_proj.bias", (D,)
    yield "ln_f.weight", (D,)
    yield "ln_f.bias", (D,)


def write_model(folder, dtype):
    size = 2 if dtype == "BF16" else 4
    header, offset = {}, 0
    for name, shape in tensors():
        n = int(np.prod(shape)) * size
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    rng = np.random.default_rng(0)
    path = os.path.join(folder, "model.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape in tensors():
            a = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
            if dtype == "BF16":
                a = (a.view(np.uint32) >> 16).astype(np.uint16)
            f.write(a.tobytes())
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V,
                   "n_positions": T, "n_ctx": T, "n_embd": D, "n_layer": L, "n_head": 12}, f)
    return os.path.getsize(path)


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    attograd, dtype, keep = args[0], "F32", None
    if "--dtype" in args:
        dtype = args[args.index("--dtype") + 1]
    if "--keep" in args:
        keep = args[args.index("--keep") + 1]
    with tempfile.TemporaryDirectory(prefix="attograd_import_mem_") as tmp:
        folder = keep or tmp
        os.makedirs(folder, exist_ok=True)
        size = write_model(folder, dtype)
        out = os.path.join(tmp, "gpt2.h5")
        reading, whole, wall = run_import(attograd, folder, out)
        print(f"{dtype} safetensors {size / 1e6:.0f} MB, checkpoint {os.path.getsize(out) / 1e6:.0f} MB, "
              f"{wall} wall\n"
              f"  peak RSS when the model is read (before the save): {reading / 1e6:.0f} MB = "
              f"{reading / size:.2f}x the file\n"
              f"  peak RSS of the whole command (with the checkpoint save): {whole / 1e6:.0f} MB = "
              f"{whole / size:.2f}x the file")
        exported = os.path.join(tmp, "exported")
        proc = subprocess.run(["/usr/bin/time", "-v", attograd, "export", "--checkpoint", out,
                               "--format", "hf", "--out", exported], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"export failed:\n{proc.stderr}")
        peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1)) * 1024
        state = 4 * 124439808  # GPT-2 124M's parameters in float32
        print(f"  export --format hf of that checkpoint: peak RSS {peak / 1e6:.0f} MB = "
              f"{peak / state:.2f}x the model's float32 state ({state / 1e6:.0f} MB)")
        return 0 if reading <= 1.5 * size and whole <= 1.5 * size else 1


def run_import(attograd, folder, out):
    """Peak RSS when `import` prints its summary (the model read, the save not begun: stdout
    line-buffered through stdbuf) and of the whole command (/usr/bin/time -v)."""
    cmd = ["/usr/bin/time", "-v", "stdbuf", "-oL", attograd, "import", folder, "--out", out]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reading = 0
    for line in proc.stdout:
        if line.startswith("imported"):
            child = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
            for pid in child.stdout.split():
                with open(f"/proc/{pid}/status") as f:
                    reading = int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) * 1024
    err = proc.stderr.read()
    if proc.wait() != 0:
        sys.exit(f"import failed:\n{err}")
    whole = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1)) * 1024
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", err).group(1)
    return reading, whole, wall


if __name__ == "__main__":
    sys.exit(main())
