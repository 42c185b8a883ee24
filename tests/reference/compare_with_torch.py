#!/usr/bin/env python3
"""Holds attograd's ops against PyTorch, an independent implementation, on random inputs.

usage: compare_with_torch.py PATH/TO/attograd_op_driver

Every case (an op, its inputs, its scalar arguments and random upstream gradients) goes
into one text file; the driver runs them all in one process, in float64 and in float32,
and writes back each output and the gradient of sum(output * upstream) with respect to
every float input (op_driver.cpp describes both files). Here the same is computed with
torch in float64, and:

  attograd float64 vs torch float64:     |got - want| <= ATOL64 + RTOL64 * |want|
  attograd float32 vs attograd float64:  |got - want| <= RTOL32 * |want| + ATOL32 * scale
                                         scale = max(1, largest |want| in that tensor)

Non-finite values (-inf from masked log_softmax) must match exactly; shapes must match.

Exit status: 0 when everything agrees, 1 on any mismatch or driver failure, 77 (ctest's
SKIP_RETURN_CODE) when torch or numpy cannot be imported.
"""
import os
import subprocess
import sys
import tempfile
import time

SKIP = 77
try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except Exception as e:  # not only ImportError: a half-installed torch raises others
    print(f"skipped: torch/numpy unavailable for {sys.executable}: {e!r}")
    sys.exit(SKIP)

SEED = 20240611
# float64: both sides compute the same formulas in double, so only rounding differs.
ATOL64, RTOL64 = 1e-10, 1e-9
# float32: rounding the inputs alone moves each element by ~6e-8 relative; cancellation
# (sub, sums, layer_norm's centering) turns that into error on the scale of the whole
# tensor rather than of the element, hence the scale term.
RTOL32, ATOL32 = 1e-5, 1e-5

rng = np.random.default_rng(SEED)


# ------------------------------------------------------------------ inputs

