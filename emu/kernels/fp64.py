"""fp64 accumulation (CPU validation functions).

Contract: the accumulator starts as c (exact in fp64); for k = 0, 1, …: acc ← RN64(acc + a_k·b_k)
(the product exact); with ``round_each_group`` the accumulator is rounded to fp32 with
``output_rounding`` after every group of ``L`` products, otherwise once at the end.

The product of two fp16 values is exact in float32, so it is formed there and widened (the
same value as the float64 product). Rounding after every product (``L`` 1) in RNE gives the
bits of the FMA family, and the dispatch runs that kernel instead
(:func:`emu.units.kernel_params` says why); this kernel still computes it correctly.
"""

from __future__ import annotations

import numpy as np

from ..jit import jit
from ._scalar import RNE, round_to_fp32_bf
from ._tiles import K_BLOCK, LANES, P_GROUP, P_OUT_ROUND, P_ROUND_EACH, ROWS, a_of, c_at, lane, task_bounds, task_grid


@jit
def _round_lanes(am, w, mode):
    """am[:w] rounded to fp32 (``mode``), kept as float64; RNE is the plain float32 conversion,
    vectorised when called with a literal mode."""
    if mode == RNE:
        for j in range(w):
            am[j] = np.float64(np.float32(am[j]))
    else:
        for j in range(w):
            am[j] = np.float64(round_to_fp32_bf(am[j], mode))


@jit
def fp64_acc(A, B, C, out, prm, t0, t1):
    M, N = out.shape
    K = B.shape[0]
    L = prm[P_GROUP]
    out_mode = prm[P_OUT_ROUND]
    each = prm[P_ROUND_EACH] != 0
    # K blocks hold whole groups, so a group's rounding is tested once per group, not per k
    kb = K_BLOCK if K_BLOCK % L == 0 else L * (K_BLOCK // L + 1)
    step = L if each else kb  # one rounding at the end: a whole block is one stretch of the loop
    n_tasks, n_rb = task_grid(M, N)
    for t in range(t0, min(t1, n_tasks)):
        n0, w, m0, m1 = task_bounds(t, n_rb, M, N)
        acc = np.empty((ROWS, LANES), np.float64)
        for m in range(m0, m1):
            for j in range(w):
                acc[m - m0, j] = np.float64(c_at(C, m, n0 + j))
        # K in blocks, every row of the task per block: the block of B stays in cache for all
        # rows (a long K, as in backward weight, would otherwise stream B once per row); each
        # output still adds its products in k order
        for k0 in range(0, K, kb):
            k1 = min(K, k0 + kb)
            for m in range(m0, m1):
                am = acc[m - m0]
                for g0 in range(k0, k1, step):
                    g1 = min(k1, g0 + step)
                    for k in range(g0, g1):
                        ak = a_of(A, m, k, n0, w)
                        Bk = B[k, n0 : n0 + w]
                        for j in range(w):
                            am[j] = am[j] + np.float64(lane(ak, j) * Bk[j])
                    if each and g1 - g0 == L and g1 < K:
                        if out_mode == RNE:
                            _round_lanes(am, w, RNE)
                        else:
                            _round_lanes(am, w, out_mode)
        for m in range(m0, m1):
            outm = out[m, n0 : n0 + w]
            for j in range(w):
                outm[j] = round_to_fp32_bf(acc[m - m0, j], out_mode)
