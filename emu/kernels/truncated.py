"""Truncated fused dot-add units: NVIDIA tensor cores (T-FDPA) and AMD MI300 (TR-FDPA).

Contract (``truncated_fused``), per group of ``L`` products and the accumulator c:
    terms = products (exact, exponent ea+eb) and c (its field exponent; fp16 c for fp16 output);
    a zero term takes exponent ``zero_exponent``; e_max = max over all terms;
    every term is cut to a multiple of 2^(e_max − F) with ``alignment_rounding`` (RZ: toward
    zero; RD: toward −∞);
    the sum is exact; it is rounded once to the output format (fp32: ``output_rounding``,
    fp16: RNE) and a zero result is +0.

Contract (``two_stage``), per group of ``L`` products:
    stage 1: e_dot = max exponent of the non-zero products; each cut at 2^(e_dot − F) with ``alignment_rounding``
    and summed exactly; stage 2: e_max = max(e_dot, field exponent of c); the product sum is
    floored at 2^(e_max − F2 − 1) and c at 2^(e_max − F); their exact sum is normalised (fp32
    subnormal exponent −126), floored to F2 fraction bits, and rounded (RNE) to fp32.

Exactness: every cut term is an integer below 2^(F+3) times the grid, so with F ≤ 48 and
L ≤ 16 all sums are exact in float64.

Method. Exponents are carried as powers of two in floating point (2^e rather than e), so that
maxima, scale factors and alignments are single vector instructions: a factor's power 2^ea is
its float32 bit pattern masked to the exponent field, clamped below at 2^-14 (fp16 subnormals)
and 0 for a zero factor, so a product's power 2^ea·2^eb is 0 exactly when the product is zero
(fp16 products never underflow). The powers of B's block are computed once per task and shared
by its rows; those of a row of A once per row. Cutting x at 2^(e − F) is cut(x·2^(F−e))·2^(e−F)
with exact power-of-two scalings (every scale stays within float64's normal range), and a
division by a power of two is the multiplication by its exact reciprocal (:func:`inv_pow2`),
the same correctly rounded value. Infinite and NaN factors get the power 2^16 (the former code
clamped exponents at 200): any finite positive scale gives the same results, since the sum is
then inf or NaN whatever the other terms are cut to.

Products are formed, scaled and cut in float32 (twice the lanes of float64), then summed in
float64: with σ = 2^(F−e) clamped to [2^-101, 2^127] as σ', cut(fl32(fl32(a·b)·σ')) =
cut(a·b·σ). a·b is exact in float32 (22 bits). If σ ≤ 2^127 it is not clamped above, and if
|a·b·σ| ≥ 2^-126 the float32 product is exact. Otherwise the cut is 0 or −1 by sign alone and the
float32 product keeps that sign and, for a non-zero product (≥ 2^-48) and σ' ≥ 2^-101, stays
non-zero (≥ 2^-149): when |a·b·σ| < 2^-126 and σ ≥ 2^-101 rounding stays on the non-zero side,
and a clamped σ < 2^-101 means |a·b·σ'| ≤ 2^32·2^-101 < 1, a cut again fixed by the sign. σ > 2^127
means e < F − 127 ≤ −79, below every non-zero product's power (≥ 2^-28), so all products are ±0
and so is their scaled value. The cut values are integers of at most 22 significant bits and
convert to float64 exactly. The products' powers (EA·EB, 0 or 2^-28 … 2^32) are also maximised in
float32; the accumulator's power and the scale factors stay in float64.

With RZ alignment, RZ output rounding of a T-FDPA group result v = total·2^(e_max−F) is
:func:`rz_bits` (clear the float64 bits below fp32 precision): v is 0, inf/NaN, exactly an fp32
value, or in fp32's normal range below 2^128. If some product is non-zero, e_max ≥ −28, so v is
a multiple of 2^(−28−48) and a non-zero |v| is far above 2^-126; RZ cuts do not grow a term, so
|v| ≤ |c| + Σ|p| < (2^128 − 2^104) + 2^37 < 2^128 (not so with RD cuts, which can move each
term by a grid step of up to 2^104, so RD alignment rounds with round_to_fp32_bf). If all
products are zero, v = cut(c) at a grid 2^(e_max−F) with e_max ≥ c's field exponent: a
subnormal v is then c itself (a grid finer than 2^-149 leaves c alone) or a multiple of a power
≥ 2^-149, an fp32 value either way.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from ..jit import jit
from ._scalar import (
    EXP64_MASK,
    EXP_CLAMP,
    POW16_CLAMP,
    RD,
    RNE,
    RZ,
    exp_pow64,
    inv_pow2,
    pow2,
    round_to_fp16_rne,
    round_to_fp32_bf,
)
from ._tiles import (
    LANES,
    P_ALIGN,
    P_CALIGN,
    P_F,
    P_F2,
    P_GROUP,
    P_IN_EMIN,
    P_IN_EMIN_B,
    P_INTERLEAVE,
    P_OUT_FB,
    P_OUT_FMT,
    P_OUT_ROUND,
    P_ZERO_EXP,
    a_of,
    a_table,
    c_at,
    is_wide,
    lane,
    task_bounds,
    task_grid,
)

# no non-zero product: stage 1 of TR-FDPA scales by 2^(F+900) (a finite scale; the sum is 0)
LOWEST_SCALE_POWER = 2.0**-900
C_POW_MAX = 2.0**EXP_CLAMP  # c's exponent is clamped here (inf/NaN accumulators)
V_POW_MAX = 2.0**1000  # ... and the exponent of a non-finite stage-2 sum here (any finite value)
SC32_MIN = 2.0**-101  # float32 product scales are clamped to [SC32_MIN, SC32_MAX] (module docstring)
SC32_MAX = 2.0**127
F32_ZERO = np.float32(0.0)
WIDE_POW_MAX = 2.0**EXP_CLAMP  # wide operands: inf/NaN factors get this power (any finite value)
FP32_OVERFLOW = 2.0**128  # a product or RZ result this large is ±inf (MMA-Sim)
FP32_TINY = 2.0**-126


def in_pow(x, pmin):
    """2**(field exponent) of an operand value x, 0.0 for x == 0: the power of |x|'s leading bit,
    ``pmin`` (2^emin of the input format) for its subnormals; inf/NaN get a power above every
    finite one (2^16 for fp16 values in float32, 2^200 for float64 operands)."""


@overload(in_pow)
def _in_pow(x, pmin):
    if isinstance(x, types.Float) and x.bitwidth == 32:

        def narrow(x, pmin):
            p = np.int32(np.float32(x).view(np.int32) & 0x7F800000).view(np.float32)
            lo = np.float32(pmin)
            p = p if p > lo else lo
            p = p if p < POW16_CLAMP else POW16_CLAMP
            return p if x != 0.0 else np.float32(0.0)

        return narrow

    def wide(x, pmin):
        p = np.int64(np.float64(x).view(np.int64) & EXP64_MASK).view(np.float64)
        p = p if p > pmin else pmin
        p = p if p < WIDE_POW_MAX else WIDE_POW_MAX
        return p if x != 0.0 else 0.0

    return wide


def _clip(p, on):
    """A product ≥ 2^128 in magnitude as ±inf when ``on`` (MI300's stage 1, MMA-Sim tr_fdpa);
    the identity for fp16 values, whose products are far below."""


@overload(_clip)
def _clip_impl(p, on):
    if isinstance(p, types.Float) and p.bitwidth == 64:

        def clip(p, on):
            if on and abs(p) >= FP32_OVERFLOW:
                return p * np.inf
            return p

        return clip

    def identity(p, on):
        return p

    return identity


@jit
def rz_bits(v, mask):
    """RZ of a float64 v by clearing the significand bits ``mask`` drops (fp32: the 29 below its
    precision; E8M13: 39). Correct only when v is 0, inf, NaN (a NaN that has a payload bit among
    the kept ones, as every NaN from fp16/fp32 data or arithmetic has), a value of the target
    precision, or in fp32's normal range below 2^128; callers prove it (module docstring)."""
    return np.float32(np.int64(np.float64(v).view(np.int64) & mask).view(np.float64))


@jit
def rz_wide(v, fb):
    """RZ of an exact float64 v to ``fb`` fraction bits in fp32's exponent range as MMA-Sim's
    RZ-FP32 / RZ-E8M13 does it: on the grid 2^(-126-fb) below 2^-126, and ±inf from 2^128 up."""
    a = abs(v)
    if a >= FP32_OVERFLOW:
        return np.float32(v * np.inf)
    if a < FP32_TINY:
        q = pow2(-126 - fb)
        return np.float32(np.trunc(v * inv_pow2(q)) * q)
    return np.float32(np.int64(np.float64(v).view(np.int64) & ~((np.int64(1) << (52 - fb)) - 1)).view(np.float64))


@jit
def _cut(x, mode):
    """x cut to an integer: toward −∞ (RD) or toward zero (RZ, the default)."""
    return np.floor(x) if mode == RD else np.trunc(x)


def _fill_a_pows(A, m, n0, w, T, pmin):
    """T[k] (GEMM layout) or T[k, j] (batched layout) = power of the a operand (in_pow)."""


@overload(_fill_a_pows)
def _fill_a_pows_impl(A, m, n0, w, T, pmin):
    if A.ndim == 3:

        def fill(A, m, n0, w, T, pmin):
            for k in range(T.shape[0]):
                Ak = A[0, k, n0 : n0 + w]
                Tk = T[k]
                for j in range(w):
                    Tk[j] = in_pow(Ak[j], pmin)

        return fill

    def fill_row(A, m, n0, w, T, pmin):
        for k in range(T.shape[0]):
            T[k] = in_pow(A[m, k], pmin)

    return fill_row


@jit
def _b_pows(B, n0, w, pmin):
    """Powers (in_pow) of the task's block of B, (K, LANES) of B's dtype."""
    K = B.shape[0]
    T = np.empty((K, LANES), B.dtype)
    for k in range(K):
        Bk = B[k, n0 : n0 + w]
        Tk = T[k]
        for j in range(w):
            Tk[j] = in_pow(Bk[j], pmin)
    return T


@jit
def _sc32(sc):
    """A float64 power-of-two product scale as the clamped float32 scale (module docstring)."""
    x = sc if sc > SC32_MIN else SC32_MIN
    return np.float32(x if x < SC32_MAX else SC32_MAX)


@jit
def _pw(ea, EBk, j):
    """The power of a product from its factors' powers: 0 or 2^-28 … 2^32 for fp16 values, exact
    in float32 (0 or 2^-252 … 2^400 for wide operands, in float64)."""
    return lane(ea, j) * EBk[j]


@jit
def _max_power(n0, w, g0, g, EA, EB, emax):
    """emax[j] (float32) = max(emax[j], the group's product powers) (a zero product has power 0).

    Four products per pass over the lanes. Each store adds +0 (exact: the powers are ≥ 0) so
    that LLVM does not turn ``emax[j] = pw if pw > e else e`` into a conditional (masked) store,
    which is microcoded and slow on AMD Zen."""
    k = g0
    while k + 4 <= g0 + g:
        ea0, ea1, ea2, ea3 = EA[k], EA[k + 1], EA[k + 2], EA[k + 3]
        EB0, EB1, EB2, EB3 = EB[k], EB[k + 1], EB[k + 2], EB[k + 3]
        for j in range(w):
            x, y = _pw(ea0, EB0, j), _pw(ea1, EB1, j)
            x = x if x > y else y
            y, z = _pw(ea2, EB2, j), _pw(ea3, EB3, j)
            y = y if y > z else z
            x = x if x > y else y
            e = emax[j]
            emax[j] = (x if x > e else e) + F32_ZERO
        k += 4
    while k < g0 + g:
        eak, EBk = EA[k], EB[k]
        for j in range(w):
            x = _pw(eak, EBk, j)
            e = emax[j]
            emax[j] = (x if x > e else e) + F32_ZERO
        k += 1


@jit
def _min_power(n0, w, g0, g, EA, EB, emin):
    """emin[j] (float32) = the smallest product power of the group (0 when a product is zero)."""
    for j in range(w):
        emin[j] = np.float32(1.0)
    for k in range(g0, g0 + g):
        eak = EA[k]
        EBk = EB[k]
        for j in range(w):
            x = _pw(eak, EBk, j)
            e = emin[j]
            emin[j] = (x if x < e else e) + F32_ZERO  # see _max_power


@jit
def _cut_p(ak, Bk, j, sc32, mode, clip):
    """cut(a·b·σ) of one product, in float32 for fp16 values (module docstring), in float64 for
    wide operands (exact: a·b has at most 22 bits, σ is a power of two in range), as float64."""
    return np.float64(_cut(_clip(lane(ak, j) * Bk[j], clip) * sc32, mode))


@jit
def _add_cut_products(A, B, m, n0, w, g0, g, sc32, total, mode, clip):
    """total[j] += cut(p·σ[j]) for the group's products p, in k order (four per pass); ``clip``:
    products ≥ 2^128 are ±inf (:func:`_clip`)."""
    k = g0
    while k + 4 <= g0 + g:
        a0, a1 = a_of(A, m, k, n0, w), a_of(A, m, k + 1, n0, w)
        a2, a3 = a_of(A, m, k + 2, n0, w), a_of(A, m, k + 3, n0, w)
        B0, B1 = B[k, n0 : n0 + w], B[k + 1, n0 : n0 + w]
        B2, B3 = B[k + 2, n0 : n0 + w], B[k + 3, n0 : n0 + w]
        for j in range(w):
            sc = sc32[j]
            total[j] = (
                ((total[j] + _cut_p(a0, B0, j, sc, mode, clip)) + _cut_p(a1, B1, j, sc, mode, clip))
                + _cut_p(a2, B2, j, sc, mode, clip)
            ) + _cut_p(a3, B3, j, sc, mode, clip)
        k += 4
    while k < g0 + g:
        ak = a_of(A, m, k, n0, w)
        Bk = B[k, n0 : n0 + w]
        for j in range(w):
            total[j] += _cut_p(ak, Bk, j, sc32[j], mode, clip)
        k += 1


@jit
def _cut_p64(ak, Bk, j, sc, mode):
    """cut(a·b·σ) of one product in float64."""
    return _cut(np.float64(lane(ak, j)) * np.float64(Bk[j]) * sc, mode)


@jit
def _round_out(v, mode, align, mask, fb, wide):
    """The fp32 rounding of a T-FDPA group result v (module docstring: rz_bits where it applies;
    :func:`rz_wide` for RZ of wide operands' results, which may be subnormal or overflow)."""
    if wide and mode == RZ:
        return rz_wide(v, fb)
    return rz_bits(v, mask) if (mode == RZ) & (align == RZ) else round_to_fp32_bf(v, mode)


@jit
def _group4(A, B, m, g0, n0, w, EA, EB, acc, zpow, c_pmin, two_f, two_mf, align, mode, zero_low, mask, fb):
    """T-FDPA on a full group of 4 with fp32 output, all in one pass over the lanes (the V100
    case): the same arithmetic as the general path, in float64 (at four lanes per vector,
    float32 would not be faster). Called with literal ``align``, ``mode`` and ``zero_low``
    where it can be, so that they are not tested inside the loop (LLVM does not unswitch a loop
    this large)."""
    a0, a1 = a_of(A, m, g0, n0, w), a_of(A, m, g0 + 1, n0, w)
    a2, a3 = a_of(A, m, g0 + 2, n0, w), a_of(A, m, g0 + 3, n0, w)
    B0, B1 = B[g0, n0 : n0 + w], B[g0 + 1, n0 : n0 + w]
    B2, B3 = B[g0 + 2, n0 : n0 + w], B[g0 + 3, n0 : n0 + w]
    ea0, ea1, ea2, ea3 = EA[g0], EA[g0 + 1], EA[g0 + 2], EA[g0 + 3]
    EB0, EB1, EB2, EB3 = EB[g0], EB[g0 + 1], EB[g0 + 2], EB[g0 + 3]
    for j in range(w):
        c = acc[j]
        e = zpow if c == 0.0 else exp_pow64(c, c_pmin, C_POW_MAX)
        w0, w1, w2, w3 = _pw(ea0, EB0, j), _pw(ea1, EB1, j), _pw(ea2, EB2, j), _pw(ea3, EB3, j)
        x = w0 if w0 > w1 else w1
        y = w2 if w2 > w3 else w3
        x = np.float64(x if x > y else y)
        e = x if x > e else e
        if not zero_low:
            x = w0 if w0 < w1 else w1
            y = w2 if w2 < w3 else w3
            e = zpow if ((x if x < y else y) == 0.0) & (zpow > e) else e
        sc = two_f * inv_pow2(e)
        tot = _cut(c * sc, align)
        tot = (
            ((tot + _cut_p64(a0, B0, j, sc, align)) + _cut_p64(a1, B1, j, sc, align)) + _cut_p64(a2, B2, j, sc, align)
        ) + _cut_p64(a3, B3, j, sc, align)
        acc[j] = np.float64(_round_out(tot * (e * two_mf), mode, align, mask, fb, is_wide(B))) + 0.0


@jit
def _finish32(total, emax, acc, w, two_mf, mode, align, mask, fb, wide):
    """acc[j] = the fp32 rounding of total[j]·emax[j]·2^-F, +0 for zero."""
    for j in range(w):
        acc[j] = np.float64(_round_out(total[j] * (emax[j] * two_mf), mode, align, mask, fb, wide)) + 0.0


@jit
def truncated_fused(A, B, C, out, prm, t0, t1):
    n_tasks, n_rb = task_grid(out.shape[0], out.shape[1])
    for t in range(t0, min(t1, n_tasks)):
        _truncated_fused_task(A, B, C, out, prm, np.int64(t), n_rb)


@jit
def _truncated_fused_task(A, B, C, out, prm, t, n_rb):
    """Task ``t`` of :func:`truncated_fused` (see :func:`emu.kernels.fused_exact._fused_exact_task`)."""
    M, N = out.shape
    K = B.shape[0]
    L = prm[P_GROUP]
    F = prm[P_F]
    fp16_out = prm[P_OUT_FMT] == 1
    out_mode = prm[P_OUT_ROUND]
    align = prm[P_ALIGN]
    c_emin = -14 if fp16_out else -126
    c_pmin = pow2(c_emin)
    zpow = pow2(prm[P_ZERO_EXP])
    a_pmin, b_pmin = pow2(prm[P_IN_EMIN]), pow2(prm[P_IN_EMIN_B])
    fb = prm[P_OUT_FB]
    mask = ~((np.int64(1) << (52 - fb)) - 1)
    wide = is_wide(B)
    # the exponent of zero terms below every non-zero term's (products ≥ 2^(emin_a + emin_b),
    # 2^-28 for fp16; c ≥ 2^c_emin): then it never decides e_max unless all terms are zero, and
    # zero products need no tracking
    zero_low = prm[P_ZERO_EXP] <= min(prm[P_IN_EMIN] + prm[P_IN_EMIN_B], c_emin)
    two_f = pow2(F)
    two_mf = pow2(-F)
    n0, w, m0, m1 = task_bounds(t, n_rb, M, N)
    EB = _b_pows(B, n0, w, b_pmin)
    EA = a_table(A, K)
    acc = np.empty(LANES, np.float64)
    emax = np.empty(LANES, np.float64)
    pmax = np.empty(LANES, B.dtype)
    pmin = np.empty(LANES, B.dtype)
    sc32 = np.empty(LANES, B.dtype)
    total = np.empty(LANES, np.float64)
    for m in range(m0, m1):
        _fill_a_pows(A, m, n0, w, EA, a_pmin)
        for j in range(w):
            acc[j] = np.float64(c_at(C, m, n0 + j))
        for g0 in range(0, K, L):
            g = min(L, K - g0)
            if L == 4 and g == 4 and not fp16_out:
                if zero_low and out_mode == RZ and align == RZ:  # V100: all literal, no tests in the loop
                    _group4(A, B, m, g0, n0, w, EA, EB, acc, zpow, c_pmin, two_f, two_mf, RZ, RZ, True, mask, fb)
                else:
                    _group4(
                        A,
                        B,
                        m,
                        g0,
                        n0,
                        w,
                        EA,
                        EB,
                        acc,
                        zpow,
                        c_pmin,
                        two_f,
                        two_mf,
                        align,
                        out_mode,
                        zero_low,
                        mask,
                        fb,
                    )
                continue
            for j in range(w):
                pmax[j] = F32_ZERO
            _max_power(n0, w, g0, g, EA, EB, pmax)
            if not zero_low:
                _min_power(n0, w, g0, g, EA, EB, pmin)
            for j in range(w):
                c = acc[j]
                e = zpow if c == 0.0 else exp_pow64(c, c_pmin, C_POW_MAX)
                x = np.float64(pmax[j])
                e = x if x > e else e
                if not zero_low:
                    e = zpow if (pmin[j] == 0.0) & (zpow > e) else e  # a zero product
                emax[j] = e
                sc = two_f * inv_pow2(e)
                sc32[j] = sc if wide else _sc32(sc)
                total[j] = _cut(c * sc, align)
            _add_cut_products(A, B, m, n0, w, g0, g, sc32, total, align, False)
            if fp16_out:
                for j in range(w):
                    acc[j] = np.float64(round_to_fp16_rne(total[j] * (emax[j] * two_mf))) + 0.0
            elif out_mode == RZ and align == RZ:
                _finish32(total, emax, acc, w, two_mf, RZ, RZ, mask, fb, wide)
            else:
                _finish32(total, emax, acc, w, two_mf, out_mode, align, mask, fb, wide)
        outm = out[m, n0 : n0 + w]
        for j in range(w):
            outm[j] = np.float32(acc[j])


@jit
def _stage2(edot, sdot, acc, w, two_f, two_mf, two_f2, two_mf2, c_mode, out_mode, drop_c):
    """TR-FDPA stage 2 for the lanes: acc[j] ← the rounded sum of the floored product sum and
    the cut accumulator (see the module docstring); edot[j] is e_dot's power (0: no product).
    With ``drop_c`` (GTR-FDPA), c adds nothing when its exponent is below e_max − F − 1."""
    c_pmin = 2.0**-126
    for j in range(w):
        e = np.float64(edot[j])
        s_dot = sdot[j] * ((e if e > LOWEST_SCALE_POWER else LOWEST_SCALE_POWER) * two_mf)
        c = acc[j]
        ec = exp_pow64(c, c_pmin, C_POW_MAX)
        e_max = e if e > ec else ec
        inv_e = inv_pow2(e_max)
        c_cut = _cut(c * (inv_e * two_f), c_mode)
        if drop_c and ec * (2.0 * two_f) < e_max:
            c_cut = 0.0
        v = np.floor(s_dot * (inv_e * (2.0 * two_f2))) * (e_max * (0.5 * two_mf2)) + c_cut * (e_max * two_mf)
        ev = exp_pow64(v, c_pmin, V_POW_MAX)
        q = ev * two_mf2
        acc[j] = np.float64(round_to_fp32_bf(np.floor(v * (inv_pow2(ev) * two_f2)) * q, out_mode))


@jit
def _half_sum(A, B, m, n0, w, k0, k1, EA, EB, two_f, epow, sc, total, mode):
    """Stage 1 of one interleaved half of a GTR-FDPA group (the products k0, k0 + 2, … < k1):
    epow[j] = their largest power (0: all zero), total[j] = Σ cut(p·2^F/epow[j])."""
    for j in range(w):
        epow[j] = F32_ZERO
        total[j] = 0.0
    for k in range(k0, k1, 2):
        eak, EBk = EA[k], EB[k]
        for j in range(w):
            x = _pw(eak, EBk, j)
            e = epow[j]
            epow[j] = (x if x > e else e) + F32_ZERO
    for j in range(w):
        e = np.float64(epow[j])
        x = two_f * inv_pow2(e if e > LOWEST_SCALE_POWER else LOWEST_SCALE_POWER)
        sc[j] = x if is_wide(B) else _sc32(x)
    for k in range(k0, k1, 2):
        ak = a_of(A, m, k, n0, w)
        Bk = B[k, n0 : n0 + w]
        for j in range(w):
            total[j] += _cut_p(ak, Bk, j, sc[j], mode, True)


@jit
def _merge_halves(w, e_even, t_even, e_odd, t_odd, edot, sdot):
    """GTR-FDPA: the two halves' sums floored onto the grid 2^(e_dot − F) of the larger power
    (MMA-Sim gtr_fdpa: floor(s·2^(e − e_dot + F))·2^-F), as one stage-1 result (edot, sdot)."""
    for j in range(w):
        xe, xo = np.float64(e_even[j]), np.float64(e_odd[j])
        ee = xe if xe > LOWEST_SCALE_POWER else LOWEST_SCALE_POWER
        eo = xo if xo > LOWEST_SCALE_POWER else LOWEST_SCALE_POWER
        ed = ee if ee > eo else eo
        inv = inv_pow2(ed)
        sdot[j] = np.floor(t_even[j] * (ee * inv)) + np.floor(t_odd[j] * (eo * inv))
        edot[j] = e_even[j] if e_even[j] > e_odd[j] else e_odd[j]


@jit
def two_stage(A, B, C, out, prm, t0, t1):
    n_tasks, n_rb = task_grid(out.shape[0], out.shape[1])
    for t in range(t0, min(t1, n_tasks)):
        _two_stage_task(A, B, C, out, prm, np.int64(t), n_rb)


@jit
def _two_stage_task(A, B, C, out, prm, t, n_rb):
    """Task ``t`` of :func:`two_stage` (see :func:`emu.kernels.fused_exact._fused_exact_task`)."""
    M, N = out.shape
    K = B.shape[0]
    L = prm[P_GROUP]
    F = prm[P_F]
    F2 = prm[P_F2]
    align = prm[P_ALIGN]
    c_mode = prm[P_CALIGN]
    out_mode = prm[P_OUT_ROUND]
    halves = prm[P_INTERLEAVE] == 2
    wide = is_wide(B)
    a_pmin, b_pmin = pow2(prm[P_IN_EMIN]), pow2(prm[P_IN_EMIN_B])
    two_f, two_mf = pow2(F), pow2(-F)
    two_f2, two_mf2 = pow2(F2), pow2(-F2)
    n0, w, m0, m1 = task_bounds(t, n_rb, M, N)
    EB = _b_pows(B, n0, w, b_pmin)
    EA = a_table(A, K)
    acc = np.empty(LANES, np.float64)
    edot = np.empty(LANES, B.dtype)
    sdot = np.empty(LANES, np.float64)
    sc32 = np.empty(LANES, B.dtype)
    e_odd = np.empty(LANES, B.dtype)
    s_odd = np.empty(LANES, np.float64)
    for m in range(m0, m1):
        _fill_a_pows(A, m, n0, w, EA, a_pmin)
        for j in range(w):
            acc[j] = np.float64(c_at(C, m, n0 + j))
        for g0 in range(0, K, L):
            g = min(L, K - g0)
            if halves:  # MI300 fp8 (GTR-FDPA): even and odd products summed apart, then merged
                _half_sum(A, B, m, n0, w, g0, g0 + g, EA, EB, two_f, edot, sc32, sdot, align)
                _half_sum(A, B, m, n0, w, g0 + 1, g0 + g, EA, EB, two_f, e_odd, sc32, s_odd, align)
                _merge_halves(w, edot, sdot, e_odd, s_odd, edot, sdot)
                _stage2(edot, sdot, acc, w, two_f, two_mf, two_f2, two_mf2, c_mode, out_mode, True)
                continue
            for j in range(w):
                edot[j] = F32_ZERO  # zero products (power 0) never raise it
            _max_power(n0, w, g0, g, EA, EB, edot)
            for j in range(w):
                e = np.float64(edot[j])
                x = two_f * inv_pow2(e if e > LOWEST_SCALE_POWER else LOWEST_SCALE_POWER)
                sc32[j] = x if wide else _sc32(x)
                sdot[j] = 0.0
            _add_cut_products(A, B, m, n0, w, g0, g, sc32, sdot, align, True)
            if c_mode == RD and out_mode == RNE:  # MI300: literal modes, no tests in the loop
                _stage2(edot, sdot, acc, w, two_f, two_mf, two_f2, two_mf2, RD, RNE, False)
            else:
                _stage2(edot, sdot, acc, w, two_f, two_mf, two_f2, two_mf2, c_mode, out_mode, False)
        outm = out[m, n0 : n0 + w]
        for j in range(w):
            outm[j] = np.float32(acc[j])
