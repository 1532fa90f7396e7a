"""The model space: every matrix-unit arithmetic and instruction k order fp16emu can identify.

A *point* of the space is a :class:`Point`: a unit's parameter record (:class:`emu.UnitParams`,
the record every ``emu`` kernel takes) and the k order in which one instruction feeds its K
products to the unit. The space is the union, over the arithmetic families, of the Cartesian
product of each family's *axes* (:data:`AXES`): the parameters that family reads, each with the
values the space admits. Parameters a family never reads are held at their ``UnitParams``
default (:func:`check_unit` rejects any other value), so every point is written one way only.

Axes (see ``emu.units`` for the arithmetic each family does):

``group_size``           products one step of the unit adds (K is consumed in such groups)
``fraction_bits``        F: fraction bits kept below the largest exponent when terms are aligned
                         (truncated families)
``sum_fraction_bits``    F2: fraction bits of the second-stage sum (two-stage family)
``alignment_rounding``   how an aligned product is cut to the grid: RZ (toward zero) or RD (floor)
``c_alignment_rounding`` how the accumulator is cut in stage 2 (two-stage family)
``output_rounding``      the rounding of each group result to fp32: RNE, RZ or RD
``zero_exponent``        the exponent a zero term takes in the alignment (truncated family)
``output_format``        fp32, or fp16 (truncated family: the NVIDIA ``.f16`` accumulators)
``flush_inputs``         fp16 subnormal inputs read as +0
``flush_c``              a subnormal accumulator read as +0 on entry
``flush_output``         subnormal results flushed, keeping their sign (pairwise: with the products
                         and partial sums; :data:`EQUIVALENCES`)
``round_each_group``     fp64 accumulator rounded to fp32 after every group, or once at the end

The *sign rule* of the flushes is fixed by the kernels, not an axis: the accumulator flushes to
+0 (as MMA-Sim's ``ftz_add`` with ``keep_sign=False`` and Khattak & Mikaitis' MI210 model do),
products, partial sums and results keep their sign; an exact zero sum is +0 in every family.

The instruction's *k order* (:class:`Point.k_tile`): 0 for ascending k (groups of consecutive
k), or a tile width T: inside every T-wide block of k the unit's groups are strided,
{b, b + T/L, b + 2T/L, …} (the AMD k-reduction instructions ``v_mfma_f32_16x16x16f16`` with
T = 16 and ``32x32x8f16`` with T = 8 feed their groups this way; ``emu.gemm.strided_k_order``).

Equivalences (:data:`EQUIVALENCES`): parameter values no fp16 input can tell apart are one
point, written with a representative value (:func:`canonical`); a named unit written with
another member of its class (V100's zero exponent −131, say) is a member of the space.

*Operand formats* (:func:`axes`, the ``input`` argument of :func:`unit_points` and
:func:`points`): the space of a format other than fp16 holds the families of the named units
that multiply it (``models.UNIT_INPUTS``), each with its fp16 axes widened by the values those
units take for the format (``models.unit(name, input=FORMAT)``: fp8's F = 13 and E8M13
accumulator, bf16's zero exponents, MI300 fp8's interleaved sums, group sizes up to 32), and
fraction bits one either side of a named value; ``input_format`` is part of every point. The
equivalences hold per format where their argument does (:func:`zero_exponent_bound`; the
result-flush class needs products that are never fp32 subnormals, false for bf16 and tf32).

The kernel accumulation parameters above the instruction (:class:`KernelAccumulation`: the
gemmK grouping of the xdlops kernel, KPack, the split-K count of the backward-weight kernel)
form a second, smaller space used to identify a kernel from whole-GEMM results.

Sources for the families and their parameters: MMA-Sim (Xie et al., arXiv 2511.10909;
github.com/microsoft/MMA-Sim), Khattak & Mikaitis (arXiv 2512.07004;
github.com/north-numerical-computing/MATLAB-tensor-core), Fasi, Higham, Mikaitis & Pranesh
(PeerJ CS 7:e330, 2021).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from emu.dot import unit_params
from emu.gemm import strided_k_order
from emu.operands import input_format, input_name
from emu.units import INPUT_EMIN, WIDE_INPUTS, Family, Format, InputFormat, Rounding, UnitParams

from .units import UNIT_INPUTS, UNIT_NAMES, unit

__all__ = [
    "AXES",
    "EQUIVALENCES",
    "FP16_ZERO_EXPONENT_CLASS",
    "FP32_ZERO_EXPONENT_CLASS",
    "KPACKS",
    "SPLIT_KS",
    "KernelAccumulation",
    "Point",
    "as_dict",
    "axes",
    "canonical",
    "check_unit",
    "contains",
    "describe",
    "families",
    "k_permutation",
    "k_tiles",
    "kernel_space",
    "named_points",
    "names_of",
    "points",
    "unit_points",
    "zero_exponent_bound",
]

_DEFAULTS = UnitParams(family=0, group_size=1)
_BOTH = (False, True)

#: Zero terms with exponent ≤ this never decide the alignment exponent of an fp32-output truncated
#: unit (products have field exponent ≥ −28, an fp32 accumulator ≥ −126), so every such value is
#: the same arithmetic; written as −133 (H100's, ``UnitParams``' default).
FP32_ZERO_EXPONENT_CLASS = -126
#: The same bound for fp16 accumulators and outputs: products ≥ −28 decide it; written as −28.
FP16_ZERO_EXPONENT_CLASS = -28
_FP32_ZERO_REP = -133
_FP16_ZERO_REP = -28

#: family → {field: the values the space admits}; fields not listed stay at the UnitParams default.
AXES: Mapping[Family, Mapping[str, tuple]] = MappingProxyType(
    {
        Family.FUSED_EXACT: MappingProxyType(
            {
                "group_size": (2, 4, 8, 16),
                "output_rounding": (Rounding.RNE, Rounding.RZ, Rounding.RD),
                "flush_inputs": _BOTH,
                "flush_c": _BOTH,
                "flush_output": _BOTH,
            }
        ),
        Family.PAIRWISE: MappingProxyType(
            {
                "group_size": (2, 4, 8, 16),
                "flush_inputs": _BOTH,
                "flush_c": _BOTH,
                "flush_output": _BOTH,  # flush_products and flush_partials follow it (EQUIVALENCES)
            }
        ),
        Family.TRUNCATED_FUSED: MappingProxyType(
            {
                "group_size": (2, 4, 8, 16),
                "fraction_bits": (22, 23, 24, 25, 26),
                "alignment_rounding": (Rounding.RZ, Rounding.RD),
                "output_rounding": (Rounding.RNE, Rounding.RZ, Rounding.RD),  # fp32 output; fp16 output: RNE
                "output_format": (Format.FP32, Format.FP16),
                "zero_exponent": (_FP32_ZERO_REP, _FP16_ZERO_REP, -22, -21, -20, -19, -18, -17),
                "flush_inputs": _BOTH,
            }
        ),
        Family.TWO_STAGE: MappingProxyType(
            {
                "group_size": (4, 8, 16),
                "fraction_bits": (23, 24, 25),
                "sum_fraction_bits": (28, 29, 30, 31, 32),
                "alignment_rounding": (Rounding.RZ, Rounding.RD),
                "c_alignment_rounding": (Rounding.RZ, Rounding.RD),
                "output_rounding": (Rounding.RNE, Rounding.RZ, Rounding.RD),
            }
        ),
        Family.FMA: MappingProxyType(
            {
                "group_size": (1,),
                "flush_inputs": _BOTH,
                "flush_c": _BOTH,
                "flush_output": _BOTH,
            }
        ),
        Family.FP64: MappingProxyType(
            {
                "group_size": (1, 2, 4, 8, 16),
                "output_rounding": (Rounding.RNE, Rounding.RZ, Rounding.RD),
                "round_each_group": _BOTH,
                "flush_inputs": _BOTH,
            }
        ),
    }
)

#: Parameter values no fp16 input can tell apart (each with its reason); :func:`canonical`
#: writes every class with one representative.
EQUIVALENCES: Mapping[str, str] = MappingProxyType(
    {
        "truncated fp32 zero exponent": (
            f"an fp32-output truncated unit with zero_exponent ≤ {FP32_ZERO_EXPONENT_CLASS}: a zero term's "
            "exponent is then below every non-zero term's (products ≥ −28, an fp32 accumulator ≥ −126), so it "
            "decides the alignment only when every term is zero, and the sum is then +0 whatever it is; "
            f"written {_FP32_ZERO_REP} (V100 −131, T4/A100/Ada −132 and H100/B200 −133 are this one class)"
        ),
        "truncated fp16 zero exponent": (
            f"an fp16-output truncated unit with zero_exponent ≤ {FP16_ZERO_EXPONENT_CLASS}: the same argument "
            f"with an fp16 accumulator (≥ −14) and products (≥ −28); written {_FP16_ZERO_REP}"
        ),
        "pairwise product and partial-sum flushes": (
            "a pairwise unit's products and partial sums of fp16 products are never fp32 subnormals (0 or ≥ "
            "2^-48 in magnitude), so flush_products and flush_partials cannot act; written equal to flush_output"
        ),
        "result flush after an accumulator flush": (
            "with flush_c, a fused-exact, pairwise or FMA unit never produces a subnormal result: c is 0 or "
            "normal and the products' sum a multiple of 2^-48, so their sum is 0 or normal (emu.kernels.fma) and "
            "flush_output cannot act; written flush_output = True (as MI200)"
        ),
        "fp64 per-product rounding": (
            "an fp64 accumulator rounded to fp32 after every product is fp32 FMA: rounding the exact sum to "
            "53 bits and then to 24 is rounding it to 24 (53 ≥ 2·24 + 2); the space keeps the FMA point"
        ),
        "fp64 group size without per-group rounding": (
            "an fp64 accumulator rounded once at the end does not depend on the group size; written group_size 1"
        ),
        "operand formats": (
            "for operands other than fp16 the zero-exponent classes end at zero_exponent_bound (products have "
            "field exponent ≥ 2·emin): for fp8 every named value lies in the one class, for bf16 and tf32 "
            "(bound −252) none does, so A100's −132 and H100's −133 are two points there; the result-flush "
            "class holds for fp8 (products are multiples of 2^-34 or coarser) but not for bf16 and tf32, whose "
            "products can be fp32 subnormals: there the pairwise product and partial-sum flushes follow the "
            "result flush as a restriction of the space, not as an equivalence"
        ),
        "k order of a one-group instruction": (
            "a k order permutes whole k values; when the unit sees all of K as one group (fused and truncated "
            "sums are order-free) or adds k one by one (FMA, fp64), only ascending k is enumerated"
        ),
    }
)

#: family → fields that are not axes but follow another field (EQUIVALENCES; for bf16 and tf32,
#: whose products can be fp32 subnormals, a restriction of the space rather than an equivalence)
_TIED = {Family.PAIRWISE: ("flush_products", "flush_partials")}


def zero_exponent_bound(output_format: int, input="fp16") -> int:
    """The largest zero exponent of a truncated unit's one class (:data:`EQUIVALENCES`) for
    operands of ``input``: min(2·emin, the accumulator's smallest exponent), emin the field
    exponent of the format's subnormals (``emu.units.INPUT_EMIN``). Below it a zero term never
    decides the alignment (products have field exponent ≥ 2·emin): −126 and −28 for fp16 (fp32
    and fp16 accumulators), −252 for bf16 and tf32, −126 and −14 for e4m3."""
    c_emin = -14 if output_format == Format.FP16 else -126
    return min(2 * INPUT_EMIN[input_format(input)], c_emin)


@functools.cache
def _named_units(fmt: InputFormat) -> tuple:
    """(name key, UnitParams) of every named unit multiplying ``fmt``, fp16 outputs as "<name>/fp16"."""
    out = []
    for name in UNIT_NAMES:
        if input_name(fmt) not in UNIT_INPUTS[name]:
            continue
        for output in ("fp32", "fp16"):
            try:
                params = unit(name, output=output, input=input_name(fmt)).params
            except ValueError:
                continue  # no fp16 output for this unit and format
            out.append((name if output == "fp32" else f"{name}/fp16", params))
    return tuple(out)


def families(input="fp16") -> tuple[Family, ...]:
    """The families the space of operand format ``input`` holds: every family for fp16, else
    those of the named units that multiply the format (``models.UNIT_INPUTS``)."""
    fmt = input_format(input)
    if fmt == InputFormat.FP16:
        return tuple(AXES)
    present = {Family(p.family) for _, p in _named_units(fmt)}
    return tuple(f for f in AXES if f in present)


@functools.cache
def _format_axes(family: Family, fmt: InputFormat) -> Mapping[str, tuple]:
    if fmt == InputFormat.FP16:
        return AXES[family]
    out = {name: tuple(values) for name, values in AXES[family].items()}
    for _, params in _named_units(fmt):
        if params.family != family:
            continue
        p = canonical(params)
        for name in UnitParams._fields:
            if name in ("family", "input_format") or name in _TIED.get(family, ()):
                continue
            value = getattr(p, name)
            value = value if isinstance(value, bool) else int(value)
            if name in out:
                out[name] += (value,) if value not in out[name] else ()
            elif value != getattr(_DEFAULTS, name):
                out[name] = (getattr(_DEFAULTS, name), value)  # a field the fp16 space holds at its default
        if "fraction_bits" in out and p.fraction_bits not in AXES[family]["fraction_bits"]:
            # the space around a named F outside the fp16 axis (fp8's 13): one bit either side
            out["fraction_bits"] += tuple(
                f for f in (p.fraction_bits - 1, p.fraction_bits + 1) if f not in out["fraction_bits"]
            )
    if "fraction_bits" in out:
        out["fraction_bits"] = tuple(sorted(out["fraction_bits"]))
    if "output_format" in out and not any(p.output_format == Format.FP16 for _, p in _named_units(fmt)):
        out["output_format"] = (Format.FP32,)  # no instruction accumulates this format in fp16
    return MappingProxyType(out)


def axes(family, input="fp16") -> Mapping[str, tuple]:
    """The axes of ``family`` in the space of operand format ``input`` (module docstring): the
    fp16 axes (:data:`AXES`), widened by the values of the named units that multiply the format
    and fraction bits one either side of a named value outside the fp16 axis. ValueError for a
    family the format's space does not hold (:func:`families`)."""
    fmt = input_format(input)
    family = Family(family)
    if family not in families(fmt):
        raise ValueError(
            f"family: {family.name} has no named unit multiplying {input_name(fmt)}; the {input_name(fmt)} "
            f"space holds {', '.join(f.name for f in families(fmt))}"
        )
    return _format_axes(family, fmt)


class Point(NamedTuple):
    """One point of the space: a unit and the k order of its instruction.

    ``unit``: the canonical parameter record; ``k_tile``: 0 for ascending k, else the width T
    of the k tiles inside which the unit's groups are strided (:func:`k_permutation`)."""

    unit: UnitParams
    k_tile: int = 0


def _name(enum_type, value) -> str:
    return enum_type(value).name


def _accepted(values) -> str:
    return ", ".join(str(int(v)) if not isinstance(v, bool) else str(v) for v in values)


def check_unit(params: UnitParams) -> UnitParams:
    """``params`` as the space writes it (:func:`canonical`), or ValueError naming the first field
    outside the space and the values it accepts (for that family).

    A field the family does not read must hold its ``UnitParams`` default; zero exponents and
    the pairwise flushes of :data:`EQUIVALENCES` are accepted in any member of their class."""
    if not isinstance(params, UnitParams):
        raise TypeError(f"params: expected emu.UnitParams, got {type(params).__name__}")
    try:
        family = Family(params.family)
    except ValueError:
        raise ValueError(
            f"family: {params.family!r} is not one of {', '.join(f'{f.value} ({f.name})' for f in Family)}"
        ) from None
    try:
        fmt = InputFormat(params.input_format)
    except ValueError:
        raise ValueError(
            f"input_format: {params.input_format!r} is not one of "
            f"{', '.join(f'{int(f)} ({input_name(f)})' for f in InputFormat)}"
        ) from None
    canon = canonical(params)
    family_axes = axes(family, fmt)
    for field_name in UnitParams._fields:
        if field_name in ("family", "input_format") or field_name in _TIED.get(family, ()):
            continue
        value = getattr(canon, field_name)
        if field_name in family_axes:
            allowed = family_axes[field_name]
            if value not in allowed:
                where = f"the {family.name} space" + ("" if fmt == InputFormat.FP16 else f" of {input_name(fmt)}")
                raise ValueError(f"{field_name}: {value!r} is outside {where}; accepted values: {_accepted(allowed)}")
        elif value != getattr(_DEFAULTS, field_name):
            raise ValueError(
                f"{field_name}: the {family.name} family does not read it; it must be the "
                f"default {getattr(_DEFAULTS, field_name)!r}, got {value!r}"
            )
    try:
        unit_params(canon)
    except ValueError as err:  # a combination the kernels do not model (exact fused bf16 groups > 2)
        raise ValueError(str(err).removeprefix("unit.")) from None
    if family == Family.FP64 and canon.round_each_group and canon.group_size == 1:
        raise ValueError(
            "group_size: an fp64 unit rounding after every product (group_size 1) is the FMA "
            "unit (EQUIVALENCES); accepted values with round_each_group: 2, 4, 8, 16"
        )
    if family == Family.TRUNCATED_FUSED:
        fp16 = canon.output_format == Format.FP16
        if fp16 and canon.output_rounding != Rounding.RNE:
            raise ValueError(
                f"output_rounding: an fp16-output truncated unit rounds RNE (the kernel's only fp16 "
                f"rounding); accepted values: {int(Rounding.RNE)}, got {canon.output_rounding!r}"
            )
        if fp16 and canon.output_fraction_bits != _DEFAULTS.output_fraction_bits:
            raise ValueError(
                f"output_fraction_bits: an fp16-output truncated unit rounds to fp16 (the field is not "
                f"read); accepted values: {_DEFAULTS.output_fraction_bits}, got {canon.output_fraction_bits!r}"
            )
        allowed_zero = _fp32_zero_exponents(fmt)
        if not fp16 and canon.zero_exponent not in allowed_zero:
            bound = zero_exponent_bound(Format.FP32, fmt)
            raise ValueError(
                "zero_exponent: an fp32-output truncated unit in the space has zero_exponent "
                + (
                    f"≤ {bound} (one class)"
                    if allowed_zero == (min(_FP32_ZERO_REP, bound),)
                    else f"in {_accepted(allowed_zero)} ({input_name(fmt)} operands)"
                )
                + f"; got {params.zero_exponent!r}"
            )
    return canon


def _fp32_zero_exponents(fmt: InputFormat) -> tuple[int, ...]:
    """The zero exponents an fp32-output truncated unit of the ``fmt`` space takes: the class
    representative when every named unit's value lies in the class, else the named values."""
    bound = zero_exponent_bound(Format.FP32, fmt)
    rep = min(_FP32_ZERO_REP, bound)
    named = sorted(
        {
            canonical(p).zero_exponent
            for _, p in _named_units(fmt)
            if p.family == Family.TRUNCATED_FUSED and p.output_format == Format.FP32
        }
    )
    return tuple(named) if named and any(z > bound for z in named) else (rep,)


def canonical(params: UnitParams) -> UnitParams:
    """The representative of ``params``' equivalence class (:data:`EQUIVALENCES`); other fields
    are returned unchanged (no validation: see :func:`check_unit`)."""
    family = params.family
    changes: dict = {}
    wide = params.input_format in WIDE_INPUTS
    if family == Family.TRUNCATED_FUSED:
        bound = zero_exponent_bound(params.output_format, params.input_format)
        if params.output_format == Format.FP16:
            if params.zero_exponent <= bound:
                changes["zero_exponent"] = min(_FP16_ZERO_REP, bound)
            changes["output_fraction_bits"] = _DEFAULTS.output_fraction_bits  # fp16 rounding reads no fp32 cut
        elif params.zero_exponent <= bound:
            changes["zero_exponent"] = min(_FP32_ZERO_REP, bound)
    elif family == Family.PAIRWISE:
        changes["flush_products"] = bool(params.flush_output)
        changes["flush_partials"] = bool(params.flush_output)
    elif family == Family.FP64 and not params.round_each_group:
        changes["group_size"] = 1
    if family in (Family.FUSED_EXACT, Family.PAIRWISE, Family.FMA) and params.flush_c and not wide:
        changes["flush_output"] = True
        if family == Family.PAIRWISE:
            changes["flush_products"] = changes["flush_partials"] = True
    canon = params._replace(**changes) if changes else params
    # booleans as bool, enums as int (UnitParams holds plain values)
    return canon._replace(
        **{
            f: bool(getattr(canon, f))
            for f in ("flush_inputs", "flush_c", "flush_products", "flush_partials", "flush_output", "round_each_group")
        }
    )


def contains(params: UnitParams) -> bool:
    """True when ``params`` is a member of the unit space (some class of it)."""
    try:
        check_unit(params)
    except ValueError:
        return False
    return True


def unit_points(output_format: int | None = None, k: int | None = None, input="fp16") -> tuple[UnitParams, ...]:
    """Every canonical unit of the space, in a fixed order.

    ``output_format``: ``emu.Format.FP32`` or ``FP16`` keeps that output only (None: both);
    ``k``: keeps the units whose group size divides ``k`` (a data set of K-product rows, each
    one instruction, cannot show a group larger than K); ``input``: the operand format (fp16,
    bf16, tf32, e4m3, e5m2, e4m3fnuz, e5m2fnuz: the families and axes of :func:`axes`)."""
    if output_format is not None and output_format not in (Format.FP32, Format.FP16):
        raise ValueError(
            f"output_format: {output_format!r} is not one of {int(Format.FP32)} (FP32), {int(Format.FP16)} (FP16)"
        )
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"k: must be a positive integer, got {k!r}")
    fmt = input_format(input)
    return _unit_points(None if output_format is None else int(output_format), k, fmt)


