"""Scalar building blocks shared by the unit kernels (all exact, all branch-light).

Values are carried in float64: every fp16 value, every fp16·fp16 product and every fp32 value is
exact there, so the only roundings are the ones a kernel performs on purpose.
"""

from __future__ import annotations

import numpy as np

from ..jit import jit

RNE, RZ, RD = 0, 1, 2
FP32_MIN_NORMAL = 2.0**-126
FP32_MAX = float(np.finfo(np.float32).max)
FP16_MAX = 65504.0
# Exponents of non-finite values are clamped here so that scale factors stay finite and nonzero:
# inf·scale stays inf and NaN stays NaN, which is how the published models propagate them.
EXP_CLAMP = 200
POW16_CLAMP = np.float32(2.0**16)
EXP64_MASK = np.int64(0x7FF0000000000000)
INV_POW2_BITS = np.int64(2046 << 52)


@jit
def exponent64(x):
    """floor(log2|x|) from the float64 bit pattern (−1023 for zero; 1024 for inf/NaN)."""
    return np.int64(((np.float64(x).view(np.int64) >> 52) & 0x7FF) - 1023)


@jit
def field_exponent(x, emin):
    """The exponent a unit aligns by: floor(log2|x|), with subnormals and zero given ``emin``;
    clamped above so that inf/NaN do not overflow scale factors."""
    e = exponent64(x)
    if e < emin:
        e = emin
    if e > EXP_CLAMP:
        e = EXP_CLAMP
    return e


@jit
def pow2(e):
    """2**e as float64 for −1022 ≤ e ≤ 1023, built from its bit pattern (exact, vectorisable)."""
    return np.int64((e + 1023) << 52).view(np.float64)


@jit
def two_sum(a, b):
    """Knuth's TwoSum: s = RN(a+b) and the exact error t, a + b = s + t."""
    s = a + b
    av = s - b
    bv = s - av
    return s, (a - av) + (b - bv)


@jit
def add_round_to_odd(a, b):
    """a + b rounded to odd in float64 (the last bit set when inexact); with 53 ≥ 24 + 2 bits a
    later rounding to fp32 in any mode equals rounding the exact a + b once (Boldo–Melquiond).

    Branch-free (vectorisable) and without integer multiplies: with (s, t) = TwoSum(a, b), the
    rounding to odd is RZ(a + b) with its last bit set when t ≠ 0, and RZ(a + b) is s, or its
    neighbour toward zero (bits − 1; sign-magnitude) when t ≠ 0 has the other sign. (t is never
    −0, and t ≠ 0 implies s ≠ 0; below a power of two s, a + b lies above the predecessor.)"""
    s, t = two_sum(a, b)
    sb = np.float64(s).view(np.int64)
    inexact = np.int64(t != 0.0)
    other_sign = ((np.float64(t).view(np.int64) ^ sb) >> 63) & 1
    return np.int64((sb - (other_sign & inexact)) | inexact).view(np.float64)


@jit
def round_to_fp32_bf(v, mode):
    """Round an exact float64 ``v`` to fp32 with RNE, RZ or RD, without branches (vectorisable):
    the RNE result stepped one ulp toward zero (RZ: when it is above |v|; RD: when it is above v
    and positive) or away from zero (RD: when it is above v and not positive). IEEE overflow
    rules: RZ gives ±max finite, RD gives +max finite or −inf (MMA-Sim's RZ would give inf from
    2^128 up, which no named unit can reach with fp16 inputs); inf and NaN pass through."""
    f = np.float32(v)
    fd = np.float64(f)
    bits = np.float32(f).view(np.int32)
    rz = np.int32(abs(fd) > abs(v))
    rd = np.int32(fd > v) * np.int32(1 - 2 * np.int32(f > 0.0))
    step = -rz if mode == RZ else (rd if mode == RD else np.int32(0))
    return np.int32(bits + step).view(np.float32)


@jit
def exp_pow64(x, pmin, pmax):
    """2**floor(log2|x|) of a float64 x (normal or zero), clamped to [pmin, pmax] (powers of two);
    inf/NaN give pmax, zero gives pmin."""
    p = np.int64(np.float64(x).view(np.int64) & EXP64_MASK).view(np.float64)
    p = p if p > pmin else pmin
    return p if p < pmax else pmax


@jit
def inv_pow2(p):
    """1/p for a power of two p = 2^e, −1022 ≤ e ≤ 1022, from the bit pattern (exact)."""
    return np.int64(INV_POW2_BITS - np.float64(p).view(np.int64)).view(np.float64)


@jit
def round_to_fp16_rne(v):
    """RNE of an exact float64 to fp16, returned as the (exact) fp16 value in float32."""
    if v != v or v - v != 0.0:
        return np.float32(v)
    e = exponent64(v)
    if e < -14:
        e = -14
    q = pow2(e - 10)
    r = np.rint(v / q) * q
    if abs(r) > FP16_MAX:
        r = np.inf if r > 0.0 else -np.inf
    return np.float32(r)


@jit
def flush_keep_sign(x, tiny):
    """A subnormal ``x`` (|x| < tiny) becomes a zero of its own sign."""
    if abs(x) < tiny:
        return np.copysign(x - x, x)  # x - x keeps x's type, unlike x * 0.0
    return x


@jit
def flush_to_plus_zero(x, tiny):
    if abs(x) < tiny:
        return x - x
    return x
