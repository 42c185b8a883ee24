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
import math
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


def to_half_bytes(v):
    return np.array([v], dtype=F).astype("<f2").tobytes()


def stored(v):  # a float as the half a block keeps
    return F(np.array([v], dtype=F).astype(np.float16)[0])


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


# ---------------------------------------------------------------- quantizers, a block at a time


def round_away(v):  # C's roundf
    return int(math.copysign(math.floor(abs(float(v)) + 0.5), float(v)))


def rne(v):  # ggml's nearest_int: to nearest, ties to even
    return int(round(float(v)))


def absmax_signed(x):
    amax, mx = F(0), F(0)
    for v in x:
        if amax < abs(v):
            amax, mx = abs(v), v
    return mx


def q_q8_0(x):
    amax = F(0)
    for v in x:
        amax = max(amax, abs(v))
    d = F(amax / F(127))
    i = F(F(1) / d) if d else F(0)
    return to_half_bytes(d) + bytes(np.array([round_away(v * i) for v in x], np.int8).view(np.uint8))


def pack_nibbles(levels):
    return bytes(int(levels[j]) | (int(levels[j + 16]) << 4) for j in range(16))


def pack_five(levels):
    qh = sum(((int(levels[j]) >> 4) & 1) << j for j in range(32))
    return qh.to_bytes(4, "little") + pack_nibbles([int(v) & 15 for v in levels])


def q_q4_0(x):
    d = F(absmax_signed(x) / F(-8))
    i = F(F(1) / d) if d else F(0)
    return to_half_bytes(d) + pack_nibbles([min(15, int(F(v * i) + F(8.5))) for v in x])


def q_q5_0(x):
    d = F(absmax_signed(x) / F(-16))
    i = F(F(1) / d) if d else F(0)
    return to_half_bytes(d) + pack_five([min(31, int(F(v * i) + F(16.5))) for v in x])


def min_max(x):
    lo, hi = F(np.finfo(F).max), F(-np.finfo(F).max)
    for v in x:
        lo, hi = (v if v < lo else lo), (v if v > hi else hi)
    return lo, hi


def q_q4_1(x):
    lo, hi = min_max(x)
    d = F(F(hi - lo) / F(15))
    i = F(F(1) / d) if d else F(0)
    lv = [min(15, int(F(F(v - lo) * i) + F(0.5))) for v in x]
    return to_half_bytes(d) + to_half_bytes(lo) + pack_nibbles(lv)


def q_q5_1(x):
    lo, hi = min_max(x)
    d = F(F(hi - lo) / F(31))
    i = F(F(1) / d) if d else F(0)
    lv = [int(F(F(v - lo) * i) + F(0.5)) for v in x]
    return to_half_bytes(d) + to_half_bytes(lo) + pack_five(lv)


def search_scale_min(x, w, nmax, rmin, rdelta, nstep):  # make_qkx2_quants, squared error
    n = len(x)
    lo, hi, sw, sx = x[0], x[0], w[0], F(w[0] * x[0])
    for k in range(1, n):
        lo = x[k] if x[k] < lo else lo
        hi = x[k] if x[k] > hi else hi
        sw = F(sw + w[k])
        sx = F(sx + F(w[k] * x[k]))
    lo = F(0) if lo > 0 else lo
    if hi == lo:
        return F(0), F(-lo), [0] * n

    def levels(iscale, base):
        return [max(0, min(nmax, rne(F(iscale * F(v - base))))) for v in x]

    def error(scale, base, lv):
        e = F(0)
        for k in range(n):
            diff = F(F(F(scale * F(lv[k])) + base) - x[k])
            e = F(e + F(w[k] * F(diff * diff)))
        return e

    iscale = F(F(nmax) / F(hi - lo))
    scale = F(F(1) / iscale)
    L = levels(iscale, lo)
    best = error(scale, lo, L)
    for step in range(nstep + 1):
        iscale = F(F(F(rmin + F(rdelta * F(step))) + F(nmax)) / F(hi - lo))
        aux = levels(iscale, lo)
        sl = sl2 = sxl = F(0)
        for k in range(n):
            wl = F(w[k] * F(aux[k]))
            sl, sl2, sxl = F(sl + wl), F(sl2 + F(wl * F(aux[k]))), F(sxl + F(wl * x[k]))
        D = F(F(sw * sl2) - F(sl * sl))
        if D > 0:
            this_scale = F(F(F(sw * sxl) - F(sx * sl)) / D)
            this_min = F(F(F(sl2 * sx) - F(sl * sxl)) / D)
            if this_min > 0:
                this_min, this_scale = F(0), F(sxl / sl2)
            e = error(this_scale, this_min, aux)
            if e < best:
                L, best, scale, lo = aux, e, this_scale, this_min
    return scale, F(-lo), L


def k_scale_bytes(ls, lm):
    s = [0] * 12
    for j in range(8):
        if j < 4:
            s[j], s[j + 4] = ls[j], lm[j]
        else:
            s[j + 4] = (ls[j] & 15) | ((lm[j] & 15) << 4)
            s[j - 4] |= (ls[j] >> 4) << 6
            s[j] |= (lm[j] >> 4) << 6
    return s


