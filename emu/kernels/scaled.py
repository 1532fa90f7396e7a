"""Block-scaled truncated fused dot-add units: NVIDIA Blackwell's MX and NVFP4 instructions.

One kernel, :func:`scaled_dot`, for both block-scaled families; the family, the formats and every
other parameter arrive in the parameter vector (:func:`emu.units.kernel_vector`), so it is
compiled once. Its operands are decoded beforehand (:mod:`emu.blockscale`) into values and
*powers* (2^(field exponent), float64): an operand's power is 2^floor(log2|x|), the format's
2^emin for its subnormals, 0 for zero; a scale's value is its float64 value (NaN for a NaN
scale), its power 2^(its field exponent) (UE8M0: 2^(x − 127); UE4M3: as e4m3's, 2^-6 for
subnormals; 0 for a zero scale). Operand values and powers are float32 (fp16 values, exact),
scale values and powers float64.

Layout (emu.kernels._tiles): the output is (M, N); a task is up to ROWS rows and LANES columns,
the lanes of every loop; group by group, the task's rows are done one after another over the
same block of B (L × LANES values of each of B's arrays, which stay in cache: the rows of a tile
share them, as the other unit kernels' do), each output keeping its own strict k order. B's arrays
are (K, N) (scales (K // block, N)); A's are (M, K) (one A row per output row, a GEMM) or
(1, K, N) (scales (1, K // block, N)) like B's (one A vector per output: M = 1), told apart at
compile time by their number of dimensions (:func:`emu.kernels._tiles.a_of`). Every output is
computed by exactly one task, so the bits do not depend on the thread count.

Contract (``SCALED_FUSED``, MMA-Sim's ST-FDPA, mmasim/arithmetic/fdpa.py st_fdpa), per group of
``L`` products and the accumulator c:
    a product's term is s = sa·sb·ssa·ssb (the four significands) with exponent ea+eb+esa+esb,
    its block's scales included; a zero term takes ``zero_exponent``; c is a term with its fp32
    field exponent (−126 below the normal range), ``zero_exponent`` when zero;
    e_max = max over all terms; each term is cut to a multiple of 2^(e_max − F) (RZ or RD), the
    cut terms are summed exactly and the sum rounded once to fp32 (RZ: MMA-Sim's RZ-FP32,
    ±inf from 2^128 up and the grid 2^-149 below 2^-126; RNE / RD: IEEE), a zero result +0.

Contract (``GROUPED_SCALED``, MMA-Sim's GST-FDPA, fdpa.gst_fdpa), per group of ``L`` products:
    the products of each subgroup of G (``subgroup_size``) are summed exactly; the subgroup's
    term is that sum times its block's two scale significands, with the exponent esa + esb of
    the scales alone (not normalised); a subgroup whose products are all zero, or whose scales'
    product is zero, takes ``zero_exponent`` (a sum that cancels to zero does not); then as
    above: c, e_max, cut at 2^(e_max − F), exact sum, one rounding.

Exactness: every value is an exact float64 (operand products have at most 8 significant bits,
times two scale significands of at most 4); a cut term is an integer below 2^(F+4)
(``SCALED_FUSED``) or 2^(F + bit_length(144·G)) (``GROUPED_SCALED``: e2m1 subgroup sums below
36·G), and :func:`emu.units.check_params` bounds F so that a group's sum stays below 2^53.
Exponents: operands −14 … 15, scales −127 … 127 each (UE8M0), c −126 … 127 (inf/NaN: 200, any
finite value does), zero terms within ±400 (check_params): every power of two below lies in
float64's normal range, so each scaling is exact (a term scaled below 1 cuts to ±0 whatever its
float64 rounding). A NaN or infinite factor gets the power 1 (its term is NaN or ±inf, whatever it
is aligned to, and so is the sum); a zero factor whose product is NaN (0·inf, a NaN scale) takes
the zero's power, for the same reason.

A term's cut value is value·2^F/2^e_max, so exponents enter only through e_max: the largest term
power, a zero product's being 2^zero_exponent. SCALED_FUSED maximises its products' powers
2^(ea+eb) in float32 (exact: 2^-28 … 2^30, or 0) a block at a time and raises the maximum by the
block's scale powers in float64; it cuts each product a·b (exact in float32) times the block's
factor σ = 2^F/2^e_max·(scale values), as float32 clamped to [2^-101, 2^127], which
emu.kernels.truncated's module docstring shows exact (a·b ≥ 2^-32 and < 2^32 here; σ > 2^127
only where every product of the block is zero; a zero scale gives σ = 0, zero products), then
sums in float64. GROUPED_SCALED sums its e2m1 products exactly in float64 and scales each
subgroup sum in float64 (at most 20 significant bits).
"""

