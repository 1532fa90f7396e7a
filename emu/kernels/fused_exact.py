"""Exact fused dot-add (AMD MI100, "E-FDPA").

Contract, per group of ``L`` products: c ← round(c + Σ products), the sum exact and rounded once
to fp32 with ``output_rounding``; a zero result is +0; subnormals kept; an inf/NaN anywhere
gives the float64 sum of the terms cast to fp32 (how MMA-Sim propagates them). ``flush_c`` /
``flush_output`` as elsewhere.

Two methods compute a group: a plain float64 path with proofs that its result is right, and an
exact path for the lanes no proof covers.

Plain path (first, on all lanes). The products are exact in float64 (22 significant bits) and
are multiples of 2^-48. Their plain float64 sum s ((p0+p1)+(p2+p3) for L = 4, left to right
otherwise) and z = c + s are computed, and the lane is accepted when every partial sum, as
computed, is below 2^5 in magnitude (for L = 4: |p0+p1|, |p2+p3| < 2^4), |z| < 2^5, and c is 0
or |c| ≥ 2^-25. Then every addition
was exact, by induction: if the addends are exact multiples of 2^-48 (c is one: its ulp is
≥ 2^-48 when |c| ≥ 2^-25), so is the exact sum; were it ≥ 2^5 in magnitude, its rounding would
be too (rounding is monotone and 2^5 is a float64), so it is below 2^5, has at most 53
significant bits above 2^-48, and is a float64. So z = c + Σp exactly, and rounding z once to
fp32 (any mode) is the contract's result; a zero z is made +0 by adding +0. Inf/NaN anywhere
fail the test (comparisons with NaN are false).

The plain path also accepts a lane whose float64 rounding errors cannot move the fp32 rounding:
with T = |p0+p1| + |p2+p3| + |s| + |z| (for L = 4; left-to-right partials otherwise), each float64
addition errs by at most 2^-53 of its result, so the exact c + Σp lies within 2^-53·T of z, and
z ± 2^-51·(T + |z|), computed in float64, brackets it (the factor absorbs the rounding of the
bracket itself). Rounding is monotone, so when both ends round to the same fp32 value, so does
the exact sum. This is what keeps large accumulators (|c| ≥ 2^5: long K, inputs of magnitude 5
to 10) on the plain path; an exact fp32 tie or a near-total cancellation still fails it. A zero
result is made +0 after rounding.

For L = 4 there is a third proof, the grid test: every term (the products and c) is a multiple
of 2^(e−23), e the exponent of the smallest nonzero term (a product has at most 22 significant
bits, c at most 24), so when T ≤ 2^29 · (smallest nonzero term) < 2^(e+30), every partial sum, in
the exact arithmetic too (monotone rounding again), is below 2^(e−23+53) and every addition was
exact. Exact fp32 ties are common there (11 % of the groups of K = 1152 sums of inputs in
[−10, 10]) and the settled test always rejects them. A row runs the first test alone until one of
its groups fails it; from then on, each group runs the grid and settled tests in the same pass
that computes it (:func:`_settle4`).

Exact path (L = 4: on each lane that no proof covers; otherwise on all lanes of a group where
some lane failed both tests; its results replace the plain path's, which are equal where both
apply). Notation: RO53(x) is x when x is a float64,
otherwise the one of its two float64 neighbours whose last significand bit is 1. The products are
summed with a TwoSum cascade into (s, err): err, the sum of the cascade's errors (multiples of
2^-48 below 2^-18 in magnitude, for any practical L), is exact, and a last TwoSum makes
|err| ≤ ulp(s)/2. Then (hi, lo) = TwoSum(c, s) and z = RO(hi + RO(lo + err)): if lo ≠ 0 then c
and s did not cancel (Sterbenz), |hi| ≥ |s|/2, so |lo + err| ≤ 1.5·2^-52|hi| and z = RO53(c + s +
err). Rounding z to fp32 in RNE, RZ or RD then equals rounding c + Σp once, because 53 ≥ 24 + 2
(Boldo–Melquiond: rounding to odd with p + 2 bits, then to p bits, is the rounding of the exact
value; also for fp32 subnormal results, which have fewer bits). Zero results come out +0 (err is
never −0). With an inf or NaN term the plain float64 sum c + s is returned instead.

Where ``flush_output`` can act: the group sum is 0 or a nonzero multiple of 2^-48, so as for
``fma`` only the first group's result can be subnormal; the kernel flushes after it only.

Wide operands (bf16, tf32 as float64; groups of at most 2, :func:`emu.dot.unit_params`): the
products are exact in float64 but lie on no fixed grid, so the first test does not apply. A
group of two runs the plain path with the grid test on all lanes (:func:`_plain2_wide`): a
product has at most 22 significant bits (16 for bf16) and c at most 24, so every term is a
multiple of 2^(e−23), e the exponent of the smallest nonzero one, and the grid test's argument
holds as for L = 4 (no float64 underflow: the products are ≥ 2^-298). It passes on nearly every
lane of real data (terms more than 2^29 apart are rare), so the settled test's two roundings are
not spent there. A lane is accepted only when its rounded result is nonzero, which then has the
sign of the exact sum; the others (terms far apart, a zero or underflowing sum, inf/NaN) take
the exact path, where a
group of two leaves one TwoSum error, exact; a nonzero sum that rounds to zero keeps its sign
(IEEE underflow, which fp16 sums never reach). The output flush acts after every group.
"""

