"""What every subcommand shares: the usage error and the one error line, the parser class, the
``--format`` option, the verdict options, and the printing of a comparison and its verdict (text
or JSON)."""

from __future__ import annotations

import argparse
import json
import math
import sys

from models.hardware import HW_ALIASES, HW_NAMES

__all__ = [
    "HW_HELP",
    "UsageError",
    "Parser",
    "FORMATS",
    "add_format_option",
    "error_line",
    "add_verdict_options",
    "parse_thresholds",
    "verifier_text",
    "emit",
    "warn",
]


#: the help of every ``--hw``: the accepted names of :mod:`models.hardware`
HW_HELP = f"{', '.join(HW_NAMES)}, or an alias ({', '.join(HW_ALIASES)}); default mi200"


class UsageError(Exception):
    """A bad argument or input: printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: one line, exit 2
        raise UsageError(message)


#: what ``--format`` accepts
FORMATS = ("text", "json")


def _format(text: str) -> str:
    key = str(text).strip().lower()
    if key not in FORMATS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(FORMATS)}")
    return key


def add_format_option(p) -> None:
    """The one ``--format`` of every command: text (default) or json, in any case."""
    p.add_argument("--format", type=_format, default="text", help="text (default) or json")


def error_line(command: str | None, message) -> str:
    """The one error line of every command: ``fp16emu COMMAND: error: MESSAGE`` (``fp16emu: error:``
    before a command is known), the message on one line."""
    text = " ".join(str(message).split()) or type(message).__name__
    return f"fp16emu {command}: error: {text}" if command else f"fp16emu: error: {text}"


def add_verdict_options(p, default_text="run: the config's harness verifier; compare: rocmlir"):
    p.add_argument(
        "--verifier",
        default=None,
        help="a verifier preset (rocmlir-2022, rocmlir, study-2022, mlu-ops, torch, miopen); default " + default_text,
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="a limit per metric (repeatable; the names of the check lines and JSON keys, e.g. max_abs_diff, "
        "max_epsilon_diff, rms; the labels absDiff, relDiff, epsilonDiff, RMS are accepted); overrides the preset's",
    )
    p.add_argument("--report", action="store_true", help="histograms and the worst elements")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="save a titled picture (validation.plots)")


def parse_thresholds(items):
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--threshold: expected METRIC=VALUE, got {item!r}")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise UsageError(f"--threshold {name}: {value!r} is not a number") from None
        if not math.isfinite(out[name.strip()]) or out[name.strip()] < 0:
            raise UsageError(f"--threshold {name}: {value!r} is not a finite number ≥ 0")
    return out


def verifier_text(name: str, source: str) -> str:
    extra = ""
    if name == "study-2022":
        extra = ", run set fair_3 (the study's verifier after both fixes; the study's MI200/MI100 fair_3 results)"
    return f"{name}{extra} ({source})"


def emit(comparison, verdict, args, header: dict, extra: dict | None = None, middle: str = "", axes=None) -> int:
    """Print the header, the metrics, ``middle`` (ensemble, GPU answer), then the verdict: its
    checks, the NaN/inf check, the flags and the final PASS/FAIL line."""
    if args.format == "json":
        doc = dict(header)
        doc.update(verdict.to_dict() if verdict is not None else comparison.to_dict())
        doc.update(extra or {})
        if axes is not None:  # each reported element's coordinates by axis name too
            elements = [*doc.get("worst", []), *doc.get("nonfinite_elements", []), *doc.get("at_max", {}).values()]
            for e in elements:
                if e is not None and len(e["coords"]) == len(axes):
                    e["where"] = dict(zip(axes, e["coords"]))
        print(json.dumps(doc, indent=1))
    else:
        for key, value in header.items():
            print(f"{key:>10s}: {value}")
        print(comparison.format_text(report=args.report, axes=axes))
        if middle:
            print(middle)
        if verdict is not None:
            print(verdict.format_text())
    return 0 if verdict is None else verdict.exit_code


def warn(messages) -> None:
    for m in messages:
        print(f"fp16emu: warning: {m}", file=sys.stderr)
