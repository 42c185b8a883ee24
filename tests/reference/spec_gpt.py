"""The GPT of docs/model.md in PyTorch, written from that page alone (not from
nn/*.cpp): the independent implementation that attograd's model, training and speed are
held against (tests/reference/gpt_reference.py, tests/reference/train_reference.py,
bench/torch_reference.py).

cfg is a dict with docs/model.md's config keys: vocab_size, context_length, d_model, n_heads,
n_layers, d_ff (0: 4 * d_model), qkv_bias, tie_weights, and optionally dropout (default 0)
and norm ("layernorm", the default, or "rmsnorm").
state_dict() names and shapes are exactly docs/model.md's, so attograd's checkpoints load by
name with load_state_dict(strict=True).
"""
import math

import torch
import torch.nn as tnn
import torch.nn.functional as F


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class MultiHeadAttention(tnn.Module):
    def __init__(self, d_model, n_heads, context_length, qkv_bias, dropout):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.W_query = tnn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = tnn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_value = tnn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = tnn.Linear(d_model, d_model)
        self.dropout = tnn.Dropout(dropout)
        # A buffer that is not persistent, so the state_dict holds exactly docs/model.md's names.
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool),
                               diagonal=1), persistent=False)

    def forward(self, a):
        B, T, C = a.shape
        H, D = self.n_heads, self.head_dim

        def heads(x):  # [B, T, C] -> [B, H, T, D]
            return x.view(B, T, H, D).transpose(1, 2)

        q, k, v = heads(self.W_query(a)), heads(self.W_key(a)), heads(self.W_value(a))
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        w = self.dropout(torch.softmax(scores, dim=-1))
        ctx = (w @ v).transpose(1, 2).reshape(B, T, C)
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
    if cfg.get("norm", "layernorm") == "rmsnorm":
        return RMSNorm(dim)
    return tnn.LayerNorm(dim, eps=1e-5)


class MLP(tnn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.fc1 = tnn.Linear(d_model, d_ff)
        self.fc2 = tnn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.fc2(gelu_tanh(self.fc1(x)))


class Block(tnn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, p = cfg["d_model"], cfg.get("dropout", 0.0)
        self.ln1 = make_norm(cfg, C)
        self.attn = MultiHeadAttention(C, cfg["n_heads"], cfg["context_length"],
                                       bool(cfg["qkv_bias"]), p)
        self.ln2 = make_norm(cfg, C)
        self.mlp = MLP(C, cfg["d_ff"] or 4 * C)
        self.dropout = tnn.Dropout(p)

    def forward(self, h):
        h = h + self.dropout(self.attn(self.ln1(h)))
        return h + self.dropout(self.mlp(self.ln2(h)))


class GPT(tnn.Module):
    def __init__(self, cfg):
        super().__init__()
        V, C = cfg["vocab_size"], cfg["d_model"]
        self.tok_emb = tnn.Embedding(V, C)
        self.pos_emb = tnn.Embedding(cfg["context_length"], C)
        self.drop_emb = tnn.Dropout(cfg.get("dropout", 0.0))
        self.blocks = tnn.ModuleList(Block(cfg) for _ in range(cfg["n_layers"]))
        self.ln_f = make_norm(cfg, C)
        # Tied: no lm_head parameter at all; the head reads tok_emb.weight.
        self.lm_head = None if cfg["tie_weights"] else tnn.Linear(C, V, bias=False)

    def forward(self, ids, targets=None):
        T = ids.shape[1]
        h = self.drop_emb(self.tok_emb.weight[ids] + self.pos_emb.weight[:T])
        for block in self.blocks:
            h = block(h)
        h = self.ln_f(h)
        head = self.tok_emb.weight if self.lm_head is None else self.lm_head.weight
        logits = h @ head.T
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


def init_spec_(model, n_layers):
    """docs/model.md's GPT-2 initialisation: Linear and embedding weights N(0, 0.02), out_proj
    and fc2 weights N(0, 0.02 / sqrt(2 n_layers)), biases 0, LayerNorm weight 1, bias 0."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln" in name or name.startswith("ln_f"):
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                p.zero_()
            elif name.endswith("out_proj.weight") or name.endswith("fc2.weight"):
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