from __future__ import annotations

import numpy as np

from ..jit import jit
from ._scalar import (
    FP32_MIN_NORMAL,
    RNE,
    add_round_to_odd,
    flush_keep_sign,
    flush_to_plus_zero,
    round_to_fp32_bf,
    two_sum,
)
from ._tiles import (
    LANES,
    P_FLUSH_C,
    P_FLUSH_OUT,
    P_GROUP,
    P_OUT_ROUND,
    a_of,
    c_at,
    is_wide,
    lane,
    task_bounds,
    task_grid,
)

EXACT_BELOW = 32.0  # sums of multiples of 2^-48 below 2^5 are exact in float64
C_ON_GRID = 2.0**-25  # an fp32 value at least this large is a multiple of 2^-48
GRID_SPAN = 2.0**29  # terms on a common grid: float64 sums up to 2^29 × the smallest are exact


@jit
def _round_exact_sum(c, s, err):
    """RO53(c + s + err) for |err| ≤ ulp(s)/2; inf/NaN pass through as the plain sum."""
    plain = c + s  # before the error terms, which are NaN once an inf is involved
    s, err = two_sum(s, err)
    hi, lo = two_sum(c, s)
    z = add_round_to_odd(hi, add_round_to_odd(lo, err))
    return z if plain - plain == 0.0 else plain


@jit
def _round(z, mode):
    return np.float64(np.float32(z) if mode == RNE else round_to_fp32_bf(z, mode))


@jit
def _plain_accept(c, z, worst, worst_below):
    """1 if the plain path is exact (see the module docstring), else 0: ``worst`` (the largest
    magnitude among the product partial sums, or a bound on it) below ``worst_below`` ≤ 2^5."""
    ac = abs(c)
    ok = (worst < worst_below) & (abs(z) < EXACT_BELOW) & ((ac >= C_ON_GRID) | (c == 0.0))
    return np.int64(ok)


@jit
def _settled(z, total, mode):
    """1 if every value within 2^-53·``total`` of the float64 ``z`` rounds to the same fp32 value
    (``mode``) as z, else 0 (NaN and inf fail); see the module docstring."""
    margin = 2.0**-51 * (total + abs(z))
    return np.int64(_round(z - margin, mode) == _round(z + margin, mode))


