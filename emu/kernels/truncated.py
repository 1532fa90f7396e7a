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
"""

from __future__ import annotations

import numpy as np
from numba.extending import overload

from .._jit import jit, prange
from ._scalar import (RD, EXP_CLAMP, exp_pow16, exp_pow64, inv_pow2, pow2, round_to_fp16_rne,
                      round_to_fp32_bf)
from ._tiles import (LANES, P_ALIGN, P_CALIGN, P_F, P_F2, P_GROUP, P_OUT_FMT, P_OUT_ROUND,
                     P_ZERO_EXP, a_of, a_table, c_at, lane, task_bounds, task_grid)

# no non-zero product: stage 1 of TR-FDPA scales by 2^(F+900) (a finite scale; the sum is 0)
LOWEST_SCALE_POWER = 2.0**-900
C_POW_MAX = 2.0**EXP_CLAMP  # c's exponent is clamped here (inf/NaN accumulators)
V_POW_MAX = 2.0**1000  # ... and the exponent of a non-finite stage-2 sum here (any finite value)


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
                Ak = A[0, k, n0:n0 + w]
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
        Bk = B[k, n0:n0 + w]
        Tk = T[k]
        for j in range(w):
            Tk[j] = exp_pow16(Bk[j])
    return T


@jit(inline="always")
def _max_power(m, n0, w, g0, g, EA, EB, emax):
    """emax[j] = max(emax[j], the group's product powers) (a zero product has power 0)."""
    for k in range(g0, g0 + g):
        eak = EA[k]
        EBk = EB[k]
        for j in range(w):
            pw = np.float64(lane(eak, j) * EBk[j])  # exact in float32: 0 or 2^-28 … 2^32
            e = emax[j]
            # + 0.0 (exact: both are ≥ 0) so that LLVM does not turn the select into a
            # conditional (masked) store, which is microcoded and slow on AMD Zen
            emax[j] = (pw if pw > e else e) + 0.0


@jit(inline="always")
def _min_power(m, n0, w, g0, g, EA, EB, emin):
    """emin[j] = the smallest product power of the group (0.0 when a product is zero)."""
    for j in range(w):
        emin[j] = 1.0
    for k in range(g0, g0 + g):
        eak = EA[k]
        EBk = EB[k]
        for j in range(w):
            pw = np.float64(lane(eak, j) * EBk[j])
            e = emin[j]
            emin[j] = (pw if pw < e else e) + 0.0  # see _max_power


@jit(inline="always")
def _add_cut_products(A, B, m, n0, w, g0, g, scale, total, mode):
    """total[j] += cut(p·scale[j]) for the group's products p, in k order."""
    for k in range(g0, g0 + g):
        ak = a_of(A, m, k, n0, w)
        Bk = B[k, n0:n0 + w]
        for j in range(w):
            total[j] += _cut(np.float64(lane(ak, j)) * np.float64(Bk[j]) * scale[j], mode)


@jit(parallel=True)
def truncated_fused(A, B, C, out, prm):
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
    n_tasks, n_rb = task_grid(M, N)
    for t in prange(n_tasks):
        n0, w, m0, m1 = task_bounds(t, n_rb, M, N)
        EB = _b_pows(B, n0, w)
        EA = a_table(A, K)
        acc = np.empty(LANES, np.float64)
        emax = np.empty(LANES, np.float64)
        emin = np.empty(LANES, np.float64)
        scale = np.empty(LANES, np.float64)
        total = np.empty(LANES, np.float64)
        for m in range(m0, m1):
            _fill_a_pows(A, m, n0, w, EA)
            for j in range(w):
                acc[j] = np.float64(c_at(C, m, n0 + j))
            for g0 in range(0, K, L):
                g = min(L, K - g0)
                for j in range(w):
                    c = acc[j]
                    emax[j] = zpow if c == 0.0 else exp_pow64(c, c_pmin, C_POW_MAX)
                _max_power(m, n0, w, g0, g, EA, EB, emax)
                if not zero_low:
                    _min_power(m, n0, w, g0, g, EA, EB, emin)
                    for j in range(w):
                        e = emax[j]
                        emax[j] = zpow if (emin[j] == 0.0) & (zpow > e) else e  # a zero product
                for j in range(w):
                    sc = two_f * inv_pow2(emax[j])
                    scale[j] = sc
                    total[j] = _cut(acc[j] * sc, align)
                _add_cut_products(A, B, m, n0, w, g0, g, scale, total, align)
                if fp16_out:
                    for j in range(w):
                        acc[j] = np.float64(round_to_fp16_rne(total[j] * (emax[j] * two_mf))) + 0.0
                else:
                    for j in range(w):
                        acc[j] = np.float64(round_to_fp32_bf(total[j] * (emax[j] * two_mf), out_mode)) + 0.0
            outm = out[m, n0:n0 + w]
            for j in range(w):
                outm[j] = np.float32(acc[j])


@jit(parallel=True)
def two_stage(A, B, C, out, prm):
    M, N = out.shape
    K = B.shape[0]
    L = prm[P_GROUP]
    F = prm[P_F]
    F2 = prm[P_F2]
    align = prm[P_ALIGN]
    c_mode = prm[P_CALIGN]
    out_mode = prm[P_OUT_ROUND]
    c_pmin = pow2(-126)
    two_f, two_mf = pow2(F), pow2(-F)
    two_f2, two_mf2 = pow2(F2), pow2(-F2)
    n_tasks, n_rb = task_grid(M, N)
    for t in prange(n_tasks):
        n0, w, m0, m1 = task_bounds(t, n_rb, M, N)
        EB = _b_pows(B, n0, w)
        EA = a_table(A, K)
        acc = np.empty(LANES, np.float64)
        edot = np.empty(LANES, np.float64)
        sdot = np.empty(LANES, np.float64)
        scale = np.empty(LANES, np.float64)
        for m in range(m0, m1):
            _fill_a_pows(A, m, n0, w, EA)
            for j in range(w):
                acc[j] = np.float64(c_at(C, m, n0 + j))
            for g0 in range(0, K, L):
                g = min(L, K - g0)
                for j in range(w):
                    edot[j] = 0.0  # zero products (power 0) never raise it
                _max_power(m, n0, w, g0, g, EA, EB, edot)
                for j in range(w):
                    e = edot[j]
                    scale[j] = two_f * inv_pow2(e if e > LOWEST_SCALE_POWER else LOWEST_SCALE_POWER)
                    sdot[j] = 0.0
                _add_cut_products(A, B, m, n0, w, g0, g, scale, sdot, align)
                for j in range(w):
                    e = edot[j]
                    s_dot = sdot[j] * ((e if e > LOWEST_SCALE_POWER else LOWEST_SCALE_POWER) * two_mf)
                    c = acc[j]
                    ec = exp_pow64(c, c_pmin, C_POW_MAX)
                    e_max = e if e > ec else ec
                    inv_e = inv_pow2(e_max)
                    v = (np.floor(s_dot * (inv_e * (2.0 * two_f2))) * (e_max * (0.5 * two_mf2))
                         + _cut(c * (inv_e * two_f), c_mode) * (e_max * two_mf))
                    ev = exp_pow64(v, c_pmin, V_POW_MAX)
                    q = ev * two_mf2
                    acc[j] = np.float64(round_to_fp32_bf(np.floor(v * (inv_pow2(ev) * two_f2)) * q, out_mode))
            outm = out[m, n0:n0 + w]
            for j in range(w):
                outm[j] = np.float32(acc[j])
