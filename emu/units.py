"""The unit parameter record the kernels take, and ``dot_add``.

A *unit* computes ``d = c + Σ_k a_k·b_k`` for fp16 ``a``, ``b`` and an fp32 (or fp16) accumulator
``c``. K is consumed from k = 0 upward in consecutive groups of ``group_size`` terms (the last group
may be shorter); each group updates the running accumulator. How one group updates it is the
unit's *family*:

``FUSED_EXACT``        c ← round(c + Σ_group p_k), the sum exact, one rounding (MI100, "E-FDPA").
``PAIRWISE``           a binary tree of fp32 adds over the group's products, then c + tree, each add
                       RNE in fp32 with optional flush of subnormal results (MI200, "FTZ-AddMul").
``TRUNCATED_FUSED``    products and c aligned to the largest exponent, each term cut at
                       ``fraction_bits`` below it, summed exactly, normalised once (NVIDIA, "T-FDPA").
``TWO_STAGE``          products aligned to their largest exponent and cut at ``fraction_bits``, summed;
                       then the product sum (cut at ``sum_fraction_bits`` + 1) and c (cut at
                       ``fraction_bits``) aligned to the larger exponent, summed, normalised, cut at
                       ``sum_fraction_bits`` and rounded (MI300, "TR-FDPA").
``FMA``                c ← RNE32(c + a_k·b_k) for each k in turn (fp32 FMA; ``group_size`` is 1).
``FP64``               the accumulator is held in fp64; each group adds its products one by one in
                       fp64; with ``round_each_group`` the accumulator is rounded to fp32 after each
                       group, otherwise once at the end.

Exponents here are *field* exponents, as the hardware aligns them: an fp16 subnormal or zero has
exponent −14, an fp32 subnormal or zero −126, and a product's exponent is the sum of its factors'.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

__all__ = ["Family", "Rounding", "Format", "UnitParams", "kernel_params"]


class Family(IntEnum):
    FUSED_EXACT = 0
    PAIRWISE = 1
    TRUNCATED_FUSED = 2
    TWO_STAGE = 3
    FMA = 4
    FP64 = 5


class Rounding(IntEnum):
    """RNE: to nearest, ties to even. RZ: toward zero (truncation). RD: toward −∞ (floor)."""

    RNE = 0
    RZ = 1
    RD = 2


class Format(IntEnum):
    FP32 = 0
    FP16 = 1


class UnitParams(NamedTuple):
    """Plain integers, so numba kernels can take them; ``models`` builds these with sources.

    Flush flags: ``flush_inputs`` sets fp16 inputs with |x| < 2^-14 to +0; ``flush_c`` sets a
    subnormal accumulator on entry to +0; ``flush_products`` / ``flush_partials`` /
    ``flush_output`` set subnormal products / intermediate sums / group results to zero of the
    same sign.
    """

    family: int
    group_size: int
    fraction_bits: int = 0
    sum_fraction_bits: int = 0
    alignment_rounding: int = Rounding.RZ
    c_alignment_rounding: int = Rounding.RD
    output_rounding: int = Rounding.RNE
    zero_exponent: int = -133
    output_format: int = Format.FP32
    flush_inputs: bool = False
    flush_c: bool = False
    flush_products: bool = False
    flush_partials: bool = False
    flush_output: bool = False
    round_each_group: bool = True


def kernel_params(params: UnitParams) -> UnitParams:
    """The parameters of the family kernel that computes ``params``' bits (the dispatch in
    :mod:`emu.dot` runs this one).

    An FP64 unit that rounds the accumulator to fp32 in RNE after every product (``group_size``
    1, ``round_each_group``, ``output_rounding`` RNE) is the FMA family without flushes: with c
    in fp32 and the fp16 product p exact in fp32, RN32(RN64(c + p)) = RN32(c + p), because
    53 ≥ 2·24 + 2 (Figueroa, "When is double rounding innocuous?", SIGNUM Newsletter 30(3),
    1995), and a sum below 2^-125 in magnitude is a multiple of 2^-149, exact in fp64. The FP64
    kernel ignores the flush flags other than ``flush_inputs`` (applied when decoding), so they
    are cleared. Every other unit is its own kernel's."""
    if (
        params.family == Family.FP64
        and params.round_each_group
        and params.group_size == 1
        and params.output_rounding == Rounding.RNE
    ):
        return params._replace(
            family=int(Family.FMA), flush_c=False, flush_products=False, flush_partials=False, flush_output=False
        )
    return params
