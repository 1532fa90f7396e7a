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

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from emu.operands import input_name, value_dtype

from ..files import load_npz_file, write_atomically

__all__ = [
    "CATEGORIES",
    "FP16_ACCUMULATOR_INPUTS",
    "INSTRUCTION_K",
    "ProbeSet",
    "categories_for",
    "file_input",
    "load_inputs",
    "pattern_dtype",
    "probe_set",
    "save",
]

CATEGORIES = ("random", "bits", "span", "window", "ties", "cancel", "groups", "subnormal", "tiny", "zeros", "overflow")


class ProbeSet:
    """The inputs of a probe set (see the module docstring): ``a``, ``b`` (R, K) bit patterns of
    the operand format ``input`` (uint16 for fp16 and bf16, uint32 for tf32, uint8 for fp8),
    ``c`` (R,) uint32 (uint16 with an fp16 accumulator), ``category`` (R,) str."""

    def __init__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, category: np.ndarray, input: str = "fp16"):
        self.a, self.b, self.c, self.category = a, b, c, category
        self.input = input_name(input)

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
        return ProbeSet(self.a[rows], self.b[rows], self.c[rows], self.category[rows], self.input)


def _f16(x) -> np.ndarray:
    """float16 bit patterns of values that must be exactly representable (checked)."""
    x = np.asarray(x, np.float64)
    h = x.astype(np.float16)
    if not np.array_equal(h.astype(np.float64), x):
        raise AssertionError("probe generator: a value is not an fp16 value")
    return h.view(np.uint16)


def _rand_f16(rng, shape, emin, emax, signed=True, mbits=10):
    """Random normal values with exponents in [emin, emax] and random ``mbits``-bit fractions
    (fp16's 10 by default)."""
    e = rng.integers(emin, emax + 1, shape)
    m = 1.0 + rng.integers(0, 1 << mbits, shape) / float(1 << mbits)
    s = np.where(rng.random(shape) < 0.5, -1.0, 1.0) if signed else 1.0
    return s * np.ldexp(m, e)


def _rand_acc(rng, shape, emin, emax, bits):
    """Random normal accumulator values with ``bits`` significant bits, exponents in [emin, emax]."""
    e = rng.integers(emin, emax + 1, shape)
    m = 1.0 + rng.integers(0, 1 << (bits - 1), shape) / float(1 << (bits - 1))
    s = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return s * np.ldexp(m, e)


def _split_product(rng, p_exp, shape, spec=None):
    """Exponents (ea, eb) of two powers of two of the operand format (``spec``; fp16 by default)
    whose product is 2^p_exp (fp16: p_exp in −48 … 30): normal powers where they can be,
    subnormal ones (fp16: down to 2^-24) below the smallest normal product (fp16: 2^-28)."""
    spec = spec or _FP16
    p_exp = np.asarray(p_exp)
    lo = np.maximum(spec.sub_exp, p_exp - spec.emax)
    hi = np.minimum(spec.emax, p_exp - spec.sub_exp)
    normal_lo = np.maximum(spec.emin, p_exp - spec.emax)
    normal_hi = np.minimum(spec.emax, p_exp - spec.emin)
    use_normal = normal_lo <= normal_hi
    lo = np.where(use_normal, normal_lo, lo)
    hi = np.where(use_normal, normal_hi, hi)
    ea = lo + (rng.random(shape) * (hi - lo + 1)).astype(np.int64)
    ea = np.minimum(ea, hi)
    return ea, p_exp - ea


@dataclass(frozen=True)
class _Spec:
    """An operand format as the generator sees it: ``mbits`` fraction bits, normal exponents
    ``emin`` … ``emax``, largest finite value ``max_value``, and its values/patterns dtypes."""

    name: str
    mbits: int
    emin: int
    emax: int
    max_value: float
    values: np.dtype
    patterns: np.dtype
    has_inf: bool

    @property
    def sub_exp(self) -> int:
        """The exponent of the smallest subnormal (fp16: −24)."""
        return self.emin - self.mbits

    @property
    def fp8(self) -> bool:
        return self.patterns.itemsize == 1

    @property
    def wide(self) -> bool:
        """An 8-bit exponent (bf16, tf32): products reach far outside fp32's range."""
        return self.emax >= 127