def normal(shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def positive(shape):  # log, sqrt, pow bases
    return rng.uniform(0.3, 3.0, shape)


def away_from_zero(shape, low=0.1):  # relu's kink, division
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(low, 2.0, shape)


def distinct(shape):
    """Values at least 0.2 apart, so max and argmax have no ties even in float32."""
    n = int(np.prod(shape, dtype=np.int64))
    return ((rng.permutation(n) - n / 2) * 0.3 + rng.uniform(0, 0.1, n)).reshape(shape)


def rand_shape(rank, low=1, high=5):
    return tuple(int(s) for s in rng.integers(low, high + 1, rank))


def inp(shape, values=normal, transposed=False, sliced=False):
    """A float input of logical shape `shape`. The op gets a non-contiguous view of a
    contiguous leaf (gradients are the leaf's): transposed, leaf.transpose(-1, -2);
    sliced, leaf.narrow(-1, 1, size), a leaf two wider so the view has an offset."""
    shape = tuple(shape)
    if transposed and len(shape) >= 2:
        return ("ft", values(shape[:-2] + (shape[-1], shape[-2])))
    if sliced and len(shape) >= 1:
        return ("fs", values(shape[:-1] + (shape[-1] + 2,)))
    return ("f", values(shape))


FLOAT_KINDS = ("f", "ft", "fs")


def ints(arr):
    return ("i", np.asarray(arr, dtype=np.int64))


def mask(arr):
    return ("b", np.asarray(arr, dtype=bool))


class Case:
    def __init__(self, inputs, iargs=(), fargs=()):
        self.op = None
        self.id = None
        self.inputs = inputs  # [(kind, ndarray | None)], kinds as in op_driver.cpp
        self.iargs = [int(v) for v in iargs]
        self.fargs = [float(v) for v in fargs]
        self.upstream = []
        self.want_outs = []
        self.want_grads = []

    def describe(self):
        shapes = []
        for kind, arr in self.inputs:
            if kind == "none":
                shapes.append("none")
            elif kind == "ft":
                shapes.append(f"{list(arr.shape)}.T")
            elif kind == "fs":
                shapes.append(f"{list(arr.shape)}[..., 1:-1]")
            else:
                shapes.append(f"{kind}{list(arr.shape)}")
        return f"inputs {' '.join(shapes)} iargs {self.iargs} fargs {self.fargs}"


# ------------------------------------------------------------------ case generators

def unary_shapes():
    return [(), (5,), (3, 4), (2, 3, 4), (2, 1, 3, 2), rand_shape(3), (3, 37)]


def unary(values=normal):
    def make():
        cases = [Case([inp(s, values)]) for s in unary_shapes()]
        cases.append(Case([inp((3, 5), values, transposed=True)]))
        cases.append(Case([inp((2, 3, 5), values, sliced=True)]))
        return cases
    return make


def with_scalar(choices, values=normal):
    def make():
        return [Case([inp(s, values, transposed=k == 3)], fargs=[choices[k % len(choices)]])
                for k, s in enumerate(unary_shapes())]
    return make


FIXED_BROADCASTS = [((2, 3, 4), (3, 1)), ((4,), (2, 1, 4)), ((), (2, 3)), ((3, 2), ()),
                    ((), ()), ((2, 1, 3), (1, 4, 1)), ((5,), (5,)), ((1,), (3, 1, 2)),
                    ((4, 33), (33,)), ((3, 1, 19), (5, 1))]


def broadcast_pairs(n_random):
    pairs = list(FIXED_BROADCASTS)
    for _ in range(n_random):
        a = rand_shape(rng.integers(0, 5))
        b = tuple(1 if rng.random() < 0.35 else s for s in a)[rng.integers(0, len(a) + 1):]
        pairs.append((a, b) if rng.random() < 0.5 else (b, a))
    return pairs


def binary(values_a=normal, values_b=normal):
    def make():
        cases = [Case([inp(a, values_a), inp(b, values_b)]) for a, b in broadcast_pairs(4)]
        cases.append(Case([inp((3, 4), values_a, transposed=True), inp((3, 4), values_b)]))
        cases.append(Case([inp((2, 3, 4), values_a), inp((3, 4), values_b, transposed=True)]))
        cases.append(Case([inp((3, 4), values_a, sliced=True), inp((2, 3, 4), values_b)]))
        cases.append(Case([inp((3, 1), values_a), inp((3, 5), values_b, sliced=True)]))
        return cases
    return make


def pow_scalar_cases():
    exponents = [(2.0, normal), (3.0, normal), (1.0, normal), (-2.0, away_from_zero),
                 (0.5, positive), (-1.5, positive), (1.7, positive), (0.0, positive)]
    shapes = unary_shapes()
    return [Case([inp(shapes[k % len(shapes)], values, transposed=k == 4)], fargs=[e])
            for k, (e, values) in enumerate(exponents)]


def reduce_cases():
    cases = []
    for shape in [(), (5,), (3, 4), (2, 3, 4), (2, 3, 1, 4)]:
        cases.append(Case([inp(shape)], iargs=[0]))  # no dims: every dim
        cases.append(Case([inp(shape)], iargs=[1]))
        if shape:
            rank = len(shape)
            dims = rng.choice(rank, rng.integers(1, rank + 1), replace=False)
            dims = [int(d) - rank if rng.random() < 0.3 else int(d) for d in dims]
            cases.append(Case([inp(shape)], iargs=[rng.integers(0, 2), *dims]))
    cases.append(Case([inp((3, 4), transposed=True)], iargs=[0, 1]))
    cases.append(Case([inp((2, 3, 4), transposed=True)], iargs=[1, 0, 2]))
    cases.append(Case([inp((2, 3, 4))], iargs=[1, 0, 1, 2]))  # every dim, named
    cases.append(Case([inp((2, 3, 4), sliced=True)], iargs=[0, -1]))
    cases.append(Case([inp((4, 3), sliced=True)], iargs=[1, 0]))
    cases.append(Case([inp((7, 45))], iargs=[0, 1]))
    return cases


def max_all_cases():
    return [Case([inp(s, distinct)]) for s in [(), (5,), (3, 4), (2, 3, 4), (1, 1)]] + \
        [Case([inp((4, 3), distinct, transposed=True)]),
         Case([inp((3, 4), distinct, sliced=True)])]


def max_dim_cases():
    cases = []
    for k, shape in enumerate([(5,), (3, 4), (3, 4), (2, 3, 4), (2, 3, 4), (2, 1, 3, 4),
                               (4, 1), rand_shape(3), (3, 4)]):
        dim = int(rng.integers(-len(shape), len(shape)))
        cases.append(Case([inp(shape, distinct, transposed=k == 2, sliced=k == 8)],
                          iargs=[dim, k % 2]))
    return cases


def sum_to_cases():
    pairs = [((2, 3, 4), (3, 1)), ((2, 3, 4), (4,)), ((2, 3, 4), (1, 3, 4)), ((2, 3, 4), ()),
             ((3, 4), (3, 4)), ((2, 3, 4), (2, 1, 1)), ((5, 1, 3), (1, 3)), ((4,), (1,))]
    return [Case([inp(s)], iargs=t) for s, t in pairs]


def matmul_cases():
    specs = [((4,), (4,)), ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)),
             ((2, 3, 4, 5), (5, 6)), ((2, 1, 3, 4), (5, 4, 2)), ((2, 3, 4), (4,)),
             ((4,), (2, 4, 3)), ((1, 4), (4, 1)), ((3, 1), (1, 5))]
    cases = [Case([inp(a), inp(b)]) for a, b in specs]
    transposed = [((3, 4), (4, 5), True, False), ((3, 4), (4, 5), False, True),
                  ((3, 4), (4, 5), True, True), ((2, 3, 4), (2, 4, 5), True, True),
                  ((2, 3, 4, 5), (5, 6), False, True), ((2, 1, 3, 4), (5, 4, 2), True, True),
                  ((4,), (4, 5), False, True), ((3, 4), (4,), True, False),
                  ((2, 33, 17), (17, 29), True, False), ((33, 17), (2, 17, 29), False, True)]
    cases += [Case([inp(a, transposed=ta), inp(b, transposed=tb)])
              for a, b, ta, tb in transposed]
    # row strides wider than the rows (BLAS leading dimensions) and nonzero offsets
    sliced = [((3, 4), (4, 5), True, False), ((3, 4), (4, 5), False, True),
              ((2, 3, 4), (4, 5), True, True), ((4,), (2, 4, 3), True, True)]
    cases += [Case([inp(a, sliced=sa), inp(b, sliced=sb)]) for a, b, sa, sb in sliced]
    for _ in range(4):
        m, k, n = rand_shape(3, 1, 7)
        batch = rand_shape(rng.integers(0, 3), 1, 3)
        b_batch = tuple(1 if rng.random() < 0.5 else s for s in batch)[rng.integers(0, 2):]
        cases.append(Case([inp(batch + (m, k), transposed=rng.random() < 0.5),
                           inp(b_batch + (k, n), transposed=rng.random() < 0.5)]))
    return cases


