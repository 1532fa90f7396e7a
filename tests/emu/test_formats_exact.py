"""``emu.dot_add`` against the exact oracle (tests/exact_reference.py) for every operand format
beyond fp16, bit for bit (issue 29).

Every (unit, format) of ``models.UNIT_INPUTS`` other than fp16, and the fp16-accumulator
variants (``output="fp16"``) of the NVIDIA units with fp8 operands, gets a few hundred rows
from small adversarial families built on the format's own bit fields: random finite patterns,
values in a few binades (rounding and ties of the sum), subnormal operands and c, exact
cancellation, wide exponent spans, products near overflow and sums near the largest finite
output, ties at the output's ulp (fp32, E8M13, fp16), signed zeros, NaN and infinite operands and
c, and the format's extreme encodings (fp8 saturating maxima and NaNs, fnuz 0x80, tf32 patterns
whose dropped low bits are set). Each pair runs in ONE ``emu.dot_add`` call of (rows, K) with K
longer than a group and not a multiple of it (chained groups and a short last group), so each
kernel family compiles once per operand dtype. Results compare as bit patterns; any NaN equals
any NaN.
"""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np
import pytest
from exact_reference import reference_batch  # noqa: E402

import emu  # noqa: E402
import models  # noqa: E402

ROWS_PER_FAMILY = 36

# format → (pattern dtype, exponent bits, fraction bits, bias, specials); tf32 as fp32 patterns
FORMATS = {
    "bf16": (np.uint16, 8, 7, 127, "ieee"),
    "tf32": (np.uint32, 8, 23, 127, "ieee"),
    "e4m3": (np.uint8, 4, 3, 7, "fn"),
    "e5m2": (np.uint8, 5, 2, 15, "ieee"),
    "e4m3fnuz": (np.uint8, 4, 3, 8, "fnuz"),
    "e5m2fnuz": (np.uint8, 5, 2, 16, "fnuz"),
}
NVIDIA_FP8 = ("ada", "h100", "b200")
PAIRS = [(n, f, "fp32") for n in models.UNIT_NAMES for f in models.UNIT_INPUTS[n] if f != "fp16"]
PAIRS += [(n, f, "fp16") for n in NVIDIA_FP8 for f in ("e4m3", "e5m2")]
# mixed fp8 (A's format, B's format): every pair of every unit that has one, NVIDIA's also with
# the fp16 accumulator
MIXED = [(n, fa, fb, "fp32") for n in models.UNIT_NAMES for fa, fb in models.UNIT_MIXED_INPUTS.get(n, ())]
MIXED += [(n, fa, fb, "fp16") for n in NVIDIA_FP8 for fa, fb in models.UNIT_MIXED_INPUTS[n]]
# fp8 mma.sync on Hopper and Blackwell (instruction="mma": fp16 steps from +0, then c; emu.steps):
# every operand pair, both accumulators
STEPPED = [
    (n, fa, fb, out)
    for n in ("h100", "b200")
    for fa, fb in (("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2"), ("e5m2", "e4m3"))
    for out in ("fp32", "fp16")
]


