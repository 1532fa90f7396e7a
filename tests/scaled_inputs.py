"""Input rows for the block-scaled units, in named families (tests/emu/test_blockscale.py against
the exact reference, tests/oracle/test_mmasim_blockscale.py against MMA-Sim).

Every family gives (a, b, sa, sb, c): operand patterns (P, K) uint8 (fp6 / fp4 in the low bits),
scale patterns (P, K // block) uint8, c (P,) float32. Built from the formats' layouts alone.

``uniform``    finite operands of every pattern, scales near 1, c of any magnitude or zero;
``cancel``     equal products of opposite signs in one block (exact cancellation), c ± a product;
``scales60``   scales of 2^±60 (UE8M0; UE4M3: its smallest subnormal and largest value);
``tiny``       the smallest operands (subnormals, zeros) and zero products, under scales that put
               the products around the zero exponent (2^-184 … 2^-124; the smallest scales
               too), c zero or an fp32 subnormal: where the zero exponent and the fp32
               subnormal grid decide;
``nan_zero``   NaN scales and zero scales (UE4M3's; UE8M0 has no zero: its smallest, 2^-127);
``special``    any operand pattern (inf and NaN encodings too) and c inf / NaN / max.
"""

from __future__ import annotations

import numpy as np

FAMILIES = ("uniform", "cancel", "scales60", "tiny", "nan_zero", "special")
#: format → (pattern bits, exponent bits, fraction bits, specials)
FORMATS = {
    "e4m3": (8, 4, 3, "fn"),
    "e5m2": (8, 5, 2, "ieee"),
    "e3m2": (6, 3, 2, "none"),
    "e2m3": (6, 2, 3, "none"),
    "e2m1": (4, 2, 1, "none"),
}


def finite_patterns(fmt: str) -> np.ndarray:
    """Every finite pattern of ``fmt``."""
    bits, E, M, kind = FORMATS[fmt]
    x = np.arange(1 << bits)
    mag = x & ((1 << (bits - 1)) - 1)
    if kind == "ieee":
        keep = (mag >> M) != (1 << E) - 1
    elif kind == "fn":
        keep = mag != (1 << (E + M)) - 1
    else:
        keep = np.ones(x.shape, bool)
    return x[keep].astype(np.uint8)


def tiny_patterns(fmt: str) -> np.ndarray:
    """Zeros, the subnormals and the smallest normal binade of ``fmt`` (both signs)."""
    bits, E, M, _ = FORMATS[fmt]
    mags = np.arange(1 << (M + 1))  # exponent field 0 and 1
    return np.concatenate([mags, mags | (1 << (bits - 1))]).astype(np.uint8)


def _scales(rng, scale: str, shape, low: int, high: int) -> np.ndarray:
    return rng.integers(low, high, shape).astype(np.uint8)


