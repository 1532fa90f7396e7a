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
``SCALED_FUSED``       block-scaled T-FDPA ("ST-FDPA"): as TRUNCATED_FUSED, each product's exponent
                       raised by the scales of its block (2^(ea+eb+sa+sb)); fp32 output.
``GROUPED_SCALED``     block-scaled T-FDPA of subgroup sums ("GST-FDPA"): each ``subgroup_size``
                       products summed exactly, times their block's scales, aligned by the scales'
                       exponent alone; fp32 output (:mod:`emu.blockscale`).

A TRUNCATED_FUSED unit with ``step_size`` S > 0 runs each instruction step of S products as an
emulated instruction does (fp8 ``mma.sync`` on Hopper and Blackwell: the fp8 operands widened to
fp16, then fp16 steps of ``group_size`` products; :mod:`emu.steps`): the step's products, dealt
in pairs to its S / ``group_size`` groups (pair p, products 2p and 2p + 1, to group p mod n),
are summed group after group from a zero accumulator, each group a T-FDPA on fp16 values (field
exponents of fp16, not of the fp8 format); the step's result is then added to c with one IEEE
addition, RNE, in the output format. K is padded with +0 products to a multiple of S.

Exponents here are *field* exponents, as the hardware aligns them: an fp16 subnormal or zero has
exponent −14, an fp32 subnormal or zero −126, and a product's exponent is the sum of its factors'.
"""

from __future__ import annotations

import numbers
from enum import IntEnum
from types import MappingProxyType
from typing import NamedTuple, get_type_hints

import numpy as np

__all__ = [
    "Family",
    "Rounding",
    "Format",
    "InputFormat",
    "ScaleFormat",
    "BLOCK_SCALED",
    "INPUT_EMIN",
    "WIDE_INPUTS",
    "UnitParams",
    "SAME_AS_A",
    "MAX_GROUP_SIZE",
    "FIELD_KINDS",
    "check_params",
    "kernel_params",
    "kernel_vector",
    "operand_formats",
]


class Family(IntEnum):
    FUSED_EXACT = 0
    PAIRWISE = 1
    TRUNCATED_FUSED = 2
    TWO_STAGE = 3
    FMA = 4
    FP64 = 5
    SCALED_FUSED = 6
    GROUPED_SCALED = 7


#: The block-scaled families: every operand block of ``block_size`` values along K carries a
#: scale (``scale_format``), and :func:`emu.dot_add` needs ``scale_a`` and ``scale_b``.
BLOCK_SCALED = frozenset({Family.SCALED_FUSED, Family.GROUPED_SCALED})


class ScaleFormat(IntEnum):
    """The block scale format of a block-scaled unit: none; UE8M0 (a power of two 2^(x − 127),
    0xFF NaN; OCP MX v1.0); UE4M3 (e4m3 without its sign: bias 7, subnormals, 0x7F NaN, zero
    allowed; NVFP4)."""

    NONE = 0
    UE8M0 = 1
    UE4M3 = 2


class Rounding(IntEnum):
    """RNE: to nearest, ties to even. RZ: toward zero (truncation). RD: toward −∞ (floor)."""

    RNE = 0
    RZ = 1
    RD = 2


class Format(IntEnum):
    FP32 = 0
    FP16 = 1


class InputFormat(IntEnum):
    """The operand format a unit multiplies: fp16; bf16; tf32 (fp32 containers whose 13 low
    fraction bits the unit drops: RZ to 10 fraction bits); the OCP fp8 formats e4m3fn and e5m2;
    the fnuz fp8 formats of AMD MI300 (no infinity, no −0, one NaN 0x80, bias one larger); the
    OCP MX fp4 and fp6 formats e2m1, e2m3 and e3m2 (no infinity, no NaN; OCP Microscaling
    Formats (MX) v1.0)."""

    FP16 = 0
    BF16 = 1
    TF32 = 2
    E4M3 = 3
    E5M2 = 4
    E4M3FNUZ = 5
    E5M2FNUZ = 6
    E2M1 = 7
    E2M3 = 8
    E3M2 = 9


#: The field exponent of each input format's subnormals and zero (its smallest normal exponent):
#: what a unit aligns a subnormal operand by (MMA-Sim mmasim/arithmetic/helper.py
#: dtype_subnormal_exponent; tf32 is fp32's).
INPUT_EMIN = MappingProxyType(
    {
        InputFormat.FP16: -14,
        InputFormat.BF16: -126,
        InputFormat.TF32: -126,
        InputFormat.E4M3: -6,
        InputFormat.E5M2: -14,
        InputFormat.E4M3FNUZ: -7,
        InputFormat.E5M2FNUZ: -15,
        InputFormat.E2M1: 0,
        InputFormat.E2M3: 0,
        InputFormat.E3M2: -2,
    }
)
#: Formats whose products can leave fp32's exponent range (8-bit exponents): the kernels run on
#: their float64 values. The others (fp16 and every fp8, whose values are all fp16 values) run
#: on fp16 bit patterns and float32 values, products exact in fp32.
WIDE_INPUTS = frozenset({InputFormat.BF16, InputFormat.TF32})


#: ``UnitParams.b_input_format`` of a unit whose two operands share one format
SAME_AS_A = -1
#: The largest products-per-group a unit may have (matrix units have 1 … 32).
MAX_GROUP_SIZE = 1 << 12


class UnitParams(NamedTuple):
    """The one unit record: every parameter of a unit's arithmetic, declared here once, as plain
    integers (an :class:`~enum.IntEnum` member is one), so numba kernels can take them;
    :func:`check_params` validates a record, and ``models.Unit`` is this record's fields with a
    name, a description and a source for each (it declares no field list of its own).

    Each field's annotation is its kind (:data:`FIELD_KINDS`): an enum (the value must be one of
    its members), ``bool`` (0 or 1) or ``int`` (a whole number, with the range
    :func:`check_params` gives). Adding a field: one line here with its kind and a default that
    keeps every existing unit's arithmetic (then ``models.Unit`` has it, and ``Unit.params``,
    ``dataclasses.replace`` and the sources table follow), and its range, if its kind does not
    say it all, in :func:`check_params`; a kernel that reads it takes it from the vector of
    :func:`kernel_vector` (fields after ``b_input_format`` come after the two subnormal exponents).

    Flush flags: ``flush_inputs`` sets fp16 inputs with |x| < 2^-14 to +0; ``flush_c`` sets a
    subnormal accumulator on entry to +0; ``flush_products`` / ``flush_partials`` /
    ``flush_output`` set subnormal products / intermediate sums / group results to zero of the
    same sign.

    ``input_format``: the operands' :class:`InputFormat` (A's, when ``b_input_format`` is set).
    ``b_input_format``: B's format where it differs from A's (mixed fp8: e4m3 × e5m2 and the like),
    :data:`SAME_AS_A` (−1) otherwise; :func:`operand_formats` gives the pair. ``output_fraction_bits``: the fraction
    bits a TRUNCATED_FUSED group result keeps in fp32's exponent range (23; 13 for the E8M13
    accumulator of NVIDIA's fp8 paths). ``interleaved_sums``: TWO_STAGE stage 1 as one
    truncated sum of the group's products (1) or as separate sums of the even and odd products,
    combined by flooring (2: AMD MI300's fp8 "GTR-FDPA").

    Block scaling (the :data:`BLOCK_SCALED` families only; :mod:`emu.blockscale`):
    ``scale_format``, the :class:`ScaleFormat` of both operands' scales; ``block_size``, the
    values along K one scale covers (32 for MX, 16 for NVFP4); ``subgroup_size``, the products a
    GROUPED_SCALED unit sums before scaling (0 for the other families).

    ``step_size``: the products of one emulated instruction step (0: none; TRUNCATED_FUSED only:
    see the module docstring), a multiple of ``group_size`` whose pairs deal evenly to its groups.
    """

    family: Family
    group_size: int
    fraction_bits: int = 0
    sum_fraction_bits: int = 0
    alignment_rounding: Rounding = Rounding.RZ
    c_alignment_rounding: Rounding = Rounding.RD
    output_rounding: Rounding = Rounding.RNE
    zero_exponent: int = -133
    output_format: Format = Format.FP32
    flush_inputs: bool = False
    flush_c: bool = False
    flush_products: bool = False
    flush_partials: bool = False
    flush_output: bool = False
    round_each_group: bool = True
    input_format: InputFormat = InputFormat.FP16
    output_fraction_bits: int = 23
    interleaved_sums: int = 1
    b_input_format: int = SAME_AS_A
    scale_format: ScaleFormat = ScaleFormat.NONE
    block_size: int = 0
    subgroup_size: int = 0
    step_size: int = 0


#: field → its kind: the enum its values are members of, ``bool`` or ``int`` (the annotations of
#: :class:`UnitParams`)
FIELD_KINDS = MappingProxyType(get_type_hints(UnitParams))


def _accepted(enum) -> str:
    return ", ".join(f"{m.name} ({int(m)})" for m in enum)


def _whole(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def check_params(params: UnitParams) -> UnitParams:
    """``params`` if every field keeps its meaning, else ValueError naming the first field that
    does not (``unit.<field>: …``) and the values it accepts. The one validation of a unit:
    ``emu``'s entry points run it on what they are given, ``models.Unit`` on every unit made
    (``dataclasses.replace`` included).

    Each field must be of its kind (:data:`FIELD_KINDS`), then: ``group_size`` in 1 …
    :data:`MAX_GROUP_SIZE`, a power of two for a pairwise tree; ``fraction_bits`` and
    ``sum_fraction_bits`` in 0 … 48 (float64 exactness); ``output_fraction_bits`` in 1 … 23;
    ``interleaved_sums`` 1 or 2; ``zero_exponent`` in −1100 … 1100 (a float64 exponent);
    ``b_input_format`` :data:`SAME_AS_A` or a format that pairs with A's
    (:func:`operand_formats`); and the combinations the kernels model: an exact fused unit with
    wide operands (bf16, tf32) in groups of at most 2, an fp16 accumulator with fp16 or fp8
    operands."""
    for name, kind in FIELD_KINDS.items():
        value = getattr(params, name)
        if kind is bool:
            if not isinstance(value, (numbers.Integral, np.bool_)) or value not in (0, 1):
                raise ValueError(f"unit.{name}: must be True or False, got {value!r}")
        elif kind is int:
            if not _whole(value):
                raise ValueError(f"unit.{name}: must be a whole number, got {value!r}")
        else:
            try:
                kind(value)
            except (ValueError, TypeError):
                raise ValueError(f"unit.{name}: {value!r} is not one of {_accepted(kind)}") from None
    p = params
    if not 1 <= p.group_size <= MAX_GROUP_SIZE:
        raise ValueError(
            f"unit.group_size: must be ≥ 1 and ≤ {MAX_GROUP_SIZE} (products per group), got {p.group_size}"
        )
    if p.family == Family.PAIRWISE and p.group_size & (p.group_size - 1):
        raise ValueError(f"unit.group_size: a pairwise tree needs a power of two, got {p.group_size}")
    for name in ("fraction_bits", "sum_fraction_bits"):
        if not 0 <= getattr(p, name) <= 48:
            raise ValueError(f"unit.{name}: must be in 0..48 (float64 exactness), got {getattr(p, name)}")
    if not 1 <= p.output_fraction_bits <= 23:
        raise ValueError(f"unit.output_fraction_bits: must be in 1..23, got {p.output_fraction_bits}")
    if p.interleaved_sums not in (1, 2):
        raise ValueError(f"unit.interleaved_sums: must be 1 or 2, got {p.interleaved_sums!r}")
    if not -1100 <= p.zero_exponent <= 1100:
        raise ValueError(f"unit.zero_exponent: must be in -1100..1100 (a float64 exponent), got {p.zero_exponent}")
    if p.b_input_format != SAME_AS_A and p.b_input_format not in set(InputFormat):
        raise ValueError(
            f"unit.b_input_format: {p.b_input_format!r} is not {SAME_AS_A} (A's format) or one of {_accepted(InputFormat)}"
        )
    fmt, _ = operand_formats(p)  # ValueError for a mixed pair with a wide format
    _check_block_scaling(p)
    _check_steps(p, fmt)
    if p.family == Family.FUSED_EXACT and fmt in WIDE_INPUTS and p.group_size > 2:
        # the exact path's error sum is exact for fp16 products (a 2^-48 grid) or one TwoSum error
        raise ValueError(
            f"unit.group_size: an exact fused unit with {fmt.name.lower()} operands is modelled for groups of "
            f"1 or 2 (MI100's bf16), got {p.group_size}"
        )
    if p.output_format == Format.FP16 and fmt in WIDE_INPUTS:
        raise ValueError(f"unit.output_format: fp16 accumulators take fp16 or fp8 operands, not {fmt.name.lower()}")
    return params


#: the narrow formats a block-scaled unit multiplies (fp16 values: products exact in float64)
SCALED_INPUTS = frozenset({InputFormat.E4M3, InputFormat.E5M2, InputFormat.E2M1, InputFormat.E2M3, InputFormat.E3M2})
#: the largest |exponent| a block-scaled unit's zero exponent may have (scale factors stay in
#: float64's normal range: emu.kernels.scaled)
SCALED_ZERO_EXPONENT = 400


def _check_block_scaling(p: UnitParams) -> None:
    """The block-scaling fields of ``p`` (:func:`check_params`)."""
    try:
        scale = ScaleFormat(p.scale_format)
    except ValueError:
        raise ValueError(f"unit.scale_format: {p.scale_format!r} is not one of {_accepted(ScaleFormat)}") from None
    if p.family not in BLOCK_SCALED:
        for name in ("scale_format", "block_size", "subgroup_size"):
            if getattr(p, name):
                raise ValueError(
                    f"unit.{name}: only block-scaled units ({', '.join(f.name for f in sorted(BLOCK_SCALED))}) "
                    f"have block scales; must be 0, got {getattr(p, name)!r}"
                )
        return
    family = Family(p.family).name
    if scale == ScaleFormat.NONE:
        raise ValueError(f"unit.scale_format: a {family} unit needs a scale format: UE8M0 (1) or UE4M3 (2)")
    if not 1 <= p.block_size <= MAX_GROUP_SIZE:
        raise ValueError(f"unit.block_size: must be in 1..{MAX_GROUP_SIZE} (values per scale), got {p.block_size}")
    for fmt in operand_formats(p):
        if fmt not in SCALED_INPUTS:
            raise ValueError(
                f"unit.input_format: a {family} unit multiplies e4m3, e5m2, e2m1, e2m3 or e3m2, not {fmt.name.lower()}"
            )
    if p.output_format != Format.FP32:
        raise ValueError(f"unit.output_format: a {family} unit has an fp32 accumulator")
    for name in ("flush_inputs", "flush_c", "flush_products", "flush_partials", "flush_output"):
        if getattr(p, name):
            raise ValueError(f"unit.{name}: a {family} unit keeps subnormals (no flush is modelled); must be False")
    if not p.round_each_group or p.interleaved_sums != 1:
        name = "round_each_group" if not p.round_each_group else "interleaved_sums"
        raise ValueError(f"unit.{name}: a {family} unit rounds after every group, one sum per group; keep the default")
    if p.alignment_rounding not in (Rounding.RZ, Rounding.RD):
        raise ValueError(f"unit.alignment_rounding: a {family} unit cuts terms with RZ (1) or RD (2)")
    if not -SCALED_ZERO_EXPONENT <= p.zero_exponent <= SCALED_ZERO_EXPONENT:
        raise ValueError(
            f"unit.zero_exponent: a {family} unit's must be in -{SCALED_ZERO_EXPONENT}..{SCALED_ZERO_EXPONENT}, "
            f"got {p.zero_exponent}"
        )
    if p.family == Family.SCALED_FUSED:
        if p.subgroup_size:
            raise ValueError(
                f"unit.subgroup_size: a SCALED_FUSED unit scales each product; must be 0, got {p.subgroup_size}"
            )
        # each cut term is below 2^(F+4) (significands < 2 each: two factors, two scales)
        terms, bits = p.group_size + 1, p.fraction_bits + 4
    else:
        G = p.subgroup_size
        if G < 1 or p.block_size % G or p.group_size % G:
            raise ValueError(
                f"unit.subgroup_size: must be ≥ 1 and divide block_size ({p.block_size}) and group_size "
                f"({p.group_size}), got {G}"
            )
        if operand_formats(p) != (InputFormat.E2M1, InputFormat.E2M1):
            raise ValueError("unit.input_format: a GROUPED_SCALED unit multiplies e2m1 (its subgroup sums are exact)")
        # a subgroup sum of e2m1 products is below 36·G, times the scales' significands (< 4)
        terms, bits = p.group_size // G + 1, p.fraction_bits + (144 * G).bit_length()
    if terms * 2**bits > 2**53:
        raise ValueError(
            f"unit.fraction_bits: {p.fraction_bits} with groups of {p.group_size} leaves the float64 sum of "
            "cut terms inexact; lower it or the group size"
        )


def _check_steps(p: UnitParams, fmt: InputFormat) -> None:
    """The ``step_size`` field of ``p`` (:func:`check_params`)."""
    S = p.step_size
    if not S:
        return
    if p.family != Family.TRUNCATED_FUSED:
        raise ValueError(
            f"unit.step_size: only a TRUNCATED_FUSED unit runs emulated steps; must be 0 for "
            f"{Family(p.family).name}, got {S}"
        )
    if S < 0 or S > MAX_GROUP_SIZE or S % p.group_size or S % (2 * (S // p.group_size)):
        raise ValueError(
            f"unit.step_size: must be 0 or a multiple n·group_size (group_size {p.group_size}) of at most "
            f"{MAX_GROUP_SIZE} whose pairs deal evenly to the n groups (a multiple of 2n), got {S}"
        )
    if fmt in WIDE_INPUTS:
        raise ValueError(f"unit.step_size: emulated steps widen fp8 or fp16 operands to fp16, not {fmt.name.lower()}")


def operand_formats(params: UnitParams) -> tuple[InputFormat, InputFormat]:
    """(A's format, B's format) of a unit. ValueError for an unknown format, or for a mixed pair
    that involves a wide format (bf16, tf32): the two operands of one unit must both run as fp16
    patterns (fp16 and the fp8 formats) or share one wide format."""
    fa = InputFormat(params.input_format)
    if params.b_input_format == SAME_AS_A:
        return fa, fa
    fb = InputFormat(params.b_input_format)
    if fa != fb and (fa in WIDE_INPUTS or fb in WIDE_INPUTS):
        raise ValueError(
            f"unit.b_input_format: {fa.name.lower()} × {fb.name.lower()}: mixed operands are modelled for "
            "fp16 and the fp8 formats only (bf16 and tf32 pair with themselves)"
        )
    return fa, fb


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


#: how many fields of :class:`UnitParams` (the first, through ``b_input_format``) come before the two
#: subnormal exponents in :func:`kernel_vector` (emu/kernels/_tiles.py numbers the slots)
_KERNEL_HEAD = UnitParams._fields.index("b_input_format") + 1


def kernel_vector(params: UnitParams, input_emin: int | None = None) -> np.ndarray:
    """The int64 vector the family kernels take: ``params`` in field order through
    ``b_input_format``, then the field exponents of A's and of B's subnormals (:data:`INPUT_EMIN`
    of each operand's format), then any later fields (so a field added to the record moves no
    slot the kernels read). The exponents are :data:`INPUT_EMIN`'s, or
    ``input_emin`` for both when the caller knows every nonzero operand lies above
    2^input_emin (then the two agree on every operand's field exponent).

    The kernels give an operand below its format's smallest normal this exponent when they align
    (a product's exponent is the sum of its factors'; T-FDPA and TR-FDPA truncate every term
    relative to the group's largest): each operand needs its own format's, as MMA-Sim's
    ``frexp_and_normalize`` gives each factor its dtype's (mmasim/arithmetic/fdpa.py t_fdpa,
    gtr_fdpa). One value for both would misplace e4m3's subnormals (binades −9 … −7 aligned
    as −6) or lift e5m2 values of 2^-14 … 2^-7 to 2^-6."""
    fa, fb = operand_formats(params)
    if input_emin is None:
        emin_a, emin_b = INPUT_EMIN[fa], INPUT_EMIN[fb]
    else:
        emin_a = emin_b = input_emin
    return np.asarray((*params[:_KERNEL_HEAD], emin_a, emin_b, *params[_KERNEL_HEAD:]), np.int64)
