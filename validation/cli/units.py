"""``fp16emu units``: the probe-vector table of every matrix unit."""

from __future__ import annotations

import models

from ..identify.unit_table import UNITS, print_table


def register_cli(subparsers):
    """Add ``fp16emu units`` (the probe-vector table) to an argparse ``subparsers``."""
    p = subparsers.add_parser("units", help="every matrix unit on probe vectors that tell them apart")
    p.add_argument("--units", default=",".join(UNITS), help=f"comma-separated unit names (default {','.join(UNITS)})")
    p.set_defaults(func=_cmd_units)
    return p


def _cmd_units(args) -> int:
    names = [u.strip() for u in args.units.split(",") if u.strip()]
    known = set(models.UNIT_NAMES) | set(models.ALIASES)
    for u in names:
        if u not in known:
            raise ValueError(f"--units: {u!r} is not one of {', '.join(models.UNIT_NAMES)}")
    print_table(names)
    return 0
