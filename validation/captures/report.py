"""What a capture search says: the answer, the schedule found, and, when the output differs, the
nearest schedule and the suspect elements with named coordinates and clusters.

:func:`read_capture` is ``fp16emu identify CAPTURE.npz`` as a function: it loads and searches a
capture and returns a :class:`CaptureReading` (the answer, the exit code the command gives, the
text and JSON reports), so the Python API says what the command prints."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from .capture import Capture, load_capture
from .gemms import SearchResult
from .search import search

__all__ = ["AXES", "CaptureReading", "read_capture", "suspects", "to_json", "to_text", "ulps_between"]

#: axis names of each op's output, in torch's logical order
AXES = {
    "mm": ("m", "n"),
    "addmm": ("m", "n"),
    "scaled_mm": ("m", "n"),
    "bmm": ("batch", "m", "n"),
    "conv2d": ("n", "k", "p", "q"),
    "conv2d_bwd_data": ("n", "c", "h", "w"),
    "conv2d_bwd_weight": ("k", "c", "r", "s"),
}


def _axes(cap: Capture) -> tuple[str, ...]:
    if cap.op == "linear":
        return tuple(f"d{i}" for i in range(cap.out.ndim - 1)) + ("out_feature",)
    return AXES[cap.op]


def ulps_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place of the output format, by ordered bit patterns."""
    bits = {2: np.int16, 4: np.int32}[a.dtype.itemsize]
    ia = a.view(bits).astype(np.int64)
    ib = b.view(bits).astype(np.int64)
    top = np.int64(1) << (8 * a.dtype.itemsize - 1)
    ia = np.where(ia < 0, -top - ia, ia)
    ib = np.where(ib < 0, -top - ib, ib)
    return np.abs(ia - ib)