from __future__ import annotations

import numpy as np

from ..jit import jit
from ..units import UnitParams
from ._scalar import RD, RZ, exp_pow64, inv_pow2, pow2, round_to_fp32_bf
from ._tiles import LANES, ROWS, a_of, lane
from .truncated import rz_wide

_F = UnitParams._fields
#: slots of the parameter vector (emu.units.kernel_vector: two subnormal exponents follow
#: b_input_format, then the later fields)
P_FAMILY = _F.index("family")
P_GROUP = _F.index("group_size")
P_F = _F.index("fraction_bits")
P_ALIGN = _F.index("alignment_rounding")
P_OUT_ROUND = _F.index("output_rounding")
P_ZERO_EXP = _F.index("zero_exponent")
P_OUT_FB = _F.index("output_fraction_bits")
_TAIL = _F.index("b_input_format") + 3
P_BLOCK = _F.index("block_size") + 2
P_SUBGROUP = _F.index("subgroup_size") + 2
assert P_BLOCK >= _TAIL and P_SUBGROUP >= _TAIL
#: emu.units.Family.GROUPED_SCALED
GROUPED = 7
C_PMIN, C_PMAX = 2.0**-126, 2.0**200  # c's power: fp32's subnormal floor; inf / NaN (any finite)
SC32_MIN, SC32_MAX = 2.0**-101, 2.0**127
F32_ZERO, F32_ONE = np.float32(0.0), np.float32(1.0)


@jit
def _cut(x, mode):
    return np.floor(x) if mode == RD else np.trunc(x)


@jit
def _round(v, mode, fb):
    """The fp32 rounding of the exact group result v (module docstring), +0 for zero."""
    if mode == RZ:
        return np.float64(rz_wide(v, fb)) + 0.0
    return np.float64(round_to_fp32_bf(v, mode)) + 0.0


@jit
def _c_power(c, zpow):
    return zpow if c == 0.0 else exp_pow64(c, C_PMIN, C_PMAX)


@jit
def _sc32(x):
    """A float64 product scale as the float32 scale, clamped to [2^-101, 2^127] (NaN kept):
    emu.kernels.truncated's argument (module docstring there) makes the float32 cut exact."""
    x = x if not (x < SC32_MIN) else SC32_MIN
    return np.float32(x if not (x > SC32_MAX) else SC32_MAX)