@jit
def _plain4(A, B, m, g0, n0, w, acc, nxt, mode):
    """Plain path of a full group of 4 (tree order) on all lanes; returns the number of lanes the
    first (exactness) test accepts. Called with a literal ``mode`` (RNE) where it can be, so that
    it is not tested in the loop."""
    a0, a1 = a_of(A, m, g0, n0, w), a_of(A, m, g0 + 1, n0, w)
    a2, a3 = a_of(A, m, g0 + 2, n0, w), a_of(A, m, g0 + 3, n0, w)
    B0, B1 = B[g0, n0 : n0 + w], B[g0 + 1, n0 : n0 + w]
    B2, B3 = B[g0 + 2, n0 : n0 + w], B[g0 + 3, n0 : n0 + w]
    accepted = np.int64(0)
    for j in range(w):
        s01 = np.float64(lane(a0, j)) * np.float64(B0[j]) + np.float64(lane(a1, j)) * np.float64(B1[j])
        s23 = np.float64(lane(a2, j)) * np.float64(B2[j]) + np.float64(lane(a3, j)) * np.float64(B3[j])
        c = acc[j]
        z = c + (s01 + s23)
        x, y = abs(s01), abs(s23)
        # both below 2^4: then |s01 + s23| < 2^5 as well
        accepted += _plain_accept(c, z, x if x > y else y, 0.5 * EXACT_BELOW)
        nxt[j] = _round(z, mode) + 0.0
    return accepted


@jit
def _nonzero_abs(x):
    """|x|, with 0 counted as +inf (a zero term puts no bound on the grid)."""
    return abs(x) if x != 0.0 else np.inf


@jit
def _settle4(A, B, m, g0, n0, w, acc, nxt, ok, mode):
    """Plain path of a full group of 4 with the second tests, for a row where some group failed
    the first: nxt[j] = the lane's plain result (as :func:`_plain4`), ok[j] = 1 where it is
    proven right, by the grid test (T ≤ 2^29 · the smallest nonzero term) or by the settled test
    (module docstring); returns the number of such lanes."""
    a0, a1 = a_of(A, m, g0, n0, w), a_of(A, m, g0 + 1, n0, w)
    a2, a3 = a_of(A, m, g0 + 2, n0, w), a_of(A, m, g0 + 3, n0, w)
    B0, B1 = B[g0, n0 : n0 + w], B[g0 + 1, n0 : n0 + w]
    B2, B3 = B[g0 + 2, n0 : n0 + w], B[g0 + 3, n0 : n0 + w]
    proven = np.int64(0)
    for j in range(w):
        p0 = np.float64(lane(a0, j)) * np.float64(B0[j])
        p1 = np.float64(lane(a1, j)) * np.float64(B1[j])
        p2 = np.float64(lane(a2, j)) * np.float64(B2[j])
        p3 = np.float64(lane(a3, j)) * np.float64(B3[j])
        c = acc[j]
        s01, s23 = p0 + p1, p2 + p3
        s = s01 + s23
        z = c + s  # the plain path's z, computed the same way
        total = abs(s01) + abs(s23) + abs(s) + abs(z)
        t0, t1, t2, t3, tc = _nonzero_abs(p0), _nonzero_abs(p1), _nonzero_abs(p2), _nonzero_abs(p3), _nonzero_abs(c)
        t01 = t0 if t0 < t1 else t1
        t23 = t2 if t2 < t3 else t3
        tmin = t01 if t01 < t23 else t23
        tmin = tmin if tmin < tc else tc
        on_grid = np.int64(total <= GRID_SPAN * tmin)
        flag = on_grid | _settled(z, total, mode)
        nxt[j] = _round(z, mode) + 0.0
        ok[j] = flag
        proven += flag
    return proven