def k_quantize(x, nmax, rmin, nstep):  # Q4_K's and Q5_K's head and levels
    scales, mins, L = [], [], []
    for j in range(8):
        xs = x[32 * j:32 * j + 32]
        s2 = F(0)
        for v in xs:
            s2 = F(s2 + F(v * v))
        av = F(np.sqrt(F(s2 / F(32))))
        w = [F(av + abs(v)) for v in xs]
        sc, mn, lv = search_scale_min(xs, w, nmax, F(rmin), F(0.1), nstep)
        scales.append(sc), mins.append(mn), L.extend(lv)
    max_scale, max_min = F(0), F(0)
    for j in range(8):
        max_scale = scales[j] if scales[j] > max_scale else max_scale
        max_min = mins[j] if mins[j] > max_min else max_min
    inv_s = F(F(63) / max_scale) if max_scale > 0 else F(0)
    inv_m = F(F(63) / max_min) if max_min > 0 else F(0)
    ls = [min(63, rne(F(inv_s * s)) & 255) for s in scales]
    lm = [min(63, rne(F(inv_m * m)) & 255) for m in mins]
    s = k_scale_bytes(ls, lm)
    d, dmin = stored(F(max_scale / F(63))), stored(F(max_min / F(63)))
    for j in range(8):
        sd = F(d * F(ls[j]))
        if sd == 0:
            continue
        dm = F(dmin * F(lm[j]))
        for k in range(32):
            L[32 * j + k] = max(0, min(nmax, rne(F(F(x[32 * j + k] + dm) / sd))))
    head = to_half_bytes(max_scale / F(63)) + to_half_bytes(max_min / F(63)) + bytes(s)
    return head, L


def nibble_rows(L):  # per 64 levels: 32 bytes, the first 32 low, the next 32 high
    return bytes((L[64 * c + k] & 15) | ((L[64 * c + 32 + k] & 15) << 4) for c in range(4) for k in range(32))


def q_q4_k(x):
    head, L = k_quantize(x, 15, -1.0, 20)
    return head + nibble_rows(L)


def q_q5_k(x):
    head, L = k_quantize(x, 31, -0.5, 15)
    qh = [0] * 32
    for k in range(256):
        qh[k % 32] |= ((L[k] >> 4) & 1) << (k // 32)
    return head + bytes(qh) + nibble_rows(L)


def signed_search(x, nmax):  # make_qx_quants, rmse_type 1, no importance weights
    amax, mx = F(0), F(0)
    for v in x:
        if abs(v) > amax:
            amax, mx = abs(v), v
    if amax < F(1e-15):
        return F(0), [0] * len(x)

    def sums(iscale):
        lv, slx, sl2 = [], F(0), F(0)
        for v in x:
            q = max(-nmax, min(nmax - 1, rne(F(iscale * v))))
            w = F(v * v)
            slx, sl2 = F(slx + F(F(w * v) * F(q))), F(sl2 + F(F(w * F(q)) * F(q)))
            lv.append(q + nmax)
        return lv, slx, sl2

    L, slx, sl2 = sums(F(F(-nmax) / mx))
    scale = F(slx / sl2) if sl2 != 0 else F(0)
    best = F(scale * slx)
    for step in [s for s in range(-9, 10) if s]:
        lv, slx, sl2 = sums(F(-F(F(nmax) + F(F(0.1) * F(step))) / mx))
        if sl2 > 0 and F(slx * slx) > F(best * sl2):
            L, scale = lv, F(slx / sl2)
            best = F(scale * slx)
    return scale, L


def q_q6_k(x):
    scales, L = [], []
    for j in range(16):
        sc, lv = signed_search(x[16 * j:16 * j + 16], 32)
        scales.append(sc), L.extend(lv)
    max_abs, max_scale = F(0), F(0)
    for s in scales:
        if abs(s) > max_abs:
            max_abs, max_scale = abs(s), s
    if max_abs < F(1e-15):
        return bytes(210)
    iscale = F(F(-128) / max_scale)
    sc8 = [min(127, rne(F(iscale * s))) for s in scales]
    d = stored(F(F(1) / iscale))
    for j in range(16):
        sd = F(d * F(sc8[j]))
        if sd == 0:
            continue
        for k in range(16 * j, 16 * j + 16):
            L[k] = max(-32, min(31, rne(F(x[k] / sd)))) + 32
    ql, qh = [0] * 128, [0] * 64
    for k in range(256):
        h, r = k // 128, k % 128
        ql[64 * h + r % 64] |= (L[k] & 15) << (4 * (r // 64))
        qh[32 * h + r % 32] |= (L[k] >> 4) << (2 * (r // 32))
    return bytes(ql) + bytes(qh) + bytes(np.array(sc8, np.int8).view(np.uint8)) + to_half_bytes(F(F(1) / iscale))


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
            want = b"".join(quantize([F(v) for v in row]) for row in x)
            differ = sum(a != b for a, b in zip(ours, want)) + abs(len(ours) - len(want))
            print(f"quantize {name}: {x.shape[0]} blocks, {differ} bytes differ")
            if differ:
                failures += 1
                first = next(i for i in range(min(len(ours), len(want))) if ours[i] != want[i])
                print(f"  first at byte {first} (block {first // LAYOUTS[name][1]})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