class Fmt:
    """Bit-field helpers of one operand format."""

    def __init__(self, name: str):
        self.name = name
        self.dtype, self.ebits, self.fbits, self.bias, self.specials = FORMATS[name]
        self.width = 1 + self.ebits + self.fbits
        self.emask = (1 << self.ebits) - 1
        self.fmask = (1 << self.fbits) - 1
        self.dropped = 13 if name == "tf32" else 0  # tf32: fp32's 13 low fraction bits are dropped
        # the largest finite exponent field and the largest fraction at it
        self.top_e = self.emask if self.specials != "ieee" else self.emask - 1
        self.top_f = self.fmask - 1 if self.specials == "fn" else self.fmask
        self.emin = 1 - self.bias
        self.emax = self.top_e - self.bias

    def bits(self, neg, e, f) -> np.ndarray:
        neg, e, f = (np.asarray(x, np.int64) for x in (neg, e, f))
        return ((neg << (self.width - 1)) | (e << self.fbits) | f).astype(self.dtype)

    def rand_frac(self, rng, shape) -> np.ndarray:
        f = rng.integers(0, self.fmask + 1, size=shape, dtype=np.int64)
        if self.dropped:  # mostly tf32 proper; some rows keep garbage in the dropped bits
            keep = rng.random(shape) < 0.7
            f = np.where(keep, f >> self.dropped << self.dropped, f)
        return f

    def finite(self, rng, shape, e_lo=None, e_hi=None) -> np.ndarray:
        """Random finite patterns with exponent fields in [e_lo, e_hi] (default: all finite)."""
        e_lo = 0 if e_lo is None else max(0, e_lo)
        e_hi = self.top_e if e_hi is None else min(self.top_e, e_hi)
        e = rng.integers(e_lo, e_hi + 1, size=shape, dtype=np.int64)
        f = self.rand_frac(rng, shape)
        f = np.where(e == self.top_e, np.minimum(f, self.top_f), f)
        neg = rng.integers(0, 2, size=shape)
        if self.specials == "fnuz":  # 0x80 is NaN: a "−0" draw becomes +0
            neg = np.where((e == 0) & (f == 0), 0, neg)
        return self.bits(neg, e, f)

    def pow2(self, k) -> np.ndarray:
        """Patterns of 2^k (k in the format's range, subnormal included)."""
        k = np.asarray(k, np.int64)
        assert np.all((k >= self.emin - self.fbits + self.dropped) & (k <= self.emax))
        e = np.where(k >= self.emin, k + self.bias, 0)
        f = np.where(k >= self.emin, 0, np.left_shift(1, np.clip(k - (self.emin - self.fbits), 0, 62)))
        return self.bits(np.zeros_like(k), e, f)

    def neg(self, bits) -> np.ndarray:
        return (bits ^ self.dtype(1 << (self.width - 1))).astype(self.dtype)

    def maxima(self) -> list[int]:
        top = int(self.bits(0, self.top_e, self.top_f))
        return [top, int(self.neg(self.dtype(top)))]

    def specials_list(self) -> list[int]:
        """Every NaN / infinity class of the format (a few patterns each)."""
        w, fb = self.width, self.fbits
        if self.specials == "fnuz":
            return [1 << (w - 1)]
        if self.specials == "fn":
            nan = (self.emask << fb) | self.fmask
            return [nan, nan | (1 << (w - 1))]
        inf = self.emask << fb
        out = [inf, inf | (1 << (w - 1)), inf | 1, inf | self.fmask, inf | (1 << (fb - 1)) | (1 << (w - 1))]
        if self.dropped:  # a NaN whose payload lies in the dropped bits only: tf32 reads an infinity
            out.append(inf | (1 << (self.dropped - 1)))
        return out

    def values(self, bits) -> np.ndarray:
        """float64 values of finite patterns (tf32: after dropping the low bits)."""
        x = np.asarray(bits)
        if self.name == "tf32":
            x = x & np.uint32(~((1 << 13) - 1) & 0xFFFFFFFF)
        return x.view(emu.operands.value_dtype(self.name)).astype(np.float64)


# ----------------------------------------------------------------------------- accumulators


C_INFO = {"fp32": (np.uint32, np.float32, 8, 23, 127), "fp16": (np.uint16, np.float16, 5, 10, 15)}


def c_finite(rng, n, out, e_lo=None, e_hi=None) -> np.ndarray:
    udt, _, eb, fb, _ = C_INFO[out]
    e_lo = 0 if e_lo is None else max(0, e_lo)
    e_hi = (1 << eb) - 2 if e_hi is None else min((1 << eb) - 2, e_hi)
    e = rng.integers(e_lo, e_hi + 1, size=n, dtype=np.int64)
    f = rng.integers(0, 1 << fb, size=n, dtype=np.int64)
    neg = rng.integers(0, 2, size=n, dtype=np.int64)
    return ((neg << (eb + fb)) | (e << fb) | f).astype(udt)


def c_of(x, out) -> np.ndarray:
    udt, fdt = C_INFO[out][:2]
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float64).astype(fdt).view(udt)


def c_specials(out) -> list[int]:
    if out == "fp16":
        return [0x7C00, 0xFC00, 0x7E00, 0x7C01]
    return [0x7F800000, 0xFF800000, 0x7FC00000, 0xFF800001]


# ----------------------------------------------------------------------------- families
# each: (rng, fmt, n, K, G, out) → (a, b, c) patterns, a and b (n, K), c (n,)