@jit
def _exact4_lane(A, B, m, g0, n0, w, j, acc, nxt, mode):
    """Exact path of a full group of 4 (TwoSum tree) for lane j alone."""
    p0 = np.float64(lane(a_of(A, m, g0, n0, w), j)) * np.float64(B[g0, n0 + j])
    p1 = np.float64(lane(a_of(A, m, g0 + 1, n0, w), j)) * np.float64(B[g0 + 1, n0 + j])
    p2 = np.float64(lane(a_of(A, m, g0 + 2, n0, w), j)) * np.float64(B[g0 + 2, n0 + j])
    p3 = np.float64(lane(a_of(A, m, g0 + 3, n0, w), j)) * np.float64(B[g0 + 3, n0 + j])
    s01, e01 = two_sum(p0, p1)
    s23, e23 = two_sum(p2, p3)
    s, e = two_sum(s01, s23)
    nxt[j] = _round(_round_exact_sum(acc[j], s, e + (e01 + e23)), mode)


@jit
def _plain2_wide(A, B, m, g0, n0, w, acc, nxt, ok, mode):
    """Plain path of a group of 2 wide products on all lanes, with the grid test: nxt[j] = the
    rounded float64 sum c + (p0 + p1), ok[j] = 1 where the test proves it right and it is
    nonzero (module docstring); returns the number of such lanes. Called with a literal
    ``mode`` (RNE) where it can be."""
    a0, a1 = a_of(A, m, g0, n0, w), a_of(A, m, g0 + 1, n0, w)
    B0, B1 = B[g0, n0 : n0 + w], B[g0 + 1, n0 : n0 + w]
    proven = np.int64(0)
    for j in range(w):
        p0 = np.float64(lane(a0, j)) * np.float64(B0[j])
        p1 = np.float64(lane(a1, j)) * np.float64(B1[j])
        c = acc[j]
        s = p0 + p1
        z = c + s
        total = abs(s) + abs(z)
        t0, t1, tc = _nonzero_abs(p0), _nonzero_abs(p1), _nonzero_abs(c)
        tmin = t0 if t0 < t1 else t1
        tmin = tmin if tmin < tc else tc
        r = _round(z, mode)
        flag = np.int64(total <= GRID_SPAN * tmin) & np.int64(r != 0.0)
        nxt[j] = r
        ok[j] = flag
        proven += flag
    return proven


@jit
def _exact2_wide_lane(A, B, m, g0, n0, w, j, acc, nxt, mode):
    """Exact path of a group of 2 wide products for lane j alone: one TwoSum of the products (its
    error exact), then the round-to-odd sum with c (module docstring)."""
    p0 = np.float64(lane(a_of(A, m, g0, n0, w), j)) * np.float64(B[g0, n0 + j])
    p1 = np.float64(lane(a_of(A, m, g0 + 1, n0, w), j)) * np.float64(B[g0 + 1, n0 + j])
    s, e = two_sum(p0, p1)
    nxt[j] = _round(_round_exact_sum(acc[j], s, e), mode)


@jit
def fused_exact(A, B, C, out, prm, t0, t1):
    n_tasks, n_rb = task_grid(out.shape[0], out.shape[1])
    for t in range(t0, min(t1, n_tasks)):
        _fused_exact_task(A, B, C, out, prm, np.int64(t), n_rb)


