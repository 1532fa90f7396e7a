"""Pairwise fp32 adder tree with flush to zero (AMD MI200, "FTZ-AddMul").

Contract, per group of ``L`` (a power of two) products: p_k = fp32(a_k·b_k) (exact for fp16),
flushed keeping its sign if subnormal (``flush_products``); the tree adds pairs level by level,
((p0+p1)+(p2+p3)) for L = 4, each add RNE in fp32 and flushed keeping its sign if subnormal
(``flush_partials``); then c ← c + tree, RNE, flushed keeping sign (``flush_output``). A
subnormal c on entry becomes +0 (``flush_c``). A short last group is padded with +0 products.
Inputs are flushed (|x| < 2^-14 → +0) before the kernel when ``flush_inputs`` is set.
"""

from __future__ import annotations

import numpy as np

from .._jit import jit, prange
from ._scalar import FP32_MIN_NORMAL, flush_keep_sign, flush_to_plus_zero
from ._tiles import (LANES, P_FLUSH_C, P_FLUSH_OUT, P_FLUSH_PART, P_FLUSH_PROD, P_GROUP, a_at,
                     tile_bounds)

TINY32 = np.float32(FP32_MIN_NORMAL)


@jit(inline="always")
def _ftz(x, on):
    return flush_keep_sign(x, TINY32) if on else x


@jit(parallel=True)
def pairwise(A, B, C, out, prm):
    M, N = out.shape
    K = B.shape[0]
    L = prm[P_GROUP]
    flush_c = prm[P_FLUSH_C] != 0
    flush_prod = prm[P_FLUSH_PROD] != 0
    flush_part = prm[P_FLUSH_PART] != 0
    flush_out = prm[P_FLUSH_OUT] != 0
    tiles = (N + LANES - 1) // LANES
    for t in prange(M * tiles):
        m, n0, w = tile_bounds(t, tiles, N)
        acc = np.empty(LANES, np.float32)
        tree = np.empty((L, LANES), np.float32)
        for j in range(w):
            c = C[m, n0 + j]
            acc[j] = flush_to_plus_zero(c, TINY32) if flush_c else c
        for g0 in range(0, K, L):
            g = min(L, K - g0)
            if L == 4 and g == 4:  # the MI200 case, fused into one pass
                B0, B1, B2, B3 = B[g0], B[g0 + 1], B[g0 + 2], B[g0 + 3]
                for j in range(w):
                    n = n0 + j
                    p0 = _ftz(a_at(A, m, g0, n) * B0[n], flush_prod)
                    p1 = _ftz(a_at(A, m, g0 + 1, n) * B1[n], flush_prod)
                    p2 = _ftz(a_at(A, m, g0 + 2, n) * B2[n], flush_prod)
                    p3 = _ftz(a_at(A, m, g0 + 3, n) * B3[n], flush_prod)
                    s = _ftz(_ftz(p0 + p1, flush_part) + _ftz(p2 + p3, flush_part), flush_part)
                    acc[j] = _ftz(acc[j] + s, flush_out)
                continue
            for i in range(L):
                if i < g:
                    Bk = B[g0 + i]
                    for j in range(w):
                        tree[i, j] = _ftz(a_at(A, m, g0 + i, n0 + j) * Bk[n0 + j], flush_prod)
                else:
                    for j in range(w):
                        tree[i, j] = np.float32(0.0)
            width = L
            while width > 1:
                width //= 2
                for i in range(width):
                    for j in range(w):
                        tree[i, j] = _ftz(tree[2 * i, j] + tree[2 * i + 1, j], flush_part)
            for j in range(w):
                acc[j] = _ftz(acc[j] + tree[0, j], flush_out)
        for j in range(w):
            out[m, n0 + j] = acc[j]
