#!/usr/bin/env python3
"""reference.gguf_keep_blocks and reference.gguf_qlora_llama_cpp: a quantized GGUF imported
keeping its blocks (`import --keep-blocks`), a LoRA fine-tune over them, and the adapter run
by llama.cpp over the very file (docs/quantization.md, "A worked QLoRA example").

usage: gguf_blocks_reference.py blocks ATTOGRAD
       gguf_blocks_reference.py llama_cpp ATTOGRAD NPM_DIR

For a Llama-shaped model (llama.cpp's llama architecture: attn_q and attn_k rows permuted per
head) and a GPT-2-shaped one (q, k and v stacked in attn_qkv), each trained briefly in float32:
  blocks: two quantized files of it: attograd's `export --dtype q4_k` (Q4_K, the head Q6_K),
    and a mix made here, apart from attograd, as llama-quantize's Q4_K_M raises tensors (this
    script's own GGUF reader and writer, the numpy twin's quantizers of quant_reference.py):
    attn_v and ffn_down Q6_K, attn_output Q5_0, one ffn_up (GPT-2: the first) Q5_K, the token
    embedding F16. Each imported with --keep-blocks and without:
      - every block tensor of the GGUF is, in the checkpoint, a dataset of its format whose
        bytes are the GGUF's bytes, row for row (llama's attn_q/attn_k rows put back in
        attograd's order, attn_qkv cut into its three), read by h5py;
      - F16/F32 tensors are float datasets (nothing quantized anew);
      - the numpy twin's dequantization of each dataset equals, bit for bit, the float32
        weights of the plain import;
      - `eval` of the two checkpoints prints the same loss;
      - `train --init-from KEPT --lora-rank 4` (3 steps) records base_precision own and saves
        its base as the same bytes (the file's blocks, held as they are).
  llama_cpp: the mix of the Llama-shaped model, imported keeping blocks, LoRA-trained 20
    steps (the adapter changes the greedy text), `export --format gguf-lora`: llama.cpp
    (node-llama-cpp) loads the mixed GGUF itself with the adapter at scale 1 and greedy-
    decodes `attograd sample --temperature 0`'s tokens of the LoRA checkpoint for at least
    AGREE (8) tokens on each prompt (llama.cpp rounds the activations to 8 bits against
    quantized weights; attograd multiplies them in float32: a greedy text may part where two
    logits are within that rounding, docs/quantization.md "Checked by llama.cpp"), or parts
    sooner only where llama.cpp's token is, by attograd's own log-probabilities (`attograd
    serve`'s logprobs on the same greedy path), within TIE (0.02) nats of attograd's pick;
    and the base alone decodes otherwise somewhere (the adapter is applied).
Exit 0 when all agree, 1 otherwise, 77 without numpy and h5py, or (llama_cpp) node-llama-cpp.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from serve_process import start_serve  # noqa: E402
from llama_cpp_process import llama_cpp_greedy  # noqa: E402

COMMON = ["--tokenizer", "bpe", "--vocab-size", "320", "--context-length", "64", "--d-model", "256",
          "--n-heads", "4", "--n-layers", "2", "--batch-size", "8", "--dropout", "0",
          "--eval-interval", "0", "--sample-tokens", "0", "--threads", "2"]
MODELS = {
    "llama": ["--position", "rope", "--mlp", "swiglu", "--norm", "rmsnorm", "--linear-bias", "false",
              "--n-kv-heads", "2", "--tie-weights", "false", "--d-ff", "512"],
    "gpt2": ["--d-ff", "512"],
}
PROMPTS = ["The tokenizer don't", "café 42", "code"]
TOKENS = 24
AGREE = int(os.environ.get("AGREE", "8"))
TIE = 0.02  # nats: a near-tie, within llama.cpp's 8-bit rounding of the activations
# ggml type ids (ggml.h) of the formats attograd's checkpoints name
GGML = {0: "f32", 1: "f16", 8: "q8_0", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 12: "q4_k",
        13: "q5_k", 14: "q6_k"}
TYPE_OF = {v: k for k, v in GGML.items()}


def run(*args, stdin=None):
    p = subprocess.run(list(args), capture_output=True, text=True, input=stdin)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} ... exited {p.returncode}: "
                           f"{p.stdout[-800:]}{p.stderr[-800:]}")
    return p.stdout


# ------------------------------------------------------------------ GGUF, read and written here
def _skip_value(buf, at, vtype):
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    if vtype == 8:  # string
        (n,) = struct.unpack_from("<Q", buf, at)
        return at + 8 + n
    if vtype == 9:  # array
        etype, count = struct.unpack_from("<IQ", buf, at)
        at += 12
        if etype in sizes:
            return at + sizes[etype] * count
        for _ in range(count):
            at = _skip_value(buf, at, etype)
        return at
    return at + sizes[vtype]


def read_gguf(path):
    """(the key section's bytes, the alignment, [(name, ne, type, bytes)]) of a GGUF v3 file."""
    buf = open(path, "rb").read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<IIQQ", buf, 0)
    assert magic == 0x46554747 and version == 3, path
    at, alignment = 24, 32
    for _ in range(n_kv):
        (n,) = struct.unpack_from("<Q", buf, at)
        key = buf[at + 8:at + 8 + n].decode()
        (vtype,) = struct.unpack_from("<I", buf, at + 8 + n)
        if key == "general.alignment":
            (alignment,) = struct.unpack_from("<I", buf, at + 12 + n)
        at = _skip_value(buf, at + 12 + n, vtype)
    keys = buf[24:at]
    infos = []
    for _ in range(n_tensors):
        (n,) = struct.unpack_from("<Q", buf, at)
        name = buf[at + 8:at + 8 + n].decode()
        at += 8 + n
        (dims,) = struct.unpack_from("<I", buf, at)
        ne = list(struct.unpack_from(f"<{dims}Q", buf, at + 4))
        ttype, offset = struct.unpack_from("<IQ", buf, at + 4 + 8 * dims)
        at += 4 + 8 * dims + 12
        infos.append((name, ne, ttype, offset))
    start = (at + alignment - 1) // alignment * alignment
    tensors = []
    for name, ne, ttype, offset in infos:
        tensors.append((name, ne, ttype, buf[start + offset:start + offset + tensor_bytes(ne, ttype)]))
    return keys, n_kv, alignment, tensors


def tensor_bytes(ne, ttype):
    from quant_reference import LAYOUTS
    n = 1
    for d in ne:
        n *= d
    fmt = GGML[ttype]
    if fmt in ("f32", "f16"):
        return n * (4 if fmt == "f32" else 2)
    weights, block = LAYOUTS[fmt]
    return n // weights * block


def write_gguf(path, keys, n_kv, alignment, tensors):
    out = bytearray(struct.pack("<IIQQ", 0x46554747, 3, len(tensors), n_kv)) + keys
    offset, offsets = 0, []
    for name, ne, ttype, data in tensors:
        offsets.append(offset)
        out += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(ne))
        out += struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", ttype, offset)
        offset = (offset + len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for (_, _, _, data), at in zip(tensors, offsets):
        out += data + b"\0" * (-len(data) % alignment)
    open(path, "wb").write(out)


def requantized(f32_tensors, name, fmt):
    """The F32 file's tensor as fmt's blocks (the numpy twin's reference quantizer), or F16."""
    import numpy as np
    from quant_reference import LAYOUTS, QUANTIZE
    _, ne, ttype, data = f32_tensors[name]
    assert GGML[ttype] == "f32", name
    x = np.frombuffer(data, dtype=np.float32)
    if fmt == "f16":
        return x.astype(np.float16).tobytes()
    return QUANTIZE[fmt](x.reshape(-1, LAYOUTS[fmt][0]))


def q4_k_m_like(arch, name):
    """The format this script's mix gives a tensor (None: as the Q4_K file has it)."""
    first_up = "blk.0.ffn_up.weight"
    if name.endswith("attn_v.weight") or name.endswith("ffn_down.weight"):
        return "q6_k"
    if name.endswith("attn_output.weight"):
        return "q5_0"
    if name == first_up:
        return "q5_k"
    if name == "token_embd.weight":
        return "f16"
    return None


def make_mix(arch, q4k, f32, out):
    keys, n_kv, alignment, tensors = read_gguf(q4k)
    floats = {t[0]: t for t in read_gguf(f32)[3]}
    mixed = []
    for name, ne, ttype, data in tensors:
        fmt = q4_k_m_like(arch, name)
        if fmt and name in floats and GGML.get(ttype) not in ("f32",):
            data, ttype = requantized(floats, name, fmt), TYPE_OF[fmt]
        mixed.append((name, ne, ttype, data))
    write_gguf(out, keys, n_kv, alignment, mixed)
    return {GGML[t[2]] for t in mixed}


# ------------------------------------------------------- GGUF tensors as attograd's datasets
def attograd_parts(arch, name, rows, heads):
    """[(attograd name, GGUF rows it holds, row order or None)] of a GGUF tensor."""
    import numpy as np
    if name == "token_embd.weight":
        return [("tok_emb.weight", slice(0, rows), None)]
    if name == "output.weight":
        return [("lm_head.weight", slice(0, rows), None)]
    if name == "position_embd.weight":
        return [("pos_emb.weight", slice(0, rows), None)]
    _, layer, what, kind = name.split(".")
    b = f"blocks.{layer}."
    if what == "attn_qkv":
        third = rows // 3
        return [(f"{b}attn.{m}.{kind}", slice(i * third, (i + 1) * third), None)
                for i, m in enumerate(("W_query", "W_key", "W_value"))]
    simple = {"attn_v": "attn.W_value", "attn_output": "attn.out_proj", "ffn_gate": "mlp.gate_proj",
              "ffn_up": "mlp.up_proj" if arch == "llama" else "mlp.fc1",
              "ffn_down": "mlp.down_proj" if arch == "llama" else "mlp.fc2"}
    if what in simple:
        return [(f"{b}{simple[what]}.{kind}", slice(0, rows), None)]
    if what in ("attn_q", "attn_k"):
        # GGUF row 2j + i of a head is attograd's row i * half + j (llama.cpp's permutation)
        h = heads[what]
        per, half = rows // h, rows // h // 2
        order = np.empty(rows, dtype=np.int64)
        for head in range(h):
            for j in range(half):
                for i in range(2):
                    order[head * per + i * half + j] = head * per + 2 * j + i
        return [(f"{b}attn.{'W_query' if what == 'attn_q' else 'W_key'}.{kind}", slice(0, rows), order)]
    return []


def check_import(a, work, arch, gguf, failures):
    import h5py
    import numpy as np
    from quant_reference import DEQUANTIZE, LAYOUTS
    tag = f"{arch} {os.path.basename(gguf)}"
    kept, floats = gguf[:-5] + "_kept.h5", gguf[:-5] + "_floats.h5"
    run(a, "import", gguf, "--keep-blocks", "--out", kept, "--overwrite")
    run(a, "import", gguf, "--out", floats, "--overwrite")
    heads = {"attn_q": 4, "attn_k": 2 if arch == "llama" else 4}
    counts = {}
    with h5py.File(kept) as k, h5py.File(floats) as f:
        for name, ne, ttype, data in read_gguf(gguf)[3]:
            fmt = GGML[ttype]
            if len(ne) != 2:
                continue
            width, rows = ne
            for ours, rows_of, order in attograd_parts(arch, name, rows, heads):
                d = k["model"][ours]
                if fmt in ("f32", "f16"):
                    if "format" in d.attrs or d.dtype != np.float32:
                        failures.append(f"{tag}: {name} ({fmt}) kept as {d.dtype} {dict(d.attrs)}")
                    continue
                counts[fmt] = counts.get(fmt, 0) + 1
                got = d.attrs.get("format")
                got = got.decode() if isinstance(got, bytes) else got
                weights, block = LAYOUTS[fmt]
                want = np.frombuffer(data, dtype=np.uint8).reshape(rows, width // weights * block)[rows_of]
                if order is not None:
                    want = want[order]
                raw = d[()]
                if got != fmt or raw.shape != want.shape or not np.array_equal(raw, want):
                    failures.append(f"{tag}: {ours} holds {got} {raw.shape}, not {name}'s {fmt} bytes")
                    continue
                values = DEQUANTIZE[fmt](raw.reshape(-1, block)).reshape(raw.shape[0], width)
                plain = f["model"][ours][()]
                if values.astype(np.float32).tobytes() != plain.tobytes():
                    failures.append(f"{tag}: {ours}'s blocks dequantized by numpy differ from the "
                                    "plain import's floats")
    print(f"{tag}: blocks kept byte for byte: {counts}")
    text = os.path.join(work, "eval.txt")
    with open(text, "w") as t:
        t.write(__doc__ * 4)
    eval_kept = run(a, "eval", "--checkpoint", kept, "--data", text, "--threads", "1")
    eval_floats = run(a, "eval", "--checkpoint", floats, "--data", text, "--threads", "1")
    if eval_kept != eval_floats or "loss" not in eval_kept:
        failures.append(f"{tag}: eval of the kept blocks {eval_kept!r} against {eval_floats!r}")
    else:
        print(f"{tag}: eval equal: {eval_kept.strip().splitlines()[-1]}")
    return kept, counts


def check_lora_keeps(a, kept, tag, failures, steps="3", lr="0.01"):
    import h5py
    import numpy as np
    lora = kept[:-3] + "_lora.h5"
    run(a, "train", "--init-from", kept, "--lora-rank", "4", "--lora-alpha", "8", "--steps", steps,
        "--lr", lr, "--batch-size", "8", "--eval-interval", "0", "--sample-tokens", "0",
        "--threads", "2", "--out", lora, "--overwrite")
    with h5py.File(kept) as k, h5py.File(lora) as l:
        config = json.loads(l.attrs["config"]) if "config" in l.attrs else {}
        same = [n for n, d in k["model"].items() if "format" in d.attrs and
                dict(d.attrs)["format"] == dict(l["model"][n].attrs).get("format") and
                np.array_equal(d[()], l["model"][n][()])]
        held = [n for n, d in k["model"].items() if "format" in d.attrs]
    if len(same) != len(held) or not held:
        failures.append(f"{tag}: the LoRA run's base holds {len(same)} of {len(held)} block tensors as "
                        "the file's bytes")
    elif config and config.get("base_precision") != "own":
        failures.append(f"{tag}: the LoRA run recorded base_precision {config.get('base_precision')}")
    else:
        print(f"{tag}: a LoRA run over the kept blocks saves its {len(held)} block tensors unchanged")
    return lora


def base_model(a, work, arch, steps):
    base, f32, q4k = (os.path.join(work, arch + s) for s in (".h5", "_f32.gguf", "_q4_k.gguf"))
    run(a, "train", *COMMON, *MODELS[arch], "--steps", steps, "--lr", "0.01", "--out", base)
    run(a, "export", base, "--format", "gguf", "--out", f32)
    run(a, "export", base, "--format", "gguf", "--dtype", "q4_k", "--out", q4k)
    mix = os.path.join(work, arch + "_mix.gguf")
    made = make_mix(arch, q4k, f32, mix)
    print(f"{arch}: the mix holds {sorted(made)}")
    return q4k, mix


def check_blocks(a, work, arch, failures):
    q4k, mix = base_model(a, work, arch, "40")
    for gguf in (q4k, mix):
        kept, counts = check_import(a, work, arch, gguf, failures)
        check_lora_keeps(a, kept, f"{arch} {os.path.basename(gguf)}", failures)
    if "q6_k" not in counts or "q5_0" not in counts or "q5_k" not in counts:
        failures.append(f"{arch}: the mix kept {counts}, not Q6_K, Q5_0 and Q5_K")


# ------------------------------------------------------------------------------ llama.cpp
def top_logprobs(a, checkpoint, prompt, tokens):
    """attograd's top-5 log-probabilities at each of its first `tokens` greedy tokens after
    prompt (serve's completions, whose greedy text is sample's), as {token text: nats}."""
    proc, port = start_serve(a, checkpoint)
    try:
        body = json.dumps({"prompt": prompt, "max_tokens": tokens, "temperature": 0,
                           "logprobs": 5}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.load(answer)["choices"][0]["logprobs"]["top_logprobs"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def near_tie(a, lora, prompt, same, theirs):
    """How far (nats) below attograd's pick llama.cpp's token `theirs` is where the greedy
    texts part (after `same` agreeing tokens); None when it is not among attograd's top 5."""
    top = top_logprobs(a, lora, prompt, same + 1)[same]
    text = run(a, "decode", "--tokenizer", lora, stdin=str(theirs))
    return max(top.values()) - top[text] if text in top else None


def check_llama_cpp(a, work, llama_dir, failures):
    arch = "llama"
    _, mix = base_model(a, work, arch, "150")
    kept = mix[:-5] + "_kept.h5"
    run(a, "import", mix, "--keep-blocks", "--out", kept)
    lora = check_lora_keeps(a, kept, "llama mix", failures, steps="20", lr="0.02")
    adapter = os.path.join(work, "mix_lora.gguf")
    run(a, "export", lora, "--format", "gguf-lora", "--out", adapter)
    prompts = [run(a, "encode", "--tokenizer", lora, stdin=prompt).split() for prompt in PROMPTS]
    with_adapter = llama_cpp_greedy(llama_dir, mix, prompts, TOKENS, adapter)
    changed = with_adapter != llama_cpp_greedy(llama_dir, mix, prompts, TOKENS, "")
    for prompt, ids, got in zip(PROMPTS, prompts, with_adapter):
        want = run(a, "sample", "--checkpoint", lora, "--prompt", prompt, "--temperature", "0",
                   "--tokens", str(TOKENS))
        same = 0  # how many of llama.cpp's tokens continue attograd's text
        for n in range(1, len(got) + 1):
            text = run(a, "decode", "--tokenizer", lora, stdin=" ".join(ids + [str(t) for t in got[:n]]))
            if not want.startswith(text.rstrip("\n")):
                break
            same = n
        gap = near_tie(a, lora, prompt, same, got[same]) if same < min(AGREE, len(got)) else None
        if gap is not None and gap <= TIE:
            print(f"after {prompt!r} llama.cpp with the adapter over the mixed GGUF decodes "
                  f"attograd's greedy tokens for {same} of {TOKENS}, then parts at a near-tie: "
                  f"its token {gap:.4f} nats below attograd's by attograd's log-probabilities")
        elif same < AGREE:
            failures.append(f"after {prompt!r} llama.cpp with the adapter over the mixed GGUF gives "
                            f"{got}, attograd {want!r}: {same} tokens agree (llama.cpp's next "
                            f"{'not in attograd top 5' if gap is None else f'{gap:.4f} nats below'})")
        else:
            print(f"after {prompt!r} llama.cpp with the adapter over the mixed GGUF decodes "
                  f"attograd's greedy tokens for {same} of {TOKENS}")
    if not changed:
        failures.append("llama.cpp decodes the same with and without the adapter")


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("blocks", "llama_cpp"):
        print(__doc__)
        return 2
    mode, a = sys.argv[1], sys.argv[2]
    sys.path.insert(0, HERE)
    try:
        import h5py  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e}")
        return 77
    llama_dir = os.path.join(sys.argv[3], "llama-cpp") if len(sys.argv) > 3 else ""
    if mode == "llama_cpp" and (shutil.which("node") is None or not os.path.isdir(
            os.path.join(llama_dir, "node_modules", "node-llama-cpp"))):
        print("skipped: node or node-llama-cpp missing (tools/npm_fixtures.sh)")
        return 77
    failures = []
    with tempfile.TemporaryDirectory(prefix="attograd_gguf_blocks_") as work:
        try:
            if mode == "llama_cpp":
                check_llama_cpp(a, work, llama_dir, failures)
            else:
                for arch in MODELS:
                    check_blocks(a, work, arch, failures)
        except (RuntimeError, AssertionError) as e:
            failures.append(str(e))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
