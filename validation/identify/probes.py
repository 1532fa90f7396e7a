"""Probe sets: fp16 dot products chosen to tell the points of ``models.space`` apart.

A probe set is R rows of ``d = c + Σ_k a_k·b_k`` over K products: ``a``, ``b`` (R, K) uint16
fp16 bit patterns and ``c`` (R,) uint32 fp32 bit patterns (uint16 fp16 patterns for an fp16
accumulator). It is saved as an ``.npz`` with those three arrays (plus ``category``, the kind
of each row, as strings); a device run adds ``d`` (uint32, or uint16 for fp16 outputs) beside
them (``validation.identify.probe_gpu``), and ``fp16emu identify`` reads the result.

Every row is finite (no inf or NaN input: those propagate the same way through every point).
The rows come in categories, each aimed at some axes of the space (values as exact binary
fractions, so the differences between points are in the last bits):

``random``     moderate values of both signs: the everyday case
``bits``       uniformly random finite fp16 bit patterns and wide fp32 accumulators
``span``       products and accumulator spread over 60 binades: alignment beyond the window
``window``     one large product and one 2^-(F±4) below it, or an accumulator at that distance:
               the number of fraction bits kept in the alignment (F, F2)
``ties``       an accumulator and products that land exactly on a rounding tie of the output
               format, with and without a sticky bit 2^-s below it: RNE/RZ/RD, sticky handling
``cancel``     an accumulator that cancels the products' sum to a few bits: normalisation after
               cancellation, truncation of the cancelled terms
``groups``     two to four non-zero products at random k with exponents 8–30 apart and the rest
               zero: the group size and the instruction's k order
``subnormal``  subnormal fp16 inputs, subnormal fp32 accumulators: the flush rules
``tiny``       a zero or tiny accumulator with products near 2^-28: the exponent of zero terms
``zeros``      signed zeros and exact cancellation: the sign of zero results
``overflow``   products near 2^31 and accumulators near the format's largest value: overflow
               to inf of the sum or of the output conversion

The generator is deterministic for a seed; categories are interleaved so that any prefix of
the rows covers every category.
"""

from __future__ import annotations

import numpy as np

from ..files import load_npz_file, write_atomically

__all__ = ["CATEGORIES", "ProbeSet", "load_inputs", "probe_set", "save"]

CATEGORIES = ("random", "bits", "span", "window", "ties", "cancel", "groups", "subnormal", "tiny", "zeros", "overflow")

_F16_MAX_EXP = 15
_F16_MIN_EXP = -14


class ProbeSet:
    """The inputs of a probe set (see the module docstring): ``a``, ``b`` (R, K) uint16, ``c`` (R,)
    uint32 (uint16 with an fp16 accumulator), ``category`` (R,) str."""

    def __init__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, category: np.ndarray):
        self.a, self.b, self.c, self.category = a, b, c, category

    def __len__(self) -> int:
        return self.a.shape[0]

    @property
    def k(self) -> int:
        return self.a.shape[1]

    @property
    def fp16_accumulator(self) -> bool:
        return self.c.dtype == np.uint16

    def c_values(self) -> np.ndarray:
        """c as float32 (or float16) values."""
        return self.c.view(np.float16 if self.fp16_accumulator else np.float32)

    def take(self, rows) -> ProbeSet:
        return ProbeSet(self.a[rows], self.b[rows], self.c[rows], self.category[rows])


def _f16(x) -> np.ndarray:
    """float16 bit patterns of values that must be exactly representable (checked)."""
    x = np.asarray(x, np.float64)
    h = x.astype(np.float16)
    if not np.array_equal(h.astype(np.float64), x):
        raise AssertionError("probe generator: a value is not an fp16 value")
    return h.view(np.uint16)


def _rand_f16(rng, shape, emin, emax, signed=True):
    """Random normal fp16 values with exponents in [emin, emax] and random 10-bit fractions."""
    e = rng.integers(emin, emax + 1, shape)
    m = 1.0 + rng.integers(0, 1024, shape) / 1024.0
    s = np.where(rng.random(shape) < 0.5, -1.0, 1.0) if signed else 1.0
    return s * np.ldexp(m, e)