def transpose_cases():
    cases = []
    for k in range(8):
        shape = rand_shape(rng.integers(2, 5))
        rank = len(shape)
        d0, d1 = (int(d) - rank * int(rng.random() < 0.3) for d in rng.integers(0, rank, 2))
        cases.append(Case([inp(shape, transposed=k == 0)], iargs=[d0, d1]))
    return cases


def permute_cases():
    cases = []
    for k in range(7):
        shape = rand_shape(rng.integers(1, 5))
        cases.append(Case([inp(shape, transposed=k < 2)], iargs=rng.permutation(len(shape))))
    return cases


def random_target_shape(n, allow_infer=True):
    """A random shape with n elements, possibly with 1s and one -1."""
    factors = [p for p in (2, 3, 5, 7) for _ in range(20) if n % p ** (_ + 1) == 0]
    rng.shuffle(factors)
    dims = [1] * int(rng.integers(1, 4))
    for f in factors:
        dims[rng.integers(0, len(dims))] *= f
    if rng.random() < 0.3:
        dims.insert(int(rng.integers(0, len(dims) + 1)), 1)
    if allow_infer and rng.random() < 0.4:
        dims[rng.integers(0, len(dims))] = -1
    return dims


def reshape_cases(allow_transposed):
    def make():
        cases = []
        for k, shape in enumerate([(6,), (2, 6), (3, 4), (2, 3, 4), (2, 1, 6), (12,), (), (5, 2)]):
            transposed = allow_transposed and len(shape) >= 2 and k % 2 == 1
            n = int(np.prod(shape, dtype=np.int64))
            cases.append(Case([inp(shape, transposed=transposed)],
                              iargs=random_target_shape(n)))
        return cases
    return make


def narrow_cases():
    cases = []
    for k in range(8):
        shape = rand_shape(rng.integers(1, 5), 1, 6)
        dim = int(rng.integers(0, len(shape)))
        start = int(rng.integers(0, shape[dim]))
        length = int(rng.integers(1, shape[dim] - start + 1))
        cases.append(Case([inp(shape, transposed=k < 2, sliced=k == 2)],
                          iargs=[dim - len(shape) * (k % 3 == 0), start, length]))
    return cases