def _zeros(fmt, n, K):
    z = np.zeros((n, K), fmt.dtype)
    return z, z.copy()


def _slots(rng, n, K, G, m):
    """Per row, m distinct positions inside one group: the first group or the (short) last one."""
    last0 = (K - 1) // G * G
    out = np.empty((n, m), np.int64)
    for i in range(n):
        g0, g1 = (0, min(G, K)) if i % 2 == 0 else (last0, K)
        width = g1 - g0
        if width >= m:
            out[i] = g0 + rng.choice(width, m, replace=False)
        else:
            out[i] = rng.choice(K, m, replace=False)
    return out


def fam_random_bits(rng, fmt, n, K, G, out):
    """Random finite patterns: half the rows over the whole range (wide formats: mostly
    overflowing products), half with exponents low enough that the products stay finite."""
    a, b = fmt.finite(rng, (n, K)), fmt.finite(rng, (n, K))
    lim = fmt.bias + (min(fmt.emax, 60) if out == "fp32" else 6) // 2
    low = (np.arange(n) % 2 == 1)[:, None]
    a = np.where(low, fmt.finite(rng, (n, K), 0, lim), a)
    b = np.where(low, fmt.finite(rng, (n, K), 0, lim), b)
    return a, b, c_finite(rng, n, out)


def fam_binades(rng, fmt, n, K, G, out):
    """Values in a few binades around 1 and a c of their size: rounding, ties, carries."""
    mid = fmt.bias
    a = fmt.finite(rng, (n, K), mid - 2, mid + 2)
    b = fmt.finite(rng, (n, K), mid - 2, mid + 2)
    cb = C_INFO[out][4]
    return a, b, c_finite(rng, n, out, cb - 3, cb + 5)


def fam_subnormal(rng, fmt, n, K, G, out):
    """Subnormal and smallest-normal operands; a subnormal or tiny c."""
    a = fmt.finite(rng, (n, K), 0, 1)
    b = fmt.finite(rng, (n, K), 0, 2)
    mix = rng.random((n, K)) < 0.3  # some products with one ordinary factor
    b = np.where(mix, fmt.finite(rng, (n, K), fmt.bias - 1, fmt.bias + 1), b)
    c = np.where(rng.random(n) < 0.6, c_finite(rng, n, out, 0, 0), c_finite(rng, n, out, 0, 3))
    a[rng.random(n) < 0.2] = 0  # zero products: the (subnormal) c alone, cut to the output grid
    return a, b, c.astype(C_INFO[out][0])


def fam_cancellation(rng, fmt, n, K, G, out):
    """Products in ± pairs, c = −(one product) when representable, a small remainder term."""
    a, b = _zeros(fmt, n, K)
    pos = _slots(rng, n, K, G, min(4, K))
    x = fmt.finite(rng, (n, 2), fmt.bias - 3, fmt.bias + 3)
    y = fmt.finite(rng, (n, 2), fmt.bias - 3, fmt.bias + 3)
    rows = np.arange(n)
    a[rows, pos[:, 0]], b[rows, pos[:, 0]] = x[:, 0], y[:, 0]
    if pos.shape[1] > 1:
        a[rows, pos[:, 1]], b[rows, pos[:, 1]] = fmt.neg(x[:, 0]), y[:, 0]
    if pos.shape[1] > 2:
        a[rows, pos[:, 2]], b[rows, pos[:, 2]] = x[:, 1], y[:, 1]
    if pos.shape[1] > 3:  # a remainder far below
        a[rows, pos[:, 3]] = fmt.finite(rng, n, 1, fmt.bias - 4)
        b[rows, pos[:, 3]] = fmt.finite(rng, n, 1, fmt.bias - 2)
    p = fmt.values(x[:, 1]) * fmt.values(y[:, 1])
    c = c_of(-p, out)
    c = np.where(rng.random(n) < 0.25, C_INFO[out][0](0), c).astype(C_INFO[out][0])
    return a, b, c


