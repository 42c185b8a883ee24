#!/usr/bin/env python3
"""reference.hf_to_llama_cpp: a Hugging Face folder of each family, as a user downloads it,
through attograd and out to llama.cpp, held against three independent implementations.

usage: hf_to_llama_cpp.py ATTOGRAD NPM_DIR

For Llama 3 (grouped heads, Llama 3's RoPE scaling), Qwen2 (q/k/v biases, NFC) and SmolLM2
(a Llama with special tokens first in its vocabulary): random weights in the family's layout
(hf_llama_reference.py's twin of transformers' modeling code) beside the family's
tokenizer.json (hf_families.js: its real layout around GPT-2's vocabulary, special and added
tokens, the template's BOS). Then
  1. `attograd import` of the folder; `attograd encode` of a text with special tokens inside
     it gives Hugging Face tokenizers' ids (npm `tokenizers`), id for id;
  2. `attograd sample --temperature 0` gives the PyTorch twin's greedy tokens;
  3. `attograd export --format gguf`, loaded by llama.cpp (npm `node-llama-cpp`), gives the
     same greedy tokens, and `attograd import` of it encodes as before (NFC text: llama.cpp
     keeps no normalizer);
  4. a LoRA fine-tune on all-linear (`train --init-from`), `merge`, `export --format gguf`:
     llama.cpp's greedy tokens are the merged checkpoint's `sample`'s.
Exit 0 when all agree, 1 otherwise, 77 when torch, node or the npm packages are missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import torch
    import hf_llama_reference as twin
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

FAMILIES = {  # tokenizer layout: (transformers family, config overrides)
    "llama3": ("llama", {"num_key_value_heads": 2, "rope_scaling": twin.LLAMA3,
                         "rope_theta": 500000.0, "rms_norm_eps": 1e-5}),
    "qwen2": ("qwen2", {"num_key_value_heads": 2, "rope_theta": 1e6, "use_sliding_window": False}),
    "smollm2": ("llama", {"num_key_value_heads": 1, "rope_theta": 100000.0}),
}
TEXT = "Hello world! The café's 12345 <|im_start|> don't\n\n  spaces 漢字 🤖 Ⅻ e\u0301"
PROMPT, TOKENS = "The café", 12


def run(*args, stdin=None):
    # random weights' greedy tokens may end inside a UTF-8 character: bytes are kept exactly
    p = subprocess.run(list(args), capture_output=True, encoding="utf-8", errors="surrogateescape",
                       input=stdin)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} ... exited {p.returncode}: "
                           f"{p.stdout[-800:]}{p.stderr[-800:]}")
    return p.stdout


def llama_cpp_greedy(llama_dir, gguf, prompt_ids):
    out = run("node", os.path.join(HERE, "llama_cpp_decode.mjs"), llama_dir, gguf, str(TOKENS),
              "-", *map(str, prompt_ids))
    return json.loads(out)["generated"]


def check_family(a, work, modules, llama_dir, name, failures):
    family, overrides = FAMILIES[name]
    tok_json = os.path.join(work, "fam", name, "tokenizer.json")
    t = json.load(open(tok_json, encoding="utf-8"))
    vocab = max(list(t["model"]["vocab"].values()) + [x["id"] for x in t["added_tokens"]]) + 1
    model = twin.ForCausalLM(dict(twin.BASE, vocab_size=vocab, **overrides), family)
    twin.randomise_(model, torch.Generator().manual_seed(5))
    folder, ckpt = os.path.join(work, name), os.path.join(work, name + ".h5")
    os.mkdir(folder)
    twin.save_model(folder, model, "F32", set())
    shutil.copy(tok_json, folder)
    run(a, "import", folder, "--out", ckpt)
    text_file = os.path.join(work, "text.txt")
    with open(text_file, "w", encoding="utf-8") as f:
        f.write(TEXT)
    ours = run(a, "encode", "--tokenizer", ckpt, stdin=TEXT).split()
    ids_out, text_out = os.path.join(work, "hf_ids"), os.path.join(work, "hf_text")
    run("node", os.path.join(HERE, "hf_families.js"), "encode", modules, tok_json, text_file,
        ids_out, text_out)
    if ours != open(ids_out).read().split():
        failures.append(f"{name}: attograd encode {ours} is not tokenizers' {open(ids_out).read()}")
    prompt_ids = [int(x) for x in
                  run(a, "encode", "--tokenizer", ckpt, "--no-special-tokens", stdin=PROMPT).split()]
    with torch.no_grad():
        want = twin.greedy(model.float(), torch.tensor([prompt_ids]), TOKENS)
    sample = run(a, "sample", "--checkpoint", ckpt, "--prompt", PROMPT, "--temperature", "0",
                 "--tokens", str(TOKENS))
    decoded = run(a, "decode", "--tokenizer", ckpt, stdin=" ".join(map(str, prompt_ids + want)))
    if sample.rstrip("\n") != decoded.rstrip("\n"):
        failures.append(f"{name}: attograd sample [{sample!r}] is not torch's greedy [{decoded!r}]")
    gguf = os.path.join(work, name + ".gguf")
    run(a, "export", "--checkpoint", ckpt, "--format", "gguf", "--out", gguf)
    got = llama_cpp_greedy(llama_dir, gguf, prompt_ids)
    if got != want:
        failures.append(f"{name}: llama.cpp's greedy {got} is not torch's {want}")
    # the GGUF read back: the same ids for a text in NFC (llama.cpp normalizes nothing)
    back = os.path.join(work, name + "_back.h5")
    run(a, "import", gguf, "--out", back)
    nfc = unicodedata.normalize("NFC", TEXT)
    if run(a, "encode", "--tokenizer", back, stdin=nfc) != run(a, "encode", "--tokenizer", ckpt,
                                                                 stdin=nfc):
        failures.append(f"{name}: the GGUF's tokenizer read back encodes otherwise")
    # LoRA on every projection, merged, exported: llama.cpp continues as attograd does
    lora, merged = os.path.join(work, name + "_lora.h5"), os.path.join(work, name + "_merged.h5")
    run(a, "train", "--init-from", ckpt, "--data", text_file, "--val-fraction", "0.2",
        "--context-length", "16", "--lora-rank", "4", "--lora-targets", "all-linear",
        "--batch-size", "2", "--steps", "3", "--lr", "0.05", "--warmup-steps", "0",
        "--eval-interval", "0", "--sample-tokens", "0", "--out", lora)
    run(a, "merge", lora, "--out", merged)
    run(a, "export", "--checkpoint", merged, "--format", "gguf", "--out", gguf, "--overwrite")
    got = llama_cpp_greedy(llama_dir, gguf, prompt_ids)
    sample = run(a, "sample", "--checkpoint", merged, "--prompt", PROMPT, "--temperature", "0",
                 "--tokens", str(TOKENS))
    decoded = run(a, "decode", "--tokenizer", merged, stdin=" ".join(map(str, prompt_ids + got)))
    if sample.rstrip("\n") != decoded.rstrip("\n"):
        failures.append(f"{name}: after LoRA, llama.cpp [{decoded!r}] is not attograd [{sample!r}]")
    print(f"{name}: tokenizers' ids, torch's and llama.cpp's greedy tokens "
          f"{'' if not failures else 'NOT '}equal; LoRA merged and run by llama.cpp")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    a, npm_dir = sys.argv[1], sys.argv[2]
    modules = os.path.join(npm_dir, "node_modules")
    llama_dir = os.path.join(npm_dir, "llama-cpp")
    if shutil.which("node") is None or not os.path.isdir(os.path.join(modules, "tokenizers")) or \
            not os.path.isdir(os.path.join(llama_dir, "node_modules", "node-llama-cpp")):
        print("skipped: node, npm tokenizers or node-llama-cpp missing (tools/npm_fixtures.sh)")
        return 77
    torch.set_num_threads(1)
    failures = []
    with tempfile.TemporaryDirectory(prefix="attograd_hf_to_llama_cpp_") as work:
        run("node", os.path.join(HERE, "hf_families.js"), "make", modules, os.path.join(work, "fam"))
        for name in FAMILIES:
            try:
                check_family(a, work, modules, llama_dir, name, failures)
            except RuntimeError as e:
                failures.append(f"{name}: {e}")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
