"""``fp16emu units``: every matrix unit on a few probe vectors that tell the units apart, and
(:func:`input_table`) the units that multiply one operand format, with their parameters for it.
The tables are computed here; the command only prints them.

The vectors are the discriminating cases of the published models (MMA-Sim, arXiv 2511.10909, and
Khattak & Mikaitis, arXiv 2512.07004; the AMD ones are model predictions, the NVIDIA ones hardware
facts of Fasi et al. 2021), built in code so the table needs nothing outside the package.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

import emu
import models
from emu.operands import INPUT_NAMES, input_name

__all__ = [
    "PROBES",
    "UNITS",
    "INPUT_FIELDS",
    "SCALED_FIELDS",
    "probe_table",
    "fmt_value",
    "input_call",
    "input_table",
    "unit_names",
    "TITLE",
]

# name, products as (a, b) pairs, c, what it shows
PROBES = [
    ("fp16 subnormal input", [(2.0**-20, 1024.0)], 0.0, "MI200 flushes |x| < 2^-14 to 0"),
    (
        "pairing tie lost",
        [(1.0, 1.0), (2.0**-12, 2.0**-12), (2.0**-12, 2.0**-12), (0.0, 0.0)],
        0.0,
        "MI200 rounds 1 + 2^-24 before adding the second 2^-24",
    ),
    (
        "sticky beyond tie",
        [(1.0, 1.0), (2.0**-12, 2.0**-12), (2.0**-14, 2.0**-14), (0.0, 0.0)],
        0.0,
        "only an exact fused sum keeps the sticky bit",
    ),
    (
        "cancellation 2^24",
        [(4096.0, 4096.0), (1.0, 1.0), (-4096.0, 4096.0), (0.0, 0.0)],
        0.0,
        "exact: 1; a rounding tree loses the 1",
    ),
    ("MI300 c round-down", [(1.0, 1.0)], -(2.0**-30), "MI300 floors c at 24 bits below the larger exponent"),
    (
        "MI300 product truncation",
        [(1.0, 1.0), (-1.5 * 2.0**-13, 2.0**-12)],
        0.0,
        "truncating products at 24 fraction bits",
    ),
    (
        "group boundary k3|k4",
        [
            (1.0, 1.0),
            (0.0, 0.0),
            (0.0, 0.0),
            (2.0**-12, 2.0**-12),
            (2.0**-12, 2.0**-12),
            (0.0, 0.0),
            (0.0, 0.0),
            (0.0, 0.0),
        ],
        0.0,
        "groups of 4 vs one group of 8",
    ),
    ("V100 alignment", [(1.0, 2.0**-24)] * 4, 1.0, "products below the 24-bit window vanish (Fasi et al.)"),
]

UNITS = ["mi100", "mi200", "mi300", "v100", "a100", "h100", "fma32", "fp64"]


def fmt_value(x: float) -> str:
    """``x`` as text, 1 ± 2^-e written so when it is one."""
    x = float(x)
    if x == 0 or not np.isfinite(x):
        return repr(x)
    one = Fraction(x) - 1
    if one != 0 and abs(one) < Fraction(1, 2**10):  # show 1 + small as 1+2^e
        n, d = one.numerator, one.denominator
        if abs(n) == 1 and d & (d - 1) == 0:
            return f"1{'+' if n > 0 else '-'}2^-{d.bit_length() - 1}"
    return f"{x:.9g}"


def probe_table(units=UNITS) -> list[dict]:
    """One row per probe: its name, why it matters, the exact value and each unit's result."""
    rows = []
    for name, pairs, c, why in PROBES:
        a = np.array([p[0] for p in pairs], np.float16)
        b = np.array([p[1] for p in pairs], np.float16)
        exact = Fraction(c) + sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b))
        results = {u: float(emu.dot_add(a, b, np.float32(c), models.unit(u))) for u in units}
        rows.append({"probe": name, "why": why, "exact": float(exact), **results})
    return rows


#: what :func:`probe_table` computes, as a title
TITLE = "d = c + Σ a_k·b_k through each unit (fp16 inputs, fp32 accumulator)"

#: the unit fields :func:`input_table` gives (``models.Unit``), in this order
INPUT_FIELDS = (
    "family",
    "group_size",
    "fraction_bits",
    "sum_fraction_bits",
    "output_fraction_bits",
    "zero_exponent",
    "interleaved_sums",
    "flush_inputs",
)


