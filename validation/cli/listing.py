"""``fp16emu list [PATTERN]``: the suite's tests, one line each, to pick a CONFIG for ``run``."""

from __future__ import annotations

import fnmatch
import json

from ..configs.suites import SUITES, suite_entries
from .common import add_format_option

__all__ = ["register_cli"]


def register_cli(subparsers):
    p = subparsers.add_parser(
        "list",
        help="list the suite's tests (name, direction, shapes, gemm sizes) to run by name",
        description="PATTERN: a substring or a shell pattern (fnmatch, case-insensitive) of the test names.",
    )
    p.add_argument("pattern", nargs="?", default=None)
    p.add_argument("--suite", default=SUITES[0], help=f"one of {', '.join(SUITES)} (default {SUITES[0]})")
    p.add_argument("--fixme", action="store_true", help="also the FIXME tests the 2022 study did not run")
    add_format_option(p)
    p.set_defaults(func=_cmd_list)
    return p


def _matches(name: str, pattern: str | None) -> bool:
    if not pattern:
        return True
    low, pat = name.lower(), pattern.lower()
    return fnmatch.fnmatch(low, pat) if any(ch in pat for ch in "*?[") else pat in low


def _cmd_list(args) -> int:
    if args.suite not in SUITES:
        raise ValueError(f"--suite: {args.suite!r} is not one of {', '.join(SUITES)}")
    entries = [
        e for e in suite_entries(args.suite, fixme=None if args.fixme else False) if _matches(e.name, args.pattern)
    ]
    rows = [
        {
            "name": e.name,
            "direction": e.direction,
            "input": [e.n, e.c, e.h, e.w],
            "filter": [e.k, e.c // e.groups, e.y, e.x],
            "groups": e.groups,
            "stride": [e.stride_h, e.stride_w],
            "output_hw": [e.out_h, e.out_w],
            "gemm": {"g": e.gemm_g, "m": e.gemm_m, "n": e.gemm_n, "k": e.gemm_k},
            "outputs": e.n_out_elements,
            "fixme": e.fixme,
        }
        for e in entries
    ]
    if args.format == "json":
        print(json.dumps(rows, indent=1))
    else:
        print(
            f"{len(rows)} tests of suite {args.suite}" + (f" matching {args.pattern!r}" if args.pattern else "") + ":"
        )
        for r in rows:
            g = r["gemm"]
            print(
                f"  {r['name']}  {r['direction']}  N×C×H×W {'×'.join(map(str, r['input']))}  "
                f"K×C×Y×X {'×'.join(map(str, r['filter']))}  stride {r['stride'][0]}×{r['stride'][1]}  "
                f"gemm g{g['g']} m{g['m']} n{g['n']} k{g['k']}{'  FIXME' if r['fixme'] else ''}"
            )
        if rows:
            print("Run one with: fp16emu run NAME --hw mi200")
    return 0 if rows else 1
