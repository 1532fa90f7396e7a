"""Adversarial input generators for the matrix-unit kernels.

Every generator takes a seeded ``numpy.random.Generator``, a row count ``n`` and a length ``K``,
and returns ``(a_bits, b_bits, c_bits)``: fp16 bit patterns ``uint16 (n, K)`` for a and b, and
the accumulator as fp32 bits ``uint32 (n,)`` — or fp16 bits ``uint16 (n,)`` when
``c_format="fp16"`` (units with an fp16 output). Everything is vectorised.

Families (``FAMILIES``, in order):

``uniform``         a, b ~ U(−1, 1) rounded to fp16; c ~ U(−1, 1)·scale
``random_bits``     uniformly random finite bit patterns (products over 2^-48 … 2^32)
``subnormal``       fp16 subnormal and near-subnormal factors, fp32 (fp16) subnormal c, zero rows
``cancellation``    products in pairs ±x (spread over the groups), c ≈ −(rest of the sum)
``ties``            exact sum on a midpoint of the output format, with or without a sticky term
``far_exponents``   products near 2^30 next to products near 2^-48, c anywhere
``overflow``        products near ±65504², c near ±(format max)
``nan_inf``         NaN and ±inf factors and c, inf·0
``signed_zeros``    every term ±0 in random sign combinations (and zero-valued mixtures)
"""

from __future__ import annotations

import numpy as np

__all__ = ["FAMILIES", "GENERATORS", "all_families", "concat", "generate"]

FAMILIES = (
    "uniform",
    "random_bits",
    "subnormal",
    "cancellation",
    "ties",
    "far_exponents",
    "overflow",
    "nan_inf",
    "signed_zeros",
)

_C_INFO = {
    # c format: (dtype of bits, float dtype, fraction bits, exponent bits, min normal exponent)
    "fp32": (np.uint32, np.float32, 23, 8, -126),
    "fp16": (np.uint16, np.float16, 10, 5, -14),
}


# ----------------------------------------------------------------------------- bit helpers


def _f16_bits(x) -> np.ndarray:
    """fp16 bits of float values (RNE conversion; values must be finite in fp16)."""
    return np.asarray(x, dtype=np.float64).astype(np.float16).view(np.uint16)


def _c_bits(x, c_format: str) -> np.ndarray:
    utype, ftype = _C_INFO[c_format][:2]
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float64).astype(ftype).view(utype)


def _pow2_f16(e: np.ndarray) -> np.ndarray:
    """fp16 bits of 2^e for integer e in [−24, 15]."""
    e = np.asarray(e, dtype=np.int64)
    assert np.all((e >= -24) & (e <= 15))
    normal = (e + 15) << 10
    sub = np.left_shift(1, np.clip(e + 24, 0, 9))
    return np.where(e >= -14, normal, sub).astype(np.uint16)


def _pow2_product(rng, t: np.ndarray):
    """fp16 bits (a, b), both powers of two, with a·b = 2^t exactly (t in [−48, 30])."""
    t = np.asarray(t, dtype=np.int64)
    lo = np.maximum(-24, t - 15)
    hi = np.minimum(15, t + 24)
    assert np.all(lo <= hi), "product exponent out of the fp16·fp16 range"
    ta = lo + (rng.random(t.shape) * (hi - lo + 1)).astype(np.int64)
    return _pow2_f16(ta), _pow2_f16(t - ta)


def _random_finite_f16(rng, shape) -> np.ndarray:
    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint32).astype(np.uint16)
    exp = (bits >> 10) & 0x1F
    fix = rng.integers(0, 31, size=shape, dtype=np.uint16)  # exponent fields 0..30
    return np.where(exp == 31, (bits & 0x83FF) | (fix << 10), bits).astype(np.uint16)


def _random_finite_c(rng, n, c_format) -> np.ndarray:
    if c_format == "fp16":
        return _random_finite_f16(rng, (n,))
    bits = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    exp = (bits >> 23) & 0xFF
    fix = rng.integers(0, 255, size=n, dtype=np.uint32)
    return np.where(exp == 255, (bits & np.uint32(0x807FFFFF)) | (fix << 23), bits).astype(np.uint32)


def _signs(rng, shape) -> np.ndarray:
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0)


def _with_sign16(bits, neg) -> np.ndarray:
    return np.where(neg, bits | 0x8000, bits & 0x7FFF).astype(np.uint16)


def _f16_random_in_binades(rng, shape, emin, emax) -> np.ndarray:
    """Random fp16 normals with exponent in [emin, emax] (each within [−14, 15]), random sign."""
    e = rng.integers(emin, emax + 1, size=shape)
    m = rng.integers(0, 1024, size=shape)
    bits = ((e + 15) << 10 | m).astype(np.uint16)
    return _with_sign16(bits, rng.random(shape) < 0.5)


