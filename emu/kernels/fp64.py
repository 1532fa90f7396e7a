"""fp64 accumulation (CPU validation functions).

Contract: the accumulator starts as c (exact in fp64); for k = 0, 1, …: acc ← RN64(acc + a_k·b_k)
(the product exact); with ``round_each_group`` the accumulator is rounded to fp32 with
``output_rounding`` after every group of ``L`` products, otherwise once at the end.
"""

from __future__ import annotations

import numpy as np

from .._jit import jit, prange
from ._scalar import round_to_fp32
from ._tiles import LANES, P_GROUP, P_OUT_ROUND, P_ROUND_EACH, a_at, tile_bounds


@jit(parallel=True)
def fp64_acc(A, B, C, out, prm):
    M, N = out.shape
    K = B.shape[0]
    L = prm[P_GROUP]
    out_mode = prm[P_OUT_ROUND]
    each = prm[P_ROUND_EACH] != 0
    tiles = (N + LANES - 1) // LANES
    for t in prange(M * tiles):
        m, n0, w = tile_bounds(t, tiles, N)
        acc = np.empty(LANES, np.float64)
        for j in range(w):
            acc[j] = np.float64(C[m, n0 + j])
        for g0 in range(0, K, L):
            for k in range(g0, min(K, g0 + L)):
                Bk = B[k]
                for j in range(w):
                    acc[j] = acc[j] + np.float64(a_at(A, m, k, n0 + j)) * np.float64(Bk[n0 + j])
            if each:
                for j in range(w):
                    acc[j] = np.float64(round_to_fp32(acc[j], out_mode))
        for j in range(w):
            out[m, n0 + j] = round_to_fp32(acc[j], out_mode)
