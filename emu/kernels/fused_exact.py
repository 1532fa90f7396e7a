"""Exact fused dot-add (AMD MI100, "E-FDPA").

Contract, per group of ``L`` products: c ← round(c + Σ products), the sum exact and rounded once
to fp32 with ``output_rounding``; subnormals kept; an inf/NaN anywhere gives the float64 sum of
the terms cast to fp32 (how MMA-Sim propagates them).

Method: the products (exact in float64, multiples of 2^-48 below 2^32) are summed with a TwoSum
cascade into (s, err), where err, the sum of the cascade's errors, is exact for any practical L;
then c is added with TwoSum and the three parts are combined with round-to-odd, so the final
rounding to fp32 equals rounding the exact sum once.
"""

from __future__ import annotations

import numpy as np

from .._jit import jit, prange
from ._scalar import (FP32_MIN_NORMAL, add_round_to_odd, flush_keep_sign, flush_to_plus_zero,
                      round_to_fp32, two_sum)
from ._tiles import (LANES, P_FLUSH_C, P_FLUSH_OUT, P_GROUP, P_OUT_ROUND, load_products,
                     tile_bounds)


@jit(parallel=True)
def fused_exact(A, B, C, out, per_lane, prm):
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
        prod = np.empty(LANES, np.float64)
        pexp = np.empty(LANES, np.int64)
        for j in range(w):
            c = np.float64(C[m, n0 + j])
            acc[j] = flush_to_plus_zero(c, FP32_MIN_NORMAL) if flush_c else c
        for g0 in range(0, K, L):
            g = min(L, K - g0)
            load_products(A, B, m, g0, n0, w, per_lane, prod, pexp)
            for j in range(w):
                s[j] = prod[j]
                err[j] = 0.0
            for i in range(1, g):
                load_products(A, B, m, g0 + i, n0, w, per_lane, prod, pexp)
                for j in range(w):
                    sj, tj = two_sum(s[j], prod[j])
                    s[j] = sj
                    err[j] += tj
            for j in range(w):
                c = acc[j]
                hi, lo = two_sum(c, s[j])
                z = add_round_to_odd(hi, add_round_to_odd(lo, err[j]))
                if z - z != 0.0:  # inf or NaN somewhere: propagate as the plain sum does
                    z = c + s[j]
                r = np.float64(round_to_fp32(z, out_mode, False))
                acc[j] = flush_keep_sign(r, FP32_MIN_NORMAL) if flush_out else r
        for j in range(w):
            out[m, n0 + j] = np.float32(acc[j])