def family_rows(family: str, fa: str, fb: str, scale: str, block: int, P: int, K: int, seed: int):
    """(a, b, sa, sb, c) of ``family`` for A in ``fa``, B in ``fb`` (module docstring)."""
    rng = np.random.default_rng(seed)
    KB = K // block
    a = rng.choice(finite_patterns(fa), (P, K))
    b = rng.choice(finite_patterns(fb), (P, K))
    ue8 = scale == "ue8m0"
    sa = _scales(rng, scale, (P, KB), 120, 135) if ue8 else _scales(rng, scale, (P, KB), 0x30, 0x48)
    sb = _scales(rng, scale, (P, KB), 120, 135) if ue8 else _scales(rng, scale, (P, KB), 0x30, 0x48)
    c = (rng.standard_normal(P) * 2.0 ** rng.integers(-40, 40, P)).astype(np.float32)
    c[rng.random(P) < 0.2] = 0.0
    if family == "cancel":
        k = np.arange(0, K, 2)  # pairs (k, k + 1) inside one block
        a[:, k + 1] = a[:, k] ^ (1 << (FORMATS[fa][0] - 1))
        b[:, k + 1] = b[:, k]
        odd = rng.random((P, K // 2)) < 0.15  # a few pairs left unbalanced
        a[:, k + 1] = np.where(odd, rng.choice(finite_patterns(fa), (P, K // 2)), a[:, k + 1])
        c[rng.random(P) < 0.5] = 0.0
    elif family == "scales60":
        if ue8:
            sa = np.where(rng.random((P, KB)) < 0.5, 127 + 60, 127 - 60).astype(np.uint8)
            sb = np.where(rng.random((P, KB)) < 0.5, 127 + 60, 127 - 60).astype(np.uint8)
        else:
            sa = np.where(rng.random((P, KB)) < 0.5, 0x7E, 0x01).astype(np.uint8)
            sb = np.where(rng.random((P, KB)) < 0.5, 0x7E, 0x01).astype(np.uint8)
        c = (rng.standard_normal(P) * 2.0 ** rng.integers(-120, 120, P)).astype(np.float32)
    elif family == "tiny":
        half = P // 2
        a[:half] = rng.choice(tiny_patterns(fa), (half, K))
        b[:half] = rng.choice(tiny_patterns(fb), (half, K))
        a[rng.random((P, K)) < 0.25] = 0
        q = P // 4  # a quarter of sparse rows: the largest and smallest magnitudes, either sign
        for x, fmt in ((a, fa), (b, fb)):
            fin = finite_patterns(fmt)
            sign = 1 << (FORMATS[fmt][0] - 1)
            ends = np.array([fin[fin < sign].max(), 1], np.uint8)
            sparse = np.where(rng.random((q, K)) < 0.15, rng.choice(ends, (q, K)), 0)
            x[half : half + q] = sparse | np.where(rng.random((q, K)) < 0.5, sign, 0)
        if ue8:  # scale exponents summing to -184 … -124: products around the zero exponent
            sa = _scales(rng, scale, (P, KB), 127 - 92, 127 - 61)
            sb = _scales(rng, scale, (P, KB), 127 - 92, 127 - 61)
            sa[:2] = _scales(rng, scale, (2, KB), 0, 3)
        else:
            sa = _scales(rng, scale, (P, KB), 1, 9)
            sb = _scales(rng, scale, (P, KB), 1, 9)
        tiny_c = (rng.integers(0, 1 << 12, P).astype(np.uint32) | (rng.integers(0, 2, P).astype(np.uint32) << 31)).view(
            np.float32
        )
        c = np.where(rng.random(P) < 0.7, np.float32(0.0), tiny_c).astype(np.float32)
    elif family == "nan_zero":
        nan = 0xFF if ue8 else 0x7F
        zero = 0x00  # UE4M3 zero; UE8M0's smallest, 2^-127
        for s in (sa, sb):
            r = rng.random(s.shape)
            s[r < 0.15] = nan
            s[(r >= 0.15) & (r < 0.4)] = zero
            if not ue8:
                s[(r >= 0.4) & (r < 0.5)] = rng.choice([0x80, 0xFF, 0xC8], int(((r >= 0.4) & (r < 0.5)).sum()))
    elif family == "special":
        a = rng.integers(0, 1 << FORMATS[fa][0], (P, K)).astype(np.uint8)
        b = rng.integers(0, 1 << FORMATS[fb][0], (P, K)).astype(np.uint8)
        pick = rng.random(P)
        c[pick < 0.1] = np.inf
        c[(pick >= 0.1) & (pick < 0.2)] = -np.inf
        c[(pick >= 0.2) & (pick < 0.3)] = np.nan
        c[(pick >= 0.3) & (pick < 0.4)] = np.float32(3.4028235e38)
        if ue8:
            sa[:, :] = _scales(rng, scale, (P, KB), 200, 255)
    elif family != "uniform":
        raise ValueError(f"family: {family!r} is not one of {', '.join(FAMILIES)}")
    return a.astype(np.uint8), b.astype(np.uint8), sa, sb, c.astype(np.float32)
