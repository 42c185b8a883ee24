#!/usr/bin/env python3
"""reference.lora_adapters_llama_cpp and reference.lora_adapters_peft_vs_torch: a LoRA
fine-tune's adapters exported apart from their base and run by other implementations
(docs/finetuning.md, "Adapters out and in").

usage: lora_adapters_reference.py llama_cpp ATTOGRAD NPM_DIR
       lora_adapters_reference.py torch ATTOGRAD DRIVER

For a Llama-shaped model (RoPE, SwiGLU, RMSNorm, grouped heads: llama.cpp's llama
architecture, whose q/k rows it permutes) and a GPT-2-shaped one (q, k and v fused in
c_attn / attn_qkv), and for torch a Qwen3-shaped one too (q/k norms), each trained on the built-in corpus and then LoRA-trained from it
(`train --init-from --lora-rank 4`, all projections) until its adapter changes the greedy text
(llama_cpp; the torch check compares logits and tensors, which need no trained base):
  llama_cpp: `export --format gguf` of the base and `--format gguf-lora` of the adapter (and
    of the adapter exported as peft and imported back onto the base);
    llama.cpp (node-llama-cpp, the adapter loaded at scale 1) greedy-decodes the tokens
    `attograd sample --temperature 0` gives for the LoRA checkpoint, on every prompt, and the
    base alone decodes otherwise somewhere (the adapter is applied, not ignored);
  torch: `export --format hf` of the base and `--format peft` of the adapter; PyTorch's twins
    of transformers' models (hf_llama_reference.py, hf_gpt2_reference.py) load the base, and
    each adapter_model.safetensors tensor by its peft name wraps its module as peft does
    (y = base(x) + (lora_alpha / r) B(A(x)), rank_pattern and alpha_pattern where they name the
    module): the logits are attograd's (the driver's, on the LoRA checkpoint) to 1e-5 of the
    largest;
  both: `import` of each export onto the base gives the LoRA checkpoint's adapters bit for bit.
Exit 0 when all agree, 1 otherwise, 77 when node-llama-cpp (llama_cpp) or torch, numpy and
h5py (torch) are missing.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from llama_cpp_process import llama_cpp_greedy  # noqa: E402
COMMON = ["--tokenizer", "bpe", "--vocab-size", "320", "--context-length", "64", "--d-model", "48",
          "--n-heads", "4", "--n-layers", "2", "--d-ff", "96", "--batch-size", "8", "--dropout", "0",
          "--eval-interval", "0", "--sample-tokens", "0"]
MODELS = {
    "llama": ["--position", "rope", "--mlp", "swiglu", "--norm", "rmsnorm", "--linear-bias", "false",
              "--n-kv-heads", "2", "--tie-weights", "false"],
    "gpt2": [],
}
# PyTorch's twins hold Qwen3 too (q/k norms, a head_dim of its own): the torch check adds it
TORCH_ONLY = {
    "qwen3": ["--position", "rope", "--mlp", "swiglu", "--norm", "rmsnorm", "--linear-bias", "false",
              "--n-kv-heads", "2", "--qk-norm", "true", "--head-dim", "16", "--norm-eps", "1e-6"],
}
PROMPTS = ["The tokenizer don't", "café 42", "code"]
TOKENS = 24


def run(*args, stdin=None):
    p = subprocess.run(list(args), capture_output=True, text=True, input=stdin)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} ... exited {p.returncode}: "
                           f"{p.stdout[-800:]}{p.stderr[-800:]}")
    return p.stdout


def train(a, work, arch, base_steps):
    """The base (BASE_STEPS) and its LoRA fine-tune (20 steps at a high rate: the adapter matters)."""
    base, lora = os.path.join(work, arch + ".h5"), os.path.join(work, arch + "_lora.h5")
    run(a, "train", *COMMON, *{**MODELS, **TORCH_ONLY}[arch], "--steps", str(base_steps), "--lr",
        "0.01", "--out", base)
    run(a, "train", "--init-from", base, "--lora-rank", "4", "--lora-alpha", "8", "--steps", "20",
        "--lr", "0.02", "--batch-size", "8", "--eval-interval", "0", "--sample-tokens", "0",
        "--out", lora)
    return base, lora


def check_round_trip(a, work, arch, base, lora, exported, failures):
    """import of the export onto the base: the LoRA checkpoint's adapters, bit for bit."""
    import h5py
    import numpy as np
    back = os.path.join(work, arch + "_back.h5")
    run(a, "import", exported, "--base", base, "--out", back, "--overwrite")
    with h5py.File(lora) as x, h5py.File(back) as y:
        names = []
        x["model"].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        differ = [n for n in names if n not in y["model"] or
                  not np.array_equal(x["model"][n][()], y["model"][n][()])]
        adapters = sum("lora_" in n for n in names)
    if differ or adapters == 0:
        failures.append(f"{arch}: {exported} imported back differs at {differ[:3]} ({adapters} adapters)")
    else:
        print(f"{arch}: {os.path.basename(exported)} imported onto the base: {adapters} adapter "
              "tensors bit for bit")


