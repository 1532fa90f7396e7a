"""A slow, independent, exact oracle of the block-scaled units: ``reference_scaled_dot``.

It shares no code with ``emu`` beyond the parameter record (``emu.units``): operands, scales and
fp32 values are decoded here from their bit patterns by hand, every value is a ``Fraction``, and
the one rounding is written out. It checks ``emu.dot_add`` on block-scaled units bit for bit
(tests/emu/test_blockscale.py).

Formats (OCP MX v1.0; OCP FP8): e4m3 (1.4.3, bias 7, S.1111.111 NaN, no inf), e5m2 (1.5.2,
bias 15, IEEE inf / NaN), e3m2 (1.3.2, bias 3), e2m3 (1.2.3, bias 1), e2m1 (1.2.1, bias 1); the
fp6 / fp4 formats have neither inf nor NaN. A subnormal or zero has the field exponent 1 − bias.
Scales: UE8M0 x → 2^(x − 127), 0xFF NaN; UE4M3: the low seven bits as e4m3 (sign ignored),
0x7F NaN, zero and subnormals allowed (field exponent −6 for both).

Semantics (MMA-Sim 2.1.1, mmasim/arithmetic/fdpa.py ``st_fdpa`` and ``gst_fdpa``), K in groups
of ``group_size`` from k = 0, the scale of value k the one of block k // ``block_size``:

* SCALED_FUSED (ST-FDPA): a product's term is (sa·sb·ssa·ssb, ea + eb + esa + esb) with the
  significands s ∈ [0, 2) and field exponents of both factors and both scales; a zero term has
  exponent ``zero_exponent``. c's term: its fp32 significand and field exponent (−126 below the
  normal range), ``zero_exponent`` when zero.
* GROUPED_SCALED (GST-FDPA): a subgroup of ``subgroup_size`` products is one term: the exact sum
  of its products times ssa·ssb, with exponent esa + esb, or ``zero_exponent`` when all its
  products are zero or ssa·ssb = 0.
* Then: e_max = the largest term exponent; each term s·2^e contributes trunc(s·2^(e − e_max + F))
  (RZ) or floor (RD), the integers are summed, v = sum·2^(e_max − F) is rounded to fp32 toward
  zero on fp32's grid (2^-149 below 2^-126), |v| ≥ 2^128 giving ±inf (MMA-Sim's RZ-FP32), or
  to nearest even for a unit whose ``output_rounding`` is RNE (IEEE fp32); a zero result is +0.
  A NaN term (a NaN factor or scale, inf·0, a NaN c) gives NaN, +inf with
  −inf NaN, an infinity otherwise that infinity.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

from emu.units import Family, InputFormat, Rounding, ScaleFormat, UnitParams

# format → (exponent bits, fraction bits, bias, specials: "fn" / "ieee" / "none")
LAYOUT = {
    InputFormat.E4M3: (4, 3, 7, "fn"),
    InputFormat.E5M2: (5, 2, 15, "ieee"),
    InputFormat.E3M2: (3, 2, 3, "none"),
    InputFormat.E2M3: (2, 3, 1, "none"),
    InputFormat.E2M1: (2, 1, 1, "none"),
}
NAN = "nan"


def decode_element(bits: int, fmt) -> tuple:
    """(value, field exponent) of one operand pattern; value NaN / ±inf as "nan" / ±math.inf."""
    E, M, bias, kind = LAYOUT[InputFormat(fmt)]
    sign = -1 if (bits >> (E + M)) & 1 else 1
    e_field = (bits >> M) & ((1 << E) - 1)
    frac = bits & ((1 << M) - 1)
    if kind == "ieee" and e_field == (1 << E) - 1:
        return (sign * math.inf if frac == 0 else NAN), 0
    if kind == "fn" and e_field == (1 << E) - 1 and frac == (1 << M) - 1:
        return NAN, 0
    if e_field == 0:
        return sign * Fraction(frac, 1 << M) * Fraction(2) ** (1 - bias), 1 - bias
    return sign * Fraction((1 << M) + frac, 1 << M) * Fraction(2) ** (e_field - bias), e_field - bias


def decode_scale(bits: int, scale) -> tuple:
    """(significand, field exponent) of one scale pattern; NaN as "nan"."""
    if ScaleFormat(scale) == ScaleFormat.UE8M0:
        return (NAN, 0) if bits == 0xFF else (Fraction(1), bits - 127)
    x = bits & 0x7F
    if x == 0x7F:
        return NAN, 0
    e_field, frac = x >> 3, x & 7
    if e_field == 0:
        return Fraction(frac, 8), -6
    return Fraction(8 + frac, 8), e_field - 7


def decode_fp32(bits: int) -> tuple:
    """(value, field exponent) of an fp32 pattern (NaN "nan", ±inf)."""
    sign = -1 if bits >> 31 else 1
    e_field, frac = (bits >> 23) & 0xFF, bits & ((1 << 23) - 1)
    if e_field == 0xFF:
        return (sign * math.inf if frac == 0 else NAN), 0
    if e_field == 0:
        return sign * Fraction(frac, 1 << 23) * Fraction(2) ** -126, -126
    return sign * Fraction((1 << 23) + frac, 1 << 23) * Fraction(2) ** (e_field - 127), e_field - 127


def fp32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _rz_fp32(v: Fraction) -> int:
    """fp32 pattern of v rounded toward zero (MMA-Sim RZ-FP32: ±inf from 2^128 up), +0 for 0."""
    if v == 0:
        return 0
    sign = 1 << 31 if v < 0 else 0
    a = abs(v)
    if a >= 2**128:
        return sign | 0x7F800000
    e = a.numerator.bit_length() - a.denominator.bit_length()  # floor(log2 a) or one above
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, -126)
    q = Fraction(2) ** (e - 23)
    n = math.floor(a / q)  # RZ on the grid of a's binade (or the subnormal grid)
    if n == 0:
        return 0
    if n >= 1 << 23:  # normal: the hidden bit and 23 fraction bits
        return sign | ((e + 127) << 23) | (n - (1 << 23))
    return sign | n


def _rne_fp32(v: Fraction) -> int:
    """fp32 pattern of v rounded to nearest, ties to even (IEEE: ±inf from 2^128·(1 − 2^-25)
    up), +0 for 0."""
    if v == 0:
        return 0
    sign = 1 << 31 if v < 0 else 0
    a = abs(v)
    if a >= Fraction(2) ** 128 * (1 - Fraction(1, 2**25)):
        return sign | 0x7F800000
    lo = _rz_fp32(a)  # the fp32 value at or below a, and the next one up
    lo_v = decode_fp32(lo)[0]
    hi_v = decode_fp32(lo + 1)[0] if lo != 0x7F7FFFFF else Fraction(2) ** 128
    d_lo, d_hi = a - lo_v, hi_v - a
    n = lo if d_lo < d_hi or (d_lo == d_hi and lo % 2 == 0) else lo + 1
    return (sign | n) if n else 0


def _cut(x: Fraction, mode) -> int:
    return math.floor(x) if mode == Rounding.RD else math.trunc(x)


def _combine(terms, c_term, F: int, mode, rho=Rounding.RZ) -> int:
    """One group's fp32 result from its terms (s, e) (s a Fraction, ±inf or "nan"; a zero term
    with its exponent already given) and c's."""
    every = terms + [c_term]
    values = [s for s, _ in every]
    if any(s is NAN for s in values):
        return 0x7FC00000
    infs = {s for s in values if isinstance(s, float)}
    if len(infs) == 2:
        return 0x7FC00000
    if infs:
        return 0x7F800000 if infs.pop() > 0 else 0xFF800000
    e_max = max(e for _, e in every)
    total = sum(_cut(s * Fraction(2) ** (e - e_max + F), mode) for s, e in every if s != 0)
    return (_rne_fp32 if rho == Rounding.RNE else _rz_fp32)(total * Fraction(2) ** (e_max - F))