def fam_far(rng, fmt, n, K, G, out):
    """Products at the two ends of the range side by side (the top kept below the output's
    overflow: the overflow family has that); c anywhere."""
    top = fmt.top_e if fmt.ebits < 8 else fmt.bias + 62
    if out == "fp16":
        top = fmt.bias + 3
    a, b = (
        np.where(rng.random((n, K)) < 0.5, fmt.finite(rng, (n, K), top - 2, top), fmt.finite(rng, (n, K), 0, 2))
        for _ in range(2)
    )
    c = np.where(rng.random(n) < 0.5, c_finite(rng, n, out), c_finite(rng, n, out, 0, 4))
    return a, b, c.astype(C_INFO[out][0])


def fam_overflow(rng, fmt, n, K, G, out):
    """Large products (bf16/tf32: ≥ 2^128 at the top), sums and c near the largest output."""
    a = fmt.finite(rng, (n, K), fmt.top_e - 3, fmt.top_e)
    b = fmt.finite(rng, (n, K), fmt.top_e - 3, fmt.top_e)
    if fmt.ebits == 8:  # bf16/tf32: products around 2^100 … 2^130 and c near FLT_MAX
        a = np.where(rng.random((n, K)) < 0.5, fmt.finite(rng, (n, K), 127 + 50, 127 + 66), a)
        b = np.where(rng.random((n, K)) < 0.5, fmt.finite(rng, (n, K), 127 + 50, 127 + 66), b)
    zero = rng.random((n, K)) < 0.3
    a = np.where(zero, fmt.dtype(0), a)
    udt, _, eb, fb, _ = C_INFO[out]
    top = (1 << eb) - 2
    c = c_finite(rng, n, out, top - 1, top)
    cmax = ((top << fb) | ((1 << fb) - 1)) | (rng.integers(0, 2, n) << (eb + fb))
    c = np.where(rng.random(n) < 0.3, cmax, c).astype(udt)
    return a, b, c


def fam_flt_max(rng, fmt, n, K, G, out):
    """c = ±(largest finite) and one or two products just crossing the overflow threshold."""
    if fmt.ebits != 8:
        return fam_overflow(rng, fmt, n, K, G, out)
    a, b = _zeros(fmt, n, K)
    pos = _slots(rng, n, K, G, min(2, K))
    rows = np.arange(n)
    # p0 = ±2^t with t around 102 … 104 (half an ulp of FLT_MAX is 2^103), p1 tiny ±
    t = rng.integers(101, 106, size=n)
    ta = t // 2
    a[rows, pos[:, 0]], b[rows, pos[:, 0]] = fmt.pow2(ta), fmt.pow2(t - ta)
    sign = rng.random(n) < 0.3
    a[rows, pos[:, 0]] = np.where(sign, fmt.neg(a[rows, pos[:, 0]]), a[rows, pos[:, 0]])
    if pos.shape[1] > 1:
        a[rows, pos[:, 1]] = fmt.finite(rng, n, 127 - 30, 127 - 20)
        b[rows, pos[:, 1]] = fmt.finite(rng, n, 127 - 30, 127 - 20)
    cneg = rng.integers(0, 2, n)
    c = (0x7F7FFFFF - rng.integers(0, 3, n)) | (cneg << 31)
    return a, b, c.astype(np.uint32)


