"""Exact fused dot-add (AMD MI100, "E-FDPA").

Contract, per group of ``L`` products: c ← round(c + Σ products), the sum exact and rounded once
to fp32 with ``output_rounding``; a zero result is +0; subnormals kept; an inf/NaN anywhere
gives the float64 sum of the terms cast to fp32 (how MMA-Sim propagates them). ``flush_c`` /
``flush_output`` as elsewhere.

Notation: RN, RO = rounding to float64 to nearest (ties to even) / to odd; RO53(x) is x when x
is a float64, otherwise the one of its two float64 neighbours whose last significand bit is 1.
Every result is round(RO53(c + Σp)), which equals round(c + Σp) for RNE, RZ and RD because 53 ≥
24 + 2 (Boldo–Melquiond: rounding to odd with p + 2 bits, then to p bits in any of these modes,
is the rounding of the exact value; also for fp32 subnormal results, which have fewer bits).

Two methods compute RO53(c + Σp), per lane and group:

Fast path (all lanes, branch-free, vectorised). The products are exact in float64 and are
multiples of 2^-48. s = the plain float64 sum of the group's products ((p0+p1)+(p2+p3) for L = 4,
left to right otherwise) is exact when every partial sum, as computed, is below 2^5 in magnitude:
by induction, if the addends are exact then the exact partial sum is a multiple of 2^-48, and if
it were ≥ 2^5 its rounding would be ≥ 2^5 (rounding is monotone and 2^5 is a float64), so it is
below 2^5, has at most 53 significant bits above 2^-48, is a float64, and the addition is exact.
With s exact and c finite (so c + s cannot overflow), ``add_round_to_odd(c, s)`` (TwoSum, then
the inexact RN result moved one ulp toward the error when its last bit is even) is RO53(c + s).
A zero c + s gives ±0, made +0 by adding +0. A lane whose certificate fails (a partial sum
≥ 2^5, inf or NaN, or c not finite) is flagged.

Exact path (the flagged lanes of a group only, recomputed from the same accumulator): the
products are summed with a TwoSum cascade into (s, err): err, the sum of the cascade's errors
(multiples of 2^-48 below 2^-18 in magnitude, for any practical L), is exact, and a last TwoSum
makes |err| ≤ ulp(s)/2. Then (hi, lo) = TwoSum(c, s) and z = RO(hi + RO(lo + err)): if lo ≠ 0
then c and s did not cancel (Sterbenz), |hi| ≥ |s|/2, so |lo + err| ≤ 1.5·2^-52|hi| and z =
RO53(c + s + err). Zero results come out +0 (err is never −0). With an inf or NaN term the plain
float64 sum c + s is returned instead.

Both give RO53 of the same exact value (and +0 for zero), so the bits do not depend on which
path a lane takes.

Where ``flush_output`` can act: the group sum is 0 or a nonzero multiple of 2^-48, so as for
``fma`` only the first group's result can be subnormal; the kernel flushes after it only.
"""

from __future__ import annotations

import numpy as np

from .._jit import jit, prange
from ._scalar import (RNE, FP32_MAX, FP32_MIN_NORMAL, add_round_to_odd, flush_keep_sign,
                      flush_to_plus_zero, round_to_fp32_bf, two_sum)
from ._tiles import (LANES, P_FLUSH_C, P_FLUSH_OUT, P_GROUP, P_OUT_ROUND, a_at, a_of, c_at, lane,
                     task_bounds, task_grid)

EXACT_BELOW = 32.0  # partial sums of multiples of 2^-48 below 2^5 are exact in float64


@jit(inline="always")
def _round_exact_sum(c, s, err):
    """RO53(c + s + err) for |err| ≤ ulp(s)/2; inf/NaN pass through as the plain sum."""
    plain = c + s  # before the error terms, which are NaN once an inf is involved
    s, err = two_sum(s, err)
    hi, lo = two_sum(c, s)
    z = add_round_to_odd(hi, add_round_to_odd(lo, err))
    return z if plain - plain == 0.0 else plain


@jit(inline="always")
def _exact_group(A, B, m, g0, g, n, c):
    """The exact path for output (m, n): RO53(c + Σ_{k=g0}^{g0+g-1} a_k·b_k)."""
    s = np.float64(a_at(A, m, g0, n)) * np.float64(B[g0, n])
    err = 0.0
    for k in range(g0 + 1, g0 + g):
        s, t = two_sum(s, np.float64(a_at(A, m, k, n)) * np.float64(B[k, n]))
        err += t
    return _round_exact_sum(c, s, err)


