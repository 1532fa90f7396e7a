"""``fp16emu units``: the probe-vector table of every matrix unit; with ``--input FORMAT``, the
units that multiply that operand format and their parameters for it."""

from __future__ import annotations

import models

from .. import warm
from ..identify.unit_table import TITLE, UNITS, fmt_value, input_call, input_table, probe_table, unit_names

__all__ = ["register_cli"]


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
        "e5m2fnuz; block-scaled: mxf4, nvf4, mxf4nvf4, mx<format>[x<format>] for e4m3, e5m2, e3m2, e2m3, "
        "e2m1, e.g. mxe4m3, mxe5m2xe2m1) with their parameters for it",
    )
    p.set_defaults(func=_cmd_units)
    return p


def _print_input_table(fmt: str, names: list[str] | None) -> None:
    rows = input_table(fmt, names)
    print(f"units with {fmt.strip().lower()} operands ({input_call(fmt)}; fp32 accumulator)\n")
    heads = [h for h in rows[0] if h != "description"] if rows else ["unit"]
    short = {
        "group_size": "group",
        "fraction_bits": "F",
        "sum_fraction_bits": "F2",
        "output_fraction_bits": "out_F",
        "zero_exponent": "e_zero",
        "interleaved_sums": "sums",
        "flush_inputs": "flush_in",
        "scale_format": "scale",
        "block_size": "block",
        "subgroup_size": "subgroup",
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
        + (
            "; scale: the block scale format, block: values along K per scale, subgroup: products summed "
            "before scaling (0: each product scaled)"
            if rows and "scale_format" in rows[0]
            else ""
        )
    )
    print("\n" + "\n".join(f"{r['unit']}: {r['description']}" for r in rows))


def _print_table(units) -> None:
    print(TITLE + "\n")
    head = f"{'probe':26s} {'exact':>10s} " + " ".join(f"{u:>10s}" for u in units)
    print(head)
    print("-" * len(head))
    for row in probe_table(units):
        cells = " ".join(f"{fmt_value(row[u]):>10s}" for u in units)
        print(f"{row['probe']:26s} {fmt_value(row['exact']):>10s} {cells}")
        print(f"{'':26s} ({row['why']})")
    print("\nUnits: " + "; ".join(f"{u}: {models.unit(u).description}" for u in units))


def _cmd_units(args) -> int:
    names = unit_names(args.units)
    if args.input is not None:
        _print_input_table(args.input, names)
        return 0
    names = names if names is not None else UNITS
    warm.prepare(warm.jobs_for_units(names))  # a first use: the families' kernels compiled in parallel
    _print_table(names)
    return 0