def _mul(x, y):
    """x·y of decoded values (Fractions, ±inf, "nan"): inf·0 is NaN."""
    if x is NAN or y is NAN:
        return NAN
    if isinstance(x, float) or isinstance(y, float):
        if x == 0 or y == 0:
            return NAN
        return math.inf if (x > 0) == (y > 0) else -math.inf
    return x * y


def reference_scaled_dot(a_bits, b_bits, sa_bits, sb_bits, c_bits: int, params: UnitParams) -> int:
    """The fp32 pattern of d for one row: ``a_bits``, ``b_bits`` K patterns; ``sa_bits``,
    ``sb_bits`` K // block_size scale patterns; ``c_bits`` the fp32 pattern of c."""
    rho = Rounding(params.output_rounding)
    assert rho in (Rounding.RZ, Rounding.RNE), "the reference rounds the fp32 output toward zero or to nearest even"
    fa = InputFormat(params.input_format)
    fb = fa if params.b_input_format == -1 else InputFormat(params.b_input_format)
    K, L, blk = len(a_bits), params.group_size, params.block_size
    F, e_zero, mode = params.fraction_bits, params.zero_exponent, Rounding(params.alignment_rounding)
    A = [decode_element(int(x), fa) for x in a_bits]
    B = [decode_element(int(x), fb) for x in b_bits]
    SA = [decode_scale(int(x), params.scale_format) for x in sa_bits]
    SB = [decode_scale(int(x), params.scale_format) for x in sb_bits]
    c = int(c_bits)
    for g0 in range(0, K, L):
        g1 = min(K, g0 + L)
        cv, ce = decode_fp32(c)
        if not isinstance(cv, Fraction):
            c_term = (cv, ce)
        elif cv == 0:
            c_term = (Fraction(0), e_zero)
        else:
            c_term = (cv / Fraction(2) ** ce, ce)
        terms = []
        if params.family == Family.SCALED_FUSED:
            for k in range(g0, g1):
                (av, ae), (bv, be) = A[k], B[k]
                (ssa, esa), (ssb, esb) = SA[k // blk], SB[k // blk]
                s = _mul(_mul(av, bv), _mul(ssa, ssb))
                if isinstance(s, Fraction):
                    s = s / Fraction(2) ** (ae + be)  # the factors' significands times the scales'
                    if s == 0:
                        terms.append((s, e_zero))
                        continue
                terms.append((s, ae + be + esa + esb))
        else:
            G = params.subgroup_size
            for s0 in range(g0, g1, G):
                prods = [A[k][0] * B[k][0] for k in range(s0, min(g1, s0 + G))]  # e2m1: finite
                (ssa, esa), (ssb, esb) = SA[s0 // blk], SB[s0 // blk]
                ss = _mul(ssa, ssb)
                if ss is NAN:
                    terms.append((NAN, 0))
                elif all(p == 0 for p in prods) or ss == 0:
                    terms.append((Fraction(0), e_zero))
                else:
                    terms.append((sum(prods) * ss, esa + esb))
        c = _combine(terms, c_term, F, mode, rho)
    return c