@jit
def _fused_exact_task(A, B, C, out, prm, t, n_rb):
    """Task ``t`` of :func:`fused_exact`. A function of its own, called from a one-line parallel
    loop: numba's parallel passes over the whole inlined body took most of the kernel's compile
    time (47 s of a cold first call, 14 s without them). Same operations, same bits."""
    M, N = out.shape
    K = B.shape[0]
    L = prm[P_GROUP]
    out_mode = prm[P_OUT_ROUND]
    flush_c = prm[P_FLUSH_C] != 0
    flush_out = prm[P_FLUSH_OUT] != 0
    wide = is_wide(B)
    n0, w, m0, m1 = task_bounds(t, n_rb, M, N)
    acc = np.empty(LANES, np.float64)
    nxt = np.empty(LANES, np.float64)
    s = np.empty(LANES, np.float64)
    err = np.empty(LANES, np.float64)
    tot = np.empty(LANES, np.float64)
    ok = np.empty(LANES, np.int64)
    for m in range(m0, m1):
        for j in range(w):
            c = np.float64(c_at(C, m, n0 + j))
            acc[j] = flush_to_plus_zero(c, FP32_MIN_NORMAL) if flush_c else c
        large = False
        for g0 in range(0, K, L):
            g = min(L, K - g0)
            if L == 4 and g == 4 and not wide:  # the MI100 case, fused into one pass
                # Large accumulators (|c| ≥ 2^5) fail the first test; once a row's group
                # has, the row takes one pass with the second test. Lanes that fail it
                # (cancellation, terms far apart) take the exact path one by one.
                if not large:
                    if out_mode == RNE:
                        proven = _plain4(A, B, m, g0, n0, w, acc, nxt, RNE)
                    else:
                        proven = _plain4(A, B, m, g0, n0, w, acc, nxt, out_mode)
                    large = proven != w
                if large:  # also the group that first failed: it is computed again, the same way
                    if out_mode == RNE:
                        proven = _settle4(A, B, m, g0, n0, w, acc, nxt, ok, RNE)
                    else:
                        proven = _settle4(A, B, m, g0, n0, w, acc, nxt, ok, out_mode)
                if proven != w:
                    for j in range(w):
                        if ok[j] == 0:
                            _exact4_lane(A, B, m, g0, n0, w, j, acc, nxt, out_mode)
            elif wide and g == 2:  # MI100's bf16 group: plain path with the grid test, exact where it fails
                if out_mode == RNE:
                    proven = _plain2_wide(A, B, m, g0, n0, w, acc, nxt, ok, RNE)
                else:
                    proven = _plain2_wide(A, B, m, g0, n0, w, acc, nxt, ok, out_mode)
                if proven != w:
                    for j in range(w):
                        if ok[j] == 0:
                            _exact2_wide_lane(A, B, m, g0, n0, w, j, acc, nxt, out_mode)
            else:
                accepted = np.int64(0)
                if not wide:  # wide operands take the exact path directly (module docstring)
                    for i in range(g):  # plain path, left to right; err holds the worst partial,
                        ai = a_of(A, m, g0 + i, n0, w)  # tot the sum of the partials' magnitudes
                        Bi = B[g0 + i, n0 : n0 + w]
                        if i == 0:
                            for j in range(w):
                                p = np.float64(lane(ai, j)) * np.float64(Bi[j])
                                s[j] = p
                                err[j] = abs(p)
                                tot[j] = 0.0  # the first product is exact
                        else:
                            for j in range(w):
                                sj = s[j] + np.float64(lane(ai, j)) * np.float64(Bi[j])
                                s[j] = sj
                                x, y = err[j], abs(sj)
                                err[j] = (x if x > y else y) + 0.0  # + 0.0: no masked store (see truncated)
                                tot[j] += y
                    for j in range(w):
                        c = acc[j]
                        z = c + s[j]
                        accepted += _plain_accept(c, z, err[j], EXACT_BELOW) | _settled(z, tot[j] + abs(z), out_mode)
                        nxt[j] = _round(z, out_mode) + 0.0
                if wide or accepted != w:  # exact path: TwoSum cascade, left to right
                    for i in range(g):
                        ai = a_of(A, m, g0 + i, n0, w)
                        Bi = B[g0 + i, n0 : n0 + w]
                        if i == 0:
                            for j in range(w):
                                s[j] = np.float64(lane(ai, j)) * np.float64(Bi[j])
                                err[j] = 0.0
                        else:
                            for j in range(w):
                                sj, tj = two_sum(s[j], np.float64(lane(ai, j)) * np.float64(Bi[j]))
                                s[j] = sj
                                err[j] += tj
                    for j in range(w):
                        nxt[j] = _round(_round_exact_sum(acc[j], s[j], err[j]), out_mode)
            if flush_out and (g0 == 0 or wide):
                for j in range(w):
                    nxt[j] = flush_keep_sign(nxt[j], FP32_MIN_NORMAL)
            acc, nxt = nxt, acc
        outm = out[m, n0 : n0 + w]
        for j in range(w):
            outm[j] = np.float32(acc[j])