# ----------------------------------------------------------------------------- families


def gen_uniform(rng, n, K, c_format="fp32"):
    a = _f16_bits(rng.uniform(-1, 1, (n, K)))
    b = _f16_bits(rng.uniform(-1, 1, (n, K)))
    scale = np.array([0.0, 1.0, float(K), 1e-3, 1e3])[rng.integers(0, 5, n)]
    if c_format == "fp16":
        scale = np.minimum(scale, 100.0)
    c = _c_bits(rng.uniform(-1, 1, n) * scale, c_format)
    return a, b, c


def gen_random_bits(rng, n, K, c_format="fp32"):
    a = _random_finite_f16(rng, (n, K))
    b = _random_finite_f16(rng, (n, K))
    if c_format == "fp16":  # exponent fields ≤ 22 (|x| < 2^8), so most sums stay below 65504
        shape = (n, K)
        a = np.where(((a >> 10) & 0x1F) > 22, (a & 0x83FF) | (rng.integers(0, 23, shape, dtype=np.uint16) << 10), a)
        b = np.where(((b >> 10) & 0x1F) > 22, (b & 0x83FF) | (rng.integers(0, 23, shape, dtype=np.uint16) << 10), b)
        a, b = a.astype(np.uint16), b.astype(np.uint16)
    c = _random_finite_c(rng, n, c_format)
    # half the rows: c in the products' range, so it interacts with them
    mid = rng.random(n) < 0.5
    if c_format == "fp32":
        cm = _c_bits(_signs(rng, n) * np.ldexp(rng.uniform(1, 2, n), rng.integers(-50, 33, n)), c_format)
    else:
        cm = _c_bits(_signs(rng, n) * np.ldexp(rng.uniform(1, 2, n), rng.integers(-24, 15, n)), c_format)
    return a, b, np.where(mid, cm, c).astype(c.dtype)


def gen_subnormal(rng, n, K, c_format="fp32"):
    shape = (n, K)
    kind = rng.integers(0, 4, size=shape)
    sub = _with_sign16(rng.integers(0, 1024, size=shape).astype(np.uint16), rng.random(shape) < 0.5)
    near = _f16_random_in_binades(rng, shape, -14, -12)  # smallest normals
    # lifts subnormal·normal products to ordinary magnitudes (fp16 output: kept below overflow)
    big = _f16_random_in_binades(rng, shape, -2, 15 if c_format == "fp32" else 7)
    a = np.where(kind == 0, sub, np.where(kind == 1, near, np.where(kind == 2, big, sub)))
    kind_b = rng.integers(0, 3, size=shape)
    b = np.where(kind_b == 0, sub[:, ::-1], np.where(kind_b == 1, near[:, ::-1], big))
    # some rows have no nonzero product at all, so c meets only zeros
    zero_rows = rng.random(n) < 0.2
    a = np.where(zero_rows[:, None], _with_sign16(np.zeros(shape, np.uint16), rng.random(shape) < 0.5), a)
    utype, _, fbits, ebits, _ = _C_INFO[c_format]
    mant = rng.integers(0, 1 << fbits, size=n).astype(np.uint64)
    sign = (rng.random(n) < 0.5).astype(np.uint64) << (fbits + ebits)
    ckind = rng.integers(0, 4, size=n)
    exp_field = np.where(ckind == 0, 0, np.where(ckind == 1, 1, np.where(ckind == 2, 0, 2))).astype(np.uint64)
    mant = np.where(ckind == 2, rng.integers(0, 4, size=n).astype(np.uint64), mant)  # a few ulps
    c = (sign | (exp_field << fbits) | mant).astype(utype)
    return a.astype(np.uint16), b.astype(np.uint16), c


