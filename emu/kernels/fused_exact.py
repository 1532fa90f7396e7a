"""Exact fused dot-add (AMD MI100, "E-FDPA").

Contract, per group of ``L`` products: c ← round(c + Σ products), the sum exact and rounded once
to fp32 with ``output_rounding``; subnormals kept; an inf/NaN anywhere gives the float64 sum of
the terms cast to fp32 (how MMA-Sim propagates them). ``flush_c`` / ``flush_output`` as elsewhere.

Method: the products (exact in float64, multiples of 2^-48 below 2^32) are summed with a TwoSum
cascade into (s, err): err, the sum of the cascade's errors, is exact for any practical L, and a
last TwoSum makes |err| ≤ ulp(s)/2. Then c is added with TwoSum and the parts are combined with
round-to-odd, so the final rounding to fp32 equals rounding the exact sum once.
"""

from __future__ import annotations

import numpy as np

from .._jit import jit, prange
from ._scalar import (RNE, FP32_MIN_NORMAL, add_round_to_odd, flush_keep_sign, flush_to_plus_zero,
                      round_to_fp32, two_sum)
from ._tiles import LANES, P_FLUSH_C, P_FLUSH_OUT, P_GROUP, P_OUT_ROUND, a_at, tile_bounds


@jit(inline="always")
def _round_exact_sum(c, s, err):
    """RO53(c + s + err) for |err| ≤ ulp(s)/2; inf/NaN pass through as the plain sum."""
    plain = c + s  # before the error terms, which are NaN once an inf is involved
    s, err = two_sum(s, err)
    hi, lo = two_sum(c, s)
    z = add_round_to_odd(hi, add_round_to_odd(lo, err))
    return z if plain - plain == 0.0 else plain


@jit(parallel=True)
def fused_exact(A, B, C, out, prm):
    M, N = out.shape
    K = B.shape[0]
    L = prm[P_GROUP]
    out_mode = prm[P_OUT_ROUND]
    flush_c = prm[P_FLUSH_C] != 0
    flush_out = prm[P_FLUSH_OUT] != 0
    tiles = (N + LANES - 1) // LANES
    for t in prange(M * tiles):
        m, n0, w = tile_bounds(t, tiles, N)
        acc = np.empty(LANES, np.float64)
        s = np.empty(LANES, np.float64)
        err = np.empty(LANES, np.float64)
        for j in range(w):
            c = np.float64(C[m, n0 + j])
            acc[j] = flush_to_plus_zero(c, FP32_MIN_NORMAL) if flush_c else c
        for g0 in range(0, K, L):
            g = min(L, K - g0)
            if L == 4 and g == 4:  # the MI100 case, fused into one pass
                B0, B1, B2, B3 = B[g0], B[g0 + 1], B[g0 + 2], B[g0 + 3]
                for j in range(w):
                    n = n0 + j
                    p0 = np.float64(a_at(A, m, g0, n)) * np.float64(B0[n])
                    p1 = np.float64(a_at(A, m, g0 + 1, n)) * np.float64(B1[n])
                    p2 = np.float64(a_at(A, m, g0 + 2, n)) * np.float64(B2[n])
                    p3 = np.float64(a_at(A, m, g0 + 3, n)) * np.float64(B3[n])
                    s01, e01 = two_sum(p0, p1)
                    s23, e23 = two_sum(p2, p3)
                    sj, e = two_sum(s01, s23)
                    s[j] = _round_exact_sum(acc[j], sj, e + (e01 + e23))
            else:
                for i in range(g):
                    Bk = B[g0 + i]
                    if i == 0:
                        for j in range(w):
                            s[j] = np.float64(a_at(A, m, g0, n0 + j)) * np.float64(Bk[n0 + j])
                            err[j] = 0.0
                    else:
                        for j in range(w):
                            p = np.float64(a_at(A, m, g0 + i, n0 + j)) * np.float64(Bk[n0 + j])
                            sj, tj = two_sum(s[j], p)
                            s[j] = sj
                            err[j] += tj
                for j in range(w):
                    s[j] = _round_exact_sum(acc[j], s[j], err[j])
            if out_mode == RNE:
                for j in range(w):
                    acc[j] = np.float64(np.float32(s[j]))
            else:
                for j in range(w):
                    acc[j] = np.float64(round_to_fp32(s[j], out_mode))
            if flush_out:
                for j in range(w):
                    acc[j] = flush_keep_sign(acc[j], FP32_MIN_NORMAL)
        for j in range(w):
            out[m, n0 + j] = np.float32(acc[j])
