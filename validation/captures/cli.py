"""``fp16emu identify CAPTURE.npz``: print what :func:`validation.captures.report.read_capture`
decides (the library-capture branch of identify).

Exit codes: 0 for the reading ``rounding`` (a schedule reproduces every output bit, or every output
is some atomic add order's outcome), 1 for every other reading (``mix-up``, ``not-modelled``,
``bug-suspect``), 2 for a capture that cannot be used (one line naming the field)."""

from __future__ import annotations

import json
import re
import sys

from .. import warm
from .capture import CaptureError
from .gemms import resolve_unit
from .report import read_capture

__all__ = ["identify_capture"]


def _progress_printer(stream):
    """A one-line progress display on a terminal; silent otherwise (the report says the time)."""
    if not getattr(stream, "isatty", lambda: False)():
        return None

    def show(stage, done, total):
        end = "\n" if done == total else ""
        stream.write(f"\r  {stage}: {done}/{total} candidates" + end)
        stream.flush()

    return show


def _transposed_hint(message: str) -> str:
    """A hint when the output's shape is the expected one reversed (the output saved transposed)."""
    m = re.match(r"out: expected shape \((\d+), (\d+)\) .*got \((\d+), (\d+)\)", message)
    if m and m.group(1, 2) == m.group(4, 3) and m.group(1) != m.group(2):
        return " (the expected shape reversed: the output saved transposed? save out, not out.T)"
    return ""


def _compile_first(cap, hw, err) -> None:
    """On a machine that has not compiled the search's kernels for this capture's unit: compile
    them first in parallel processes (:func:`validation.warm.prepare`), about half the wall time
    of compiling them as the search goes on 2 cores. A unit that cannot be resolved is left to the
    search, which says why."""
    try:
        unit = resolve_unit(cap, hw)
    except CaptureError:
        return
    warm.prepare(warm.jobs_for_units([unit], gemm=True), out=err)


def identify_capture(
    path, hw: str | None = None, fmt: str = "text", plot: str | None = None, out=None, err=None
) -> int:
    """Search the schedule space for the capture at ``path`` and print the report on ``out``
    (text or JSON); returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    if fmt not in ("text", "json"):
        print(f"fp16emu identify: error: --format: {fmt!r} is not one of text, json", file=err)
        return 2
    try:
        reading = read_capture(
            path, hw=hw, progress=_progress_printer(err), before_search=lambda cap: _compile_first(cap, hw, err)
        )
    except CaptureError as exc:
        print(f"fp16emu identify: error: {exc}{_transposed_hint(str(exc))}", file=err)
        return 2
    print(json.dumps(reading.json(), indent=1) if fmt == "json" else reading.text(), file=out)
    if plot:
        from .plots import plot_capture

        plot_capture(reading.capture, reading.result, plot, reading=reading)
        if fmt == "text":
            print(f"plot: {plot}", file=out)
    return reading.exit_code