@jit
def _scaled_group(ops, work, acc, m, n0, w, g0, g1, blk, zpow, two_f, two_mf, align, mode, fb):
    """SCALED_FUSED over one group for one row's lanes (acc updated), a block at a time: the
    products' powers (2^(ea+eb), float32, exact) maximised per block and raised by the block's
    scale powers in float64; each product cut in float32 at its block's scale (module docstring).
    ``ops``: (AV, AP, BV, BP, SAV, SAP, SBV, SBP); ``work``: the task's scratch lanes."""
    AV, AP, BV, BP, SAV, SAP, SBV, SBP = ops
    emax, sc, tot, pmax, pmin, sc32 = work[0], work[1], work[2], work[5], work[6], work[7]
    for j in range(w):
        emax[j] = _c_power(acc[j], zpow)
    k0 = g0
    while k0 < g1:
        b = k0 // blk
        k1 = min(g1, (b + 1) * blk)
        for j in range(w):
            pmax[j] = F32_ZERO
            pmin[j] = F32_ONE
        for k in range(k0, k1):
            BPk = BP[k, n0 : n0 + w]
            APk = a_of(AP, m, k, n0, w)
            for j in range(w):
                p = lane(APk, j) * BPk[j]
                x, y = pmax[j], pmin[j]
                pmax[j] = (p if p > x else x) + F32_ZERO  # + 0: no masked store (truncated._max_power)
                pmin[j] = (p if p < y else y) + F32_ZERO
        SBPb = SBP[b, n0 : n0 + w]
        SAPb = a_of(SAP, m, b, n0, w)
        for j in range(w):
            e = emax[j]
            sp = lane(SAPb, j) * SBPb[j]
            x = np.float64(pmax[j]) * sp
            x = x if x > e else e
            zero = (pmin[j] == F32_ZERO) | (sp == 0.0)  # a zero product, or a zero scale
            emax[j] = zpow if zero & (zpow > x) else x
        k0 = k1
    for j in range(w):
        sc[j] = two_f * inv_pow2(emax[j])
        tot[j] = _cut(acc[j] * sc[j], align)
    k0 = g0
    while k0 < g1:
        b = k0 // blk
        k1 = min(g1, (b + 1) * blk)
        SBVb = SBV[b, n0 : n0 + w]
        SAVb = a_of(SAV, m, b, n0, w)
        for j in range(w):
            x = sc[j] * (lane(SAVb, j) * SBVb[j])
            sc32[j] = _sc32(x) if x != 0.0 else F32_ZERO  # a zero scale: zero products
        for k in range(k0, k1):
            BVk = BV[k, n0 : n0 + w]
            AVk = a_of(AV, m, k, n0, w)
            for j in range(w):
                tot[j] += np.float64(_cut(lane(AVk, j) * BVk[j] * sc32[j], align))
        k0 = k1
    for j in range(w):
        acc[j] = _round(tot[j] * (emax[j] * two_mf), mode, fb)


@jit
def _grouped_group(ops, work, TS, acc, m, n0, w, g0, g1, blk, G, zpow, two_f, two_mf, align, mode, fb):
    """GROUPED_SCALED over one group for one row's lanes (acc updated); TS holds the subgroups'
    terms. ``ops``: (AV, AP, BV, BP, SAV, SAP, SBV, SBP), the values AV and BV are the e2m1
    operands'; ``work``: the task's scratch lanes."""
    AW, _, BW, _, SAV, SAP, SBV, SBP = ops
    emax, sc, tot, ps, pa = work[0], work[1], work[2], work[3], work[4]
    for j in range(w):
        emax[j] = _c_power(acc[j], zpow)
    n = 0
    for s0 in range(g0, g1, G):
        b = s0 // blk
        for j in range(w):
            ps[j] = 0.0
            pa[j] = 0.0
        for k in range(s0, min(g1, s0 + G)):
            BWk = BW[k, n0 : n0 + w]
            AWk = a_of(AW, m, k, n0, w)
            for j in range(w):
                p = np.float64(lane(AWk, j) * BWk[j])  # exact in float32
                ps[j] += p
                pa[j] += abs(p)
        SBVb, SBPb = SBV[b, n0 : n0 + w], SBP[b, n0 : n0 + w]
        SAVb, SAPb = a_of(SAV, m, b, n0, w), a_of(SAP, m, b, n0, w)
        TSn = TS[n]
        for j in range(w):
            sv = lane(SAVb, j) * SBVb[j]
            spow = lane(SAPb, j) * SBPb[j]
            x = spow if (pa[j] != 0.0) & (spow != 0.0) else zpow
            TSn[j] = ps[j] * sv
            e = emax[j]
            emax[j] = (x if x > e else e) + 0.0
        n += 1
    for j in range(w):
        sc[j] = two_f * inv_pow2(emax[j])
        tot[j] = _cut(acc[j] * sc[j], align)
    for i in range(n):
        TSi = TS[i]
        for j in range(w):
            tot[j] += _cut(TSi[j] * sc[j], align)
    for j in range(w):
        acc[j] = _round(tot[j] * (emax[j] * two_mf), mode, fb)


