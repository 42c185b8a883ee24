"""The GPT of docs/model.md in PyTorch, written from that page alone (not from
nn/*.cpp): the independent implementation that attograd's model, training and speed are
held against (tests/reference/gpt_reference.py, tests/reference/train_reference.py,
bench/torch_reference.py).

cfg is a dict with docs/model.md's config keys: vocab_size, context_length, d_model, n_heads,
n_layers, d_ff (0: 4 * d_model), qkv_bias, tie_weights, and optionally dropout (default 0)
and norm ("layernorm", the default, or "rmsnorm"), and the Llama family's keys (defaults
GPT-2's): norm_eps, linear_bias, n_kv_heads, head_dim, qk_norm, mlp ("gelu" or "swiglu"),
position ("learned" or "rope"), rope_theta, rope_scaling ("none" or "llama3"),
rope_factor, rope_low_freq_factor, rope_high_freq_factor, rope_original_context.
state_dict() names and shapes are exactly docs/model.md's, so attograd's checkpoints load by
name with load_state_dict(strict=True).
"""
import math

import torch
import torch.nn as tnn
import torch.nn.functional as F


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def rope_inverse_frequencies(cfg, head_dim):
    """theta^(-2i/D) in float32 as transformers computes them; Llama 3's scaling: wavelengths
    over original_context / low_freq_factor divided by factor, under original_context /
    high_freq_factor kept, blended between."""
    theta = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    if cfg.get("rope_scaling", "none") == "llama3":
        factor, low = cfg.get("rope_factor", 8.0), cfg.get("rope_low_freq_factor", 1.0)
        high, old = cfg.get("rope_high_freq_factor", 4.0), cfg.get("rope_original_context", 8192)
        wavelength = 2 * math.pi / inv
        smooth = (old / wavelength - low) / (high - low)
        blended = (1 - smooth) * inv / factor + smooth * inv
        inv = torch.where(wavelength < old / high, inv,
                          torch.where(wavelength > old / low, inv / factor, blended))
    return inv.float()