def _rand_acc(rng, shape, emin, emax, bits):
    """Random normal accumulator values with ``bits`` significant bits, exponents in [emin, emax]."""
    e = rng.integers(emin, emax + 1, shape)
    m = 1.0 + rng.integers(0, 1 << (bits - 1), shape) / float(1 << (bits - 1))
    s = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return s * np.ldexp(m, e)


def _split_product(rng, p_exp, shape):
    """Exponents (ea, eb) of two fp16 powers of two whose product is 2^p_exp (p_exp in −48 … 30):
    normal powers where they can be, subnormal ones (down to 2^-24) below 2^-28."""
    p_exp = np.asarray(p_exp)
    lo = np.maximum(-24, p_exp - _F16_MAX_EXP)
    hi = np.minimum(_F16_MAX_EXP, p_exp + 24)
    normal_lo = np.maximum(_F16_MIN_EXP, p_exp - _F16_MAX_EXP)
    normal_hi = np.minimum(_F16_MAX_EXP, p_exp - _F16_MIN_EXP)
    use_normal = normal_lo <= normal_hi
    lo = np.where(use_normal, normal_lo, lo)
    hi = np.where(use_normal, normal_hi, hi)
    ea = lo + (rng.random(shape) * (hi - lo + 1)).astype(np.int64)
    ea = np.minimum(ea, hi)
    return ea, p_exp - ea


