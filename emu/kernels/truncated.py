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
"""

from __future__ import annotations

import numpy as np

from .._jit import jit, prange
from ._scalar import RD, exponent64, field_exponent, pow2, round_to_fp16_rne, round_to_fp32
from ._tiles import (FP16_EMIN, LANES, P_ALIGN, P_CALIGN, P_F, P_F2, P_GROUP, P_OUT_FMT, P_OUT_ROUND,
                     P_ZERO_EXP, a_at, tile_bounds)

NO_PRODUCT_EXPONENT = -999  # stage 1 of TR-FDPA leaves zero products out of the maximum
LOWEST_SCALE_EXPONENT = -900  # keeps 2^(F - e) finite when a group has no non-zero product


@jit(inline="always")
def _cut(x, mode):
    """x cut to an integer: toward −∞ (RD) or toward zero (RZ, the default)."""
    return np.floor(x) if mode == RD else np.trunc(x)


@jit(inline="always")
def _product(A, B, m, k, n):
    """(a·b exactly in float64, field exponent of a + field exponent of b, a·b == 0)."""
    a = np.float64(a_at(A, m, k, n))
    b = np.float64(B[k, n])
    p = a * b
    return p, field_exponent(a, FP16_EMIN) + field_exponent(b, FP16_EMIN)


@jit(parallel=True)
def truncated_fused(A, B, C, out, prm):
    M, N = out.shape
    K = B.shape[0]
    L = prm[P_GROUP]
    F = prm[P_F]
    zero_exp = prm[P_ZERO_EXP]
    fp16_out = prm[P_OUT_FMT] == 1
    out_mode = prm[P_OUT_ROUND]
    align = prm[P_ALIGN]
    c_emin = -14 if fp16_out else -126
    tiles = (N + LANES - 1) // LANES
    for t in prange(M * tiles):
        m, n0, w = tile_bounds(t, tiles, N)
        acc = np.empty(LANES, np.float64)
        emax = np.empty(LANES, np.int64)
        scale = np.empty(LANES, np.float64)
        total = np.empty(LANES, np.float64)
        for j in range(w):
            acc[j] = np.float64(C[m, n0 + j])
        for g0 in range(0, K, L):
            g = min(L, K - g0)
            for j in range(w):
                e = field_exponent(acc[j], c_emin)
                emax[j] = zero_exp if acc[j] == 0.0 else e
            for k in range(g0, g0 + g):
                for j in range(w):
                    p, e = _product(A, B, m, k, n0 + j)
                    emax[j] = max(emax[j], zero_exp if p == 0.0 else e)
            for j in range(w):
                scale[j] = pow2(F - emax[j])
                total[j] = _cut(acc[j] * scale[j], align)
            for k in range(g0, g0 + g):
                for j in range(w):
                    p, e = _product(A, B, m, k, n0 + j)
                    total[j] += _cut(p * scale[j], align)
            if fp16_out:
                for j in range(w):
                    acc[j] = np.float64(round_to_fp16_rne(total[j] * pow2(emax[j] - F))) + 0.0
            else:
                for j in range(w):
                    acc[j] = np.float64(round_to_fp32(total[j] * pow2(emax[j] - F), out_mode)) + 0.0
        for j in range(w):
            out[m, n0 + j] = np.float32(acc[j])


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
    tiles = (N + LANES - 1) // LANES
    for t in prange(M * tiles):
        m, n0, w = tile_bounds(t, tiles, N)
        acc = np.empty(LANES, np.float64)
        edot = np.empty(LANES, np.int64)
        sdot = np.empty(LANES, np.float64)
        scale = np.empty(LANES, np.float64)
        for j in range(w):
            acc[j] = np.float64(C[m, n0 + j])
        for g0 in range(0, K, L):
            g = min(L, K - g0)
            for j in range(w):
                edot[j] = NO_PRODUCT_EXPONENT
                sdot[j] = 0.0
            for k in range(g0, g0 + g):
                for j in range(w):
                    p, e = _product(A, B, m, k, n0 + j)
                    edot[j] = max(edot[j], NO_PRODUCT_EXPONENT if p == 0.0 else e)
            for j in range(w):
                scale[j] = pow2(F - max(edot[j], LOWEST_SCALE_EXPONENT))
            for k in range(g0, g0 + g):
                for j in range(w):
                    p, e = _product(A, B, m, k, n0 + j)
                    sdot[j] += _cut(p * scale[j], align)
            for j in range(w):
                s_dot = sdot[j] / scale[j]
                c = acc[j]
                e_max = max(edot[j], field_exponent(c, -126))
                q_dot = pow2(e_max - F2 - 1)
                q_c = pow2(e_max - F)
                v = _cut(s_dot / q_dot, RD) * q_dot + _cut(c / q_c, c_mode) * q_c
                q = pow2(max(exponent64(v), -126) - F2)
                acc[j] = np.float64(round_to_fp32(np.floor(v / q) * q, out_mode))
        for j in range(w):
            out[m, n0 + j] = np.float32(acc[j])