@functools.cache
def _unit_points(output_format: int | None, k: int | None, fmt: InputFormat) -> tuple[UnitParams, ...]:
    out = []
    for family in families(fmt):
        family_axes = axes(family, fmt)
        names = list(family_axes)
        for values in itertools.product(*(family_axes[n] for n in names)):
            params = _DEFAULTS._replace(
                family=int(family),
                input_format=int(fmt),
                **{n: (v if isinstance(v, bool) else int(v)) for n, v in zip(names, values)},
            )
            params = canonical(params)
            try:
                if check_unit(params) != params:
                    continue
            except ValueError:
                continue  # an invalid combination (fp16 output with RZ rounding, ...)
            if output_format is not None and params.output_format != output_format:
                continue
            if k is not None and k % params.group_size:
                continue
            if k is not None and params.family == Family.FP64 and params.round_each_group and params.group_size == k:
                continue  # one group of K: rounded once, the round_once point
            out.append(params)
    return tuple(dict.fromkeys(out))  # the fp64 group-size class collapses to one point


def k_tiles(params: UnitParams, k: int) -> tuple[int, ...]:
    """The k orders the space admits for ``params`` on K = ``k``: 0 (ascending) and every strided
    tile T = 2L, 4L (L the group size) with T ≤ k and k a multiple of T, for units of more than
    one group; FMA and fp64 units (one product at a time) take ascending k only."""
    L = params.group_size
    if params.family in (Family.FMA, Family.FP64) or L >= k:
        return (0,)
    return (0,) + tuple(T for T in (2 * L, 4 * L) if T <= k and k % T == 0)


