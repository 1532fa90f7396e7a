"""Sequential fp32 FMA (VALU ``v_fma_f32`` chains; non-xdlops kernels).

Contract: for k = 0, 1, …: c ← RNE32(c + a_k·b_k). An fp16·fp16 product is exact in fp32, so
the float32 multiply-then-add below rounds once, exactly like a fused multiply-add. Flags:
``flush_c`` (subnormal c on entry → +0) and ``flush_output`` (subnormal after each step → ±0).
"""

from __future__ import annotations

import numpy as np

from .._jit import jit, prange
from ._scalar import FP32_MIN_NORMAL, flush_keep_sign, flush_to_plus_zero
from ._tiles import LANES, P_FLUSH_C, P_FLUSH_OUT, a_at, tile_bounds

TINY32 = np.float32(FP32_MIN_NORMAL)


@jit(parallel=True)
def fma32(A, B, C, out, prm):
    M, N = out.shape
    K = B.shape[0]
    flush_c = prm[P_FLUSH_C] != 0
    flush_out = prm[P_FLUSH_OUT] != 0
    tiles = (N + LANES - 1) // LANES
    for t in prange(M * tiles):
        m, n0, w = tile_bounds(t, tiles, N)
        acc = np.empty(LANES, np.float32)
        for j in range(w):
            c = C[m, n0 + j]
            acc[j] = flush_to_plus_zero(c, TINY32) if flush_c else c
        for k in range(K):
            Bk = B[k]
            for j in range(w):
                acc[j] = acc[j] + a_at(A, m, k, n0 + j) * Bk[n0 + j]
            if flush_out:
                for j in range(w):
                    acc[j] = flush_keep_sign(acc[j], TINY32)
        for j in range(w):
            out[m, n0 + j] = acc[j]
