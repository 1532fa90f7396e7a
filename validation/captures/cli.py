"""``fp16emu identify CAPTURE.npz``: parse, search, print (the library-capture branch of identify).

Exit codes: 0 when a schedule reproduces every output bit (or every output is some atomic add
order's outcome), 1 when none does, 2 for a capture that cannot be used (one line naming the
field)."""

from __future__ import annotations

import json
import sys

from .capture import CaptureError, load_capture
from .report import to_json, to_text
from .search import search

__all__ = ["identify_capture"]


def _progress_printer(stream):
    """A one-line progress display on a terminal; silent otherwise (the report says the time)."""
    if not getattr(stream, "isatty", lambda: False)():
        return None
    last = {"stage": None}

    def show(stage, done, total):
        end = "\n" if done == total else ""
        stream.write(f"\r  {stage}: {done}/{total} candidates" + end)
        stream.flush()
        last["stage"] = stage

    return show


def identify_capture(
    path, hw: str | None = None, fmt: str = "text", plot: str | None = None, out=None, err=None
) -> int:
    """Search the schedule space for the capture at ``path`` and print the report on ``out``
    (text or JSON); returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    if fmt not in ("text", "json"):
        print(f"fp16emu identify: --format: {fmt!r} is not one of text, json", file=err)
        return 2
    try:
        cap = load_capture(path)
        result = search(cap, hw=hw, progress=_progress_printer(err))
    except CaptureError as exc:
        print(f"fp16emu identify: {exc}", file=err)
        return 2
    if fmt == "json":
        print(json.dumps(to_json(cap, result), indent=1), file=out)
    else:
        print(to_text(cap, result), file=out)
    if plot:
        from .plots import plot_capture

        plot_capture(cap, result, plot)
        if fmt == "text":
            print(f"plot: {plot}", file=out)
    return 1 if result.answer == "differs" else 0