def check_llama_cpp(a, work, llama_dir, arch, failures):
    # a base that writes text of its own, so that the adapter's change of it shows
    base, lora = train(a, work, arch, 150)
    gguf, adapter = os.path.join(work, arch + ".gguf"), os.path.join(work, arch + "_lora.gguf")
    run(a, "export", base, "--format", "gguf", "--out", gguf)
    run(a, "export", lora, "--format", "gguf-lora", "--out", adapter)
    # the adapter through peft's folder too: exported, imported onto the base, exported for llama.cpp
    peft, again = os.path.join(work, arch + "_peft"), os.path.join(work, arch + "_again.h5")
    via_peft = os.path.join(work, arch + "_via_peft.gguf")
    run(a, "export", lora, "--format", "peft", "--out", peft)
    run(a, "import", peft, "--base", base, "--out", again)
    run(a, "export", again, "--format", "gguf-lora", "--out", via_peft)
    prompts = [run(a, "encode", "--tokenizer", lora, stdin=prompt).split() for prompt in PROMPTS]
    with_adapter = llama_cpp_greedy(llama_dir, gguf, prompts, TOKENS, adapter)
    changed = with_adapter != llama_cpp_greedy(llama_dir, gguf, prompts, TOKENS, "")
    via_peft_adapter = llama_cpp_greedy(llama_dir, gguf, prompts, TOKENS, via_peft)
    for prompt, ids, got_direct, got_via_peft in zip(PROMPTS, prompts, with_adapter, via_peft_adapter):
        want = run(a, "sample", "--checkpoint", lora, "--prompt", prompt, "--temperature", "0",
                   "--tokens", str(TOKENS))
        for name, got in (("gguf-lora", got_direct), ("peft -> import -> gguf-lora", got_via_peft)):
            text = run(a, "decode", "--tokenizer", lora, stdin=" ".join(ids + [str(t) for t in got]))
            if text.rstrip("\n") != want.rstrip("\n"):
                failures.append(f"{arch}: after {prompt!r} llama.cpp with the {name} adapter gives "
                                f"{text!r}, attograd {want!r}")
            else:
                print(f"{arch}: after {prompt!r} llama.cpp with the {name} adapter decodes "
                      f"attograd's {TOKENS} greedy tokens: {want.strip()[:60]!r}")
    if not changed:
        failures.append(f"{arch}: llama.cpp decodes the same with and without the adapter")
    check_round_trip(a, work, arch, base, lora, adapter, failures)


# ------------------------------------------------------------------------------ peft in torch
def read_tensors(path):
    import hf_llama_reference as twin
    import numpy as np
    import torch
    out = {}
    for name, (dtype, shape, raw) in twin.read_safetensors_raw(path).items():
        assert dtype == "F32", f"{path}: {name} is {dtype}"
        out[name] = torch.from_numpy(np.frombuffer(raw, dtype=np.float32).astype(np.float64)).view(*shape)
    return out


def peft_value(pattern, module, fallback):
    """peft's pattern rule: a key naming the module, or its end after a dot."""
    for key, value in pattern.items():
        if re.match(rf"(.*\.)?({key})$", module):
            return value
    return fallback