def gen_cancellation(rng, n, K, c_format="fp32"):
    shape = (n, K)
    lo, hi = (-6, 6) if c_format == "fp32" else (-6, 3)
    a = _f16_random_in_binades(rng, shape, lo, hi)
    b = _f16_random_in_binades(rng, shape, lo, hi)
    # pair position 2i+1 with 2i: same product, opposite sign (a negated, or factors swapped)
    npairs = K // 2
    paired = rng.random((n, npairs)) < 0.75
    swap = rng.random((n, npairs)) < 0.5
    for i in range(npairs):
        j0, j1 = 2 * i, 2 * i + 1
        na = np.where(swap[:, i], b[:, j0], a[:, j0] ^ 0x8000)
        nb = np.where(swap[:, i], a[:, j0] ^ 0x8000, b[:, j0])
        a[:, j1] = np.where(paired[:, i], na, a[:, j1])
        b[:, j1] = np.where(paired[:, i], nb, b[:, j1])
    # spread the pairs over the groups: one random permutation of k per row
    perm = np.argsort(rng.random(shape), axis=1)
    a = np.take_along_axis(a, perm, axis=1)
    b = np.take_along_axis(b, perm, axis=1)
    # c ≈ −Σp: products are multiples of 2^-34 below 2^16, so the float64 sum is exact
    p = a.view(np.float16).astype(np.float64) * b.view(np.float16).astype(np.float64)
    s = p.sum(axis=1)
    utype, ftype = _C_INFO[c_format][:2]
    cb = _c_bits(-s, c_format).astype(np.int64)
    # nudge by a few ulps (same sign side), or take −s exactly when representable
    nudge = rng.integers(-2, 3, size=n)
    cb = np.where((cb & ((1 << (8 * np.dtype(utype).itemsize - 1)) - 1)) > 4, cb + nudge, cb)
    c = cb.astype(utype)
    exact_rows = rng.random(n) < 0.3
    c = np.where(exact_rows, _c_bits(-s, c_format), c).astype(utype)
    return a, b, c


def gen_ties(rng, n, K, c_format="fp32"):
    """The exact sum sits on a midpoint of the output format (plus, in some rows, a sticky term)."""
    utype, ftype, fbits, _, cemin = _C_INFO[c_format]
    shape = (n, K)
    a = np.zeros(shape, np.uint16)
    b = np.zeros(shape, np.uint16)
    # E: binade of c; half-ulp product 2^(E − fbits − 1), which must be an fp16·fp16 product
    if c_format == "fp32":
        E = rng.integers(-20, 40, size=n)
    else:
        E = rng.integers(-13, 15, size=n)
    with_c = rng.random(n) < 0.8
    mant = rng.integers(0, 1 << fbits, size=n)
    cval = np.ldexp(1.0 + mant / float(1 << fbits), E) * _signs(rng, n)
    c = np.where(with_c, _c_bits(cval, c_format), 0).astype(utype)
    # without c: a big product 2^m takes its place (m ≤ 30)
    m = np.minimum(E, 30)
    E = np.where(with_c, E, m)
    half = E - fbits - 1
    ok = half >= -48
    half = np.maximum(half, -48)
    cols = np.argsort(rng.random(shape), axis=1)  # distinct random positions per row
    rows = np.arange(n)
    sgn_half = rng.random(n) < 0.5
    ta, tb = _pow2_product(rng, half)
    k0 = cols[:, 0]
    a[rows, k0] = _with_sign16(ta, sgn_half)
    b[rows, k0] = tb
    if K >= 2:
        # the big product when there is no c
        ba, bb = _pow2_product(rng, np.clip(m, -48, 30))
        k1 = cols[:, 1]
        big_sign = np.asarray(cval < 0)
        a[rows, k1] = np.where(with_c, a[rows, k1], _with_sign16(ba, big_sign))
        b[rows, k1] = np.where(with_c, b[rows, k1], bb)
    if K >= 3:
        # sticky: ±2^(half − d) in some rows
        d = rng.integers(1, 30, size=n)
        sticky = (rng.random(n) < 0.5) & (half - d >= -48)
        sa, sb = _pow2_product(rng, np.maximum(half - d, -48))
        k2 = cols[:, 2]
        a[rows, k2] = np.where(sticky, _with_sign16(sa, rng.random(n) < 0.5), a[rows, k2])
        b[rows, k2] = np.where(sticky, sb, b[rows, k2])
    if K >= 5:
        # a cancelling pair of larger products, which moves the alignment maximum
        t = np.clip(E + rng.integers(-2, 4, size=n), -48, 30)
        pa, pb = _pow2_product(rng, t)
        pair = rng.random(n) < 0.4
        for col, neg in ((cols[:, 3], False), (cols[:, 4], True)):
            a[rows, col] = np.where(pair, _with_sign16(pa, np.full(n, neg)), a[rows, col])
            b[rows, col] = np.where(pair, pb, b[rows, col])
    if K >= 6:
        # split the half-ulp into two quarter-ulp products in some rows
        split = (rng.random(n) < 0.3) & (half - 1 >= -48)
        qa, qb = _pow2_product(rng, np.maximum(half - 1, -48))
        a[rows, k0] = np.where(split, _with_sign16(qa, sgn_half), a[rows, k0])
        b[rows, k0] = np.where(split, qb, b[rows, k0])
        k5 = cols[:, 5]
        a[rows, k5] = np.where(split, _with_sign16(qa, sgn_half), a[rows, k5])
        b[rows, k5] = np.where(split, qb, b[rows, k5])
    # rows whose half-ulp is below the fp16 product range fall back to plain random data
    ra, rb, rc = gen_uniform(rng, n, K, c_format)
    a = np.where(ok[:, None], a, ra)
    b = np.where(ok[:, None], b, rb)
    c = np.where(ok, c, rc).astype(utype)
    return a, b, c