def points(output_format: int | None = None, k: int = 16, input="fp16") -> tuple[Point, ...]:
    """Every point (unit × k order) of the space of operand format ``input`` for rows of ``k``
    products (:func:`unit_points`, :func:`k_tiles`)."""
    return tuple(Point(u, t) for u in unit_points(output_format, k, input) for t in k_tiles(u, k))


def k_permutation(point: Point, k: int):
    """The k indices in the order the point's unit consumes them (None for ascending)."""
    if point.k_tile == 0:
        return None
    L = point.unit.group_size
    if point.k_tile % L or k % point.k_tile:
        raise ValueError(f"k_tile: {point.k_tile} must be a multiple of the group size {L} and divide k = {k}")
    return strided_k_order(k, point.k_tile, L)


_SHORT = {
    Family.FUSED_EXACT: "fused_exact",
    Family.PAIRWISE: "pairwise",
    Family.TRUNCATED_FUSED: "truncated",
    Family.TWO_STAGE: "two_stage",
    Family.FMA: "fma",
    Family.FP64: "fp64",
}


def as_dict(point: Point | UnitParams) -> dict:
    """The fields the point's family reads (enum values by name) and its k order, JSON-ready."""
    if isinstance(point, UnitParams):
        point = Point(point)
    p = point.unit
    family = Family(p.family)
    fmt = InputFormat(p.input_format)
    doc = {"family": family.name}
    if fmt != InputFormat.FP16:
        doc["input"] = input_name(fmt)
    for field_name in axes(family, fmt):
        value = getattr(p, field_name)
        if field_name.endswith("rounding"):
            value = _name(Rounding, value)
        elif field_name == "output_format":
            value = _name(Format, value)
        elif isinstance(value, bool):
            value = bool(value)
        else:
            value = int(value)
        doc[field_name] = value
    if family == Family.TRUNCATED_FUSED and "output_format" not in doc:
        doc["output_format"] = _name(Format, p.output_format)
    doc["k_order"] = "ascending" if point.k_tile == 0 else f"strided tile {point.k_tile}"
    return doc


