"""Two captures of one op compared: the relation of their operands (detected from the operands
themselves), the elements that differ (ulps at the larger magnitude and sizes, the metrics of the
identify report: :func:`validation.captures.report.ulps_between`,
:func:`validation.captures.report.difference_sizes`), each capture's identify reading, and the one
reading of the pair.

Readings (exit codes of ``fp16emu diff``):

* ``same-bits`` (0): every shared output has the same bits;
* ``rounding`` (0): they differ, and a schedule reproduces each: two legal schedules (named), so
  the change is rounding, not a bug; for a block of rows, whether one schedule reproduces both
  (the schedule did not change with the batch size) or not (it did: cuBLAS picks its kernel from
  the whole shape — the batch-invariance problem);
* ``mix-up`` (1): one file, as written, is not what the GPU computed, and a transform of it is
  (identify's ``mix-up``);
* ``bug-suspect`` (1): they differ and one (or both) is reproduced by no schedule: which;
* exit 2: a file that cannot be used, or two captures of different ops or operands.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..captures.capture import CaptureError
from ..captures.gemms import bits
from ..captures.report import CaptureReading, difference_sizes, read_capture, ulps_between

__all__ = ["DIFF_EXIT_CODES", "DIFF_READINGS", "CaptureDiff", "diff_captures", "shared_rows"]

#: the readings of a pair, and ``fp16emu diff``'s exit code for each
DIFF_READINGS = ("same-bits", "rounding", "mix-up", "bug-suspect")
DIFF_EXIT_CODES = {"same-bits": 0, "rounding": 0, "mix-up": 1, "bug-suspect": 1}

#: per op: the operand whose rows are the output's rows (the others must be equal)
_ROW_OPERAND = {"mm": "A", "addmm": "A", "linear": "input"}


def _rows(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).reshape(-1, x.shape[-1])


def shared_rows(a, b) -> tuple[str, int, int] | None:
    """How capture ``b``'s operands hold capture ``a``'s: ``("same", 0, m)`` for equal operands,
    ``("rows", start, m)`` when b's row operand (mm, addmm: A; linear: input, its leading axes
    flattened) holds a's as the block of rows start … start + m − 1 and every other operand is
    equal (addmm's C: the same block of rows); None otherwise. Compared bit for bit."""
    if a.op != b.op or set(a.operands) != set(b.operands):
        return None
    same = all(
        a.operands[k].shape == b.operands[k].shape and np.array_equal(bits(a.operands[k]), bits(b.operands[k]))
        for k in a.operands
    )
    if same and a.extra.keys() == b.extra.keys():
        return "same", 0, int(_rows(a.out).shape[0]) if a.out.ndim else 1
    name = _ROW_OPERAND.get(a.op)
    if name is None:
        return None
    ra, rb = bits(_rows(a.operands[name])), bits(_rows(b.operands[name]))
    if ra.shape[1] != rb.shape[1] or ra.shape[0] > rb.shape[0]:
        return None
    for k in a.operands:
        if k not in (name, "C") and not np.array_equal(bits(a.operands[k]), bits(b.operands[k])):
            return None
    m = ra.shape[0]
    starts = np.flatnonzero((rb == ra[0]).all(axis=1))
    for s in starts:
        s = int(s)
        if s + m <= rb.shape[0] and np.array_equal(rb[s : s + m], ra):
            if "C" in a.operands and not np.array_equal(
                bits(_rows(b.operands["C"]))[s : s + m], bits(_rows(a.operands["C"]))
            ):
                continue
            return "rows", s, m
    return None


@dataclass(repr=False)
class CaptureDiff:
    """Two captures compared (module docstring): ``a``, ``b`` their identify readings,
    ``relation`` (``same`` or ``rows``, start, rows), the shared outputs' comparison."""

    a: CaptureReading
    b: CaptureReading
    relation: tuple[str, int, int]
    n: int
    n_differ: int
    ulps: dict | None
    sizes: dict | None

    #: whether no one schedule reproduces both (None unless both are reproduced): A's schedule run
    #: on B's operands and B's on A's, each compared with the other's output bit for bit
    schedule_changed: bool | None = None

    @property
    def reading(self) -> str:
        if self.n_differ == 0:
            return "same-bits"
        readings = (self.a.reading, self.b.reading)
        if "mix-up" in readings:
            return "mix-up"
        if readings == ("rounding", "rounding"):
            return "rounding"
        return "bug-suspect"

    @property
    def exit_code(self) -> int:
        return DIFF_EXIT_CODES[self.reading]

    @property
    def suspects(self) -> list[str]:
        """Which capture(s) no schedule reproduces ("a", "b")."""
        return [k for k, r in (("a", self.a), ("b", self.b)) if r.reading != "rounding"]

    def json(self) -> dict:
        kind, start, m = self.relation
        out = {
            "reading": self.reading,
            "exit_code": self.exit_code,
            "n": self.n,
            "n_differ": self.n_differ,
            "relation": {"kind": kind, "rows": [start, start + m - 1] if kind == "rows" else None},
            "ulps": self.ulps,
            "sizes": self.sizes,
            "schedule_changed": self.schedule_changed,
            "schedules": {k: _schedule(r) for k, r in (("a", self.a), ("b", self.b))},
            "suspects": self.suspects if self.reading in ("bug-suspect", "mix-up") else [],
            "a": self.a.json(),
            "b": self.b.json(),
        }
        return out

    def text(self) -> str:
        kind, start, m = self.relation
        a, b = self.a.capture, self.b.capture
        lines = [f"diff A {a.path}: {a.describe()}", f"     B {b.path}: {b.describe()}"]
        if kind == "same":
            lines.append("  the same operands, bit for bit")
        else:
            lines.append(f"  B's operands hold A's as rows {start}..{start + m - 1} of B's (the other operands equal)")
        if self.n_differ == 0:
            lines.append(f"all {self.n} shared outputs have the same bits")
        else:
            u, z = self.ulps or {}, self.sizes or {}
            lines.append(
                f"{self.n_differ} of {self.n} shared outputs differ: at most {_g(u.get('max'))} ulps at the larger "
                f"magnitude ({u.get('n_1ulp', 0)} by 1 ulp), |A − B| ≤ {_g(z.get('max_abs'))}, relative ≤ "
                f"{_g(z.get('max_rel'))}"
            )
        for key, r in (("A", self.a), ("B", self.b)):
            s = _schedule(r)
            lines.append(f"  {key}: identify reads {r.reading}" + (f": {s}" if s else ""))
        reading = self.reading
        if reading == "rounding":
            changed = self.schedule_changed
            lines.append(
                "ROUNDING: each output is reproduced bit for bit by a legal schedule"
                + (", different ones: not a bug" if changed else "; one schedule reproduces both")
            )
            if kind == "rows":
                lines.append(
                    "  the schedule changed with the batch size (the library chose its kernel from the whole shape)"
                    if changed
                    else "  the schedule did not change with the batch size"
                )
        elif reading == "same-bits" and kind == "rows" and self.schedule_changed is not None:
            lines.append(
                "  the schedule " + ("changed" if self.schedule_changed else "did not change") + " with the batch size"
            )
        elif reading == "mix-up":
            who = " and ".join(k.upper() for k, r in (("a", self.a), ("b", self.b)) if r.reading == "mix-up")
            lines.append(f"MIX-UP: {who} as written is not what the GPU computed (see identify {who})")
        elif reading == "bug-suspect":
            who = " and ".join(k.upper() for k in self.suspects)
            lines.append(f"BUG SUSPECT: no schedule reproduces {who}")
            for k in self.suspects:
                r = self.a if k == "a" else self.b
                if r.cause:
                    lines.append(f"  {k.upper()}'s likely cause: {r.cause.get('mutant')}")
        return "\n".join(lines + [f"reading: {reading} (exit {self.exit_code})"])


def _schedule(r: CaptureReading) -> str | None:
    best = r.result.best
    if r.reading == "rounding" and best is not None:
        return best.describe()
    if r.reading == "mix-up" and r.mixup is not None:
        return r.mixup.result.best.describe()
    return None


def _g(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def diff_captures(path_a, path_b, hw: str | None = None, progress=None) -> CaptureDiff:
    """Identify the captures at ``path_a`` and ``path_b`` and compare the outputs they share
    (module docstring); :class:`validation.captures.CaptureError` when one cannot be used or
    they are not two captures of one op on related operands."""
    a = read_capture(path_a, hw=hw, progress=progress)
    b = read_capture(path_b, hw=hw, progress=progress)
    ca, cb = a.capture, b.capture
    if ca.op != cb.op:
        raise CaptureError(f"op: A is {ca.op}, B is {cb.op}: diff compares two captures of one op")
    if ca.out.dtype != cb.out.dtype:
        raise CaptureError(f"out: A is {ca.out.dtype}, B is {cb.out.dtype}: two captures of one op in one dtype")
    relation = shared_rows(ca, cb)
    if relation is None:
        relation = shared_rows(cb, ca)
        if relation is not None:
            raise CaptureError(
                "operands: A's operands hold B's as a block of rows; give the smaller capture first (diff SMALL LARGE)"
            )
        raise CaptureError(
            "operands: B's operands are neither A's nor hold A's as a block of rows (compared bit for bit): "
            "diff compares two runs of one op on the same inputs"
        )
    kind, start, m = relation
    out_a = _rows(ca.out) if ca.out.ndim > 1 else ca.out.reshape(1, -1)
    out_b = _rows(cb.out) if cb.out.ndim > 1 else cb.out.reshape(1, -1)
    if kind == "rows":
        out_b = out_b[start : start + m]
    elif out_a.shape != out_b.shape:
        raise CaptureError(f"out: A's is {ca.out.shape}, B's {cb.out.shape} on the same operands")
    differ = bits(out_a) != bits(out_b)
    n_differ = int(differ.sum())
    ulps = sizes = None
    if n_differ:
        u = ulps_between(np.ascontiguousarray(out_a), np.ascontiguousarray(out_b))[differ]
        ulps = {
            "max": None if not np.isfinite(u.max()) else float(u.max()),
            "median": float(np.median(u)),
            "n_1ulp": int((u == 1).sum()),
        }
        sizes = difference_sizes(out_a.astype(np.float64)[differ], out_b.astype(np.float64)[differ])
    d = CaptureDiff(a, b, relation, int(out_a.size), n_differ, ulps, sizes)
    if a.reading == "rounding" and b.reading == "rounding" and a.result.best and b.result.best:
        d.schedule_changed = not (_explains(a.result.best, cb, cb.out) or _explains(b.result.best, ca, ca.out))
    return d


def _explains(cand, cap, want) -> bool:
    """Whether ``cand`` reproduces ``want`` (the capture's output) bit for bit."""
    from ..captures.gemms import run_candidate
    from ..captures.scaled import run_scaled

    got = run_scaled(cap, cand) if cap.op == "scaled_mm" else run_candidate(cap, cand)
    return bool(np.array_equal(bits(np.asarray(got).astype(want.dtype)), bits(want)))
