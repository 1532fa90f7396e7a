"""Block-scaled truncated fused dot-add units: NVIDIA Blackwell's MX and NVFP4 instructions.

One kernel, :func:`scaled_dot`, for both block-scaled families; the family, the formats and every
other parameter arrive in the parameter vector (:func:`emu.units.kernel_vector`), so it is
compiled once. Its operands are decoded beforehand (:mod:`emu.blockscale`): each operand value
as float64 with its field exponent (``floor(log2|x|)``, the format's subnormal exponent for its
subnormals), each scale as its significand (float64; 1 for UE8M0, NaN for a NaN scale, 0 for a
zero UE4M3 scale) and its field exponent (UE8M0: x − 127; UE4M3: as e4m3's, −6 for subnormals).

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
float64 rounding). A NaN or infinite factor gets the exponent 0 (its term is NaN or ±inf,
whatever it is aligned to, and so is the sum).
"""

from __future__ import annotations

import numpy as np

from ..jit import jit, prange
from ..units import UnitParams
from ._scalar import RD, RZ, field_exponent, pow2, round_to_fp32_bf
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
#: outputs per parallel task
TASK = 256


@jit(inline="always")
def _cut(x, mode):
    return np.floor(x) if mode == RD else np.trunc(x)


@jit(inline="always")
def _round(v, mode, fb):
    """The fp32 rounding of the exact group result v (module docstring), +0 for zero."""
    if mode == RZ:
        return np.float64(rz_wide(v, fb)) + 0.0
    return np.float64(round_to_fp32_bf(v, mode)) + 0.0


@jit
def _scaled_row(av, ae, bv, be, sas, sae, sbs, sbe, c, K, L, blk, F, ezero, align, mode, fb):
    """SCALED_FUSED over one row: c after every group of L (module docstring)."""
    for g0 in range(0, K, L):
        g1 = min(K, g0 + L)
        emax = ezero if c == 0.0 else field_exponent(c, -126)
        zero = False
        k = g0
        while k < g1:  # the exponents, a block at a time
            b = k // blk
            k1 = min(g1, (b + 1) * blk)
            ss = sas[b] * sbs[b]
            es = sae[b] + sbe[b]
            for i in range(k, k1):
                if av[i] * bv[i] * ss == 0.0:
                    zero = True
                else:
                    e = ae[i] + be[i] + es
                    emax = e if e > emax else emax
            k = k1
        if zero and ezero > emax:
            emax = ezero
        total = _cut(c * pow2(F - emax), align)
        k = g0
        while k < g1:  # the cut terms
            b = k // blk
            k1 = min(g1, (b + 1) * blk)
            ss = sas[b] * sbs[b]
            f = pow2(sae[b] + sbe[b] - emax + F)
            for i in range(k, k1):
                total += _cut(av[i] * bv[i] * ss * f, align)
            k = k1
        c = _round(total * pow2(emax - F), mode, fb)
    return c


@jit
def _grouped_row(av, bv, sas, sae, sbs, sbe, c, K, L, blk, G, F, ezero, align, mode, fb, ts, te):
    """GROUPED_SCALED over one row: c after every group of L (module docstring); ``ts``, ``te``
    hold the group's subgroup terms and exponents."""
    for g0 in range(0, K, L):
        g1 = min(K, g0 + L)
        emax = ezero if c == 0.0 else field_exponent(c, -126)
        n = 0
        for s0 in range(g0, g1, G):
            b = s0 // blk
            ps = 0.0
            nonzero = False
            for i in range(s0, min(g1, s0 + G)):
                p = av[i] * bv[i]
                ps += p
                nonzero |= p != 0.0
            ss = sas[b] * sbs[b]
            e = sae[b] + sbe[b] if nonzero and ss != 0.0 else ezero
            ts[n] = ps * ss
            te[n] = e
            emax = e if e > emax else emax
            n += 1
        total = _cut(c * pow2(F - emax), align)
        for i in range(n):
            total += _cut(ts[i] * pow2(te[i] - emax + F), align)
        c = _round(total * pow2(emax - F), mode, fb)
    return c


@jit(parallel=True)
def scaled_dot(ia, ib, AV, AE, BV, BE, SAS, SAE, SBS, SBE, C, out, prm):
    """out[p] = the unit's d for row ia[p] of A (AV values, AE exponents, SAS / SAE its block
    scales), row ib[p] of B (BV, BE, SBS, SBE) and accumulator C[p] (float32, (P,))."""
    P = out.shape[0]
    K = AV.shape[1]
    L = prm[P_GROUP]
    F = prm[P_F]
    align = prm[P_ALIGN]
    mode = prm[P_OUT_ROUND]
    ezero = prm[P_ZERO_EXP]
    fb = prm[P_OUT_FB]
    blk = prm[P_BLOCK]
    G = prm[P_SUBGROUP]
    grouped = prm[P_FAMILY] == GROUPED
    n_tasks = -(-P // TASK)
    for t in prange(n_tasks):
        ts = np.empty(max(1, L // max(G, 1) + 1), np.float64)
        te = np.empty(max(1, L // max(G, 1) + 1), np.int64)
        for p in range(t * TASK, min(P, (t + 1) * TASK)):
            i, j = ia[p], ib[p]
            c = np.float64(C[p])
            if grouped:
                c = _grouped_row(
                    AV[i], BV[j], SAS[i], SAE[i], SBS[j], SBE[j], c, K, L, blk, G, F, ezero, align, mode, fb, ts, te
                )
            else:
                c = _scaled_row(
                    AV[i], AE[i], BV[j], BE[j], SAS[i], SAE[i], SBS[j], SBE[j], c, K, L, blk, F, ezero, align, mode, fb
                )
            out[p] = np.float32(c)