def describe(point: Point | UnitParams) -> str:
    """A one-line label, e.g. ``truncated L=8 F=24 align=RZ out=RZ zero≤-126 fp32 k=ascending``."""
    if isinstance(point, UnitParams):
        point = Point(point)
    p = point.unit
    family = Family(p.family)
    fmt = InputFormat(p.input_format)
    parts = [_SHORT[family], f"L={p.group_size}"]
    if family in (Family.TRUNCATED_FUSED, Family.TWO_STAGE):
        parts.append(f"F={p.fraction_bits}")
    if family == Family.TWO_STAGE:
        parts.append(f"F2={p.sum_fraction_bits}")
        parts.append(f"align={_name(Rounding, p.alignment_rounding)}")
        parts.append(f"c_align={_name(Rounding, p.c_alignment_rounding)}")
    elif family == Family.TRUNCATED_FUSED:
        parts.append(f"align={_name(Rounding, p.alignment_rounding)}")
    if family == Family.TWO_STAGE and p.interleaved_sums == 2:
        parts.append("sums=even+odd")
    if family not in (Family.PAIRWISE, Family.FMA):
        parts.append(f"out={_name(Rounding, p.output_rounding)}")
    if family == Family.TRUNCATED_FUSED and p.output_fraction_bits != _DEFAULTS.output_fraction_bits:
        parts.append(f"acc=E8M{p.output_fraction_bits}")
    if family == Family.TRUNCATED_FUSED:
        fp16 = p.output_format == Format.FP16
        bound = zero_exponent_bound(p.output_format, fmt)
        parts.append(f"zero≤{bound}" if p.zero_exponent <= bound else f"zero={p.zero_exponent}")
        parts.append("fp16" if fp16 else "fp32")
    if family == Family.FP64:
        parts.append("round_each_group" if p.round_each_group else "round_once")
    flushes = [n for n, on in (("in", p.flush_inputs), ("c", p.flush_c), ("out", p.flush_output)) if on]
    if family in AXES and any(f in AXES[family] for f in ("flush_inputs", "flush_c", "flush_output")):
        parts.append("ftz=" + ("+".join(flushes) if flushes else "none"))
    parts.append("k=ascending" if point.k_tile == 0 else f"k=strided{point.k_tile}")
    if fmt != InputFormat.FP16:
        parts.append(f"in={input_name(fmt)}")
    return " ".join(parts)