def _spec(name: str) -> _Spec:
    if name == "tf32":  # fp32 containers holding tf32 values (10 fraction bits)
        return _Spec(
            "tf32", 10, -126, 127, float((2 - 2.0**-10) * 2.0**127), np.dtype(np.float32), np.dtype(np.uint32), True
        )
    values = np.dtype(value_dtype(name))
    info = ml_dtypes.finfo(values) if values != np.float16 else np.finfo(np.float16)
    has_inf = bool(np.isinf(np.array(np.inf).astype(values)))
    patterns = np.dtype(f"uint{8 * values.itemsize}")
    return _Spec(
        name, int(info.nmant), int(info.minexp), int(info.maxexp) - 1, float(info.max), values, patterns, has_inf
    )


_FP16 = _Spec("fp16", 10, -14, 15, 65504.0, np.dtype(np.float16), np.dtype(np.uint16), True)


def _encode(x, spec: _Spec, what: str) -> np.ndarray:
    """Bit patterns of values of ``spec``'s format; finite values beyond its largest are clipped
    to it (e4m3's top binade stops at 1.75·2^8), and every value must then be exact (checked)."""
    if spec.name == "fp16":
        return _f16(x)
    x = np.asarray(x, np.float64)
    x = np.where(np.isfinite(x), np.clip(x, -spec.max_value, spec.max_value), x)
    v = x.astype(spec.values)
    if not np.array_equal(v.astype(np.float64), x, equal_nan=True):
        raise AssertionError(f"probe generator ({what}): a value is not a {spec.name} value")
    return v.view(spec.patterns)


