"""``fp16emu units``: the probe-vector table of every matrix unit; with ``--input FORMAT``, the
units that multiply that operand format and their parameters for it."""

from __future__ import annotations

import models
from emu.operands import INPUT_NAMES, input_name

from ..identify.unit_table import UNITS, print_table

__all__ = ["register_cli", "input_table", "INPUT_FIELDS"]

#: the unit fields ``--input`` prints (``models.Unit``), in this order
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


def register_cli(subparsers):
    """Add ``fp16emu units`` (the probe-vector table) to an argparse ``subparsers``."""
    p = subparsers.add_parser("units", help="every matrix unit on probe vectors that tell them apart")
    p.add_argument(
        "--units",
        default=None,
        help=f"comma-separated unit names (default {','.join(UNITS)}; with --input, every unit that has it)",
    )
    p.add_argument(
        "--input",
        default=None,
        metavar="FORMAT",
        help="list the units that multiply this operand format (fp16, bf16, tf32, e4m3, e5m2, e4m3fnuz, "
        "e5m2fnuz) with their parameters for it",
    )
    p.set_defaults(func=_cmd_units)
    return p


def _check_names(names: list[str]) -> None:
    known = set(models.UNIT_NAMES) | set(models.ALIASES)
    for u in names:
        if u not in known:
            raise ValueError(f"--units: {u!r} is not one of {', '.join(models.UNIT_NAMES)}")


def input_table(fmt: str, names: list[str] | None = None) -> list[dict]:
    """One row per unit that multiplies operands of ``fmt``: its name, description and the
    :data:`INPUT_FIELDS` of ``models.unit(name, input=fmt)``. ``names`` (given units) must all
    have the format; None: every unit of :data:`models.UNIT_INPUTS` that has it. ValueError for
    an unknown format (naming the accepted ones) or a given unit without it."""
    key = str(fmt).strip().lower()
    if key not in INPUT_NAMES:
        raise ValueError(
            f"--input: {fmt!r} is not one of {', '.join(dict.fromkeys(map(input_name, INPUT_NAMES.values())))}"
        )
    name = input_name(key)
    if names is None:
        names = [u for u in models.UNIT_NAMES if name in models.UNIT_INPUTS[u]]
    rows = []
    for u in names:
        try:
            unit = models.unit(u, input=name)
        except ValueError as exc:
            raise ValueError(f"--units: {exc}") from None
        row = {"unit": unit.name, "description": unit.description}
        for f in INPUT_FIELDS:
            v = getattr(unit, f)
            row[f] = v.name.lower() if f == "family" else int(v)
        rows.append(row)
    return rows


def _print_input_table(fmt: str, names: list[str] | None) -> None:
    rows = input_table(fmt, names)
    name = input_name(fmt.strip().lower())
    print(f"units with {name} operands (models.unit(NAME, input={name!r}); fp32 accumulator)\n")
    heads = ["unit"] + [f for f in INPUT_FIELDS]
    short = {
        "group_size": "group",
        "fraction_bits": "F",
        "sum_fraction_bits": "F2",
        "output_fraction_bits": "out_F",
        "zero_exponent": "e_zero",
        "interleaved_sums": "sums",
        "flush_inputs": "flush_in",
    }
    widths = [max(len(short.get(h, h)), *(len(str(r[h])) for r in rows)) for h in heads]
    print("  ".join(short.get(h, h).ljust(w) for h, w in zip(heads, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(r[h]).ljust(w) for h, w in zip(heads, widths)).rstrip())
    print(
        "\nF: fraction bits kept in alignment; F2: of the second stage; out_F: of the accumulator; e_zero: "
        "the exponent an all-zero group aligns to; sums: interleaved partial sums (fields a family does "
        "not read are shown as stored)"
    )
    print("\n" + "\n".join(f"{r['unit']}: {r['description']}" for r in rows))


def _cmd_units(args) -> int:
    names = None if args.units is None else [u.strip() for u in args.units.split(",") if u.strip()]
    if names is not None:
        _check_names(names)
    if args.input is not None:
        _print_input_table(args.input, names)
        return 0
    print_table(names if names is not None else UNITS)
    return 0