def named_points(input="fp16") -> Mapping[str, Point]:
    """Every named unit multiplying operand format ``input`` (``models.unit``; ``"<name>/fp16"``
    for an fp16-output variant) as a point of that format's space with ascending k."""
    return _named_points(input_format(input))


@functools.cache
def _named_points(fmt: InputFormat) -> Mapping[str, Point]:
    return MappingProxyType({name: Point(check_unit(params)) for name, params in _named_units(fmt)})


def names_of(point: Point) -> tuple[str, ...]:
    """The named units that are ``point`` (empty if none), in its operand format."""
    target = Point(canonical(point.unit), point.k_tile)
    return tuple(name for name, p in named_points(point.unit.input_format).items() if p == target)


# --- kernel accumulation -------------------------------------------------------------------------

#: KPack values of the 2022 rocMLIR xdlops tunings (models.tuning) and split-K counts explored.
KPACKS = (1, 4, 8)
SPLIT_KS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class KernelAccumulation:
    """How a kernel feeds gemmK to its unit, above one instruction.

    ``k_tile``: 0 (consecutive groups in ascending gemmK) or the tile width inside which a
    k-reduction instruction strides its groups (``models.tuning.mfma_k_order``); ``kpack``: the
    gemmK values one LDS vector holds (moves the strided groups when ≥ the group size);
    ``split_k``: the number of contiguous gemmK chunks whose partial sums are added afterwards
    (the backward-weight KBlocks)."""

    group_size: int
    k_tile: int = 0
    kpack: int = 1
    split_k: int = 1

    def __post_init__(self):
        if self.group_size not in (1, 2, 4, 8, 16):
            raise ValueError(f"group_size: {self.group_size!r} is not one of 1, 2, 4, 8, 16")
        if self.kpack not in KPACKS:
            raise ValueError(f"kpack: {self.kpack!r} is not one of {', '.join(map(str, KPACKS))}")
        if self.split_k not in SPLIT_KS:
            raise ValueError(f"split_k: {self.split_k!r} is not one of {', '.join(map(str, SPLIT_KS))}")
        if self.k_tile and (self.k_tile % self.group_size or self.k_tile <= self.group_size):
            raise ValueError(
                f"k_tile: {self.k_tile!r} must be 0 or a multiple of group_size {self.group_size} larger than it"
            )
        if self.kpack > 1 and self.kpack % self.group_size:
            raise ValueError(
                f"kpack: {self.kpack} is not a multiple of group_size {self.group_size} "
                "(rocMLIR's lowering never pairs them so)"
            )


def kernel_space(group_size: int, k_tiles: tuple[int, ...] = (0, 8, 16)) -> Iterator[KernelAccumulation]:
    """Every valid :class:`KernelAccumulation` for a unit of ``group_size`` (invalid combinations
    skipped), k tiles from ``k_tiles``."""
    for tile, kpack, split in itertools.product(k_tiles, KPACKS, SPLIT_KS):
        try:
            yield KernelAccumulation(group_size, tile, kpack, split)
        except ValueError:
            continue
