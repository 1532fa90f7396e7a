"""fp64 accumulation (CPU validation functions).

Contract: the accumulator starts as c (exact in fp64); for k = 0, 1, …: acc ← RN64(acc + a_k·b_k)
(the product exact); with ``round_each_group`` the accumulator is rounded to fp32 with
``output_rounding`` after every group of ``L`` products, otherwise once at the end.

The product of two fp16 values is exact in float32, so it is formed there and widened (the
same value as the float64 product).
"""

from __future__ import annotations

import numpy as np

from ..jit import jit, prange
from ._scalar import round_to_fp32_bf
from ._tiles import K_BLOCK, LANES, P_GROUP, P_OUT_ROUND, P_ROUND_EACH, ROWS, a_of, c_at, lane, task_bounds, task_grid


@jit(parallel=True)
def fp64_acc(A, B, C, out, prm):
    M, N = out.shape
    K = B.shape[0]
    L = prm[P_GROUP]
    out_mode = prm[P_OUT_ROUND]
    each = prm[P_ROUND_EACH] != 0
    n_tasks, n_rb = task_grid(M, N)
    for t in prange(n_tasks):
        n0, w, m0, m1 = task_bounds(t, n_rb, M, N)
        acc = np.empty((ROWS, LANES), np.float64)
        for m in range(m0, m1):
            for j in range(w):
                acc[m - m0, j] = np.float64(c_at(C, m, n0 + j))
        # K in blocks, every row of the task per block: the block of B stays in cache for all
        # rows (a long K, as in backward weight, would otherwise stream B once per row); each
        # output still adds its products in k order
        for k0 in range(0, K, K_BLOCK):
            k1 = min(K, k0 + K_BLOCK)
            for m in range(m0, m1):
                am = acc[m - m0]
                for k in range(k0, k1):
                    ak = a_of(A, m, k, n0, w)
                    Bk = B[k, n0 : n0 + w]
                    for j in range(w):
                        am[j] = am[j] + np.float64(lane(ak, j) * Bk[j])
                    if each and (k + 1) % L == 0 and k + 1 < K:
                        for j in range(w):
                            am[j] = np.float64(round_to_fp32_bf(am[j], out_mode))
        for m in range(m0, m1):
            outm = out[m, n0 : n0 + w]
            for j in range(w):
                outm[j] = round_to_fp32_bf(acc[m - m0, j], out_mode)