class _Gen:
    def __init__(self, rng, n, k, fp16_acc, spec=_FP16):
        self.rng, self.n, self.k, self.fp16_acc, self.spec = rng, n, k, fp16_acc, spec
        # the accumulator format: significant bits and exponent range of normal values
        self.cbits = 11 if fp16_acc else 24
        self.cemin = -14 if fp16_acc else -126
        self.cemax = 15 if fp16_acc else 127
        sp = spec
        self.pnorm = (2 * sp.emin, 2 * sp.emax)  # products of normal powers (fp16: −28 … 30)
        self.pall = (2 * sp.sub_exp, 2 * sp.emax)  # every product of powers (fp16: −48 … 30)
        self.depth_lo = 9 if sp.fp8 else 18  # depths around F: 22–26 (fp16, bf16, tf32), 13 (fp8)

    def r(self, shape, emin, emax, signed=True):
        """Random normal operand values (the format's fraction bits), exponents in [emin, emax]."""
        return _rand_f16(self.rng, shape, emin, emax, signed, mbits=self.spec.mbits)

    def split(self, p_exp, shape):
        return _split_product(self.rng, p_exp, shape, self.spec)

    def frac(self, n):
        """1.m with a random fraction of the format's width."""
        return 1.0 + self.rng.integers(0, 1 << self.spec.mbits, n) / float(1 << self.spec.mbits)

    def zeros(self):
        return np.zeros((self.n, self.k)), np.zeros((self.n, self.k)), np.zeros(self.n)

    def clip_c_exp(self, e):
        return np.clip(e, self.cemin, self.cemax)

    # -- categories: each returns float64 values (a, b, c), exactly representable ------------

    def random(self):
        a = self.r((self.n, self.k), -4, 4)
        b = self.r((self.n, self.k), -4, 4)
        c = _rand_acc(self.rng, self.n, -6, 8, self.cbits)
        c[self.rng.random(self.n) < 0.15] = 0.0
        return a, b, c

    def bits(self):
        rng = self.rng
        if self.spec.name != "fp16":
            return self.bits_other()

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
        sp = self.spec
        lo_e, hi_e = max(sp.emin, -30), min(sp.emax, 30)  # fp16: its whole range; bf16: 60 binades
        a = self.r((self.n, self.k), lo_e, hi_e)
        b = self.r((self.n, self.k), lo_e, hi_e)
        lo, hi = (-14, 15) if self.fp16_acc else (-40, 40)
        c = _rand_acc(rng, self.n, lo, hi, self.cbits)
        return a, b, c

    def window(self):
        """A leading term 2^E (product or c) and other terms 2^-s below it, s around F, F2."""
        rng = self.rng
        n, k = self.n, self.k
        a, b, c = self.zeros()
        top = self.pnorm[1]
        E = rng.integers(-4, 12, n) if top >= 24 else rng.integers(top - 14, top, n)  # fp8: below its largest product
        lead_is_c = rng.random(n) < 0.4
        # the leading product at a random k
        ka = rng.integers(0, k, n)
        ea, eb = self.split(E, n)
        m = self.frac(n)
        rows = np.arange(n)
        a[rows, ka] = np.where(lead_is_c, 0.0, m * np.ldexp(1.0, ea))
        b[rows, ka] = np.where(lead_is_c, 0.0, np.ldexp(1.0, eb))
        c_lead = np.ldexp(1.0 + rng.integers(0, 1 << (self.cbits - 1), n) / float(1 << (self.cbits - 1)), E)
        c = np.where(lead_is_c, c_lead, 0.0)
        # one to three small products at depth s below E
        for j in range(3):
            s = rng.integers(self.depth_lo, 36, n)
            kk = (ka + 1 + j + rng.integers(0, k, n)) % k
            ok = (kk != ka) | lead_is_c
            pe = np.clip(E - s, *self.pnorm)
            ea2, eb2 = self.split(pe, n)
            sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
            m2 = self.frac(n)
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
        if self.fp16_acc:
            e = rng.integers(max(-14, self.pall[0] + 11), min(14, self.pall[1] + 9) + 1, n)
        else:
            e = rng.integers(max(-2, self.pall[0] + 24), min(28, self.pall[1] + 22), n)
        # the precision whose tie is aimed at: the accumulator's, and for fp8 also E8M13's 14 bits
        cbits = self.cbits if not (self.spec.fp8 and not self.fp16_acc) else np.where(rng.random(n) < 0.5, 24, 14)
        c = np.ldexp(1.0 + rng.integers(0, 1 << (self.cbits - 1), n) / float(1 << (self.cbits - 1)), e)
        if not np.isscalar(cbits):
            c = np.ldexp(np.floor(np.ldexp(c, -e + cbits - 1)), e - cbits + 1)  # keep cbits significant bits
        c = np.where(rng.random(n) < 0.5, -c, c)
        ulp_exp = e - (cbits - 1)
        rows = np.arange(n)
        # the tie: half an ulp, as one product (or split into two quarters)
        half = ulp_exp - 1
        kk = rng.integers(0, k, n)
        ea, eb = self.split(np.clip(half, *self.pall), n)
        tie_sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        a[rows, kk] = tie_sign * np.ldexp(1.0, ea)
        b[rows, kk] = np.ldexp(1.0, eb)
        # a sticky term 2^-s below the tie, on most rows, of either sign
        sticky = rng.random(n) < 0.75
        # depths: 1…12 bits below the tie, 4…9 (F2 = 28…32 of a two-stage sum) more often, up to 44
        u = rng.random(n)
        s = np.where(u < 0.4, rng.integers(1, 13, n), np.where(u < 0.7, rng.integers(4, 10, n), rng.integers(1, 45, n)))
        s = np.minimum(s, half - self.pall[0])
        k2 = (kk + 1 + rng.integers(0, k - 1, n)) % k if k > 1 else kk
        ea2, eb2 = self.split(np.clip(half - s, *self.pall), n)
        st_sign = np.where(rng.random(n) < 0.75, tie_sign, -tie_sign)  # mostly beyond the tie
        a[rows, k2] = np.where(sticky, st_sign * np.ldexp(1.0, ea2), a[rows, k2])
        b[rows, k2] = np.where(sticky, np.ldexp(1.0, eb2), b[rows, k2])
        # some rows: the tie of a sum of products with c = 0 (ties inside the products' sum)
        no_c = rng.random(n) < 0.2
        c = np.where(no_c, 0.0, c)
        a[no_c, (kk[no_c] + 2) % k] = np.ldexp(
            1.0, np.clip(ulp_exp[no_c] + self.cbits - 1, self.spec.emin, self.spec.emax)
        )
        b[no_c, (kk[no_c] + 2) % k] = np.where(k > 2, 1.0, 0.0)
        return a, b, c

    def cancel(self):
        rng = self.rng
        n, k = self.n, self.k
        a = self.r((n, k), -3, 3)
        b = self.r((n, k), -3, 3)
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
            pe = np.clip(E - gap, *self.pnorm)
            ea, eb = self.split(pe, n)
            m = self.frac(n)
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
        sp = self.spec
        a = self.r((n, k), sp.emin, sp.emin + 16)
        b = self.r((n, k), sp.emin, sp.emin + 16)
        sub_a = rng.random((n, k)) < 0.35
        sub_b = rng.random((n, k)) < 0.2
        sa = np.where(rng.random((n, k)) < 0.5, -1.0, 1.0)
        a = np.where(sub_a, sa * rng.integers(1, 1 << sp.mbits, (n, k)) * 2.0**sp.sub_exp, a)
        b = np.where(sub_b, rng.integers(1, 1 << sp.mbits, (n, k)) * 2.0**sp.sub_exp, b)
        if sp.wide:
            # bf16/tf32: a subnormal's partner near 2^110 … 2^126 makes the product visible in fp32
            b = np.where(sub_a & ~sub_b, self.r((n, k), 100, 126, signed=False), b)
            a = np.where(sub_b & ~sub_a, self.r((n, k), 100, 126), a)
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
        b[neg] = -np.abs(self.r((int(neg.sum()), k), -3, 3))
        if k >= 2:
            pair = alone & (rng.random(n) < 0.5)
            v = self.r(int(pair.sum()), -3, 3)
            a[pair] = 0.0
            a[pair, 0], a[pair, 1] = v, -v
            b[pair, 0], b[pair, 1] = 1.0, 1.0
        return a, b, c

    def tiny(self):
        rng = self.rng
        if self.spec.name != "fp16":
            return self.tiny_other()
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
        v = self.r(n, -3, 3)
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
        hi = min(self.spec.emax, 64)  # fp16 and fp8: their largest binades; bf16: products past 2^127
        a = self.r((n, k), hi - 2, hi)
        b = self.r((n, k), hi - 2, hi)
        if self.fp16_acc:
            a = self.r((n, k), 3, 8)
            b = self.r((n, k), 3, 8)
            c = _rand_acc(rng, n, 14, 15, 11)
        else:
            c = _rand_acc(rng, n, 124, 127, 24)
            c[rng.random(n) < 0.3] = 0.0
        same = rng.random(n) < 0.7  # products of c's sign: overflow rather than cancel
        sgn = np.sign(np.where(c == 0, 1.0, c))
        a = np.where(same[:, None], np.abs(a) * sgn[:, None], a)
        b = np.abs(b)
        return a, b, c

    # -- the categories' forms for operand formats other than fp16 ------------------------------

    def bits_other(self):
        """Uniformly random finite bit patterns of the format (bf16/tf32: exponents within 40
        binades of 1, a tenth subnormal or zero, so products neither all overflow nor vanish)."""
        rng, sp = self.rng, self.spec
        shape = (self.n, self.k)
        width = 8 * sp.patterns.itemsize

        def finite():
            x = rng.integers(0, 1 << width, shape, dtype=np.uint64)
            if sp.wide:
                frac_bits = 23 if sp.name == "tf32" else 7
                biased = rng.integers(127 - 40, 127 + 41, shape).astype(np.uint64)
                biased[rng.random(shape) < 0.1] = 0
                x = (x & np.uint64((1 << (width - 1)) | ((1 << frac_bits) - 1))) | (biased << np.uint64(frac_bits))
                if sp.name == "tf32":
                    x &= ~np.uint64(0x1FFF)  # tf32 values: the 13 low bits clear
            pat = x.astype(sp.patterns)
            bad = ~np.isfinite(pat.view(sp.values).astype(np.float64))
            # inf/NaN (and fnuz's NaN 0x80) → a positive subnormal or zero
            pat[bad] = pat[bad] & sp.patterns.type((1 << sp.mbits) - 1)
            return pat.view(sp.values).astype(np.float64)

        a, b = finite(), finite()
        c = _rand_acc(rng, self.n, *((-20, 15) if self.fp16_acc else (-60, 60)), self.cbits)
        return a, b, c

    def tiny_other(self):
        """The smallest products of the format, with zero or tiny accumulators; for bf16 and tf32
        also rows with c = 0, a product m·2^-149 (a multiple of fp32's smallest step) and a
        second −2^-(149+j): whether it survives the alignment depends on the zero exponent
        (−132 against −133), and it moves an RZ result down one step."""
        rng, sp = self.rng, self.spec
        n, k = self.n, self.k
        a = self.r((n, k), sp.emin, sp.emin + 4)
        b = self.r((n, k), sp.emin, sp.emin + 4)
        sub = rng.random((n, k)) < 0.3
        a = np.where(sub, rng.integers(1, 1 << sp.mbits, (n, k)) * 2.0**sp.sub_exp, a)
        a[rng.random((n, k)) < 0.4] = 0.0
        if self.fp16_acc:
            c = np.where(rng.random(n) < 0.6, 0.0, rng.integers(-1023, 1024, n) * 2.0**-24)
        else:
            c = np.where(rng.random(n) < 0.5, 0.0, _rand_acc(rng, n, -60, -20, 24))
        if sp.wide and not self.fp16_acc:
            edge = rng.random(n) < 0.6
            m = int(edge.sum())
            rows = np.flatnonzero(edge)
            a[edge] = 0.0
            b[edge] = 0.0
            k1 = rng.integers(0, k, m)
            ea, eb = self.split(np.full(m, -149), m)
            a[rows, k1] = rng.integers(1, 1 << min(sp.mbits, 7), m) * np.ldexp(1.0, ea)
            b[rows, k1] = np.ldexp(1.0, eb)
            if k > 1:
                k2 = (k1 + 1 + rng.integers(0, k - 1, m)) % k
                ea2, eb2 = self.split(-149 - rng.integers(1, 13, m), m)
                a[rows, k2] = -np.ldexp(1.0, ea2)
                b[rows, k2] = np.ldexp(1.0, eb2)
            c[edge] = np.where(rng.random(m) < 0.5, -0.0, 0.0)
        return a, b, c

    def special(self):
        """Non-finite and extreme operands: NaN; ±inf where the format has it (inf·0 = NaN, +inf
        and −inf in one row); the largest finite value (the saturating encoding of fp8) squared,
        with accumulators near fp32's largest. Accumulators finite."""
        rng, sp = self.rng, self.spec
        n, k = self.n, self.k
        a = self.r((n, k), -2, 2)
        b = self.r((n, k), -2, 2)
        c = _rand_acc(rng, n, -4, 8, self.cbits)
        rows = np.arange(n)
        k1 = rng.integers(0, k, n)
        k2 = (k1 + 1 + rng.integers(0, max(k - 1, 1), n)) % k
        kind = rng.integers(0, 5, n)
        inf = np.inf if sp.has_inf else np.nan
        sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        # 0: NaN; 1: ±inf (NaN without inf); 2: inf·0; 3: +inf and −inf; 4: max·max, large c
        a[rows, k1] = np.where(kind == 0, np.nan, a[rows, k1])
        a[rows, k1] = np.where((kind == 1) | (kind == 2) | (kind == 3), sign * inf, a[rows, k1])
        b[rows, k1] = np.where(kind == 2, 0.0, b[rows, k1])
        if k > 1:
            a[rows, k2] = np.where(kind == 3, -sign * inf, a[rows, k2])
            b[rows, k2] = np.where(kind == 3, np.abs(b[rows, k2]), b[rows, k2])
        b[rows, k1] = np.where(kind == 3, np.abs(b[rows, k1]), b[rows, k1])
        big = kind == 4
        a[big] = np.where(rng.random((int(big.sum()), k)) < 0.5, -sp.max_value, sp.max_value)
        b[big] = sp.max_value
        if not self.fp16_acc:
            c = np.where(big, sign * _rand_acc(rng, n, 124, 127, 24), c)
        return a, b, c


