#!/usr/bin/env python3
"""`attograd sample`'s work in PyTorch, two ways, for bench/sample_compare.py:

  --mode cache  a key/value cache of its own: the window is prefilled once, then one
                position per token through every layer, attending to the cached keys and
                values (preallocated for the context); past the context the window moves
                --slide tokens at a time and the cache is rebuilt from it, exactly as
                attograd does (nn/generation.h), so both do the same arithmetic;
  --mode full   nanoGPT's generate(): the whole window (the last context_length tokens)
                through the model for every token.

The model is the reference GPT (tests/reference/spec_gpt.py): loaded from an attograd checkpoint
(h5py; a char tokenizer's prompt is encoded with its vocabulary), or at the given config
with the reference's initialisation (the speed does not depend on the weights). Under
torch.inference_mode, float32 or (--dtype bfloat16) the whole model in bfloat16, greedy
(the choice costs the same either way). Prints one JSON
line: tokens/s over the generated tokens (the prefill included), the prefill's time, peak
RSS, and the generated ids. The BLAS kernel is chosen by the environment
(OPENBLAS_CORETYPE, ATEN_CPU_CAPABILITY).

usage: torch_sample.py [--checkpoint run.h5 --prompt TEXT] [--vocab-size 65
                       --context-length 256 --d-model 256 --n-heads 8 --n-layers 6
                       --prompt-tokens 100] [--tokens 1000] [--mode cache|full] [--slide 0]
                       [--threads 1] [--dtype float32|bfloat16]
"""
import argparse
import json
import math
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import torch  # noqa: E402
from spec_gpt import GPT, init_spec_  # noqa: E402


