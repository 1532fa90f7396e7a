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
:func:`rz_mask` (clear the float64 bits below fp32 precision): v is 0, inf/NaN, exactly an fp32
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
from numba.extending import overload

from ..jit import jit, prange
from ._scalar import (
    EXP_CLAMP,
    RD,
    RNE,
    RZ,
    exp_pow16,
    exp_pow64,
    inv_pow2,
    pow2,
    round_to_fp16_rne,
    round_to_fp32_bf,
    rz_mask,
)
from ._tiles import (
    LANES,
    P_ALIGN,
    P_CALIGN,
    P_F,
    P_F2,
    P_GROUP,
    P_OUT_FMT,
    P_OUT_ROUND,
    P_ZERO_EXP,
    a_of,
    a_table,
    c_at,
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


@jit(inline="always")
def _cut(x, mode):
    """x cut to an integer: toward −∞ (RD) or toward zero (RZ, the default)."""
    return np.floor(x) if mode == RD else np.trunc(x)


def _fill_a_pows(A, m, n0, w, T):
    """T[k] (GEMM layout) or T[k, j] (batched layout) = power of the a operand (exp_pow16)."""


@overload(_fill_a_pows, inline="always")
def _fill_a_pows_impl(A, m, n0, w, T):
    if A.ndim == 3:

        def fill(A, m, n0, w, T):
            for k in range(T.shape[0]):
                Ak = A[0, k, n0 : n0 + w]
                Tk = T[k]
                for j in range(w):
                    Tk[j] = exp_pow16(Ak[j])

        return fill

    def fill_row(A, m, n0, w, T):
        for k in range(T.shape[0]):
            T[k] = exp_pow16(A[m, k])

    return fill_row


@jit(inline="always")
def _b_pows(B, n0, w):
    """Powers (exp_pow16) of the task's block of B, (K, LANES) float32."""
    K = B.shape[0]
    T = np.empty((K, LANES), np.float32)
    for k in range(K):
        Bk = B[k, n0 : n0 + w]
        Tk = T[k]
        for j in range(w):
            Tk[j] = exp_pow16(Bk[j])
    return T


@jit(inline="always")
def _sc32(sc):
    """A float64 power-of-two product scale as the clamped float32 scale (module docstring)."""
    x = sc if sc > SC32_MIN else SC32_MIN
    return np.float32(x if x < SC32_MAX else SC32_MAX)


@jit(inline="always")
def _pw(ea, EBk, j):
    """The power of a product from its factors' powers: 0 or 2^-28 … 2^32, exact in float32."""
    return lane(ea, j) * EBk[j]


@jit(inline="always")
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


@jit(inline="always")
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


@jit(inline="always")
def _cut_p(ak, Bk, j, sc32, mode):
    """cut(a·b·σ) of one product, in float32 (module docstring), as float64."""
    return np.float64(_cut(lane(ak, j) * Bk[j] * sc32, mode))


@jit(inline="always")
def _add_cut_products(A, B, m, n0, w, g0, g, sc32, total, mode):
    """total[j] += cut(p·σ[j]) for the group's products p, in k order (four per pass)."""
    k = g0
    while k + 4 <= g0 + g:
        a0, a1 = a_of(A, m, k, n0, w), a_of(A, m, k + 1, n0, w)
        a2, a3 = a_of(A, m, k + 2, n0, w), a_of(A, m, k + 3, n0, w)
        B0, B1 = B[k, n0 : n0 + w], B[k + 1, n0 : n0 + w]
        B2, B3 = B[k + 2, n0 : n0 + w], B[k + 3, n0 : n0 + w]
        for j in range(w):
            sc = sc32[j]
            total[j] = (
                ((total[j] + _cut_p(a0, B0, j, sc, mode)) + _cut_p(a1, B1, j, sc, mode)) + _cut_p(a2, B2, j, sc, mode)
            ) + _cut_p(a3, B3, j, sc, mode)
        k += 4
    while k < g0 + g:
        ak = a_of(A, m, k, n0, w)
        Bk = B[k, n0 : n0 + w]
        for j in range(w):
            total[j] += _cut_p(ak, Bk, j, sc32[j], mode)
        k += 1


@jit(inline="always")
def _cut_p64(ak, Bk, j, sc, mode):
    """cut(a·b·σ) of one product in float64."""
    return _cut(np.float64(lane(ak, j)) * np.float64(Bk[j]) * sc, mode)


@jit(inline="always")
def _round_out(v, mode, align):
    """The fp32 rounding of a T-FDPA group result v (module docstring: rz_mask where it applies)."""
    return rz_mask(v) if (mode == RZ) & (align == RZ) else round_to_fp32_bf(v, mode)


@jit(inline="always")
def _group4(A, B, m, g0, n0, w, EA, EB, acc, zpow, c_pmin, two_f, two_mf, align, mode, zero_low):
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
        acc[j] = np.float64(_round_out(tot * (e * two_mf), mode, align)) + 0.0


@jit(inline="always")
def _finish32(total, emax, acc, w, two_mf, mode, align):
    """acc[j] = the fp32 rounding of total[j]·emax[j]·2^-F, +0 for zero."""
    for j in range(w):
        acc[j] = np.float64(_round_out(total[j] * (emax[j] * two_mf), mode, align)) + 0.0


@jit(parallel=True)
def truncated_fused(A, B, C, out, prm):
    n_tasks, n_rb = task_grid(out.shape[0], out.shape[1])
    for t in prange(n_tasks):
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
    # the exponent of zero terms below every non-zero term's (products ≥ 2^-28, c ≥ 2^c_emin):
    # then it never decides e_max unless all terms are zero, and zero products need no tracking
    zero_low = prm[P_ZERO_EXP] <= min(-28, c_emin)
    two_f = pow2(F)
    two_mf = pow2(-F)
    n0, w, m0, m1 = task_bounds(t, n_rb, M, N)
    EB = _b_pows(B, n0, w)
    EA = a_table(A, K)
    acc = np.empty(LANES, np.float64)
    emax = np.empty(LANES, np.float64)
    pmax = np.empty(LANES, np.float32)
    pmin = np.empty(LANES, np.float32)
    sc32 = np.empty(LANES, np.float32)
    total = np.empty(LANES, np.float64)
    for m in range(m0, m1):
        _fill_a_pows(A, m, n0, w, EA)
        for j in range(w):
            acc[j] = np.float64(c_at(C, m, n0 + j))
        for g0 in range(0, K, L):
            g = min(L, K - g0)
            if L == 4 and g == 4 and not fp16_out:
                if zero_low and out_mode == RZ and align == RZ:  # V100: all literal, no tests in the loop
                    _group4(A, B, m, g0, n0, w, EA, EB, acc, zpow, c_pmin, two_f, two_mf, RZ, RZ, True)
                else:
                    _group4(A, B, m, g0, n0, w, EA, EB, acc, zpow, c_pmin, two_f, two_mf, align, out_mode, zero_low)
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
                sc32[j] = _sc32(sc)
                total[j] = _cut(c * sc, align)
            _add_cut_products(A, B, m, n0, w, g0, g, sc32, total, align)
            if fp16_out:
                for j in range(w):
                    acc[j] = np.float64(round_to_fp16_rne(total[j] * (emax[j] * two_mf))) + 0.0
            elif out_mode == RZ and align == RZ:
                _finish32(total, emax, acc, w, two_mf, RZ, RZ)
            else:
                _finish32(total, emax, acc, w, two_mf, out_mode, align)
        outm = out[m, n0 : n0 + w]
        for j in range(w):
            outm[j] = np.float32(acc[j])


@jit(inline="always")
def _stage2(edot, sdot, acc, w, two_f, two_mf, two_f2, two_mf2, c_mode, out_mode):
    """TR-FDPA stage 2 for the lanes: acc[j] ← the rounded sum of the floored product sum and
    the cut accumulator (see the module docstring); edot[j] is e_dot's power (0: no product)."""
    c_pmin = 2.0**-126
    for j in range(w):
        e = np.float64(edot[j])
        s_dot = sdot[j] * ((e if e > LOWEST_SCALE_POWER else LOWEST_SCALE_POWER) * two_mf)
        c = acc[j]
        ec = exp_pow64(c, c_pmin, C_POW_MAX)
        e_max = e if e > ec else ec
        inv_e = inv_pow2(e_max)
        v = np.floor(s_dot * (inv_e * (2.0 * two_f2))) * (e_max * (0.5 * two_mf2)) + _cut(
            c * (inv_e * two_f), c_mode
        ) * (e_max * two_mf)
        ev = exp_pow64(v, c_pmin, V_POW_MAX)
        q = ev * two_mf2
        acc[j] = np.float64(round_to_fp32_bf(np.floor(v * (inv_pow2(ev) * two_f2)) * q, out_mode))


@jit(parallel=True)
def two_stage(A, B, C, out, prm):
    n_tasks, n_rb = task_grid(out.shape[0], out.shape[1])
    for t in prange(n_tasks):
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
    two_f, two_mf = pow2(F), pow2(-F)
    two_f2, two_mf2 = pow2(F2), pow2(-F2)
    n0, w, m0, m1 = task_bounds(t, n_rb, M, N)
    EB = _b_pows(B, n0, w)
    EA = a_table(A, K)
    acc = np.empty(LANES, np.float64)
    edot = np.empty(LANES, np.float32)
    sdot = np.empty(LANES, np.float64)
    sc32 = np.empty(LANES, np.float32)
    for m in range(m0, m1):
        _fill_a_pows(A, m, n0, w, EA)
        for j in range(w):
            acc[j] = np.float64(c_at(C, m, n0 + j))
        for g0 in range(0, K, L):
            g = min(L, K - g0)
            for j in range(w):
                edot[j] = F32_ZERO  # zero products (power 0) never raise it
            _max_power(n0, w, g0, g, EA, EB, edot)
            for j in range(w):
                e = np.float64(edot[j])
                sc32[j] = _sc32(two_f * inv_pow2(e if e > LOWEST_SCALE_POWER else LOWEST_SCALE_POWER))
                sdot[j] = 0.0
            _add_cut_products(A, B, m, n0, w, g0, g, sc32, sdot, align)
            if c_mode == RD and out_mode == RNE:  # MI300: literal modes, no tests in the loop
                _stage2(edot, sdot, acc, w, two_f, two_mf, two_f2, two_mf2, RD, RNE)
            else:
                _stage2(edot, sdot, acc, w, two_f, two_mf, two_f2, two_mf2, c_mode, out_mode)
        outm = out[m, n0 : n0 + w]
        for j in range(w):
            outm[j] = np.float32(acc[j])