def suspects(cap: Capture, emulated: np.ndarray, top: int = 10) -> dict:
    """The elements where the GPU's output differs from ``emulated``: how many, how far in ulps,
    the ``top`` farthest with named coordinates, and connected clusters (face-adjacent elements)
    with their bounding boxes, largest first."""
    got, want = cap.out, emulated.astype(cap.out.dtype)
    differ = got.view(np.dtype(f"u{got.dtype.itemsize}")) != want.view(np.dtype(f"u{got.dtype.itemsize}"))
    axes = _axes(cap)
    n = int(differ.sum())
    out = {"n_differ": n, "axes": list(axes)}
    if not n:
        return out
    ulps = ulps_between(np.ascontiguousarray(got), np.ascontiguousarray(want))
    d = ulps[differ]
    out["ulps"] = {"max": int(d.max()), "median": float(np.median(d)), "n_1ulp": int((d == 1).sum())}
    flat = np.flatnonzero(differ.reshape(-1))
    worst = flat[np.argsort(-ulps.reshape(-1)[flat], kind="stable")[:top]]
    out["elements"] = [
        {
            **{a: int(i) for a, i in zip(axes, np.unravel_index(f, got.shape))},
            "gpu": float(got.reshape(-1)[f]),
            "emulated": float(want.reshape(-1)[f]),
            "ulps": int(ulps.reshape(-1)[f]),
        }
        for f in worst
    ]
    labels, count = ndimage.label(differ)
    sizes = np.bincount(labels.reshape(-1))[1:]
    boxes = ndimage.find_objects(labels)
    clusters = []
    for lab in np.argsort(-sizes, kind="stable")[:top]:
        box = boxes[lab]
        clusters.append({"size": int(sizes[lab]), **{a: [int(s.start), int(s.stop - 1)] for a, s in zip(axes, box)}})
    out["clusters"] = clusters
    out["n_clusters"] = int(count)
    spread = count > max(1, n // 4)
    out["pattern"] = ("scattered" if spread else "clustered") + (", all within 1 ulp" if d.max() <= 1 else "")
    return out


def _candidate(c) -> dict:
    return {"text": c.describe(), **c.fields()}


def to_json(cap: Capture, r: SearchResult) -> dict:
    """The JSON report of ``fp16emu identify CAPTURE --format json``."""
    out = {
        "capture": cap.path,
        "op": cap.op,
        "problem": cap.describe(),
        "gpu": cap.gpu,
        "kernels": list(cap.kernels),
        "unit": r.unit,
        "input": cap.input,
        "answer": r.answer,
        "n": r.n,
        "n_identical": r.n_identical,
        "schedule": _candidate(r.best) if r.best and r.answer != "differs" else None,
        "schedules": [_candidate(c) for c in r.reproducing],
        "searched": r.searched,
        "seconds": round(r.seconds, 3),
        "stages": [{"stage": s, "candidates": a, "kept": b} for s, a, b in r.stages],
        "kernel_families": [h for h in r.hints if " " not in h],
        "notes": [h for h in r.hints if " " in h],
    }
    if r.answer == "differs" and r.best is not None:
        out["nearest"] = {**_candidate(r.best), "n_identical": r.n_identical}
        out["suspects"] = suspects(cap, r.emulated)
    return out


def _operands(cap: Capture) -> str:
    return f" (input={cap.input})" if cap.input != "fp16" else ""


def to_text(cap: Capture, r: SearchResult) -> str:
    """The text report."""
    lines = [f"capture {cap.path}: {cap.describe()}"]
    if cap.gpu or cap.kernels:
        lines.append(
            f"  recorded on {cap.gpu or 'an unnamed GPU'}; kernels: {', '.join(k[:80] for k in cap.kernels) or '-'}"
        )
    families = [h for h in r.hints if " " not in h]
    notes = [h for h in r.hints if " " in h]
    hint = f" (kernel names suggest {', '.join(families)})" if families else ""
    lines.append(
        f"  searched {r.searched} schedules for unit {r.unit}{_operands(cap)}{hint} in {r.seconds:.1f} s: "
        + ", ".join(f"{s} {a}→{b}" for s, a, b in r.stages)
    )
    lines.extend(f"  note: {n}" for n in notes)
    if r.answer == "identical":
        lines.append(f"IDENTICAL: all {r.n} outputs equal, bit for bit, the emulation with")
        lines.append(f"  {r.best.describe()}")
        if len(r.reproducing) > 1:
            lines.append(f"  ({len(r.reproducing)} schedules reproduce every output; the others:)")
            lines.extend(f"  - {c.describe()}" for c in r.reproducing[1:])
        lines.append("  The differences from an exact reference are rounding, not a bug.")
        return "\n".join(lines)
    if r.answer == "inside-ensemble":
        lines.append(
            f"INSIDE-ENSEMBLE: every one of the {r.n} outputs is the outcome of some order of fp32 atomic adds of the "
            f"split partials of ({r.n_identical} equal the splits added in order):"
        )
        lines.append(f"  {r.best.describe()}")
        lines.append("  A split-K kernel with atomics gives other bits on every run: this is rounding, not a bug.")
        return "\n".join(lines)
    s = suspects(cap, r.emulated)
    lines.append(
        f"DIFFERS: no schedule reproduces every output; the nearest gets {r.n_identical} of {r.n} "
        f"({s['n_differ']} differ, {s['pattern']}, at most {s['ulps']['max']} ulps):"
    )
    lines.append(f"  {r.best.describe()}")
    for e in s["elements"][:5]:
        where = ", ".join(f"{a}={e[a]}" for a in s["axes"])
        lines.append(f"  - ({where}): GPU {e['gpu']!r}, emulated {e['emulated']!r}, {e['ulps']} ulps")
    if s["n_clusters"] <= 5:
        for c in s["clusters"]:
            box = ", ".join(f"{a} {c[a][0]}..{c[a][1]}" for a in s["axes"])
            lines.append(f"  cluster of {c['size']}: {box}")
    if s["pattern"] == "scattered, all within 1 ulp":
        lines.append("  Scattered 1-ulp differences: arithmetic the search does not model, more likely than a bug.")
    else:
        lines.append(
            "  Clustered or larger than 1 ulp: a BUG SUSPECT in the kernel (or inputs that are not the GPU's)."
        )
    return "\n".join(lines)


@dataclass
class CaptureReading:
    """A capture and what the search found for it: :attr:`answer` (``identical``,
    ``inside-ensemble`` or ``differs``), :attr:`exit_code` (``fp16emu identify``'s: 1 when no
    schedule reproduces, else 0), and the reports :meth:`text` and :meth:`json`."""

    capture: Capture
    result: SearchResult

    @property
    def answer(self) -> str:
        return self.result.answer

    @property
    def exit_code(self) -> int:
        return 1 if self.result.answer == "differs" else 0

    def text(self) -> str:
        return to_text(self.capture, self.result)

    def json(self) -> dict:
        return to_json(self.capture, self.result)


def read_capture(path, hw: str | None = None, progress=None) -> CaptureReading:
    """Load the capture at ``path`` and search its schedule (``hw``: a unit name that overrides
    the one the capture's ``gpu`` names; ``progress(stage, done, total)`` now and then);
    :class:`validation.captures.CaptureError` naming the field when it cannot be used."""
    cap = load_capture(path)
    return CaptureReading(cap, search(cap, hw=hw, progress=progress))