class KVCache:
    """Keys and values of every layer for context_length positions, [L, B, H, T, D]."""

    def __init__(self, model, cfg, batch):
        T, C, H, L = cfg["context_length"], cfg["d_model"], cfg["n_heads"], cfg["n_layers"]
        dtype = model.tok_emb.weight.dtype
        self.k = torch.zeros(L, batch, H, T, C // H, dtype=dtype)
        self.v = torch.zeros(L, batch, H, T, C // H, dtype=dtype)
        self.model, self.length = model, 0

    def run(self, ids, start):
        """ids [B, n] at positions start..start+n-1; the last position's logits [B, V]."""
        m, (B, n) = self.model, ids.shape
        h = m.tok_emb.weight[ids] + m.pos_emb.weight[start:start + n]
        for layer, block in enumerate(m.blocks):
            h = h + self.attend(block.attn, block.ln1(h), layer, start)
            h = h + block.mlp(block.ln2(h))
        self.length = start + n
        h = m.ln_f(h[:, -1])
        return h @ (m.tok_emb.weight if m.lm_head is None else m.lm_head.weight).T

    def attend(self, attn, a, layer, start):
        B, n, C = a.shape
        H, D = attn.n_heads, attn.head_dim
        heads = lambda x: x.view(B, n, H, D).transpose(1, 2)  # noqa: E731
        q, k, v = heads(attn.W_query(a)), heads(attn.W_key(a)), heads(attn.W_value(a))
        end = start + n
        self.k[layer, :, :, start:end] = k
        self.v[layer, :, :, start:end] = v
        keys, values = self.k[layer, :, :, :end], self.v[layer, :, :, :end]
        scores = q @ keys.transpose(-2, -1) / math.sqrt(D)
        if n > 1:  # a prefill (from position 0): causal
            scores = scores.masked_fill(attn.mask[:n, :n], float("-inf"))
        ctx = torch.softmax(scores, dim=-1) @ values
        return attn.out_proj(ctx.transpose(1, 2).reshape(B, n, C))


def window_start(n, T, slide):
    return 0 if n <= T else (n - T + slide - 1) // slide * slide


def generate_cached(model, cfg, prompt, tokens, slide):
    T = cfg["context_length"]
    cache = KVCache(model, cfg, 1)
    text = list(prompt)
    s = window_start(len(text), T, slide)
    t0 = time.perf_counter()
    logits = cache.run(torch.tensor([text[s:]]), 0)
    prefill = time.perf_counter() - t0
    for k in range(tokens):
        text.append(int(logits[0].float().argmax()))
        if k + 1 == tokens:
            break
        moved = window_start(len(text), T, slide)
        if moved != s:
            s = moved
            logits = cache.run(torch.tensor([text[s:]]), 0)
        else:
            logits = cache.run(torch.tensor([[text[-1]]]), len(text) - 1 - s)
    return time.perf_counter() - t0, prefill, text[len(prompt):]


def generate_full(model, cfg, prompt, tokens):
    """nanoGPT's loop: crop to the last context_length tokens, forward, take the last."""
    T = cfg["context_length"]
    idx = torch.tensor([prompt])
    t0 = time.perf_counter()
    prefill = None
    for _ in range(tokens):
        logits, _ = model(idx[:, -T:])
        idx = torch.cat([idx, logits[:, -1].float().argmax(-1, keepdim=True)], dim=1)
        prefill = prefill or time.perf_counter() - t0
    return time.perf_counter() - t0, prefill, idx[0, len(prompt):].tolist()


def from_checkpoint(path, prompt):
    """The model of an attograd checkpoint, and the prompt's ids (char tokenizer)."""
    import h5py
    with h5py.File(path, "r") as f:
        config = json.loads(f.attrs["config"])
        state = {k: torch.from_numpy(f["model"][k][()]) for k in f["model"].keys()}
        vocab = f["tokenizer"]["vocab"][()].tolist() if "vocab" in f["tokenizer"] else None
    cfg = {k: config[k] for k in ("vocab_size", "context_length", "d_model", "n_heads",
                                  "n_layers", "d_ff", "qkv_bias", "tie_weights")}
    model = GPT(dict(cfg, dropout=0.0))
    model.load_state_dict(state, strict=True)
    if vocab is None:
        sys.exit("torch_sample.py: only a char tokenizer's prompt can be encoded here")
    ids = [vocab.index(ord(c)) for c in (prompt or "\n")]
    return model, cfg, ids


def main():
    ap = argparse.ArgumentParser()
    for key, default in (("vocab-size", 65), ("context-length", 256), ("d-model", 256),
                         ("n-heads", 8), ("n-layers", 6), ("prompt-tokens", 100),
                         ("tokens", 1000), ("slide", 0), ("threads", 1)):
        ap.add_argument("--" + key, type=int, default=default)
    ap.add_argument("--mode", default="cache", choices=["cache", "full"])
    ap.add_argument("--checkpoint")
    ap.add_argument("--prompt", default="")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                    help="the model's dtype: bfloat16 weights, activations and cache")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.checkpoint:
        model, cfg, prompt = from_checkpoint(a.checkpoint, a.prompt)
    else:
        cfg = dict(vocab_size=a.vocab_size, context_length=a.context_length, d_model=a.d_model,
                   n_heads=a.n_heads, n_layers=a.n_layers, d_ff=0, qkv_bias=False,
                   tie_weights=True, dropout=0.0)
        model = GPT(cfg)
        init_spec_(model, a.n_layers)
        prompt = torch.randint(0, a.vocab_size, (a.prompt_tokens,)).tolist()
    model.eval()
    model.to(getattr(torch, a.dtype))
    slide = a.slide or max(1, cfg["context_length"] // 2)
    with torch.inference_mode():
        if a.mode == "cache":
            seconds, prefill, ids = generate_cached(model, cfg, prompt, a.tokens, slide)
        else:
            seconds, prefill, ids = generate_full(model, cfg, prompt, a.tokens)
    print(json.dumps(dict(impl="torch", mode=a.mode, dtype=a.dtype, threads=a.threads,
                          tokens=a.tokens, ids=ids,
                          seconds=seconds, tokens_per_s=a.tokens / seconds,
                          prefill_ms=prefill * 1e3,
                          peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                          openblas_coretype=os.environ.get("OPENBLAS_CORETYPE", "auto"),
                          torch_version=torch.__version__)))


if __name__ == "__main__":
    main()
