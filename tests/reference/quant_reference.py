#!/usr/bin/env python3
"""ggml's quantised block formats, written here a second time from their layouts (ggml's
ggml-common.h block structs; the quantizers from the steps of llama.cpp's reference
quantize_row_*_ref) in numpy float32, held against attograd's (autograd/quant/) through
attograd_quant_driver:

  - dequantize: random blocks (every byte random, the half scales drawn finite, negative
    ones included) give bit-equal floats, for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
    Q6_K and Q8_K;
  - quantize: random weights (normal, uniform, all positive, a block of zeros, a block with
    one outlier) give byte-equal blocks for every format attograd writes.

usage: quant_reference.py PATH/TO/attograd_quant_driver

Exit status: 0 when all agree, 1 on a mismatch (printed), 77 without numpy.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("skipped: numpy cannot be imported")
    sys.exit(77)

F = np.float32
# name: (weights a block, bytes a block)
LAYOUTS = {"q8_0": (32, 34), "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22),
           "q5_1": (32, 24), "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210),
           "q8_k": (256, 292)}


def half(b, at):  # the half at byte `at` of each block, as float32 [blocks, 1]
    return b[:, at:at + 2].copy().view("<f2").astype(F)


# ---------------------------------------------------------------- dequantizers, vectorised


def nibbles(qs):  # [blocks, 16] bytes -> [blocks, 32]: low nibbles then high
    return np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int32)


def fifth_bits(qh):  # [blocks, 4] bytes -> [blocks, 32] bit j of the little-endian word
    word = qh.copy().view("<u4").astype(np.uint64)
    return ((word >> np.arange(32, dtype=np.uint64)) & 1).astype(np.int32)


def deq_q8_0(b):
    return b[:, 2:].view(np.int8).astype(F) * half(b, 0)


def deq_q4_0(b):
    return (nibbles(b[:, 2:]) - 8).astype(F) * half(b, 0)


def deq_q4_1(b):
    return nibbles(b[:, 4:]).astype(F) * half(b, 0) + half(b, 2)


def deq_q5_0(b):
    q = nibbles(b[:, 6:]) | (fifth_bits(b[:, 2:6]) << 4)
    return (q - 16).astype(F) * half(b, 0)


def deq_q5_1(b):
    q = nibbles(b[:, 8:]) | (fifth_bits(b[:, 4:8]) << 4)
    return q.astype(F) * half(b, 0) + half(b, 2)


def k_scales(s):  # [blocks, 12] -> 6-bit scales and mins [blocks, 8]
    s = s.astype(np.int32)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc, mn


def k_levels4(qs):  # [blocks, 128] -> [blocks, 256]: per 32 bytes, low nibbles then high
    parts = []
    for c in range(4):
        chunk = qs[:, 32 * c:32 * c + 32].astype(np.int32)
        parts += [chunk & 15, chunk >> 4]
    return np.concatenate(parts, axis=1)


def k_apply(b, q):
    sc, mn = k_scales(b[:, 4:16])
    d1 = half(b, 0) * sc.astype(F)  # [blocks, 8]
    m1 = half(b, 2) * mn.astype(F)
    return np.repeat(d1, 32, axis=1) * q.astype(F) - np.repeat(m1, 32, axis=1)


def deq_q4_k(b):
    return k_apply(b, k_levels4(b[:, 16:144]))


def deq_q5_k(b):
    qh = b[:, 16:48].astype(np.int32)
    high = np.concatenate([(qh >> s) & 1 for s in range(8)], axis=1)  # element 32 s + l
    return k_apply(b, k_levels4(b[:, 48:176]) + (high << 4))


def deq_q6_k(b):
    ql, qh = b[:, 0:128].astype(np.int32), b[:, 128:192].astype(np.int32)
    sc = b[:, 192:208].view(np.int8).astype(F)
    q = np.zeros((b.shape[0], 256), np.int32)
    for h in range(2):
        for part in range(4):  # elements 128 h + 32 part + l
            low = ql[:, 64 * h + 32 * (part % 2): 64 * h + 32 * (part % 2) + 32]
            low = (low >> (4 * (part // 2))) & 15
            high = (qh[:, 32 * h:32 * h + 32] >> (2 * part)) & 3
            q[:, 128 * h + 32 * part:128 * h + 32 * part + 32] = low | (high << 4)
    d = half(b, 208)
    return np.repeat(d * sc, 16, axis=1) * (q - 32).astype(F)


def deq_q8_k(b):
    d = b[:, 0:4].copy().view("<f4")
    return d * b[:, 4:260].view(np.int8).astype(F)


# ------------------------------------------------------- quantizers, every block side by side
# Each quantizer takes weights [blocks, n] (n a block's weights; a flat array is cut into
# blocks) and returns the blocks' bytes. A block's arithmetic is its own, in float32, with
# the steps of llama.cpp's reference quantizer in its order: every sum runs element by
# element along the block (never numpy's pairwise reductions), numpy only takes step k of
# all the blocks at once. (One block at a time in Python took about 50 ms a K-quant block.)


def as_blocks(x, n):
    return np.asarray(x, dtype=F).reshape(-1, n)


def round_away(v):  # C's roundf (its half added in double, as roundf rounds exactly)
    v = np.asarray(v, np.float64)
    return (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64)


def rne(v):  # ggml's nearest_int: to nearest, ties to even
    return np.rint(np.asarray(v, np.float64)).astype(np.int64)


def half_bytes(v):  # [blocks] floats -> [blocks, 2] the bytes of their halves
    return np.asarray(v, F).astype("<f2").view(np.uint8).reshape(-1, 2)


def absmax_signed(x):  # the element of largest magnitude, the first of equals; 0 when none
    at = np.argmax(np.abs(x), axis=1)
    mx = x[np.arange(len(x)), at]
    return np.where(np.abs(mx) > 0, mx, F(0))


def inverse(d):  # 1/d, 0 where d is 0
    with np.errstate(divide="ignore"):
        return np.where(d != 0, F(1) / d, F(0)).astype(F)


def joined(*parts):  # [blocks, *] byte arrays side by side -> the blocks' bytes
    return np.concatenate([np.asarray(p).astype(np.uint8) for p in parts], axis=1).tobytes()


def q_q8_0(x):
    x = as_blocks(x, 32)
    d = (np.abs(x).max(axis=1) / F(127)).astype(F)
    q = round_away(x * inverse(d)[:, None]).astype(np.int8).view(np.uint8)
    return joined(half_bytes(d), q)


def pack_nibbles(levels):  # [blocks, 32] -> [blocks, 16]: j low, j + 16 high
    return (levels[:, :16] & 15) | ((levels[:, 16:] & 15) << 4)


def pack_five(levels):  # [blocks, 32] -> [blocks, 20]: the fifth bits' word, then nibbles
    qh = np.zeros(len(levels), np.uint64)
    for j in range(32):
        qh |= ((levels[:, j].astype(np.uint64) >> np.uint64(4)) & np.uint64(1)) << np.uint64(j)
    return np.concatenate([qh.astype("<u4").view(np.uint8).reshape(-1, 4), pack_nibbles(levels)], axis=1)


def q_q4_0(x):
    x = as_blocks(x, 32)
    d = (absmax_signed(x) / F(-8)).astype(F)
    lv = np.minimum(15, np.trunc(x * inverse(d)[:, None] + F(8.5)).astype(np.int64))
    return joined(half_bytes(d), pack_nibbles(lv))


def q_q5_0(x):
    x = as_blocks(x, 32)
    d = (absmax_signed(x) / F(-16)).astype(F)
    lv = np.minimum(31, np.trunc(x * inverse(d)[:, None] + F(16.5)).astype(np.int64))
    return joined(half_bytes(d), pack_five(lv))


def min_max(x):  # [blocks] lowest and highest, the first of equals kept (as a scan does)
    lo = np.full(len(x), np.finfo(F).max, F)
    hi = np.full(len(x), -np.finfo(F).max, F)
    for k in range(x.shape[1]):
        lo = np.where(x[:, k] < lo, x[:, k], lo)
        hi = np.where(x[:, k] > hi, x[:, k], hi)
    return lo, hi


def q_q4_1(x):
    x = as_blocks(x, 32)
    lo, hi = min_max(x)
    d = ((hi - lo) / F(15)).astype(F)
    lv = np.minimum(15, np.trunc((x - lo[:, None]) * inverse(d)[:, None] + F(0.5)).astype(np.int64))
    return joined(half_bytes(d), half_bytes(lo), pack_nibbles(lv))


def q_q5_1(x):
    x = as_blocks(x, 32)
    lo, hi = min_max(x)
    d = ((hi - lo) / F(31)).astype(F)
    lv = np.trunc((x - lo[:, None]) * inverse(d)[:, None] + F(0.5)).astype(np.int64)
    return joined(half_bytes(d), half_bytes(lo), pack_five(lv))


def search_scale_min(x, w, nmax, rmin, rdelta, nstep):  # make_qkx2_quants, squared error
    """x, w [blocks, n] -> scale [blocks], -min [blocks], levels [blocks, n]."""
    n = x.shape[1]
    lo, hi, sw, sx = x[:, 0], x[:, 0], w[:, 0], w[:, 0] * x[:, 0]
    for k in range(1, n):
        lo = np.where(x[:, k] < lo, x[:, k], lo)
        hi = np.where(x[:, k] > hi, x[:, k], hi)
        sw, sx = sw + w[:, k], sx + w[:, k] * x[:, k]
    lo = np.where(lo > 0, F(0), lo)
    flat, lowest = hi == lo, lo

    def levels(iscale, base):
        return np.clip(rne(iscale[:, None] * (x - base[:, None])), 0, nmax)

    def error(scale, base, lv):
        e, lf = np.zeros(len(x), F), lv.astype(F)
        for k in range(n):
            diff = (scale * lf[:, k] + base) - x[:, k]
            e = e + w[:, k] * (diff * diff)
        return e

    iscale = F(nmax) / (hi - lo)
    scale = F(1) / iscale
    L = levels(iscale, lo)
    best = error(scale, lo, L)
    for step in range(nstep + 1):
        iscale = ((rmin + rdelta * F(step)) + F(nmax)) / (hi - lo)
        aux = levels(iscale, lo)
        sl = sl2 = sxl = np.zeros(len(x), F)
        for k in range(n):
            wl = w[:, k] * aux[:, k].astype(F)
            sl, sl2, sxl = sl + wl, sl2 + wl * aux[:, k].astype(F), sxl + wl * x[:, k]
        D = sw * sl2 - sl * sl
        this_scale = (sw * sxl - sx * sl) / D
        this_min = (sl2 * sx - sl * sxl) / D
        raised = this_min > 0
        this_min, this_scale = np.where(raised, F(0), this_min), np.where(raised, sxl / sl2, this_scale)
        e = error(this_scale, this_min, aux)
        better = (D > 0) & (e < best)
        L = np.where(better[:, None], aux, L)
        best, scale, lo = (np.where(better, a, b) for a, b in ((e, best), (this_scale, scale), (this_min, lo)))
    return np.where(flat, F(0), scale), -np.where(flat, lowest, lo), np.where(flat[:, None], 0, L)


def k_scale_bytes(ls, lm):  # [blocks, 8] 6-bit scales and mins -> [blocks, 12]
    s = np.zeros((len(ls), 12), np.int64)
    for j in range(8):
        if j < 4:
            s[:, j], s[:, j + 4] = ls[:, j], lm[:, j]
        else:
            s[:, j + 4] = (ls[:, j] & 15) | ((lm[:, j] & 15) << 4)
            s[:, j - 4] |= (ls[:, j] >> 4) << 6
            s[:, j] |= (lm[:, j] >> 4) << 6
    return s


def k_quantize(x, nmax, rmin, nstep):  # Q4_K's and Q5_K's heads [blocks, 16] and levels
    scales, mins, L = np.zeros((len(x), 8), F), np.zeros((len(x), 8), F), np.zeros(x.shape, np.int64)
    for j in range(8):
        xs = x[:, 32 * j:32 * j + 32]
        s2 = np.zeros(len(x), F)
        for k in range(32):
            s2 = s2 + xs[:, k] * xs[:, k]
        w = np.sqrt(s2 / F(32))[:, None] + np.abs(xs)
        scales[:, j], mins[:, j], L[:, 32 * j:32 * j + 32] = search_scale_min(xs, w, nmax, F(rmin), F(0.1), nstep)
    max_scale, max_min = np.zeros(len(x), F), np.zeros(len(x), F)
    for j in range(8):
        max_scale = np.where(scales[:, j] > max_scale, scales[:, j], max_scale)
        max_min = np.where(mins[:, j] > max_min, mins[:, j], max_min)
    with np.errstate(divide="ignore"):
        inv_s = np.where(max_scale > 0, F(63) / max_scale, F(0)).astype(F)
        inv_m = np.where(max_min > 0, F(63) / max_min, F(0)).astype(F)
    ls = np.minimum(63, rne(inv_s[:, None] * scales) & 255)
    lm = np.minimum(63, rne(inv_m[:, None] * mins) & 255)
    d = (max_scale / F(63)).astype(np.float16).astype(F)
    dmin = (max_min / F(63)).astype(np.float16).astype(F)
    for j in range(8):
        sd, dm = d * ls[:, j].astype(F), dmin * lm[:, j].astype(F)
        with np.errstate(divide="ignore", invalid="ignore"):
            again = np.clip(rne((x[:, 32 * j:32 * j + 32] + dm[:, None]) / sd[:, None]), 0, nmax)
        L[:, 32 * j:32 * j + 32] = np.where((sd != 0)[:, None], again, L[:, 32 * j:32 * j + 32])
    head = np.concatenate([half_bytes(max_scale / F(63)), half_bytes(max_min / F(63)), k_scale_bytes(ls, lm)], axis=1)
    return head, L


def nibble_rows(L):  # per 64 levels: 32 bytes, the first 32 low, the next 32 high
    return np.concatenate([(L[:, 64 * c:64 * c + 32] & 15) | ((L[:, 64 * c + 32:64 * c + 64] & 15) << 4)
                           for c in range(4)], axis=1)


def q_q4_k(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        head, L = k_quantize(as_blocks(x, 256), 15, -1.0, 20)
    return joined(head, nibble_rows(L))


def q_q5_k(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        head, L = k_quantize(as_blocks(x, 256), 31, -0.5, 15)
    qh = np.zeros((len(L), 32), np.int64)
    for j in range(8):  # level 32 j + l's fifth bit is bit j of byte l
        qh |= ((L[:, 32 * j:32 * j + 32] >> 4) & 1) << j
    return joined(head, qh, nibble_rows(L))


def signed_search(x, nmax):  # make_qx_quants, rmse_type 1, no importance weights
    """x [blocks, n] -> scale [blocks], levels [blocks, n] (0 for a block of |x| < 1e-15)."""
    mx = absmax_signed(x)
    tiny = np.abs(mx) < F(1e-15)

    def sums(iscale):
        q = np.clip(rne(iscale[:, None] * x), -nmax, nmax - 1)
        qf, slx, sl2 = q.astype(F), np.zeros(len(x), F), np.zeros(len(x), F)
        for k in range(x.shape[1]):
            w = x[:, k] * x[:, k]
            slx, sl2 = slx + (w * x[:, k]) * qf[:, k], sl2 + (w * qf[:, k]) * qf[:, k]
        return q + nmax, slx, sl2

    L, slx, sl2 = sums(F(-nmax) / mx)
    scale = np.where(sl2 != 0, slx / sl2, F(0)).astype(F)
    best = scale * slx
    for step in [s for s in range(-9, 10) if s]:
        lv, slx, sl2 = sums(-(F(nmax) + F(0.1) * F(step)) / mx)
        better = (sl2 > 0) & (slx * slx > best * sl2)
        L, scale = np.where(better[:, None], lv, L), np.where(better, slx / sl2, scale)
        best = np.where(better, scale * slx, best)
    return np.where(tiny, F(0), scale), np.where(tiny[:, None], 0, L)


def q_q6_k(x):
    x = as_blocks(x, 256)
    scales, L = np.zeros((len(x), 16), F), np.zeros(x.shape, np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(16):
            scales[:, j], L[:, 16 * j:16 * j + 16] = signed_search(x[:, 16 * j:16 * j + 16], 32)
        max_scale = absmax_signed(scales)
        iscale = (F(-128) / max_scale).astype(F)
        sc8 = np.minimum(127, rne(iscale[:, None] * scales))
        d = (F(1) / iscale).astype(np.float16).astype(F)
        for j in range(16):
            sd = d * sc8[:, j].astype(F)
            again = np.clip(rne(x[:, 16 * j:16 * j + 16] / sd[:, None]), -32, 31) + 32
            L[:, 16 * j:16 * j + 16] = np.where((sd != 0)[:, None], again, L[:, 16 * j:16 * j + 16])
    ql, qh = np.zeros((len(x), 128), np.int64), np.zeros((len(x), 64), np.int64)
    for h in range(2):  # level 128 h + r: ql byte 64 h + r % 64, qh byte 32 h + r % 32
        for part in range(4):
            lv = L[:, 128 * h + 32 * part:128 * h + 32 * part + 32]
            ql[:, 64 * h + 32 * (part % 2):64 * h + 32 * (part % 2) + 32] |= (lv & 15) << (4 * (part // 2))
            qh[:, 32 * h:32 * h + 32] |= (lv >> 4) << (2 * part)
    out = np.concatenate([ql, qh, sc8.astype(np.int8).view(np.uint8), half_bytes(F(1) / iscale)], axis=1)
    out[np.abs(max_scale) < F(1e-15)] = 0
    return out.astype(np.uint8).tobytes()


DEQUANTIZE = {"q8_0": deq_q8_0, "q4_0": deq_q4_0, "q4_1": deq_q4_1, "q5_0": deq_q5_0,
              "q5_1": deq_q5_1, "q4_k": deq_q4_k, "q5_k": deq_q5_k, "q6_k": deq_q6_k,
              "q8_k": deq_q8_k}
QUANTIZE = {"q8_0": q_q8_0, "q4_0": q_q4_0, "q4_1": q_q4_1, "q5_0": q_q5_0, "q5_1": q_q5_1,
            "q4_k": q_q4_k, "q5_k": q_q5_k, "q6_k": q_q6_k}


def random_blocks(rng, name, count):
    n, size = LAYOUTS[name]
    b = rng.integers(0, 256, (count, size), dtype=np.uint8)
    scale_at = {"q6_k": [208], "q8_k": []}.get(name, [0, 2] if name in ("q4_1", "q5_1", "q4_k", "q5_k") else [0])
    for at in scale_at:  # finite halves of either sign, from subnormal to 100
        v = rng.choice([-1, 1], count) * np.exp(rng.uniform(np.log(1e-7), np.log(100), count))
        b[:, at:at + 2] = v.astype("<f2").view(np.uint8).reshape(count, 2)
    if name == "q8_k":
        b[:, 0:4] = (rng.standard_normal(count) * 0.01).astype("<f4").view(np.uint8).reshape(count, 4)
    return b


def random_weights(rng, n, count):
    rows = [rng.standard_normal((count, n)) * 0.02, rng.uniform(-1, 1, (count, n)),
            np.abs(rng.standard_normal((count, n))) + 0.5]
    x = np.concatenate(rows).astype(F)
    x[0, :] = 0
    x[1, 3] = 40.0  # an outlier
    x[2, n // 2:] = 0  # half a block of zeros
    return x


def run(driver, mode, name, data, tmp):
    src, dst = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    open(src, "wb").write(data)
    subprocess.run([driver, mode, name, src, dst], check=True)
    return open(dst, "rb").read()


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    driver, rng, failures = sys.argv[1], np.random.default_rng(42), 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in LAYOUTS:
            blocks = random_blocks(rng, name, 200)
            ours = np.frombuffer(run(driver, "dequantize", name, blocks.tobytes(), tmp), F)
            want = DEQUANTIZE[name](blocks).reshape(-1)
            bad = np.flatnonzero(ours.view(np.uint32) != want.view(np.uint32))
            print(f"dequantize {name}: {blocks.shape[0]} random blocks, {len(bad)} floats differ")
            if len(bad):
                failures += 1
                print(f"  first at {bad[0]}: attograd {ours[bad[0]]!r}, reference {want[bad[0]]!r}")
        for name, quantize in QUANTIZE.items():
            n = LAYOUTS[name][0]
            x = random_weights(rng, n, 4 if n == 256 else 30)
            ours = run(driver, "quantize", name, x.tobytes(), tmp)
            want = quantize(x)
            differ = sum(a != b for a, b in zip(ours, want)) + abs(len(ours) - len(want))
            print(f"quantize {name}: {x.shape[0]} blocks, {differ} bytes differ")
            if differ:
                failures += 1
                first = next(i for i in range(min(len(ours), len(want))) if ours[i] != want[i])
                print(f"  first at byte {first} (block {first // LAYOUTS[name][1]})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