#: The instruction K of each operand format (products one matrix instruction takes per output):
#: fp16 and bf16 ``mma.sync m16n8k16`` and AMD's 16x16x16 MFMAs; tf32 ``m16n8k8`` / ``wgmma
#: k8`` and MI300's ``v_mfma_f32_16x16x8_xf32``; fp8 ``wgmma m64nNk32`` (Hopper), ``mma.sync
#: m16n8k32`` (Ada) and MI300's ``v_mfma_f32_16x16x32_fp8`` (PTX ISA 8.x; CDNA3 ISA).
INSTRUCTION_K = {"fp16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "e4m3fnuz": 32, "e5m2fnuz": 32}
#: Operand formats some named unit accumulates in fp16 (NVIDIA's .f16 accumulators).
FP16_ACCUMULATOR_INPUTS = ("fp16", "e4m3", "e5m2")


def categories_for(input: str = "fp16") -> tuple[str, ...]:
    """The default categories of a probe set of operand format ``input``: :data:`CATEGORIES`, and
    for formats other than fp16 also ``special`` (NaN, inf, the largest finite value)."""
    return CATEGORIES if input_name(input) == "fp16" else CATEGORIES + ("special",)


def probe_set(
    rows: int = 4096,
    k: int = 16,
    *,
    seed: int = 0,
    accumulator: str = "fp32",
    categories=None,
    input: str = "fp16",
) -> ProbeSet:
    """A probe set of ``rows`` rows of ``k`` products (see the module docstring), deterministic for
    ``seed``. ``accumulator``: "fp32" (c uint32) or "fp16" (c uint16, for fp16-output units;
    fp16, e4m3 and e5m2 operands only). ``input``: the operand format (fp16, bf16, tf32, e4m3,
    e5m2, e4m3fnuz, e5m2fnuz): a, b hold its bit patterns (uint16; uint32 fp32 containers of
    tf32 values; uint8 for fp8). ``categories``: a subset of :data:`CATEGORIES` and ``special``
    (default :func:`categories_for` the format). The fp16 sets are those of earlier releases."""
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1:
        raise ValueError(f"rows: must be a positive integer, got {rows!r}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= 64:
        raise ValueError(f"k: must be an integer in 1 … 64, got {k!r}")
    if accumulator not in ("fp32", "fp16"):
        raise ValueError(f"accumulator: {accumulator!r} is not one of 'fp32', 'fp16'")
    try:
        fmt = input_name(input)
    except ValueError:
        raise ValueError(f"input: {input!r} is not one of {', '.join(INSTRUCTION_K)}") from None
    if accumulator == "fp16" and fmt not in FP16_ACCUMULATOR_INPUTS:
        raise ValueError(
            f"accumulator: no unit accumulates {fmt} products in fp16; fp16 accumulators take "
            f"{', '.join(FP16_ACCUMULATOR_INPUTS)} operands"
        )
    allowed = CATEGORIES + ("special",)
    categories = categories_for(fmt) if categories is None else tuple(categories)
    unknown = [c for c in categories if c not in allowed]
    if unknown or not categories:
        raise ValueError(f"categories: {unknown or 'none given'} not among {', '.join(allowed)}")
    spec = _FP16 if fmt == "fp16" else _spec(fmt)
    fp16_acc = accumulator == "fp16"
    rng = np.random.default_rng(seed)
    per = -(-rows // len(categories))
    gen = _Gen(rng, per, k, fp16_acc, spec)
    parts = []
    for name in categories:
        a, b, c = getattr(gen, "zeros_" if name == "zeros" else name)()
        a_bits, b_bits = _encode(a, spec, name), _encode(b, spec, name)
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
    return ProbeSet(
        np.ascontiguousarray(a), np.ascontiguousarray(b), np.ascontiguousarray(c), cat.astype(str), input=fmt
    )


def pattern_dtype(input: str) -> np.dtype:
    """The dtype of the operand bit patterns of a format in probe files: uint16 (fp16, bf16),
    uint32 (tf32 in fp32 containers), uint8 (fp8)."""
    name = input_name(input)
    return np.dtype(np.uint32) if name == "tf32" else np.dtype(f"uint{8 * np.dtype(value_dtype(name)).itemsize}")


def save(path, probes: ProbeSet, d=None, option: str = "--out", **extra) -> None:
    """Write ``probes`` (and outputs ``d`` if given) as an .npz at exactly ``path`` (no suffix
    added), atomically: a, b, c, category, input (the operand format's name)[, d], extra.
    ValueError naming ``option`` for a path that is not a regular file (``/dev/null``) or lies in
    no folder."""
    arrays = {
        "a": probes.a,
        "b": probes.b,
        "c": probes.c,
        "category": probes.category.astype(str),
        "input": np.array(probes.input),
    }
    if d is not None:
        arrays["d"] = d
    arrays.update(extra)
    write_atomically(path, lambda fh: np.savez(fh, **arrays), option)


def file_input(data, path, given: str | None = None, named: str | None = None) -> str:
    """The operand format of a probe file's arrays ``data``: ``given`` (an --input option) if
    set, else its ``input`` entry (or ``named``: the format a file name states), else fp16 (files
    of earlier releases). ValueError naming the field for an unknown name, and for a ``given``
    that contradicts what the file records (bf16 rows read as fp16 would be other numbers)."""
    recorded = None
    if "input" in data:
        entry = data["input"]
        try:
            recorded = input_name(str(entry.item() if hasattr(entry, "item") else entry))
        except (ValueError, TypeError):
            raise ValueError(f"{path}: input: {str(entry)[:40]!r} is not one of {', '.join(INSTRUCTION_K)}") from None
        where = "its input entry"
    elif named is not None:
        recorded = input_name(named)
        where = "its file name"
    if given is not None:
        try:
            chosen = input_name(given)
        except ValueError:
            raise ValueError(f"--input: {given!r} is not one of {', '.join(INSTRUCTION_K)}") from None
        if recorded is not None and chosen != recorded:
            raise ValueError(
                f"--input: {chosen}, but {path} records {recorded} operands ({where}); its bit patterns read as "
                f"{chosen} would be other numbers: leave --input out"
            )
        return chosen
    return recorded or "fp16"


def load_inputs(path, input: str | None = None) -> ProbeSet:
    """The inputs of a probe .npz (a, b, c; category and input if present; ``input`` overrides
    the file's format). ValueError naming the array for a missing array, a wrong dtype or
    inconsistent shapes."""
    data = load_npz_file(path, "probes", fail=lambda why: ValueError(f"{path}: {why}"))
    for name in ("a", "b", "c"):
        if name not in data:
            raise ValueError(f"{path}: no array {name!r} (has {', '.join(data) or 'none'})")
    fmt = file_input(data, path, input)
    want = pattern_dtype(fmt)
    a, b, c = data["a"], data["b"], data["c"]
    if a.dtype != want or b.dtype != want:
        raise ValueError(f"{path}: a and b must be {want} {fmt} bit patterns, got {a.dtype}, {b.dtype}")
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"{path}: a and b must be (R, K) arrays of one shape, got {a.shape}, {b.shape}")
    if c.dtype not in (np.uint32, np.uint16) or c.shape != (a.shape[0],):
        raise ValueError(
            f"{path}: c must be ({a.shape[0]},) uint32 (fp32) or uint16 (fp16) bit patterns, got {c.shape} {c.dtype}"
        )
    category = data["category"].astype(str) if "category" in data else np.full(a.shape[0], "")
    return ProbeSet(a, b, c, category, fmt)