def fam_ties(rng, fmt, n, K, G, out):
    """c + p exactly at a midpoint (or an ulp boundary) of the output's grid: fp32, E8M13, fp16;
    some rows with a sticky third product."""
    a, b = _zeros(fmt, n, K)
    pos = _slots(rng, n, K, G, min(3, K))
    rows = np.arange(n)
    udt, _, eb, fb, cbias = C_INFO[out]
    # the product's exponent t: reachable by two powers of two of the format
    t_lo = 2 * (fmt.emin - fmt.fbits + fmt.dropped) + 2
    t_hi = 2 * fmt.emax - 2
    if out == "fp16":
        t_lo, t_hi = max(t_lo, -24), min(t_hi, 4)
    t = rng.integers(max(t_lo, -60), min(t_hi, 60) + 1, size=n)
    ta = np.clip(t // 2, fmt.emin - fmt.fbits + fmt.dropped, fmt.emax)
    tb = t - ta
    ok = (tb >= fmt.emin - fmt.fbits + fmt.dropped) & (tb <= fmt.emax)
    tb = np.where(ok, tb, ta)
    t = ta + tb
    a[rows, pos[:, 0]], b[rows, pos[:, 0]] = fmt.pow2(ta), fmt.pow2(tb)
    a[rows, pos[:, 0]] = np.where(rng.random(n) < 0.5, fmt.neg(a[rows, pos[:, 0]]), a[rows, pos[:, 0]])
    # c's exponent E: p = half an ulp of c (fp32: 2^(E−24); E8M13: 2^(E−14); fp16: 2^(E−11)),
    # or a whole ulp, or 3/2 of one
    half = {"fp32": [24, 14, 23, 13], "fp16": [11, 10]}[out]
    E = t + rng.choice(half, size=n)
    E = np.clip(E, 1 - cbias, cbias)
    frac = rng.integers(0, 1 << fb, size=n) | rng.integers(0, 2, size=n)
    c = (((E + cbias) << fb) | frac) | (rng.integers(0, 2, n) << (eb + fb))
    if pos.shape[1] > 2:  # sticky: a tiny product in some rows
        sticky = rng.random(n) < 0.3
        a[rows, pos[:, 2]] = np.where(sticky, fmt.finite(rng, n, 1, 2), 0)
        b[rows, pos[:, 2]] = np.where(sticky, fmt.finite(rng, n, 1, 2), 0)
    if pos.shape[1] > 1:  # or a second equal product: 3/2 ulp
        dbl = rng.random(n) < 0.25
        a[rows, pos[:, 1]] = np.where(dbl, a[rows, pos[:, 0]], 0)
        b[rows, pos[:, 1]] = np.where(dbl, b[rows, pos[:, 0]], 0)
    return a, b, c.astype(udt)


def fam_signed_zeros(rng, fmt, n, K, G, out):
    """±0 operands, ±0 c, and zero-valued mixtures (x·y − x·y)."""
    sign = 1 << (fmt.width - 1)
    zero_pats = np.array([0, sign] if fmt.specials != "fnuz" else [0], fmt.dtype)
    a = rng.choice(zero_pats, size=(n, K))
    b = np.where(rng.random((n, K)) < 0.5, rng.choice(zero_pats, size=(n, K)), fmt.finite(rng, (n, K)))
    udt = C_INFO[out][0]
    c = rng.choice(np.array([0, 1 << (8 * np.dtype(udt).itemsize - 1)], udt), size=n)
    # some rows: every product −0 (+0 times a negative number) and c = −0
    neg = np.flatnonzero(rng.random(n) < 0.3)
    a[neg] = 0
    b[neg] = fmt.finite(rng, (neg.size, K), 1) | fmt.dtype(1 << (fmt.width - 1))
    c[neg] = 1 << (8 * np.dtype(udt).itemsize - 1)
    # some rows: x·y and −x·y in one group, c ±0
    pos = _slots(rng, n, K, G, min(2, K))
    rows = np.flatnonzero(rng.random(n) < 0.4)
    if pos.shape[1] > 1 and rows.size:
        x, y = fmt.finite(rng, rows.size, 1), fmt.finite(rng, rows.size)
        a[rows, pos[rows, 0]], b[rows, pos[rows, 0]] = x, y
        a[rows, pos[rows, 1]], b[rows, pos[rows, 1]] = fmt.neg(x), y
    return a, b, c.astype(udt)


def fam_specials(rng, fmt, n, K, G, out):
    """NaN / infinite operands and c (every encoding of the format), inf·0, the maxima."""
    a = fmt.finite(rng, (n, K), fmt.bias - 4, fmt.bias + 4)
    b = fmt.finite(rng, (n, K), fmt.bias - 4, fmt.bias + 4)
    sp = np.array(fmt.specials_list() + fmt.maxima(), np.int64)
    rows = np.arange(n)
    for arr in (a, b):
        hit = rng.random(n) < 0.45
        k = rng.integers(0, K, size=n)
        arr[rows[hit], k[hit]] = rng.choice(sp, size=int(hit.sum())).astype(fmt.dtype)
    zero_hit = rng.random(n) < 0.2  # inf·0 where b holds an infinity
    k = rng.integers(0, K, size=n)
    a[rows[zero_hit], k[zero_hit]] = 0
    b[rows[zero_hit], k[zero_hit]] = sp[0]
    c = c_finite(rng, n, out, C_INFO[out][4] - 4, C_INFO[out][4] + 4)
    c_hit = rng.random(n) < 0.35
    c[c_hit] = rng.choice(np.array(c_specials(out), np.int64), size=int(c_hit.sum()))
    return a, b, c


def fam_maxima(rng, fmt, n, K, G, out):
    """Only ± the largest finite value and small ones: saturating products, big cancellations."""
    mx = np.array(fmt.maxima(), fmt.dtype)
    a = rng.choice(mx, size=(n, K))
    b = rng.choice(mx, size=(n, K))
    small = rng.random((n, K)) < 0.3
    b = np.where(small, fmt.finite(rng, (n, K), 0, fmt.bias), b)
    zero = rng.random((n, K)) < 0.2
    a = np.where(zero, fmt.dtype(0), a)
    return a, b, c_finite(rng, n, out)


def fam_edges(rng, fmt, n, K, G, out):
    """Fixed rows at known boundaries, each in the first group and again in the last one.

    * wide formats: c = ±FLT_MAX and p0 = ±2^103 (half its ulp) with p1 = ±2^-50 or 0: just
      below, at and above the RNE overflow midpoint (MMA-Sim's E-FDPA gives inf just below it:
      its special-value test rounds the float64 sum to float32 twice), and p0 = 2^104: exactly
      2^128 under RZ; a product of exactly 2^128 (MI300 clips it to inf, T-FDPA adds it to
      c = −FLT_MAX and gets 2^104) and the largest product below it;
    * every format: c = ±inf or NaN beside the largest product (MMA-Sim's GTR-FDPA drops such a
      c once e_max ≥ 25: torch.frexp gives it the exponent 0);
    * c subnormal with only zero products (cut to the output grid, E8M13 included)."""
    udt = C_INFO[out][0]
    sign = 1 << (fmt.width - 1)
    mx = fmt.maxima()[0]
    rows = []  # (a0, b0, a1, b1, c)
    if fmt.ebits == 8:
        two = {k: int(fmt.pow2(k)) for k in (-25, 51, 52, 64, 63)}
        for p1 in (None, +1, -1):
            for c_neg in (0, 1):
                a1 = 0 if p1 is None else two[-25]
                b1 = 0 if p1 is None else two[-25] | (sign if p1 < 0 else 0)
                for hi in (51, 52):  # 2^103, 2^104
                    a0 = two[52] | (sign if c_neg else 0)
                    rows.append((a0, two[hi], a1, b1, 0x7F7FFFFF | (c_neg << 31)))
        below = int(fmt.bits(0, 127 + 63, fmt.fmask >> fmt.dropped << fmt.dropped))  # (2 − ulp)·2^63
        for c in (0xFF7FFFFF, 0x7F7FFFFF, 0):
            rows.append((two[64], two[64], 0, 0, c))
            rows.append((below, two[64], 0, 0, c))
    for c in c_specials(out):
        rows.append((mx, mx, 0, 0, c))
        rows.append((mx, mx | sign, mx, mx, c))
    for c in (1, 0x80000001, 0x007FFFFF, 0x00001FFF) if out == "fp32" else (1, 0x8001, 0x03FF):
        rows.append((0, mx, 0, 0, c))
    rows = rows[: n // 2]
    a, b = _zeros(fmt, n, K)
    c = np.zeros(n, udt)
    last0 = (K - 1) // G * G
    for i, (a0, b0, a1, b1, cc) in enumerate(rows + rows):
        j = last0 if i >= len(rows) and K - last0 >= 2 else 0
        a[i, j], b[i, j], a[i, j + 1], b[i, j + 1], c[i] = a0, b0, a1, b1, cc
    fill = slice(2 * len(rows), n)  # the rest: random rows near the top of the range
    a[fill] = fmt.finite(rng, (n - 2 * len(rows), K), fmt.top_e - 1 if out == "fp32" else fmt.bias + 2)
    b[fill] = fmt.finite(rng, (n - 2 * len(rows), K), fmt.bias - 1, fmt.bias + 1)
    return a, b, c


FAMILIES = {
    "random_bits": fam_random_bits,
    "binades": fam_binades,
    "subnormal": fam_subnormal,
    "cancellation": fam_cancellation,
    "far_exponents": fam_far,
    "overflow": fam_overflow,
    "flt_max": fam_flt_max,
    "ties": fam_ties,
    "signed_zeros": fam_signed_zeros,
    "specials": fam_specials,
    "maxima": fam_maxima,
    "edges": fam_edges,
}


def _length(G: int, step: int = 0) -> int:
    """K: more than one group and not a multiple of G (chained groups, a short last group); for
    a unit with emulated steps, more than one step and not a multiple of one (a padded step)."""
    if step:
        return step + step // 2 + 2
    if G == 1:
        return 5
    K = G + G // 2 + 1
    return K if K % G else K + 1


def _is_nan(bits: np.ndarray, fp16: bool) -> np.ndarray:
    if fp16:
        return ((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0)
    return ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x7FFFFF) != 0)


def test_pairs_cover_every_format():
    assert {f for _, f, _ in PAIRS} == set(FORMATS)
    assert len(PAIRS) == 38


def fam_mixed_subnormal(rng, fmt_a, fmt_b, n, K, F, out):
    """Mixed formats only: a subnormal factor of one format (its field exponent is its format's
    emin, above its binade) times a normal one of the other decides the group's largest
    exponent, and a second product with bits around 2^(e_max − F) is cut there; c = +0. The cut
    moves if the subnormal's exponent is taken from the other format. Products in slots 0 and 2
    (one group, both even: MI300 sums even and odd products apart)."""
    a, b = np.zeros((n, K), fmt_a.dtype), np.zeros((n, K), fmt_b.dtype)
    for i in range(n):
        sub_a = i % 2 == 0  # alternately A's or B's factor is the subnormal
        sub, other = (fmt_a, fmt_b) if sub_a else (fmt_b, fmt_a)
        x = int(sub.bits(rng.integers(0, 2), 0, rng.integers(1, sub.fmask + 1)))
        # large, so that the second product, 2^F below, is still normal in both formats
        e_other = int(rng.integers(other.top_e - 4, other.top_e + 1))
        f_other = rng.integers(0, other.fmask + (e_other < other.top_e))  # below an fn NaN
        y = int(other.bits(rng.integers(0, 2), e_other, f_other))
        if sub_a:
            a[i, 0], b[i, 0] = x, y
        else:
            a[i, 0], b[i, 0] = y, x
        e_max = sub.emin + (e_other - other.bias)
        t = e_max - F + int(rng.integers(-2, 5))  # the second product straddles the cut
        ea = int(np.clip(t // 2, fmt_a.emin, fmt_a.emax))
        eb = t - ea
        if fmt_b.emin <= eb <= fmt_b.emax and K > 2:
            a[i, 2] = fmt_a.bits(rng.integers(0, 2), ea + fmt_a.bias, rng.integers(0, fmt_a.fmask + 1))
            b[i, 2] = fmt_b.bits(rng.integers(0, 2), eb + fmt_b.bias, rng.integers(1, fmt_b.fmask + 1))
    return a, b, np.zeros(n, C_INFO[out][0])


def _rows(seed: str, fmt_a: Fmt, fmt_b: Fmt, K: int, G: int, F: int, out: str):
    """(a, b, c, family labels) of every family. With two formats each family runs twice from
    the same seed, once per format, and a comes from the first run, b and c from the second: the
    families draw the same number of values whatever the format, so positions, cancelling pairs
    and zero slots line up, and every product has an A factor of ``fmt_a`` and a B factor of
    ``fmt_b`` (e4m3 subnormals beside e5m2 ones: the two operands' own subnormal exponents)."""
    parts_a, parts_b = [], []
    for fmt, parts in ((fmt_a, parts_a), (fmt_b, parts_b)):
        rng = np.random.default_rng(zlib.crc32(seed.encode()))
        parts += [(label, gen(rng, fmt, ROWS_PER_FAMILY, K, G, out)) for label, gen in FAMILIES.items()]
    if fmt_a.name != fmt_b.name:
        rng = np.random.default_rng(zlib.crc32(seed.encode()) + 1)
        rows = fam_mixed_subnormal(rng, fmt_a, fmt_b, ROWS_PER_FAMILY, K, F, out)
        parts_a.append(("mixed_subnormal", rows))
        parts_b.append(("mixed_subnormal", rows))
    a = np.concatenate([p[1][0] for p in parts_a]).astype(fmt_a.dtype)
    b = np.concatenate([p[1][1] for p in parts_b]).astype(fmt_b.dtype)
    c = np.concatenate([p[1][2] for p in parts_b]).astype(C_INFO[out][0])
    fam = [label for label, p in parts_b for _ in range(len(p[2]))]
    assert a.shape == b.shape == (len(c), K)
    return a, b, c, fam


@pytest.mark.parametrize("name,fmt_name,out", PAIRS, ids=[f"{n}-{f}-{o}" for n, f, o in PAIRS])
def test_format_matches_oracle(name, fmt_name, out):
    _check_against_oracle(name, fmt_name, fmt_name, out)


@pytest.mark.parametrize("name,fmt_a,fmt_b,out", MIXED, ids=[f"{n}-{a}x{b}-{o}" for n, a, b, o in MIXED])
def test_mixed_fp8_matches_oracle(name, fmt_a, fmt_b, out):
    """e4m3 × e5m2 (and the reverse; MI300's fp8 × bf8): the same kernels, each operand with its
    own format (no new compilation: every fp8 format runs as fp16 patterns)."""
    _check_against_oracle(name, fmt_a, fmt_b, out)


def test_mixed_pairs_cover_every_unit_with_fp8():
    assert {n for n, *_ in MIXED} == {"ada", "h100", "b200", "mi300", "fma32", "fp64"}
    assert len(MIXED) == 22


@pytest.mark.parametrize("name,fmt_a,fmt_b,out", STEPPED, ids=[f"{n}-{a}x{b}-{o}" for n, a, b, o in STEPPED])
def test_fp8_mma_matches_oracle(name, fmt_a, fmt_b, out):
    """fp8 mma.sync on Hopper and Blackwell: the emulated steps (two fp16 groups of 16 per k32,
    pairs alternating, from +0, then one RNE addition of c), K = 50 (a padded second step)."""
    unit = models.unit(name, input=(fmt_a, fmt_b), output=out, instruction="mma")
    assert (unit.step_size, unit.group_size) == (32, 16)
    _check_against_oracle(name, fmt_a, fmt_b, out, instruction="mma")


def _check_against_oracle(name, fmt_name, b_name, out, instruction=None):
    spec = fmt_name if b_name == fmt_name else (fmt_name, b_name)
    unit = models.unit(name, input=spec, output=out, instruction=instruction)
    params = unit.params
    fmt, fmt_b = Fmt(fmt_name), Fmt(b_name)
    fp16 = out == "fp16"
    G = params.group_size
    K = _length(G, params.step_size)
    seed = f"{name}/{fmt_name}/{out}" if b_name == fmt_name else f"{name}/{fmt_name}x{b_name}/{out}"
    seed += f"/{instruction}" if instruction else ""
    a, b, c, fam = _rows(seed, fmt, fmt_b, K, G, params.fraction_bits, out)

    with np.errstate(invalid="ignore"):  # signalling-NaN patterns warn when cast (harmless)
        got = np.asarray(emu.dot_add(a, b, c.view(C_INFO[out][1]), unit))
    got_bits = got.view(C_INFO[out][0]).astype(np.uint32)
    want = np.array(reference_batch((a.tolist(), b.tolist(), [int(x) for x in c], params)), np.uint32)
    ok = (got_bits == want) | (_is_nan(got_bits, fp16) & _is_nan(want, fp16))
    if not ok.all():
        bad = np.flatnonzero(~ok)
        w = 4 if fp16 else 8
        d = np.dtype(fmt.dtype).itemsize * 2
        spec = fmt_name if b_name == fmt_name else f"{fmt_name}x{b_name}"
        lines = [
            f"  [{fam[i]}] a={[f'{x:0{d}x}' for x in a[i]]} b={[f'{x:0{d}x}' for x in b[i]]} "
            f"c=0x{int(c[i]):0{w}x} → dot_add 0x{int(got_bits[i]):0{w}x}, oracle 0x{int(want[i]):0{w}x}"
            for i in bad[:6]
        ]
        pytest.fail(
            f"{name} {spec} ({out} out, K={K}): {bad.size}/{len(c)} differ from the exact oracle "
            f"(per family: {dict(Counter(fam[i] for i in bad))})\n" + "\n".join(lines),
            pytrace=False,
        )