def gen_far_exponents(rng, n, K, c_format="fp32"):
    shape = (n, K)
    big = rng.random(shape) < 0.5
    top = 15 if c_format == "fp32" else 6  # fp32: products near 2^30; fp16 output: near 2^12
    ha = _f16_random_in_binades(rng, shape, top - 2, top)
    hb = _f16_random_in_binades(rng, shape, top - 2, top)
    tiny_a = _with_sign16(rng.integers(1, 1024, size=shape).astype(np.uint16), rng.random(shape) < 0.5)
    tiny_b = np.where(
        rng.random(shape) < 0.5,
        _with_sign16(rng.integers(1, 1024, size=shape).astype(np.uint16), rng.random(shape) < 0.5),
        _f16_random_in_binades(rng, shape, -14, -10),
    )
    a = np.where(big, ha, tiny_a).astype(np.uint16)
    b = np.where(big, hb, tiny_b).astype(np.uint16)
    if c_format == "fp32":
        e = np.array([-140, -48, -30, 0, 20, 31, 40, 100])[rng.integers(0, 8, n)]
    else:
        e = np.array([-24, -14, -5, 0, 10, 15])[rng.integers(0, 6, n)]
    cval = _signs(rng, n) * np.ldexp(rng.uniform(1, 2, n), e)
    cval = np.where(rng.random(n) < 0.15, 0.0, cval)
    return a, b, _c_bits(cval, c_format)


def gen_overflow(rng, n, K, c_format="fp32"):
    shape = (n, K)
    m = rng.integers(896, 1024, size=shape)  # near the top of the binade
    top = 30 if c_format == "fp32" else 22  # fp32: products near 65504²; fp16: near 2^16
    e = rng.integers(top - 1, top + 1, size=shape)
    a = _with_sign16(((e << 10) | m).astype(np.uint16), rng.random(shape) < 0.5)
    mb = rng.integers(896, 1024, size=shape)
    b = _with_sign16(((top << 10) | mb).astype(np.uint16), rng.random(shape) < 0.3)
    small = rng.random(shape) < 0.2
    a = np.where(small, _f16_bits(rng.uniform(-1, 1, shape)), a).astype(np.uint16)
    utype, _, fbits, ebits, _ = _C_INFO[c_format]
    emax_field = (1 << ebits) - 2
    cm = rng.integers((1 << fbits) - 64, 1 << fbits, size=n).astype(np.uint64)
    ce = (emax_field - rng.integers(0, 2, size=n)).astype(np.uint64)
    sign = (rng.random(n) < 0.5).astype(np.uint64) << (fbits + ebits)
    c = (sign | (ce << fbits) | cm).astype(utype)
    c = np.where(rng.random(n) < 0.2, 0, c).astype(utype)
    return a, b, c


def gen_nan_inf(rng, n, K, c_format="fp32"):
    a, b, c = gen_uniform(rng, n, K, c_format)
    specials16 = np.array([0x7C00, 0xFC00, 0x7C00, 0xFC00, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFFFF], np.uint16)
    rows = np.arange(n)
    k1 = rng.integers(0, K, size=n)
    pick = specials16[rng.integers(0, len(specials16), size=n)]
    which = rng.integers(0, 3, size=n)  # a, b, or both sides' entries
    a[rows, k1] = np.where(which != 1, pick, a[rows, k1])
    b[rows, k1] = np.where(which == 1, pick, b[rows, k1])
    # inf · 0 in some rows
    inf0 = rng.random(n) < 0.15
    b[rows, k1] = np.where(inf0 & (which != 1), np.where(rng.random(n) < 0.5, 0x0000, 0x8000), b[rows, k1])
    # a second special elsewhere (possibly the opposite infinity)
    k2 = rng.integers(0, K, size=n)
    second = rng.random(n) < 0.3
    pick2 = specials16[rng.integers(0, 2, size=n)]
    a[rows, k2] = np.where(second, pick2, a[rows, k2])
    # some rows with a clean input and only c special; some with c special as well
    clean = rng.random(n) < 0.15
    a = np.where(clean[:, None], _f16_bits(rng.uniform(-1, 1, (n, K))), a).astype(np.uint16)
    if c_format == "fp32":
        cspec = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001], np.uint32)
    else:
        cspec = np.array([0x7C00, 0xFC00, 0x7E00, 0xFE01], np.uint16)
    cs = rng.random(n) < np.where(clean, 1.0, 0.2)
    c = np.where(cs, cspec[rng.choice(4, size=n, p=[0.35, 0.35, 0.15, 0.15])], c).astype(c.dtype)
    return a, b, c