class _Gen:
    def __init__(self, rng, n, k, fp16_acc):
        self.rng, self.n, self.k, self.fp16_acc = rng, n, k, fp16_acc
        # the accumulator format: significant bits and exponent range of normal values
        self.cbits = 11 if fp16_acc else 24
        self.cemin = -14 if fp16_acc else -126
        self.cemax = 15 if fp16_acc else 127

    def zeros(self):
        return np.zeros((self.n, self.k)), np.zeros((self.n, self.k)), np.zeros(self.n)

    def clip_c_exp(self, e):
        return np.clip(e, self.cemin, self.cemax)

    # -- categories: each returns float64 values (a, b, c), exactly representable ------------

    def random(self):
        a = _rand_f16(self.rng, (self.n, self.k), -4, 4)
        b = _rand_f16(self.rng, (self.n, self.k), -4, 4)
        c = _rand_acc(self.rng, self.n, -6, 8, self.cbits)
        c[self.rng.random(self.n) < 0.15] = 0.0
        return a, b, c

    def bits(self):
        rng = self.rng

        def finite(shape):
            x = rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16)
            x[(x & 0x7C00) == 0x7C00] &= 0x83FF  # inf/NaN → a subnormal or zero of the same sign
            return x.view(np.float16).astype(np.float64)

        a, b = finite((self.n, self.k)), finite((self.n, self.k))
        lo, hi = (-20, 15) if self.fp16_acc else (-60, 60)
        c = _rand_acc(rng, self.n, lo, hi, self.cbits)
        return a, b, c

    def span(self):
        rng = self.rng
        a = _rand_f16(rng, (self.n, self.k), -14, 15)
        b = _rand_f16(rng, (self.n, self.k), -14, 15)
        lo, hi = (-14, 15) if self.fp16_acc else (-40, 40)
        c = _rand_acc(rng, self.n, lo, hi, self.cbits)
        return a, b, c

    def window(self):
        """A leading term 2^E (product or c) and other terms 2^-s below it, s around F, F2."""
        rng = self.rng
        n, k = self.n, self.k
        a, b, c = self.zeros()
        E = rng.integers(-4, 12, n)
        lead_is_c = rng.random(n) < 0.4
        # the leading product at a random k
        ka = rng.integers(0, k, n)
        ea, eb = _split_product(rng, E, n)
        m = 1.0 + rng.integers(0, 1024, n) / 1024.0
        rows = np.arange(n)
        a[rows, ka] = np.where(lead_is_c, 0.0, m * np.ldexp(1.0, ea))
        b[rows, ka] = np.where(lead_is_c, 0.0, np.ldexp(1.0, eb))
        c_lead = np.ldexp(1.0 + rng.integers(0, 1 << (self.cbits - 1), n) / float(1 << (self.cbits - 1)), E)
        c = np.where(lead_is_c, c_lead, 0.0)
        # one to three small products at depth s below E
        for j in range(3):
            s = rng.integers(18, 36, n)
            kk = (ka + 1 + j + rng.integers(0, k, n)) % k
            ok = (kk != ka) | lead_is_c
            pe = np.clip(E - s, -28, 30)
            ea2, eb2 = _split_product(rng, pe, n)
            sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
            m2 = 1.0 + rng.integers(0, 1024, n) / 1024.0
            use = ok & (rng.random(n) < (1.0 if j == 0 else 0.5))
            a[rows, kk] = np.where(use, sign * m2 * np.ldexp(1.0, ea2), a[rows, kk])
            b[rows, kk] = np.where(use, np.ldexp(1.0, eb2), b[rows, kk])
        c = np.where(rng.random(n) < 0.5, -c, c)
        if not self.fp16_acc:
            # also: a small c at depth s below a leading product
            small_c = (~lead_is_c) & (rng.random(n) < 0.5)
            s = rng.integers(18, 36, n)
            c = np.where(
                small_c,
                np.where(rng.random(n) < 0.5, -1.0, 1.0)
                * np.ldexp(1.0 + rng.integers(0, 1 << 23, n) / float(1 << 23), E - s),
                c,
            )
        return a, b, c

    def ties(self):
        """c = 1.m·2^e; products summing to half an ulp of c's format (a tie), ± a sticky 2^-s."""
        rng = self.rng
        n, k = self.n, self.k
        a, b, _ = self.zeros()
        e = rng.integers(-2, 28, n) if not self.fp16_acc else rng.integers(-14, 15, n)
        c = np.ldexp(1.0 + rng.integers(0, 1 << (self.cbits - 1), n) / float(1 << (self.cbits - 1)), e)
        c = np.where(rng.random(n) < 0.5, -c, c)
        ulp_exp = e - (self.cbits - 1)
        rows = np.arange(n)
        # the tie: half an ulp, as one product (or split into two quarters)
        half = ulp_exp - 1
        kk = rng.integers(0, k, n)
        ea, eb = _split_product(rng, np.clip(half, -48, 30), n)
        tie_sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        a[rows, kk] = tie_sign * np.ldexp(1.0, ea)
        b[rows, kk] = np.ldexp(1.0, eb)
        # a sticky term 2^-s below the tie, on most rows, of either sign
        sticky = rng.random(n) < 0.75
        # depths: 1…12 bits below the tie, 4…9 (F2 = 28…32 of a two-stage sum) more often, up to 44
        u = rng.random(n)
        s = np.where(u < 0.4, rng.integers(1, 13, n), np.where(u < 0.7, rng.integers(4, 10, n), rng.integers(1, 45, n)))
        s = np.minimum(s, half + 48)
        k2 = (kk + 1 + rng.integers(0, k - 1, n)) % k if k > 1 else kk
        ea2, eb2 = _split_product(rng, np.clip(half - s, -48, 30), n)
        st_sign = np.where(rng.random(n) < 0.75, tie_sign, -tie_sign)  # mostly beyond the tie
        a[rows, k2] = np.where(sticky, st_sign * np.ldexp(1.0, ea2), a[rows, k2])
        b[rows, k2] = np.where(sticky, np.ldexp(1.0, eb2), b[rows, k2])
        # some rows: the tie of a sum of products with c = 0 (ties inside the products' sum)
        no_c = rng.random(n) < 0.2
        c = np.where(no_c, 0.0, c)
        a[no_c, (kk[no_c] + 2) % k] = np.ldexp(1.0, np.clip(ulp_exp[no_c] + self.cbits - 1, -14, 15))
        b[no_c, (kk[no_c] + 2) % k] = np.where(k > 2, 1.0, 0.0)
        return a, b, c

    def cancel(self):
        rng = self.rng
        n, k = self.n, self.k
        a = _rand_f16(rng, (n, k), -3, 3)
        b = _rand_f16(rng, (n, k), -3, 3)
        exact = np.sum(a * b, axis=1)  # exact in float64 (products of 22 bits, K ≤ 64)
        # c = -(the sum), rounded to the accumulator's precision, then nudged by a few ulps
        c = -exact
        if self.fp16_acc:
            c = c.astype(np.float16).astype(np.float64)
        else:
            c = c.astype(np.float32).astype(np.float64)
        nudge = rng.integers(-3, 4, n)
        c = c + nudge * np.spacing(np.abs(c).astype(np.float16 if self.fp16_acc else np.float32)).astype(np.float64)
        # pairs that cancel exactly among the products, leaving one small term
        pairs = rng.random(n) < 0.3
        if k >= 2:
            a[pairs, 1] = -a[pairs, 0]
            b[pairs, 1] = b[pairs, 0]
        return a, b, c

    def groups(self):
        rng = self.rng
        n, k = self.n, self.k
        a, b, c = self.zeros()
        rows = np.arange(n)
        E = rng.integers(0, 14, n)
        count = rng.integers(2, 5, n)
        for j in range(4):
            kk = rng.integers(0, k, n)
            gap = rng.integers(8, 31, n) if j else np.zeros(n, np.int64)
            pe = np.clip(E - gap, -28, 30)
            ea, eb = _split_product(rng, pe, n)
            m = 1.0 + rng.integers(0, 1024, n) / 1024.0
            sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
            use = j < count
            a[rows, kk] = np.where(use, sign * m * np.ldexp(1.0, ea), a[rows, kk])
            b[rows, kk] = np.where(use, np.ldexp(1.0, eb), b[rows, kk])
        with_c = rng.random(n) < 0.5
        ce = self.clip_c_exp(E - rng.integers(0, 30, n))
        c = np.where(with_c, _rand_acc(rng, n, 0, 0, self.cbits) * np.ldexp(1.0, ce), 0.0)
        return a, b, c

    def subnormal(self):
        rng = self.rng
        n, k = self.n, self.k
        a = _rand_f16(rng, (n, k), -14, 2)
        b = _rand_f16(rng, (n, k), -14, 2)
        sub_a = rng.random((n, k)) < 0.35
        sub_b = rng.random((n, k)) < 0.2
        sa = np.where(rng.random((n, k)) < 0.5, -1.0, 1.0)
        a = np.where(sub_a, sa * rng.integers(1, 1024, (n, k)) * 2.0**-24, a)
        b = np.where(sub_b, rng.integers(1, 1024, (n, k)) * 2.0**-24, b)
        if self.fp16_acc:
            c = np.where(rng.random(n) < 0.5, rng.integers(-1023, 1024, n) * 2.0**-24, _rand_acc(rng, n, -14, -10, 11))
        else:
            c = np.where(
                rng.random(n) < 0.6,
                rng.integers(-(1 << 23) + 1, 1 << 23, n) * 2.0**-149,
                _rand_acc(rng, n, -40, -20, 24),
            )
        # a subnormal accumulator alone: zero products, or a pair that cancels exactly
        alone = rng.random(n) < 0.35
        sub_c = (
            rng.integers(1, 1 << 10, n) * 2.0**-24 if self.fp16_acc else rng.integers(1, 1 << 23, n) * 2.0**-149
        ) * np.where(rng.random(n) < 0.5, -1.0, 1.0)
        c = np.where(alone, sub_c, c)
        a[alone] = np.where(rng.random((int(alone.sum()), k)) < 0.5, 0.0, a[alone])
        b[alone] = np.where(a[alone] == 0.0, b[alone], 0.0)
        # half of them with every product −0 (a = +0, b < 0): a −0 result then survives later groups
        neg = alone & (rng.random(n) < 0.5)
        a[neg] = 0.0
        b[neg] = -np.abs(_rand_f16(rng, (int(neg.sum()), k), -3, 3))
        if k >= 2:
            pair = alone & (rng.random(n) < 0.5)
            v = _rand_f16(rng, int(pair.sum()), -3, 3)
            a[pair] = 0.0
            a[pair, 0], a[pair, 1] = v, -v
            b[pair, 0], b[pair, 1] = 1.0, 1.0
        return a, b, c

    def tiny(self):
        rng = self.rng
        n, k = self.n, self.k
        a = _rand_f16(rng, (n, k), -14, -10)
        b = _rand_f16(rng, (n, k), -14, -10)
        a[rng.random((n, k)) < 0.5] = 0.0
        if self.fp16_acc:
            c = np.where(rng.random(n) < 0.6, 0.0, rng.integers(-1023, 1024, n) * 2.0**-24)
        else:
            c = np.where(rng.random(n) < 0.5, 0.0, _rand_acc(rng, n, -60, -20, 24))
        # half the rows: a zero accumulator, an output tie (an odd multiple of half the smallest
        # subnormal step of the output format, from normal factors) and a sticky product deep below
        # it (from subnormal factors): whether the sticky survives the alignment depends on the
        # exponent zero terms take
        tie_rows = rng.random(n) < 0.5
        m = int(tie_rows.sum())
        rows = np.flatnonzero(tie_rows)
        a[tie_rows] = 0.0
        b[tie_rows] = 0.0
        step = -24 if self.fp16_acc else -48  # the output's (or the products') smallest step
        half = step - 1 if self.fp16_acc else -27
        odd = 2 * rng.integers(0, 4, m) + 1  # 1, 3, 5, 7 halves
        k1 = rng.integers(0, k, m)
        a[rows, k1] = odd * np.ldexp(1.0, -14)
        b[rows, k1] = np.ldexp(1.0, half + 14) if half + 14 >= -14 else 0.0
        # in the tie's group (the first non-zero one, where c is still zero) for most group
        # sizes and k orders: the neighbour k1^1, or k1^2, or k1^4
        k2 = (k1 ^ rng.choice(np.array([1, 1, 2, 4]), m)) % k
        deep = rng.integers(38, 49, m)  # the sticky 2^-deep = 2^-24 · 2^-(deep-24): z − F for z ≥ −22, F ≤ 26
        sign = np.where(rng.random(m) < 0.5, -1.0, 1.0)
        a[rows, k2] = np.where(k2 != k1, sign * np.ldexp(1.0, -24), a[rows, k2])
        b[rows, k2] = np.where(k2 != k1, np.ldexp(1.0, 24 - deep), b[rows, k2])
        c[tie_rows] = np.where(rng.random(m) < 0.5, -0.0, 0.0)
        return a, b, c

    def zeros_(self):
        rng = self.rng
        n, k = self.n, self.k
        a = np.where(rng.random((n, k)) < 0.5, -0.0, 0.0)
        b = np.where(rng.random((n, k)) < 0.5, -0.0, 0.0)
        c = np.where(rng.random(n) < 0.5, -0.0, 0.0)
        # some rows: a product and its negation (exact zero sum), or c = -product
        some = rng.random(n) < 0.5
        v = _rand_f16(rng, n, -3, 3)
        a[some, 0] = v[some]
        b[some, 0] = 1.0
        if k > 1:
            half = some & (rng.random(n) < 0.5)
            a[half, 1] = -v[half]
            b[half, 1] = 1.0
            rest = some & ~half
            c[rest] = -v[rest]
        return a, b, c

    def overflow(self):
        rng = self.rng
        n, k = self.n, self.k
        a = _rand_f16(rng, (n, k), 13, 15)
        b = _rand_f16(rng, (n, k), 13, 15)
        if self.fp16_acc:
            a = _rand_f16(rng, (n, k), 3, 8)
            b = _rand_f16(rng, (n, k), 3, 8)
            c = _rand_acc(rng, n, 14, 15, 11)
        else:
            c = _rand_acc(rng, n, 124, 127, 24)
            c[rng.random(n) < 0.3] = 0.0
        same = rng.random(n) < 0.7  # products of c's sign: overflow rather than cancel
        sgn = np.sign(np.where(c == 0, 1.0, c))
        a = np.where(same[:, None], np.abs(a) * sgn[:, None], a)
        b = np.abs(b)
        return a, b, c