def select_cases():
    cases = []
    for k in range(6):
        shape = rand_shape(rng.integers(1, 5))
        dim = int(rng.integers(0, len(shape)))
        cases.append(Case([inp(shape, transposed=k < 2)],
                          iargs=[dim, int(rng.integers(0, shape[dim]))]))
    return cases


def expand_cases():
    specs = [((3, 1), (3, 4)), ((1,), (5,)), ((3, 1), (2, 3, 4)), ((), (2, 3)),
             ((2, 1, 4), (-1, 3, -1)), ((1, 1), (2, 2, 3)), ((4,), (3, 2, 4)),
             ((2, 3), (2, 3))]
    return [Case([inp(s)], iargs=t) for s, t in specs] + \
        [Case([inp((3, 1), transposed=True)], iargs=[2, 3, 4])]


def unsqueeze_cases():
    cases = []
    for k in range(6):
        shape = rand_shape(rng.integers(0, 4))
        cases.append(Case([inp(shape, transposed=k == 0)],
                          iargs=[int(rng.integers(-len(shape) - 1, len(shape) + 1))]))
    return cases


def squeeze_cases():
    specs = [((3, 1, 4), 1), ((3, 1, 4), -2), ((1,), 0), ((3, 4), 0), ((2, 3, 1), -1),
             ((1, 1), 1)]
    return [Case([inp(s)], iargs=[d]) for s, d in specs] + \
        [Case([inp((1, 4), transposed=True)], iargs=[1])]


def layout_cases():  # contiguous, clone
    return [Case([inp(s, transposed=k % 2 == 0, sliced=k % 2 == 1)])
            for k, s in enumerate([(3, 4), (2, 3, 4), (5,), (), (2, 3, 4, 2), (3, 4)])]


def cat_cases(same_shapes):
    def make():
        cases = []
        for k in range(8):
            rank = int(rng.integers(1, 5))
            base = list(rand_shape(rank, 1, 4))
            dim = int(rng.integers(0, rank + (1 if same_shapes else 0)))
            shapes = []
            for _ in range(int(rng.integers(1, 5))):
                s = list(base)
                if not same_shapes:
                    s[dim] = int(rng.integers(1, 4))
                shapes.append(s)
            dim_arg = dim - (rank + same_shapes) if k % 3 == 0 else dim
            cases.append(Case([inp(s, transposed=rng.random() < 0.25,
                                   sliced=rng.random() < 0.25) for s in shapes],
                              iargs=[dim_arg]))
        return cases
    return make


def split_cases(by_sizes):
    def make():
        cases = []
        for k in range(8):
            shape = rand_shape(rng.integers(1, 5), 1, 7)
            dim = int(rng.integers(0, len(shape)))
            n = shape[dim]
            dim_arg = dim - len(shape) if k % 3 == 0 else dim
            if by_sizes:
                cuts = sorted(rng.integers(0, n + 1, int(rng.integers(0, 3))))
                sizes = np.diff([0, *cuts, n])
                cases.append(Case([inp(shape, transposed=k < 2)], iargs=[dim_arg, *sizes]))
            else:
                cases.append(Case([inp(shape, transposed=k < 2)],
                                  iargs=[dim_arg, int(rng.integers(1, n + 1))]))
        return cases
    return make


def causal_mask(t):
    return np.triu(np.ones((t, t), dtype=bool), 1)


def masked_fill_cases():
    values = [0.0, -1e9, 2.5, -np.inf, np.inf]
    cases = []
    for k in range(7):
        shape = rand_shape(rng.integers(1, 5))
        mshape = tuple(1 if rng.random() < 0.4 else s for s in shape)
        mshape = mshape[rng.integers(0, len(mshape) + 1):]
        cases.append(Case([inp(shape, transposed=k == 0, sliced=k == 1),
                           mask(rng.random(mshape) < 0.4)],
                          fargs=[values[k % len(values)]]))
    cases.append(Case([inp((2, 2, 4, 4)), mask(causal_mask(4))], fargs=[-np.inf]))
    cases.append(Case([inp((3, 3)), mask(causal_mask(3))], fargs=[-1e4]))
    return cases