def gen_signed_zeros(rng, n, K, c_format="fp32"):
    shape = (n, K)
    # per row, the products' signs: 0 all −0, 1 all +0, 2 random
    mode = rng.integers(0, 3, size=n)[:, None]
    neg_p = np.where(mode == 0, True, np.where(mode == 1, False, rng.random(shape) < 0.5))
    neg_a = rng.random(shape) < 0.5
    a = np.where(neg_a, 0x8000, 0x0000).astype(np.uint16)
    b = np.where(neg_a != neg_p, 0x8000, 0x0000).astype(np.uint16)
    # a quarter of the rows: one factor of each product nonzero (the products are still ±0)
    nz = (rng.random(n) < 0.25)[:, None] & (rng.random(shape) < 0.5)
    other = _f16_bits(rng.uniform(0.1, 2, shape))  # positive: the product's sign stays neg_p
    a, b = np.where(nz, _with_sign16(other, neg_a), a), np.where(nz, _with_sign16(b, neg_a != neg_p), b)
    # a further fifth: some ±(fp16 subnormal)·(±1): zero on flushing units, tiny elsewhere
    sub = (rng.random(n) < 0.2)[:, None] & (rng.random(shape) < 0.3)
    tiny = _with_sign16(rng.integers(1, 1024, size=shape).astype(np.uint16), rng.random(shape) < 0.5)
    a = np.where(sub, tiny, a).astype(np.uint16)
    b = np.where(sub, _with_sign16(np.full(shape, 0x3C00, np.uint16), rng.random(shape) < 0.5), b)
    utype, _, fbits, ebits, _ = _C_INFO[c_format]
    signbit = 1 << (fbits + ebits)
    c = np.where(rng.random(n) < 0.6, signbit, 0).astype(utype)
    # some c are ±(smallest subnormal): flushed to +0 by flushing units
    c = np.where(rng.random(n) < 0.1, c | 1, c).astype(utype)
    return a.astype(np.uint16), b.astype(np.uint16), c


GENERATORS = {
    "uniform": gen_uniform,
    "random_bits": gen_random_bits,
    "subnormal": gen_subnormal,
    "cancellation": gen_cancellation,
    "ties": gen_ties,
    "far_exponents": gen_far_exponents,
    "overflow": gen_overflow,
    "nan_inf": gen_nan_inf,
    "signed_zeros": gen_signed_zeros,
}
assert tuple(GENERATORS) == FAMILIES


def generate(family: str, rng, n: int, K: int, c_format: str = "fp32"):
    """One family's batch: (a uint16 (n, K), b uint16 (n, K), c uint32 (n,) or uint16 for fp16)."""
    if c_format not in _C_INFO:
        raise ValueError(f"c_format: {c_format!r} is not 'fp32' or 'fp16'")
    if K < 1 or n < 0:
        raise ValueError("need K ≥ 1 and n ≥ 0")
    a, b, c = GENERATORS[family](rng, n, K, c_format)
    utype = _C_INFO[c_format][0]
    a = np.ascontiguousarray(a, dtype=np.uint16)
    b = np.ascontiguousarray(b, dtype=np.uint16)
    c = np.ascontiguousarray(c, dtype=utype)
    assert a.shape == b.shape == (n, K) and c.shape == (n,)
    return a, b, c


def all_families(rng, n_per_family: int, K: int, c_format: str = "fp32"):
    """{family name: (a_bits, b_bits, c_bits)} for every family, n_per_family rows each."""
    return {name: generate(name, rng, n_per_family, K, c_format) for name in FAMILIES}


def concat(batches):
    """Stack a dict (or list) of (a, b, c) batches into one batch plus a per-row family label."""
    items = list(batches.items()) if isinstance(batches, dict) else list(enumerate(batches))
    a = np.concatenate([x[1][0] for x in items])
    b = np.concatenate([x[1][1] for x in items])
    c = np.concatenate([x[1][2] for x in items])
    labels = np.concatenate([np.full(len(x[1][2]), str(x[0]), dtype=object) for x in items])
    return a, b, c, labels