@jit
def scaled_dot(AV, AP, BV, BP, SAV, SAP, SBV, SBP, C, out, prm, t0, t1):
    """out (M, N) = the unit's d for A (AV values, AP powers, float32; SAV / SAP its scales'
    values and powers, float64), B (BV, BP; SBV, SBP) and the accumulator C (float32, (M, N));
    A's arrays are (M, K) (GEMM layout) or (1, K, N) (one A vector per output, M = 1); module
    docstring."""
    M, N = out.shape
    K = BV.shape[0]
    L = prm[P_GROUP]
    F = prm[P_F]
    align = prm[P_ALIGN]
    mode = prm[P_OUT_ROUND]
    zpow = pow2(prm[P_ZERO_EXP])
    fb = prm[P_OUT_FB]
    blk = prm[P_BLOCK]
    G = max(prm[P_SUBGROUP], 1)
    grouped = prm[P_FAMILY] == GROUPED
    two_f, two_mf = pow2(F), pow2(-F)
    ops = (AV, AP, BV, BP, SAV, SAP, SBV, SBP)
    n_cb = (N + LANES - 1) // LANES
    n_rb = (M + ROWS - 1) // ROWS
    for t in range(t0, min(t1, n_rb * n_cb)):
        _scaled_dot_task(ops, C, out, np.int64(t), n_cb, K, L, align, mode, zpow, fb, blk, G, grouped, two_f, two_mf)


@jit
def _scaled_dot_task(ops, C, out, t, n_cb, K, L, align, mode, zpow, fb, blk, G, grouped, two_f, two_mf):
    """Task ``t`` of :func:`scaled_dot` (a tile of ROWS × LANES outputs). A function of its own,
    called from a one-line parallel loop, as the other kernels' tasks: numba's parallel passes
    then see one call, not the whole body. Same operations, same bits."""
    M = out.shape[0]
    N = out.shape[1]
    rb = t // n_cb
    m0 = rb * ROWS
    rows = min(ROWS, M - m0)
    n0 = (t - rb * n_cb) * LANES
    w = min(LANES, N - n0)
    ACC = np.empty((ROWS, LANES), np.float64)
    W64 = np.empty((5, LANES), np.float64)  # emax, sc, tot, ps, pa
    W32 = np.empty((3, LANES), np.float32)  # pmax, pmin, sc32
    work = (W64[0], W64[1], W64[2], W64[3], W64[4], W32[0], W32[1], W32[2])
    TS = np.empty((L // G + 1, LANES), np.float64)
    for r in range(rows):
        for j in range(w):
            ACC[r, j] = np.float64(C[m0 + r, n0 + j])
    for g0 in range(0, K, L):
        g1 = min(K, g0 + L)
        for r in range(rows):  # the tile's rows over the same group of B's columns
            acc, m = ACC[r], m0 + r
            # a constant alignment where it matters, so that the RZ case is specialised
            if grouped:
                _grouped_group(ops, work, TS, acc, m, n0, w, g0, g1, blk, G, zpow, two_f, two_mf, align, mode, fb)
            elif align == RZ:
                _scaled_group(ops, work, acc, m, n0, w, g0, g1, blk, zpow, two_f, two_mf, RZ, mode, fb)
            else:
                _scaled_group(ops, work, acc, m, n0, w, g0, g1, blk, zpow, two_f, two_mf, align, mode, fb)
    for r in range(rows):
        outm = out[m0 + r, n0 : n0 + w]
        for j in range(w):
            outm[j] = np.float32(ACC[r, j])