def softmax_cases():
    cases = []
    for k, shape in enumerate([(5,), (3, 4), (3, 4), (2, 3, 4), (2, 3, 4), (2, 3, 4),
                               (2, 2, 3, 5), (1, 6), (3, 70), (2, 4, 3)]):
        dim = [0, 1, -1][k % 3] if len(shape) > 1 else [0, -1][k % 2]
        cases.append(Case([inp(shape, lambda s: normal(s, 3.0), transposed=k == 2,
                               sliced=k >= 8)], iargs=[dim]))
    # logits near 100: exp overflows float32 unless the max is subtracted first; on a
    # 1/64 grid so that both dtypes see exactly the same inputs
    near_100 = lambda s: 100 + np.round(normal(s, 2.0) * 64) / 64
    cases.append(Case([inp((3, 5), near_100)], iargs=[-1]))
    cases.append(Case([inp((4, 3), near_100)], iargs=[0]))
    return cases


def masked_softmax_cases():
    cases = []
    for shape, dim in [((4, 4), -1), ((2, 2, 5, 5), -1), ((2, 3, 3), -2), ((1, 6, 6), -1)]:
        cases.append(Case([inp(shape, sliced=dim == -2), mask(causal_mask(shape[-1]))],
                          iargs=[dim]))
    # random masks over the whole shape, with one position per slice along dim left open
    for shape, dim in [((3, 5), -1), ((3, 5), 0), ((2, 4, 3), 1), ((2, 3, 4), -1)]:
        m = rng.random(shape) < 0.5
        keep_shape = list(shape)
        keep_shape[dim] = 1
        np.put_along_axis(m, rng.integers(0, shape[dim], keep_shape), False, axis=dim)
        cases.append(Case([inp(shape), mask(m)], iargs=[dim]))
    return cases


def cross_entropy_cases():
    cases = []
    for k, (shape, ignore) in enumerate([((4, 5), -100), ((6, 3), -100), ((1, 7), -100),
                                         ((2, 3, 4), -100), ((3, 4, 6), -1), ((5, 4), 0),
                                         ((2, 5, 3), 2), ((4, 5), -100), ((2, 3, 5), -100),
                                         ((16, 50), -100)]):
        classes = shape[-1]
        targets = rng.integers(0, classes, shape[:-1])
        targets[rng.random(targets.shape) < 0.25] = ignore
        if (targets == ignore).all():  # torch gives nan when every target is ignored
            targets.flat[0] = (ignore + 1) % classes
        cases.append(Case([inp(shape, lambda s: normal(s, 2.0), transposed=k == 7,
                               sliced=k == 8), ints(targets)], iargs=[ignore]))
    return cases


def embedding_cases():
    cases = []
    for k, (vocab, dim, ids_shape) in enumerate([(5, 3, (6,)), (4, 2, (2, 5)), (7, 4, ()),
                                                 (3, 1, (3, 4)), (8, 5, (2, 2, 3)),
                                                 (6, 3, (5,))]):
        ids = rng.integers(0, vocab, ids_shape)
        if ids.size >= 2:
            ids.flat[-1] = ids.flat[0]  # a repeated id: backward must add, not overwrite
        cases.append(Case([inp((vocab, dim), transposed=k == 5), ints(ids)]))
    return cases


def layer_norm_cases():
    cases = []
    for k, shape in enumerate([(5,), (3, 4), (2, 3, 6), (4, 8), (2, 2, 3), (3, 1), (6, 2),
                               (2, 5), (2, 3, 4), (3, 64)]):
        c = shape[-1]
        weight = inp((c,)) if k % 2 == 0 else ("none", None)
        bias = inp((c,)) if k % 4 < 2 else ("none", None)
        eps = 1e-5 if k < 6 else 1e-3
        cases.append(Case([inp(shape, lambda s: normal(s, 2.0) + 0.5, transposed=k == 7,
                               sliced=k == 8), weight, bias], fargs=[eps]))
    return cases


# ------------------------------------------------------------------ torch references
# fn(inputs as the op sees them, iargs, fargs) -> list of outputs

def t_sum(x, i, f, reduce):
    keepdim, dims = bool(i[0]), i[1:]
    if not dims:  # attograd: an empty dims list means every dim
        if x.dim() == 0:
            return [reduce(x)]
        return [reduce(x, dim=tuple(range(x.dim())), keepdim=keepdim)]
    return [reduce(x, dim=tuple(dims), keepdim=keepdim)]


def t_sum_to(x, shape):
    lead = x.dim() - len(shape)
    if lead:
        x = x.sum(dim=tuple(range(lead)))
    dims = tuple(d for d, s in enumerate(shape) if s == 1 and x.shape[d] != 1)
    return x.sum(dim=dims, keepdim=True) if dims else x