def unit_names(text: str | None) -> list[str] | None:
    """The units a comma-separated ``text`` names (None: none given, the table's default);
    ValueError naming ``--units`` and the accepted names for an unknown one."""
    if text is None:
        return None
    names = [u.strip() for u in text.split(",") if u.strip()]
    if not names:
        raise ValueError(f"--units: {text!r} names no unit; give one or more of {', '.join(models.UNIT_NAMES)}")
    known = set(models.UNIT_NAMES) | set(models.ALIASES) | set(models.SCALED_UNIT_NAMES)
    for u in names:
        if u not in known:
            raise ValueError(f"--units: {u!r} is not one of {', '.join(models.UNIT_NAMES)}")
    return names


#: the block-scaling fields the table adds for a block-scaled recipe
SCALED_FIELDS = ("scale_format", "block_size", "subgroup_size")
#: the formats only block-scaled units multiply (fp6, fp4)
_SCALED_ONLY = tuple(n for n in models.SCALED_INPUT_NAMES if not any(n in v for v in models.UNIT_INPUTS.values()))


def input_call(fmt: str) -> str:
    """The ``models.unit`` call the table of ``fmt`` shows (NAME for the unit)."""
    spec = models.scaled_input(fmt)
    if spec is None:
        return f"models.unit(NAME, input={input_name(str(fmt).strip().lower())!r})"
    fa, fb, scale, block, kind = spec
    pair = repr(fa) if fa == fb else repr((fa, fb))
    return f"models.unit(NAME, input={pair}, scale={scale!r}, block={block}, kind={kind!r})"


def _accepted_inputs() -> str:
    names = [n for n in dict.fromkeys(map(input_name, INPUT_NAMES.values())) if n not in _SCALED_ONLY]
    return (
        ", ".join(names)
        + "; block-scaled: "
        + ", ".join(models.SCALED_RECIPES)
        + ", mx<format>[x<format>] (mxe4m3, mxe5m2xe2m1)"
    )


def _has_recipe(name: str, spec) -> bool:
    fa, fb, scale, block, kind = spec
    try:
        models.unit(name, input=(fa, fb), scale=scale, block=block, kind=kind)
    except ValueError:
        return False
    return True


def input_table(fmt: str, names: list[str] | None = None) -> list[dict]:
    """One row per unit that multiplies operands of ``fmt``: its name, description and the
    :data:`INPUT_FIELDS` of ``models.unit(name, input=fmt)``. ``names`` (given units) must all
    have the format; None: every unit of :data:`models.UNIT_INPUTS` that has it. ValueError for
    an unknown format (naming the accepted ones) or a given unit without it.

    A block-scaled recipe (``mxf4``, ``nvf4``, ``mxe4m3``, …: :func:`models.scaled_input`) lists
    the block-scaled units (:data:`models.SCALED_UNIT_NAMES`) with :data:`SCALED_FIELDS` too."""
    key = str(fmt).strip().lower()
    spec = models.scaled_input(key)
    if spec is None and key not in INPUT_NAMES:
        raise ValueError(f"--input: {fmt!r} is not one of {_accepted_inputs()}")
    if spec is None and input_name(key) in _SCALED_ONLY:
        raise ValueError(
            f"--input: {input_name(key)} is multiplied by block-scaled units only: ask for a recipe "
            f"(mx{input_name(key)}{', mxf4, nvf4' if input_name(key) == 'e2m1' else ''})"
        )
    fields = INPUT_FIELDS + (SCALED_FIELDS if spec else ())
    if names is None:
        names = (
            [u for u in models.SCALED_UNIT_NAMES if _has_recipe(u, spec)]  # with its scale and block
            if spec
            else [u for u in models.UNIT_NAMES if input_name(key) in models.UNIT_INPUTS[u]]
        )
    rows = []
    for u in names:
        try:
            if spec:
                fa, fb, scale, block, kind = spec
                unit = models.unit(u, input=(fa, fb), scale=scale, block=block, kind=kind)
            else:
                unit = models.unit(u, input=input_name(key))
        except ValueError as exc:
            raise ValueError(f"--units: {exc}") from None
        row = {"unit": unit.name, "description": unit.description}
        for f in fields:
            v = getattr(unit, f)
            row[f] = v.name.lower() if f in ("family", "scale_format") else int(v)
        rows.append(row)
    return rows