def rotate(x, cos, sin):
    """rotate-half RoPE of x [B, H, T, D] by cos, sin [T, D/2]."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)


class MultiHeadAttention(tnn.Module):
    def __init__(self, cfg):
        super().__init__()
        d_model, n_heads = cfg["d_model"], cfg["n_heads"]
        self.n_heads = n_heads
        self.n_kv = cfg.get("n_kv_heads", 0) or n_heads
        self.head_dim = cfg.get("head_dim", 0) or d_model // n_heads
        Q, K = n_heads * self.head_dim, self.n_kv * self.head_dim
        qkv_bias = bool(cfg["qkv_bias"])
        self.W_query = tnn.Linear(d_model, Q, bias=qkv_bias)
        self.W_key = tnn.Linear(d_model, K, bias=qkv_bias)
        self.W_value = tnn.Linear(d_model, K, bias=qkv_bias)
        self.out_proj = tnn.Linear(Q, d_model, bias=cfg.get("linear_bias", True))
        if cfg.get("qk_norm", False):
            self.q_norm = RMSNorm(self.head_dim, cfg.get("norm_eps", 1e-5))
            self.k_norm = RMSNorm(self.head_dim, cfg.get("norm_eps", 1e-5))
        else:
            self.q_norm = self.k_norm = None
        self.dropout = tnn.Dropout(cfg.get("dropout", 0.0))
        T = cfg["context_length"]
        # Buffers that are not persistent, so the state_dict holds exactly docs/model.md's names.
        self.register_buffer(
            "mask", torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1), persistent=False)
        self.rope = cfg.get("position", "learned") == "rope"
        if self.rope:
            angles = torch.arange(T, dtype=torch.float32)[:, None] * \
                rope_inverse_frequencies(cfg, self.head_dim)[None, :]
            self.register_buffer("cos", angles.cos(), persistent=False)
            self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, a):
        B, T, _ = a.shape
        H, D, G = self.n_heads, self.head_dim, self.n_heads // self.n_kv

        def heads(x, n):  # [B, T, n D] -> [B, n, T, D]
            return x.view(B, T, n, D).transpose(1, 2)

        q, k = heads(self.W_query(a), H), heads(self.W_key(a), self.n_kv)
        v = heads(self.W_value(a), self.n_kv)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope:
            q, k = rotate(q, self.cos[:T], self.sin[:T]), rotate(k, self.cos[:T], self.sin[:T])
        k, v = k.repeat_interleave(G, 1), v.repeat_interleave(G, 1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        w = self.dropout(torch.softmax(scores, dim=-1))
        ctx = (w @ v).transpose(1, 2).reshape(B, T, H * D)
        return self.out_proj(ctx)


class RMSNorm(tnn.Module):
    """x / sqrt(mean(x^2) + eps) * weight (torch 1.13 has no nn.RMSNorm)."""

    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = tnn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(cfg, dim):
    eps = cfg.get("norm_eps", 1e-5)
    if cfg.get("norm", "layernorm") == "rmsnorm":
        return RMSNorm(dim, eps)
    return tnn.LayerNorm(dim, eps=eps)


class MLP(tnn.Module):
    def __init__(self, d_model, d_ff, bias=True):
        super().__init__()
        self.fc1 = tnn.Linear(d_model, d_ff, bias=bias)
        self.fc2 = tnn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        return self.fc2(gelu_tanh(self.fc1(x)))


class SwiGLU(tnn.Module):
    def __init__(self, d_model, d_ff, bias=False):
        super().__init__()
        self.gate_proj = tnn.Linear(d_model, d_ff, bias=bias)
        self.up_proj = tnn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = tnn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(tnn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, p = cfg["d_model"], cfg.get("dropout", 0.0)
        self.ln1 = make_norm(cfg, C)
        self.attn = MultiHeadAttention(cfg)
        self.ln2 = make_norm(cfg, C)
        mlp = SwiGLU if cfg.get("mlp", "gelu") == "swiglu" else MLP
        self.mlp = mlp(C, cfg["d_ff"] or 4 * C, cfg.get("linear_bias", True))
        self.dropout = tnn.Dropout(p)

    def forward(self, h):
        h = h + self.dropout(self.attn(self.ln1(h)))
        return h + self.dropout(self.mlp(self.ln2(h)))


class GPT(tnn.Module):
    def __init__(self, cfg):
        super().__init__()
        V, C = cfg["vocab_size"], cfg["d_model"]
        self.tok_emb = tnn.Embedding(V, C)
        learned = cfg.get("position", "learned") == "learned"
        self.pos_emb = tnn.Embedding(cfg["context_length"], C) if learned else None
        self.drop_emb = tnn.Dropout(cfg.get("dropout", 0.0))
        self.blocks = tnn.ModuleList(Block(cfg) for _ in range(cfg["n_layers"]))
        self.ln_f = make_norm(cfg, C)
        # Tied: no lm_head parameter at all; the head reads tok_emb.weight.
        self.lm_head = None if cfg["tie_weights"] else tnn.Linear(C, V, bias=False)

    def forward(self, ids, targets=None):
        T = ids.shape[1]
        h = self.tok_emb.weight[ids]
        if self.pos_emb is not None:
            h = h + self.pos_emb.weight[:T]
        h = self.drop_emb(h)
        for block in self.blocks:
            h = block(h)
        h = self.ln_f(h)
        head = self.tok_emb.weight if self.lm_head is None else self.lm_head.weight
        logits = h @ head.T
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


def load_checkpoint(path):
    """A GPT-2-shaped attograd checkpoint's weights in this model, float64, in eval mode
    (needs h5py)."""
    import json

    import h5py
    with h5py.File(path, "r") as f:
        config = json.loads(f.attrs["config"])
        state = {k: torch.from_numpy(f["model"][k][()]).double() for k in f["model"].keys()}
    cfg = {k: config[k] for k in ("vocab_size", "context_length", "d_model", "n_heads",
                                  "n_layers", "d_ff", "qkv_bias", "tie_weights")}
    model = GPT(cfg).double()
    model.load_state_dict(state, strict=True)
    return model.eval()


def init_spec_(model, n_layers):
    """docs/model.md's GPT-2 initialisation: Linear and embedding weights N(0, 0.02), out_proj
    and fc2 weights N(0, 0.02 / sqrt(2 n_layers)), biases 0, LayerNorm weight 1, bias 0."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln" in name or name.startswith("ln_f") or "_norm." in name:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                p.zero_()
            elif name.endswith(("out_proj.weight", "fc2.weight", "down_proj.weight")):
                p.normal_(0.0, 0.02 / math.sqrt(2 * n_layers))
            else:
                p.normal_(0.0, 0.02)


def adamw_for_spec(model, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1):
    """docs/model.md's optimiser: AdamW, decay on every parameter of two or more dims only."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    plain = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": plain, "weight_decay": 0.0}],
                             lr=lr, betas=betas, eps=eps)


def warmup_cosine(step, lr, min_lr, warmup, total):
    """lr * step / warmup up to warmup, then cosine from lr to min_lr at total (step from 1)."""
    if warmup > 0 and step <= warmup:
        return lr * step / warmup
    if step >= total:
        return lr if total <= warmup else min_lr
    progress = (step - warmup) / (total - warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))