def t_cross_entropy(x, i, f):
    logits, targets = x
    return [F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                            ignore_index=i[0])]


OPS = [
    ("add", lambda x, i, f: [x[0] + x[1]], binary()),
    ("sub", lambda x, i, f: [x[0] - x[1]], binary()),
    ("mul", lambda x, i, f: [x[0] * x[1]], binary()),
    ("div", lambda x, i, f: [x[0] / x[1]], binary(normal, lambda s: away_from_zero(s, 0.5))),
    ("add_scalar", lambda x, i, f: [x[0] + f[0]], with_scalar([1.5, -0.25, 0.0, 3.0])),
    ("sub_scalar", lambda x, i, f: [x[0] - f[0]], with_scalar([1.5, -0.25, 0.0, 3.0])),
    ("mul_scalar", lambda x, i, f: [x[0] * f[0]], with_scalar([2.0, -0.5, 0.0, 1e3])),
    ("rmul_scalar", lambda x, i, f: [f[0] * x[0]], with_scalar([2.0, -0.5, 0.1])),
    ("div_scalar", lambda x, i, f: [x[0] / f[0]], with_scalar([2.0, -0.5, 3.0, 1e-2])),
    ("pow", lambda x, i, f: [torch.pow(x[0], x[1])], binary(positive, normal)),
    ("pow_scalar", lambda x, i, f: [torch.pow(x[0], f[0])], pow_scalar_cases),
    ("neg", lambda x, i, f: [-x[0]], unary()),
    ("exp", lambda x, i, f: [torch.exp(x[0])], unary()),
    ("log", lambda x, i, f: [torch.log(x[0])], unary(positive)),
    ("sqrt", lambda x, i, f: [torch.sqrt(x[0])], unary(positive)),
    ("tanh", lambda x, i, f: [torch.tanh(x[0])], unary(lambda s: normal(s, 2.0))),
    ("relu", lambda x, i, f: [torch.relu(x[0])], unary(away_from_zero)),
    ("gelu", lambda x, i, f: [F.gelu(x[0], approximate="tanh")],
     unary(lambda s: normal(s, 3.0))),
    ("sum", lambda x, i, f: t_sum(x[0], i, f, torch.sum), reduce_cases),
    ("mean", lambda x, i, f: t_sum(x[0], i, f, torch.mean), reduce_cases),
    ("max_all", lambda x, i, f: [x[0].max()], max_all_cases),
    ("max_dim", lambda x, i, f: [x[0].max(dim=i[0], keepdim=bool(i[1])).values],
     max_dim_cases),
    ("argmax", lambda x, i, f: [x[0].argmax(dim=i[0], keepdim=bool(i[1]))], max_dim_cases),
    ("sum_to", lambda x, i, f: [t_sum_to(x[0], i)], sum_to_cases),
    ("matmul", lambda x, i, f: [torch.matmul(x[0], x[1])], matmul_cases),
    ("transpose", lambda x, i, f: [x[0].transpose(i[0], i[1])], transpose_cases),
    ("permute", lambda x, i, f: [x[0].permute(*i)], permute_cases),
    ("reshape", lambda x, i, f: [x[0].reshape(i)], reshape_cases(True)),
    ("view", lambda x, i, f: [x[0].view(i)], reshape_cases(False)),
    ("narrow", lambda x, i, f: [x[0].narrow(i[0], i[1], i[2])], narrow_cases),
    ("select", lambda x, i, f: [x[0].select(i[0], i[1])], select_cases),
    ("expand", lambda x, i, f: [x[0].expand(*i)], expand_cases),
    ("unsqueeze", lambda x, i, f: [x[0].unsqueeze(i[0])], unsqueeze_cases),
    ("squeeze", lambda x, i, f: [x[0].squeeze(i[0])], squeeze_cases),
    ("contiguous", lambda x, i, f: [x[0].contiguous()], layout_cases),
    ("clone", lambda x, i, f: [x[0].clone()], layout_cases),
    ("cat", lambda x, i, f: [torch.cat(x, i[0])], cat_cases(False)),
    ("stack", lambda x, i, f: [torch.stack(x, i[0])], cat_cases(True)),
    ("split", lambda x, i, f: list(torch.split(x[0], i[1], i[0])), split_cases(False)),
    ("split_sizes", lambda x, i, f: list(torch.split(x[0], i[1:], i[0])), split_cases(True)),
    ("masked_fill", lambda x, i, f: [x[0].masked_fill(x[1], f[0])], masked_fill_cases),
    ("softmax", lambda x, i, f: [F.softmax(x[0], i[0])], softmax_cases),
    ("log_softmax", lambda x, i, f: [F.log_softmax(x[0], i[0])], softmax_cases),
    ("masked_softmax", lambda x, i, f: [F.softmax(x[0].masked_fill(x[1], -np.inf), i[0])],
     masked_softmax_cases),
    ("masked_log_softmax",
     lambda x, i, f: [F.log_softmax(x[0].masked_fill(x[1], -np.inf), i[0])],
     masked_softmax_cases),
    ("cross_entropy", t_cross_entropy, cross_entropy_cases),
    ("embedding", lambda x, i, f: [F.embedding(x[1], x[0])], embedding_cases),
    ("layer_norm", lambda x, i, f: [F.layer_norm(x[0], (x[0].shape[-1],), x[1], x[2], f[0])],
     layer_norm_cases),
]


