"""Sequential fp32 FMA (VALU ``v_fma_f32`` chains; non-xdlops kernels).

Contract: for k = 0, 1, …: c ← RNE32(c + a_k·b_k). An fp16·fp16 product is exact in fp32, so
the float32 multiply-then-add below rounds once, exactly like a fused multiply-add. Flags:
``flush_c`` (subnormal c on entry → +0) and ``flush_output`` (subnormal after each step → ±0).

Where ``flush_output`` can act: a product of fp16 values is 0 or a multiple of 2^-48 with
|a·b| ≥ 2^-48. If c is 0 or normal (|c| ≥ 2^-126) the exact c + a·b is c (product 0), a·b (c = 0),
or a multiple of 2^min(e_c − 23, −48), so either 0 or ≥ 2^-126 in magnitude when e_c ≥ −103,
and > 2^-49 when e_c < −103 (then |c| < 2^-102 ≤ |a·b|/2^54); rounding keeps it 0 or normal. So
after the first step the accumulator is never subnormal and the flush is the identity; the
kernel applies it after the first step only (the same bits as after every step).

Wide operands (bf16, tf32 as float64): the product is formed exactly in float64 and c + a·b
rounded in float64, then to fp32 when stored: RN32(RN64(c + p)) = RN32(c + p), since c and p
have at most 24 significant bits and 53 ≥ 2·24 + 2 (Figueroa 1995), and the float64 sum neither
underflows nor overflows (|p| is between 2^-298 and 2^257). The flush acts after every step.
"""

from __future__ import annotations

import numpy as np

from ..jit import jit
from ._scalar import FP32_MIN_NORMAL, flush_keep_sign, flush_to_plus_zero
from ._tiles import K_BLOCK, LANES, P_FLUSH_C, P_FLUSH_OUT, ROWS, a_of, c_at, is_wide, lane, task_bounds, task_grid

TINY32 = np.float32(FP32_MIN_NORMAL)


@jit
def fma32(A, B, C, out, prm, t0, t1):
    M, N = out.shape
    K = B.shape[0]
    flush_c = prm[P_FLUSH_C] != 0
    flush_out = prm[P_FLUSH_OUT] != 0
    wide = is_wide(B)
    n_tasks, n_rb = task_grid(M, N)
    for t in range(t0, min(t1, n_tasks)):
        n0, w, m0, m1 = task_bounds(t, n_rb, M, N)
        acc = np.empty((ROWS, LANES), np.float32)
        for m in range(m0, m1):
            for j in range(w):
                c = c_at(C, m, n0 + j)
                acc[m - m0, j] = flush_to_plus_zero(c, TINY32) if flush_c else c
        # K in blocks, every row per block: B's block stays in cache (see fp64_acc)
        for k0 in range(0, K, K_BLOCK):
            k1 = min(K, k0 + K_BLOCK)
            for m in range(m0, m1):
                am = acc[m - m0]
                for k in range(k0, k1):
                    ak = a_of(A, m, k, n0, w)
                    Bk = B[k, n0 : n0 + w]
                    for j in range(w):
                        am[j] = am[j] + lane(ak, j) * Bk[j]
                    if flush_out and (k == 0 or wide):
                        for j in range(w):
                            am[j] = flush_keep_sign(am[j], TINY32)
        for m in range(m0, m1):
            outm = out[m, n0 : n0 + w]
            for j in range(w):
                outm[j] = acc[m - m0, j]