def apply_peft_(model, folder):
    """Each adapter's module wrapped as peft's LoRA layer computes it."""
    import torch.nn as tnn
    cfg = json.load(open(os.path.join(folder, "adapter_config.json")))
    tensors = read_tensors(os.path.join(folder, "adapter_model.safetensors"))
    prefix = "base_model.model."
    modules = sorted({k[len(prefix):-len(".lora_A.weight")] for k in tensors if k.endswith(".lora_A.weight")})

    class Lora(tnn.Module):
        def __init__(self, base, A, B, scale):
            super().__init__()
            self.base, self.A, self.B, self.scale = base, A, B, scale

        def forward(self, x):
            return self.base(x) + (x @ self.A.T @ self.B.T) * self.scale

    for m in modules:
        r = peft_value(cfg["rank_pattern"], m, cfg["r"])
        alpha = peft_value(cfg["alpha_pattern"], m, cfg["lora_alpha"])
        A, B = tensors[f"{prefix}{m}.lora_A.weight"], tensors[f"{prefix}{m}.lora_B.weight"]
        assert A.shape[0] == r and B.shape[1] == r, f"{m}: rank {A.shape[0]}, config {r}"
        parent, _, leaf = m.rpartition(".")
        holder = model.get_submodule(parent)
        setattr(holder, leaf, Lora(getattr(holder, leaf), A, B, alpha / r))
    return len(modules)


def hf_twin(folder):
    """The exported base as the twin of transformers' model, in float64."""
    import hf_gpt2_reference as gpt2
    import hf_llama_reference as llama
    cfg = json.load(open(os.path.join(folder, "config.json")))
    if cfg["model_type"] == "gpt2":
        model = gpt2.GPT2LMHeadModel(dict(cfg, n_inner=cfg.get("n_inner"),
                                          tie_word_embeddings=cfg.get("tie_word_embeddings", True)))
    else:
        model = llama.ForCausalLM(cfg, cfg["model_type"])
    missing, unexpected = model.load_state_dict(read_tensors(os.path.join(folder, "model.safetensors")),
                                                strict=False)
    assert not unexpected and all(n == "lm_head.weight" for n in missing), (missing, unexpected)
    return model.double()


def check_torch(a, driver, work, arch, failures):
    import torch
    # the logits and the tensors are compared whatever the base has learnt: 20 steps (150 were
    # three quarters of this check's time, 200 of its 286 s under the sanitizers)
    base, lora = train(a, work, arch, 20)
    hf, peft = os.path.join(work, arch + "_hf"), os.path.join(work, arch + "_peft")
    run(a, "export", base, "--format", "hf", "--out", hf)
    run(a, "export", lora, "--format", "peft", "--out", peft)
    model = hf_twin(hf)
    n = apply_peft_(model, peft)
    ids = [int(t) for t in run(a, "encode", "--tokenizer", lora, stdin=PROMPTS[0] + " and more").split()]
    out = os.path.join(work, arch + "_logits.safetensors")
    run(driver, lora, out, "0", *map(str, ids))
    ours = read_tensors(out)["logits"]
    with torch.no_grad():
        theirs = model(torch.tensor([ids[:-1]]))[0][0]
    err, scale = (ours - theirs).abs().max().item(), theirs.abs().max().item()
    if not err <= 1e-5 * scale:
        failures.append(f"{arch}: peft's LoRA in torch gives logits {err:.3g} from attograd's "
                        f"(largest {scale:.3g})")
    else:
        print(f"{arch}: peft's {n} adapters on the hf export in torch give attograd's logits to "
              f"{err / scale:.2g} of the largest")
    check_round_trip(a, work, arch, base, lora, peft, failures)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("llama_cpp", "torch"):
        print(__doc__)
        return 2
    mode, a = sys.argv[1], sys.argv[2]
    sys.path.insert(0, HERE)
    try:
        import h5py  # noqa: F401
        import numpy  # noqa: F401
        if mode == "torch":
            import torch
            torch.set_num_threads(1)
    except ImportError as e:
        print(f"skipped: {e}")
        return 77
    llama_dir = os.path.join(sys.argv[3], "llama-cpp")
    if mode == "llama_cpp" and (shutil.which("node") is None or not os.path.isdir(
            os.path.join(llama_dir, "node_modules", "node-llama-cpp"))):
        print("skipped: node or node-llama-cpp missing (tools/npm_fixtures.sh)")
        return 77
    failures = []
    with tempfile.TemporaryDirectory(prefix="attograd_lora_adapters_") as work:
        for arch in list(MODELS) + (list(TORCH_ONLY) if mode == "torch" else []):
            try:
                if mode == "llama_cpp":
                    check_llama_cpp(a, work, llama_dir, arch, failures)
                else:
                    check_torch(a, sys.argv[3], work, arch, failures)
            except (RuntimeError, AssertionError) as e:
                failures.append(f"{arch}: {e}")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