def run_torch(case, fn):
    """Fills case.upstream, case.want_outs and case.want_grads from torch in float64."""
    leaves, op_inputs = [], []
    for kind, arr in case.inputs:
        if kind == "none":
            t = None
        elif kind in FLOAT_KINDS:
            t = torch.tensor(arr, dtype=torch.float64, requires_grad=True)
        elif kind == "i":
            t = torch.tensor(arr, dtype=torch.int64)
        else:
            t = torch.tensor(arr, dtype=torch.bool)
        leaves.append(t)
        op_inputs.append(t.transpose(-1, -2) if kind == "ft" else
                         t.narrow(-1, 1, t.shape[-1] - 2) if kind == "fs" else t)
    outs = fn(op_inputs, case.iargs, case.fargs)
    float_outs = [o for o in outs if o.is_floating_point()]
    case.upstream = [normal(tuple(o.shape)) for o in float_outs]
    float_leaves = [t for t, (kind, _) in zip(leaves, case.inputs) if kind in FLOAT_KINDS]
    grads = [None] * len(float_leaves)
    if float_outs and float_leaves:
        grads = torch.autograd.grad(float_outs, float_leaves,
                                    [torch.tensor(u) for u in case.upstream],
                                    allow_unused=True)
    case.want_outs = [o.detach().double().numpy() for o in outs]
    case.want_grads = [np.zeros(tuple(t.shape)) if g is None else g.numpy()
                       for t, g in zip(float_leaves, grads)]


# ------------------------------------------------------------------ the driver's files

def tensor_text(arr, as_int=False):
    arr = np.asarray(arr)
    values = arr.astype(np.int64).ravel().tolist() if as_int else \
        arr.astype(np.float64).ravel().tolist()
    return " ".join(map(repr, [arr.ndim, *arr.shape, *values]))


def write_cases(path, cases):
    with open(path, "w") as out:
        for c in cases:
            out.write(f"case {c.id} {c.op}\n")
            out.write(f"iargs {len(c.iargs)} {' '.join(map(str, c.iargs))}\n")
            out.write(f"fargs {len(c.fargs)} {' '.join(map(repr, c.fargs))}\n")
            for kind, arr in c.inputs:
                text = "" if kind == "none" else tensor_text(arr, as_int=kind in ("i", "b"))
                out.write(f"input {kind} {text}\n")
            for u in c.upstream:
                out.write(f"upstream {tensor_text(u)}\n")
            out.write("end\n")


def parse_tensor(tokens):
    rank = int(tokens[0])
    shape = tuple(int(t) for t in tokens[1:1 + rank])
    return np.array([float(t) for t in tokens[1 + rank:]], dtype=np.float64).reshape(shape)


def read_results(path):
    """{(case id, dtype name): {"outs": [...], "grads": [... | None], "error": str | None}}"""
    results, current = {}, None
    with open(path) as lines:
        for line in lines:
            tokens = line.split()
            if not tokens:
                continue
            if tokens[0] == "case":
                current = {"outs": [], "grads": [], "error": None}
                results[(tokens[1], tokens[2])] = current
            elif tokens[0] == "out":
                current["outs"].append(parse_tensor(tokens[1:]))
            elif tokens[0] == "grad":
                current["grads"].append(None if tokens[1] == "none" else
                                        parse_tensor(tokens[1:]))
            elif tokens[0] == "error":
                current["error"] = line.strip()[len("error "):]
    return results


