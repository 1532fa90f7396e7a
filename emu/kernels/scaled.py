"""Block-scaled truncated fused dot-add units: NVIDIA Blackwell's MX and NVFP4 instructions.

One kernel, :func:`scaled_dot`, for both block-scaled families; the family, the formats and every
other parameter arrive in the parameter vector (:func:`emu.units.kernel_vector`), so it is
compiled once. Its operands are decoded beforehand (:mod:`emu.blockscale`) into values and
*powers* (2^(field exponent), float64): an operand's power is 2^floor(log2|x|), the format's
2^emin for its subnormals, 0 for zero; a scale's value is its float64 value (NaN for a NaN
scale), its power 2^(its field exponent) (UE8M0: 2^(x − 127); UE4M3: as e4m3's, 2^-6 for
subnormals; 0 for a zero scale). Operand values and powers are float32 (fp16 values, exact),
scale values and powers float64.

Layout: the output is (M, N); a task is one row m and up to LANES columns, the lanes of every
loop. B's arrays are (K, N) (scales (K // block, N)); A's are (M, K) (one A row per output row,
a GEMM) or, with ``a_lanes``, (K, N) like B's (one A vector per output: M = 1).

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

from ..jit import jit, prange
from ..units import UnitParams
from ._scalar import RD, RZ, exp_pow64, inv_pow2, pow2, round_to_fp32_bf
from ._tiles import LANES
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


@jit(inline="always")
def _cut(x, mode):
    return np.floor(x) if mode == RD else np.trunc(x)


@jit(inline="always")
def _round(v, mode, fb):
    """The fp32 rounding of the exact group result v (module docstring), +0 for zero."""
    if mode == RZ:
        return np.float64(rz_wide(v, fb)) + 0.0
    return np.float64(round_to_fp32_bf(v, mode)) + 0.0


@jit(inline="always")
def _a(X, m, k, j, a_lanes):
    """A's entry for output lane j: X[k, j] (one A vector per output) or X[m, k] (GEMM)."""
    return X[k, j] if a_lanes else X[m, k]


@jit(inline="always")
def _c_power(c, zpow):
    return zpow if c == 0.0 else exp_pow64(c, C_PMIN, C_PMAX)


@jit(inline="always")
def _sc32(x):
    """A float64 product scale as the float32 scale, clamped to [2^-101, 2^127] (NaN kept):
    emu.kernels.truncated's argument (module docstring there) makes the float32 cut exact."""
    x = x if not (x < SC32_MIN) else SC32_MIN
    return np.float32(x if not (x > SC32_MAX) else SC32_MAX)


@jit(inline="always")
def _scaled_group(
    AV,
    AP,
    BV,
    BP,
    SAV,
    SAP,
    SBV,
    SBP,
    m,
    n0,
    w,
    g0,
    g1,
    blk,
    acc,
    emax,
    sc,
    tot,
    pmax,
    pmin,
    sc32,
    zpow,
    two_f,
    two_mf,
    align,
    mode,
    fb,
    a_lanes,
):
    """SCALED_FUSED over one group for the task's lanes (acc updated), a block at a time: the
    products' powers (2^(ea+eb), float32, exact) maximised per block and raised by the block's
    scale powers in float64; each product cut in float32 at its block's scale (module docstring)."""
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
            for j in range(w):
                p = _a(AP, m, k, n0 + j, a_lanes) * BPk[j]
                x, y = pmax[j], pmin[j]
                pmax[j] = (p if p > x else x) + F32_ZERO  # + 0: no masked store (truncated._max_power)
                pmin[j] = (p if p < y else y) + F32_ZERO
        SBPb = SBP[b, n0 : n0 + w]
        for j in range(w):
            e = emax[j]
            sp = _a(SAP, m, b, n0 + j, a_lanes) * SBPb[j]
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
        for j in range(w):
            x = sc[j] * (_a(SAV, m, b, n0 + j, a_lanes) * SBVb[j])
            sc32[j] = _sc32(x) if x != 0.0 else F32_ZERO  # a zero scale: zero products
        for k in range(k0, k1):
            BVk = BV[k, n0 : n0 + w]
            for j in range(w):
                tot[j] += np.float64(_cut(_a(AV, m, k, n0 + j, a_lanes) * BVk[j] * sc32[j], align))
        k0 = k1
    for j in range(w):
        acc[j] = _round(tot[j] * (emax[j] * two_mf), mode, fb)


