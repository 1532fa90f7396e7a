"""``fp16emu diff A.npz B.npz``: argument handling and printing only (:mod:`validation.diff`)."""

from __future__ import annotations

import json
import sys

from ..captures import is_capture
from .common import add_format_option

__all__ = ["register_cli"]


def register_cli(subparsers):
    """Add ``diff`` to an argparse ``subparsers``; its handler returns the exit code."""
    p = subparsers.add_parser(
        "diff",
        help="why two captures of one op differ: same bits, rounding (two schedules), mix-up or a bug suspect",
        description="A, B: two library captures of one op, on the same operands or with B's operands holding A's "
        "as a block of rows (batch 1 inside batch 64: give the smaller first). Each is identified as "
        "`fp16emu identify` does; the shared outputs are compared. Exit 0: same-bits or rounding; 1: mix-up or "
        "bug-suspect; 2: a file that cannot be used.",
    )
    p.add_argument("a", metavar="A.npz")
    p.add_argument("b", metavar="B.npz")
    p.add_argument("--hw", default=None, help="the unit to search both with (default: from each capture's gpu)")
    add_format_option(p)
    p.set_defaults(func=_cmd_diff)
    return p


def _cmd_diff(args) -> int:
    from ..diff import diff_captures

    for name, path in (("A", args.a), ("B", args.b)):
        if not is_capture(path):
            raise ValueError(f"{name}: {path!r} is not a library capture (an .npz with an 'op' member)")
    d = diff_captures(args.a, args.b, hw=args.hw)
    print(json.dumps(d.json(), indent=1) if args.format == "json" else d.text(), file=sys.stdout)
    return d.exit_code
