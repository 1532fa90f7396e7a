"""The capture search's answer on every convolution capture at hand (issue 37).

One line per capture: the main kernel's family (``models.libraries.kernel_family``), the pass,
the format, and the answer (``identical``, ``inside-ensemble``, ``differs`` with the differing
outputs, ``not-modelled``). Rerun before and after a change to the search:

    nice python -m benchmarks.conv_status [--out FILE] [--max-outputs N] PATH ...

PATH may be a file or a folder (its ``*conv*.npz`` and ``c[0-9]*.npz``). Mix-ups are not
searched (``mixups=False``): the answer is the schedule search's alone.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import time

import numpy as np

from models.libraries import compute_kernels
from validation.captures import load_capture
from validation.captures.report import CaptureReading
from validation.captures.search import search


def files(paths) -> list[pathlib.Path]:
    out = []
    for p in map(pathlib.Path, paths):
        if p.is_dir():
            out += sorted(f for f in p.glob("*.npz") if "conv" in f.name or f.name[:2] in ("c1", "c3", "c5", "c7"))
        else:
            out.append(p)
    return out


def short_name(kernel: str) -> str:
    """The kernel's name without its namespace, template arguments and parameters."""
    named = re.search(r"(cutlass_\w+|sm\d+_xmma_\w+|xmma_\w+)", kernel)
    if named:
        return named.group(1)[:90]
    name = kernel.split("(")[0]
    depth, out = 0, ""
    for ch in name:
        depth += ch == "<"
        if depth == 0:
            out += ch
        depth -= ch == ">"
    return out.replace("void ", "").split("::")[-1].strip()[:90]


def status(path: pathlib.Path, max_outputs: int) -> dict:
    cap = load_capture(path)
    main = compute_kernels(cap.kernels)
    row = {
        "file": path.name,
        "kernel": short_name(next((k for k in main if "workspace" not in k), main[0])) if main else "-",
        "pass": cap.op,
        "format": cap.input,
        "outputs": int(np.asarray(cap.out).size),
    }
    if row["outputs"] > max_outputs:
        return row | {"answer": "skipped", "seconds": 0.0, "best": "-"}
    t = time.perf_counter()
    r = search(cap)
    rd = CaptureReading(cap, r)
    answer = r.answer
    if answer == "differs" and rd.named_not_modelled:
        answer = "not-modelled"
    if answer in ("differs", "not-modelled") and r.nearest_distance:
        answer += f" ({r.nearest_distance.get('n_differ')} of {r.n})"
    best = r.best.describe() if r.best is not None else "-"
    row["best"] = best
    return row | {"answer": answer, "seconds": round(time.perf_counter() - t, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--out", help="append the table's rows here as they come")
    ap.add_argument("--max-outputs", type=int, default=200_000)
    a = ap.parse_args(argv)
    sink = open(a.out, "a") if a.out else None
    for f in files(a.paths):
        try:
            row = status(f, a.max_outputs)
        except Exception as e:  # a capture the loader refuses is a row too
            row = {
                "file": f.name,
                "kernel": "-",
                "pass": "-",
                "format": "-",
                "outputs": 0,
                "answer": f"error: {type(e).__name__}: {str(e)[:80]}",
                "seconds": 0.0,
                "best": "-",
            }
        line = (
            "| "
            + " | ".join(
                str(row[k]) for k in ("file", "kernel", "pass", "format", "outputs", "answer", "seconds", "best")
            )
            + " |"
        )
        print(line, flush=True)
        if sink:
            sink.write(line + "\n")
            sink.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