@jit(inline="always")
def _grouped_group(
    AW,
    BW,
    SAV,
    SAP,
    SBV,
    SBP,
    m,
    n0,
    w,
    g0,
    g1,
    blk,
    G,
    acc,
    emax,
    sc,
    tot,
    ps,
    pa,
    TS,
    zpow,
    two_f,
    two_mf,
    align,
    mode,
    fb,
    a_lanes,
):
    """GROUPED_SCALED over one group for the task's lanes (acc updated); TS holds the
    subgroups' terms."""
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
            for j in range(w):
                p = np.float64(_a(AW, m, k, n0 + j, a_lanes) * BWk[j])  # exact in float32
                ps[j] += p
                pa[j] += abs(p)
        SBVb, SBPb = SBV[b, n0 : n0 + w], SBP[b, n0 : n0 + w]
        TSn = TS[n]
        for j in range(w):
            sv = _a(SAV, m, b, n0 + j, a_lanes) * SBVb[j]
            spow = _a(SAP, m, b, n0 + j, a_lanes) * SBPb[j]
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


@jit(parallel=True)
def scaled_dot(AV, AP, BV, BP, SAV, SAP, SBV, SBP, C, out, prm, a_lanes):
    """out (M, N) = the unit's d for A (AV values, AP powers, float32; SAV / SAP its scales'
    values and powers, float64), B (BV, BP; SBV, SBP) and the accumulator C (float32, (M, N));
    module docstring."""
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
    n_cb = (N + LANES - 1) // LANES
    for t in prange(M * n_cb):
        m = t // n_cb
        n0 = (t - m * n_cb) * LANES
        w = min(LANES, N - n0)
        acc = np.empty(LANES, np.float64)
        emax = np.empty(LANES, np.float64)
        sc = np.empty(LANES, np.float64)
        tot = np.empty(LANES, np.float64)
        ps = np.empty(LANES, np.float64)
        pa = np.empty(LANES, np.float64)
        pmax = np.empty(LANES, np.float32)
        pmin = np.empty(LANES, np.float32)
        sc32 = np.empty(LANES, np.float32)
        TS = np.empty((L // G + 1, LANES), np.float64)
        for j in range(w):
            acc[j] = np.float64(C[m, n0 + j])
        for g0 in range(0, K, L):
            g1 = min(K, g0 + L)
            # literal flags where they matter, so that the inlined loops are specialised
            if grouped:
                if a_lanes:
                    _grouped_group(
                        AV,
                        BV,
                        SAV,
                        SAP,
                        SBV,
                        SBP,
                        m,
                        n0,
                        w,
                        g0,
                        g1,
                        blk,
                        G,
                        acc,
                        emax,
                        sc,
                        tot,
                        ps,
                        pa,
                        TS,
                        zpow,
                        two_f,
                        two_mf,
                        align,
                        mode,
                        fb,
                        True,
                    )
                else:
                    _grouped_group(
                        AV,
                        BV,
                        SAV,
                        SAP,
                        SBV,
                        SBP,
                        m,
                        n0,
                        w,
                        g0,
                        g1,
                        blk,
                        G,
                        acc,
                        emax,
                        sc,
                        tot,
                        ps,
                        pa,
                        TS,
                        zpow,
                        two_f,
                        two_mf,
                        align,
                        mode,
                        fb,
                        False,
                    )
            elif align == RZ and not a_lanes:
                _scaled_group(
                    AV,
                    AP,
                    BV,
                    BP,
                    SAV,
                    SAP,
                    SBV,
                    SBP,
                    m,
                    n0,
                    w,
                    g0,
                    g1,
                    blk,
                    acc,
                    emax,
                    sc,
                    tot,
                    pmax,
                    pmin,
                    sc32,
                    zpow,
                    two_f,
                    two_mf,
                    RZ,
                    mode,
                    fb,
                    False,
                )
            elif align == RZ:
                _scaled_group(
                    AV,
                    AP,
                    BV,
                    BP,
                    SAV,
                    SAP,
                    SBV,
                    SBP,
                    m,
                    n0,
                    w,
                    g0,
                    g1,
                    blk,
                    acc,
                    emax,
                    sc,
                    tot,
                    pmax,
                    pmin,
                    sc32,
                    zpow,
                    two_f,
                    two_mf,
                    RZ,
                    mode,
                    fb,
                    True,
                )
            else:
                _scaled_group(
                    AV,
                    AP,
                    BV,
                    BP,
                    SAV,
                    SAP,
                    SBV,
                    SBP,
                    m,
                    n0,
                    w,
                    g0,
                    g1,
                    blk,
                    acc,
                    emax,
                    sc,
                    tot,
                    pmax,
                    pmin,
                    sc32,
                    zpow,
                    two_f,
                    two_mf,
                    align,
                    mode,
                    fb,
                    a_lanes,
                )
        outm = out[m, n0 : n0 + w]
        for j in range(w):
            outm[j] = np.float32(acc[j])