@jit(inline="always")
def _fast_round(c, s, worst, mode):
    """(the rounded result of the fast path as float64, 1 if the lane must take the exact path);
    ``worst`` is the largest magnitude among the partial sums before s."""
    z = add_round_to_odd(c, s) + 0.0
    # an inf/NaN partial sum leaves s inf/NaN (finite products cannot cancel it), so NaN in
    # ``worst`` need not be tracked; comparisons with NaN are false, so such lanes are flagged
    ok = (worst < EXACT_BELOW) & (abs(s) < EXACT_BELOW) & (abs(c) <= FP32_MAX)
    r = np.float32(z) if mode == RNE else round_to_fp32_bf(z, mode)
    return np.float64(r), np.int32(1) - np.int32(ok)


@jit(parallel=True)
def fused_exact(A, B, C, out, prm):
    M, N = out.shape
    K = B.shape[0]
    L = prm[P_GROUP]
    out_mode = prm[P_OUT_ROUND]
    flush_c = prm[P_FLUSH_C] != 0
    flush_out = prm[P_FLUSH_OUT] != 0
    n_tasks, n_rb = task_grid(M, N)
    for t in prange(n_tasks):
        n0, w, m0, m1 = task_bounds(t, n_rb, M, N)
        acc = np.empty(LANES, np.float64)
        nxt = np.empty(LANES, np.float64)
        s = np.empty(LANES, np.float64)
        worst = np.empty(LANES, np.float64)
        bad = np.empty(LANES, np.int32)
        for m in range(m0, m1):
            for j in range(w):
                c = np.float64(c_at(C, m, n0 + j))
                acc[j] = flush_to_plus_zero(c, FP32_MIN_NORMAL) if flush_c else c
            for g0 in range(0, K, L):
                g = min(L, K - g0)
                any_bad = np.int32(0)
                if L == 4 and g == 4:  # the MI100 case, fused into one pass
                    a0, a1 = a_of(A, m, g0, n0, w), a_of(A, m, g0 + 1, n0, w)
                    a2, a3 = a_of(A, m, g0 + 2, n0, w), a_of(A, m, g0 + 3, n0, w)
                    B0, B1 = B[g0, n0:n0 + w], B[g0 + 1, n0:n0 + w]
                    B2, B3 = B[g0 + 2, n0:n0 + w], B[g0 + 3, n0:n0 + w]
                    for j in range(w):
                        s01 = np.float64(lane(a0, j)) * np.float64(B0[j]) + np.float64(lane(a1, j)) * np.float64(B1[j])
                        s23 = np.float64(lane(a2, j)) * np.float64(B2[j]) + np.float64(lane(a3, j)) * np.float64(B3[j])
                        sj = s01 + s23
                        x, y = abs(s01), abs(s23)
                        r, f = _fast_round(acc[j], sj, x if x > y else y, out_mode)
                        nxt[j] = r
                        bad[j] = f
                        any_bad |= f
                else:
                    for i in range(g):
                        ai = a_of(A, m, g0 + i, n0, w)
                        Bi = B[g0 + i, n0:n0 + w]
                        if i == 0:
                            for j in range(w):
                                p = np.float64(lane(ai, j)) * np.float64(Bi[j])
                                s[j] = p
                                worst[j] = abs(p)
                        else:
                            for j in range(w):
                                sj = s[j] + np.float64(lane(ai, j)) * np.float64(Bi[j])
                                s[j] = sj
                                x, y = worst[j], abs(sj)
                                worst[j] = (x if x > y else y) + 0.0  # no masked store (see truncated)
                    for j in range(w):
                        r, f = _fast_round(acc[j], s[j], worst[j], out_mode)
                        nxt[j] = r
                        bad[j] = f
                        any_bad |= f
                if any_bad != 0:
                    for j in range(w):
                        if bad[j] != 0:
                            z = _exact_group(A, B, m, g0, g, n0 + j, acc[j])
                            nxt[j] = np.float64(np.float32(z) if out_mode == RNE else round_to_fp32_bf(z, out_mode))
                if flush_out and g0 == 0:
                    for j in range(w):
                        nxt[j] = flush_keep_sign(nxt[j], FP32_MIN_NORMAL)
                acc, nxt = nxt, acc
            outm = out[m, n0:n0 + w]
            for j in range(w):
                outm[j] = np.float32(acc[j])
