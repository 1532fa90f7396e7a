"""Pairwise fp32 adder tree with flush to zero (AMD MI200, "FTZ-AddMul").

Contract, per group of ``L`` (a power of two) products: p_k = fp32(a_k·b_k) (exact for fp16),
flushed keeping its sign if subnormal (``flush_products``); the tree adds pairs level by level,
((p0+p1)+(p2+p3)) for L = 4, each add RNE in fp32 and flushed keeping its sign if subnormal
(``flush_partials``); then c ← c + tree, RNE, flushed keeping sign (``flush_output``). A
subnormal c on entry becomes +0 (``flush_c``). A short last group is padded with +0 products.
Inputs are flushed (|x| < 2^-14 → +0) before the kernel when ``flush_inputs`` is set.

Which flushes can act (a and b are fp16 values, so this holds for every input):
* products: a·b is 0 or a multiple of 2^-48 with |a·b| ≥ 2^-48, never subnormal in fp32;
* partial sums: a sum of multiples of 2^-48 is one too, and so is its fp32 rounding (below
  2^-25 it needs at most 23 bits and is exact; above, the fp32 grid is coarser than 2^-48), so
  every tree value is 0 or ≥ 2^-48 in magnitude, never subnormal;
* output: with c 0 or normal and the tree value t 0 or a nonzero multiple of 2^-48, c + t is
  0 or normal (see ``fma``: the same argument with t for the product), so only the first group,
  where c may be a subnormal that ``flush_c`` left alone, can produce a subnormal.
So the product and partial flushes are the identity and the output flush acts only after the
first group: the kernel applies exactly those, with the bits of the contract.

Wide operands (bf16 as float64, AMD MI200's ``v_mfma_f32_*bf16_1k``): none of that holds (a
bf16 product can be subnormal in fp32, or overflow), so every product is rounded to fp32 when
stored in the float32 tree, and every flag is applied where the contract puts it.
"""

from __future__ import annotations

import numpy as np

from ..jit import jit
from ._scalar import FP32_MIN_NORMAL, flush_keep_sign, flush_to_plus_zero
from ._tiles import (
    LANES,
    P_FLUSH_C,
    P_FLUSH_OUT,
    P_FLUSH_PART,
    P_FLUSH_PROD,
    P_GROUP,
    a_of,
    c_at,
    is_wide,
    lane,
    task_bounds,
    task_grid,
)

TINY32 = np.float32(FP32_MIN_NORMAL)


@jit
def pairwise(A, B, C, out, prm, t0, t1):
    M, N = out.shape
    K = B.shape[0]
    L = prm[P_GROUP]
    flush_c = prm[P_FLUSH_C] != 0
    flush_out = prm[P_FLUSH_OUT] != 0
    wide = is_wide(B)
    flush_prod = wide and prm[P_FLUSH_PROD] != 0
    flush_part = wide and prm[P_FLUSH_PART] != 0
    n_tasks, n_rb = task_grid(M, N)
    for t in range(t0, min(t1, n_tasks)):
        n0, w, m0, m1 = task_bounds(t, n_rb, M, N)
        acc = np.empty(LANES, np.float32)
        tree = np.empty((L, LANES), np.float32)
        for m in range(m0, m1):
            for j in range(w):
                c = c_at(C, m, n0 + j)
                acc[j] = flush_to_plus_zero(c, TINY32) if flush_c else c
            for g0 in range(0, K, L):
                g = min(L, K - g0)
                if L == 4 and g == 4 and not wide:  # the MI200 case, fused into one pass
                    a0, a1 = a_of(A, m, g0, n0, w), a_of(A, m, g0 + 1, n0, w)
                    a2, a3 = a_of(A, m, g0 + 2, n0, w), a_of(A, m, g0 + 3, n0, w)
                    B0, B1 = B[g0, n0 : n0 + w], B[g0 + 1, n0 : n0 + w]
                    B2, B3 = B[g0 + 2, n0 : n0 + w], B[g0 + 3, n0 : n0 + w]
                    for j in range(w):
                        s01 = lane(a0, j) * B0[j] + lane(a1, j) * B1[j]
                        s23 = lane(a2, j) * B2[j] + lane(a3, j) * B3[j]
                        acc[j] = acc[j] + (s01 + s23)
                else:
                    for i in range(L):
                        Ti = tree[i]
                        if i < g:
                            ai = a_of(A, m, g0 + i, n0, w)
                            Bi = B[g0 + i, n0 : n0 + w]
                            for j in range(w):
                                Ti[j] = lane(ai, j) * Bi[j]  # fp32 (RNE) of the exact product
                            if flush_prod:
                                for j in range(w):
                                    Ti[j] = flush_keep_sign(Ti[j], TINY32)
                        else:
                            for j in range(w):
                                Ti[j] = np.float32(0.0)
                    width = L
                    while width > 1:
                        width //= 2
                        for i in range(width):
                            Ti, Tl, Tr = tree[i], tree[2 * i], tree[2 * i + 1]
                            for j in range(w):
                                Ti[j] = Tl[j] + Tr[j]
                            if flush_part:
                                for j in range(w):
                                    Ti[j] = flush_keep_sign(Ti[j], TINY32)
                    T0 = tree[0]
                    for j in range(w):
                        acc[j] = acc[j] + T0[j]
                if flush_out and (g0 == 0 or wide):
                    for j in range(w):
                        acc[j] = flush_keep_sign(acc[j], TINY32)
            outm = out[m, n0 : n0 + w]
            for j in range(w):
                outm[j] = acc[j]