# ------------------------------------------------------------------ comparing

def tol64(want):
    return ATOL64 + RTOL64 * np.abs(want)


def tol32(want):
    finite = np.abs(want[np.isfinite(want)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    return RTOL32 * np.abs(want) + ATOL32 * scale


def mismatch(got, want, tol):
    """None when got agrees with want, else a description of the worst element."""
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, want {list(want.shape)}"
    if got.size == 0:
        return None
    with np.errstate(invalid="ignore"):
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        excess = np.where(same, -1.0, np.abs(got - want) - tol(want))
    excess = np.nan_to_num(excess, nan=np.inf)  # a nan on one side only
    idx = np.unravel_index(int(np.argmax(excess)), got.shape)
    if excess[idx] <= 0:
        return None
    return (f"worst element {list(idx)}: got {got[idx]!r}, want {want[idx]!r}, "
            f"|diff| {abs(got[idx] - want[idx]):.3g} > tol {tol(want)[idx]:.3g}")


def compare(got, want_outs, want_grads, tol):
    """Yields a description per disagreement of one driver result with the wanted values."""
    if got["error"] is not None:
        yield f"attograd threw: {got['error']}"
        return
    if len(got["outs"]) != len(want_outs) or len(got["grads"]) != len(want_grads):
        yield (f"{len(got['outs'])} outputs and {len(got['grads'])} gradients, "
               f"want {len(want_outs)} and {len(want_grads)}")
        return
    for k, (g, w) in enumerate(zip(got["outs"], want_outs)):
        if (m := mismatch(g, w, tol)) is not None:
            yield f"output {k} {m}"
    for k, (g, w) in enumerate(zip(got["grads"], want_grads)):
        g = np.zeros(w.shape) if g is None else g  # no gradient at all means zeros
        if (m := mismatch(g, w, tol)) is not None:
            yield f"gradient of float input {k} {m}"


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 1
    driver = sys.argv[1]
    if not os.access(driver, os.X_OK):
        print(f"FAIL: driver {driver} is not an executable file")
        return 1
    start = time.monotonic()
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead

    cases, per_op = [], {}
    for op, fn, make_cases in OPS:
        per_op[op] = make_cases()
        for k, case in enumerate(per_op[op]):
            case.op, case.id = op, f"{op}#{k}"
            run_torch(case, fn)
            cases.append(case)

    with tempfile.TemporaryDirectory(prefix="attograd_ref_") as tmp:
        cases_path, results_path = os.path.join(tmp, "cases.txt"), os.path.join(tmp, "results.txt")
        write_cases(cases_path, cases)
        run = subprocess.run([driver, cases_path, results_path], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAIL: {driver} exited with {run.returncode}\n{run.stdout}{run.stderr}")
            return 1
        results = read_results(results_path)

    failures = 0
    for op, op_cases in per_op.items():
        bad = 0
        for case in op_cases:
            problems = []
            r64, r32 = results.get((case.id, "float64")), results.get((case.id, "float32"))
            if r64 is None or r32 is None:
                problems.append("no result from the driver")
            else:
                problems += [f"[float64 vs torch] {p}" for p in
                             compare(r64, case.want_outs, case.want_grads, tol64)]
                if r64["error"] is None:
                    want_grads = [np.zeros(w.shape) if g is None else g
                                  for g, w in zip(r64["grads"], case.want_grads)]
                    problems += [f"[float32 vs float64] {p}" for p in
                                 compare(r32, r64["outs"], want_grads, tol32)]
            if problems:
                bad += 1
                for p in problems:
                    print(f"FAIL {op} case {case.id}: {case.describe()}: {p}")
        failures += bad
        print(f"{op}: {len(op_cases)} cases ok" if not bad else
              f"{op}: {bad} of {len(op_cases)} cases FAILED")

    elapsed = time.monotonic() - start
    if failures:
        print(f"FAILED: {failures} of {len(cases)} cases over {len(per_op)} ops disagree "
              f"({elapsed:.1f}s)")
        return 1
    print(f"OK: {len(cases)} cases over {len(per_op)} ops agree with torch in float64 "
          f"(atol {ATOL64:g}, rtol {RTOL64:g}) and with float64 in float32 "
          f"(rtol {RTOL32:g}, atol {ATOL32:g} x scale) ({elapsed:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