def probe_set(
    rows: int = 4096, k: int = 16, *, seed: int = 0, accumulator: str = "fp32", categories=CATEGORIES
) -> ProbeSet:
    """A probe set of ``rows`` rows of ``k`` products (see the module docstring), deterministic for
    ``seed``. ``accumulator``: "fp32" (c uint32) or "fp16" (c uint16, for fp16-output units).
    ``categories``: a subset of :data:`CATEGORIES`."""
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1:
        raise ValueError(f"rows: must be a positive integer, got {rows!r}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= 64:
        raise ValueError(f"k: must be an integer in 1 … 64, got {k!r}")
    if accumulator not in ("fp32", "fp16"):
        raise ValueError(f"accumulator: {accumulator!r} is not one of 'fp32', 'fp16'")
    categories = tuple(categories)
    unknown = [c for c in categories if c not in CATEGORIES]
    if unknown or not categories:
        raise ValueError(f"categories: {unknown or 'none given'} not among {', '.join(CATEGORIES)}")
    fp16_acc = accumulator == "fp16"
    rng = np.random.default_rng(seed)
    per = -(-rows // len(categories))
    gen = _Gen(rng, per, k, fp16_acc)
    parts = []
    for name in categories:
        a, b, c = getattr(gen, "zeros_" if name == "zeros" else name)()
        a_bits, b_bits = _f16(a), _f16(b)
        if fp16_acc:
            c16 = np.asarray(c, np.float64).astype(np.float16)  # RNE: the categories aim at fp16 values
            if not np.all(np.isfinite(c16)):
                raise AssertionError(f"probe generator ({name}): an fp16 accumulator overflowed")
            c_bits = c16.view(np.uint16)
        else:
            c32 = np.asarray(c, np.float64).astype(np.float32)
            if not np.array_equal(c32.astype(np.float64), c):
                raise AssertionError(f"probe generator ({name}): an accumulator is not an fp32 value")
            c_bits = c32.view(np.uint32)
        parts.append((a_bits, b_bits, c_bits, np.full(per, name)))
    # interleave the categories row by row, then cut to ``rows``
    order = np.arange(per * len(categories)).reshape(len(categories), per).T.ravel()
    a = np.concatenate([p[0] for p in parts])[order][:rows]
    b = np.concatenate([p[1] for p in parts])[order][:rows]
    c = np.concatenate([p[2] for p in parts])[order][:rows]
    cat = np.concatenate([p[3] for p in parts])[order][:rows]
    return ProbeSet(np.ascontiguousarray(a), np.ascontiguousarray(b), np.ascontiguousarray(c), cat.astype(str))


def save(path, probes: ProbeSet, d=None, option: str = "--out", **extra) -> None:
    """Write ``probes`` (and outputs ``d`` if given) as an .npz at exactly ``path`` (no suffix
    added), atomically: a, b, c, category[, d], extra. ValueError naming ``option`` for a path
    that is not a regular file (``/dev/null``) or lies in no folder."""
    arrays = {"a": probes.a, "b": probes.b, "c": probes.c, "category": probes.category.astype(str)}
    if d is not None:
        arrays["d"] = d
    arrays.update(extra)
    write_atomically(path, lambda fh: np.savez(fh, **arrays), option)


def load_inputs(path) -> ProbeSet:
    """The inputs of a probe .npz (a, b, c; category if present). ValueError naming the array
    for a missing array, a wrong dtype or inconsistent shapes."""
    data = load_npz_file(path, "probes", fail=lambda why: ValueError(f"{path}: {why}"))
    for name in ("a", "b", "c"):
        if name not in data:
            raise ValueError(f"{path}: no array {name!r} (has {', '.join(data) or 'none'})")
    a, b, c = data["a"], data["b"], data["c"]
    if a.dtype != np.uint16 or b.dtype != np.uint16:
        raise ValueError(f"{path}: a and b must be uint16 fp16 bit patterns, got {a.dtype}, {b.dtype}")
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"{path}: a and b must be (R, K) arrays of one shape, got {a.shape}, {b.shape}")
    if c.dtype not in (np.uint32, np.uint16) or c.shape != (a.shape[0],):
        raise ValueError(
            f"{path}: c must be ({a.shape[0]},) uint32 (fp32) or uint16 (fp16) bit patterns, got {c.shape} {c.dtype}"
        )
    category = data["category"].astype(str) if "category" in data else np.full(a.shape[0], "")
    return ProbeSet(a, b, c, category)
