"""What a capture search says: the reading (``rounding``, ``mix-up``, ``not-modelled`` or
``bug-suspect``), the schedule found, and, when the output differs, the nearest schedule, the
suspect elements with named coordinates, clusters and sizes (ulps at the larger magnitude,
absolute and relative differences), the mix-up that explains them or the likely cause.

:func:`read_capture` is ``fp16emu identify CAPTURE.npz`` as a function: it loads and searches a
capture and returns a :class:`CaptureReading` (the reading, the exit code the command gives, the
text and JSON reports), so the Python API says what the command prints."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from emu.formats import spacing
from models.libraries import not_modelled

from .capture import Capture, load_capture
from .gemms import SearchResult, bits, product_magnitudes
from .mixups import AXES, MixupFound, axes_of, find_mixup, likely_cause
from .search import search

__all__ = [
    "AXES",
    "EXIT_CODES",
    "READINGS",
    "CaptureReading",
    "read_capture",
    "reading_of",
    "difference_sizes",
    "suspects",
    "to_json",
    "to_text",
    "ulps_between",
]


def ulps_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a − b| in units in the last place of the output format (``a``'s dtype) at the larger of
    the two magnitudes (float64; 0 where the bits are equal, inf where one side is not finite):
    neighbours in one binade are 1 ulp apart, and values of opposite signs are as far apart as
    their sizes say (not the billions of patterns between them)."""
    fmt = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}[a.dtype.name]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    same = bits(np.ascontiguousarray(a)) == bits(np.ascontiguousarray(b))
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(a64 - b64) / spacing(np.maximum(np.abs(a64), np.abs(b64)), fmt)
    return np.where(same, 0.0, np.where(np.isfinite(d), d, np.inf))


def _number(x: float):
    """A JSON number: whole ulps as ints, inf as None."""
    x = float(x)
    if not np.isfinite(x):
        return None
    return int(x) if x == int(x) else x


def difference_sizes(got: np.ndarray, want: np.ndarray) -> dict:
    """Absolute and relative differences (relative to the larger magnitude) of the elements in
    ``got`` and ``want`` (float64 arrays of the differing elements)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        d = np.abs(got - want)
        rel = d / np.maximum(np.abs(got), np.abs(want))
    ok = np.isfinite(d)
    if not ok.any():
        return {"max_abs": None, "max_rel": None, "median_abs": None}
    return {
        "max_abs": float(d[ok].max()),
        "median_abs": float(np.median(d[ok])),
        "max_rel": float(rel[ok].max()),
    }


def suspects(cap: Capture, emulated: np.ndarray, top: int = 10) -> dict:
    """The elements where the GPU's output differs from ``emulated``: how many, how far in ulps,
    the ``top`` farthest with named coordinates, and connected clusters (face-adjacent elements)
    with their bounding boxes, largest first."""
    got, want = cap.out, emulated.astype(cap.out.dtype)
    differ = got.view(np.dtype(f"u{got.dtype.itemsize}")) != want.view(np.dtype(f"u{got.dtype.itemsize}"))
    axes = axes_of(cap)
    n = int(differ.sum())
    out = {"n_differ": n, "axes": list(axes)}
    if not n:
        return out
    ulps = ulps_between(np.ascontiguousarray(got), np.ascontiguousarray(want))
    d = ulps[differ]
    out["ulps"] = {"max": _number(d.max()), "median": _number(np.median(d)), "n_1ulp": int((d == 1).sum())}
    out["sizes"] = difference_sizes(got.astype(np.float64)[differ], want.astype(np.float64)[differ])
    flat = np.flatnonzero(differ.reshape(-1))
    worst = flat[
        np.argsort(-np.nan_to_num(ulps.reshape(-1)[flat], posinf=np.finfo(np.float64).max), kind="stable")[:top]
    ]
    out["elements"] = [
        {
            **{a: int(i) for a, i in zip(axes, np.unravel_index(f, got.shape))},
            "gpu": float(got.reshape(-1)[f]),
            "emulated": float(want.reshape(-1)[f]),
            "ulps": _number(ulps.reshape(-1)[f]),
            "abs": float(abs(float(got.reshape(-1)[f]) - float(want.reshape(-1)[f]))),
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


#: the readings, one word each, that every surface states the same way
READINGS = ("rounding", "mix-up", "not-modelled", "bug-suspect")
#: ``fp16emu identify``'s exit code per reading (2: a file that cannot be used)
EXIT_CODES = {"rounding": 0, "mix-up": 1, "not-modelled": 1, "bug-suspect": 1}
_REPRODUCES = ("identical", "inside-ensemble")


#: the unit roundoff of the accumulations the order bound allows for: fp32's 2^-24, doubled for the
#: matrix units that truncate (RZ) what they align and add
ORDER_ROUNDOFF = 2.0**-23


def within_order_bound(cap: Capture, emulated: np.ndarray) -> bool:
    """Whether every output the GPU and the emulation disagree on lies within what another
    summation order of the same products can give: |GPU − emulated| ≤ 2·γ_K·Σ|a·b| + one ulp of
    the output format at the GPU's value, γ_K = K·u/(1 − K·u) with u = :data:`ORDER_ROUNDOFF`
    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1: any order of a
    K-term sum is within γ_{K−1}·Σ|x_i| of the exact one, so two orders within twice that). False
    where the magnitudes are not computed (:func:`product_magnitudes`) or an output is not finite.
    A kernel bug that drops, doubles, scales or misreads products moves an output by about a
    product's size, far beyond this bound."""
    stored = np.asarray(emulated).astype(cap.out.dtype)  # the emulation in the capture's output format
    got, want = (np.asarray(x).astype(np.float64).reshape(-1) for x in (cap.out, stored))
    differ = bits(cap.out).reshape(-1) != bits(stored).reshape(-1)
    if not differ.any():
        return True
    if not (np.isfinite(got[differ]).all() and np.isfinite(want[differ]).all()):
        return False
    mags = product_magnitudes(cap)
    if mags is None:
        return False
    total, K = mags
    gamma = K * ORDER_ROUNDOFF / (1 - K * ORDER_ROUNDOFF)
    out_ulp = spacing(np.abs(got[differ]), cap.out_format)
    return bool(np.all(np.abs(got[differ] - want[differ]) <= 2 * gamma * total[differ] + out_ulp))


@dataclass(repr=False)
class CaptureReading:
    """A capture and what the search found for it.

    :attr:`reading` is one word that the text, the JSON, the exit code and the plot state alike:
    ``rounding`` (a schedule reproduces every output bit, or every output is some atomic add
    order's outcome), ``mix-up`` (the file as written is not what the GPU computed, and a transform
    of it is: :attr:`matches` names the field and the transform, e.g. ``{"out": "transposed"}``),
    ``not-modelled`` (the kernels are of a family, or show arithmetic, the search does not model),
    ``bug-suspect`` (none of these explains the output; :attr:`cause` is the library bug mutant
    that reproduces it, when one does). :attr:`answer` is the search's own answer on the file as
    written (``identical``, ``inside-ensemble`` or ``differs``); :attr:`exit_code` is
    ``fp16emu identify``'s (0 for ``rounding``, 1 otherwise); :meth:`report` (:meth:`text`) and
    :meth:`json` are its reports."""

    capture: Capture
    result: SearchResult
    mixup: MixupFound | None = None
    cause: dict | None = None
    screened: int = 0
    #: every differing output lies within the bound of another summation order (:func:`within_order_bound`)
    order_bound: bool = False

    @property
    def answer(self) -> str:
        return self.result.answer

    @property
    def nearest_suspects(self) -> dict | None:
        """:func:`suspects` of the nearest schedule on the file as written (None when one reproduces)."""
        if self.result.answer in _REPRODUCES or self.result.emulated is None:
            return None
        if not hasattr(self, "_suspects"):
            self._suspects = suspects(self.capture, self.result.emulated)
        return self._suspects

    @property
    def named_not_modelled(self) -> str | None:
        """Why the kernels are of a family the search does not model (the search's answer or the
        kernel names), or None."""
        if self.result.answer in _REPRODUCES or self.mixup is not None:
            return None
        family = getattr(self.result, "not_modelled", None)
        if family == "Winograd" and not not_modelled(self.capture.kernels):  # every Winograd kernel modelled
            return (
                "the kernels are cuDNN's Winograd, whose measured order misses this capture: a rounding not "
                "measured yet or a kernel bug, which the search does not tell apart for Winograd"
            )
        if family or self.result.answer == "not-modelled":
            return f"the kernels are of a family the search does not model ({family or 'named in the notes'})"
        why = not_modelled(self.capture.kernels)
        return why[0] if why else None

    @property
    def not_modelled(self) -> str | None:
        """Why the search's model does not cover this capture's kernels or arithmetic, or None."""
        named = self.named_not_modelled
        if named or self.result.answer in _REPRODUCES or self.mixup is not None:
            return named
        s = self.nearest_suspects
        if s and s.get("pattern") == "scattered, all within 1 ulp":
            return "scattered 1-ulp differences: arithmetic the search does not model (another order or unit)"
        if self.order_bound:
            return (
                "every difference lies within what another fp32 summation order of the same products can give "
                "(|Δ| ≤ 2·γ_K·Σ|a·b| + 1 ulp): an order the search does not model, not a lost or wrong product"
            )
        return None

    @property
    def reading(self) -> str:
        if self.result.answer in _REPRODUCES:
            return "rounding"
        if self.mixup is not None:
            return "mix-up"
        if self.not_modelled:
            return "not-modelled"
        return "bug-suspect"

    @property
    def matches(self) -> list[dict]:
        """What reproduces the output, each ``{field: transform}`` (empty unless a mix-up)."""
        return [self.mixup.mixup.match()] if self.mixup is not None else []

    @property
    def suspects(self) -> dict | None:
        """The differing elements (:func:`suspects`) for ``bug-suspect`` and ``not-modelled``; None otherwise."""
        return self.nearest_suspects if self.reading in ("bug-suspect", "not-modelled") else None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.reading]

    def report(self) -> str:
        """The text ``fp16emu identify`` prints."""
        return self.text()

    def text(self) -> str:
        return _text(self)

    def json(self) -> dict:
        return _json(self)

    def __repr__(self) -> str:
        m = ", ".join(f"{k}: {v}" for d in self.matches for k, v in d.items())
        extra = f", matches {m}" if m else (f", cause {self.cause['mutant']}" if self.cause else "")
        return (
            f"<CaptureReading {self.capture.path}: {self.reading}{extra} "
            f"({self.result.n_identical} of {self.result.n} outputs as written; exit {self.exit_code})>"
        )


def to_json(cap: Capture, r: SearchResult) -> dict:
    """The JSON report of ``fp16emu identify CAPTURE --format json`` for a search result alone
    (no mix-up search: :func:`read_capture` runs it)."""
    return _json(CaptureReading(cap, r))


def to_text(cap: Capture, r: SearchResult) -> str:
    """The text report for a search result alone (no mix-up search)."""
    return _text(CaptureReading(cap, r))


def _json(rd: CaptureReading) -> dict:
    cap, r = rd.capture, rd.result
    out = {
        "capture": cap.path,
        "op": cap.op,
        "problem": cap.describe(),
        "gpu": cap.gpu,
        "kernels": list(cap.kernels),
        "unit": r.unit,
        "input": cap.input,
        "reading": rd.reading,
        "matches": rd.matches,
        "exit_code": rd.exit_code,
        "answer": r.answer,
        "n": r.n,
        "n_identical": r.n_identical,
        "schedule": _candidate(r.best) if r.best and r.answer in _REPRODUCES else None,
        "schedules": [_candidate(c) for c in r.reproducing],
        "searched": r.searched,
        "seconds": round(r.seconds, 3),
        "stages": [{"stage": s, "candidates": a, "kept": b} for s, a, b in r.stages],
        "kernel_families": [h for h in r.hints if " " not in h],
        "notes": [h for h in r.hints if " " in h],
    }
    if r.answer not in _REPRODUCES and r.best is not None:
        out["nearest"] = {**_candidate(r.best), "n_identical": r.n_identical}
        out["suspects"] = rd.nearest_suspects
    if rd.mixup is not None:
        f = rd.mixup
        out["mixup"] = {
            "text": f.mixup.describe(),
            "answer": f.result.answer,
            "unit": f.result.unit,
            "schedule": _candidate(f.result.best),
            "seconds": round(f.result.seconds, 3),
        }
        out["schedule"] = _candidate(f.result.best)
    if r.answer not in _REPRODUCES:
        out["mixups_tried"] = rd.screened
    if rd.reading == "not-modelled":
        out["not_modelled"] = rd.not_modelled
    if rd.reading == "bug-suspect":
        out["cause"] = rd.cause
    return out


def _operands(cap: Capture) -> str:
    return f" (input={cap.input})" if cap.input != "fp16" else ""


def _size_text(s: dict) -> str:
    z = s.get("sizes") or {}
    if z.get("max_abs") is None:
        return ""
    return f", |GPU − emulated| ≤ {z['max_abs']:.3g}, relative ≤ {z['max_rel']:.3g}"


def _ulps_text(u) -> str:
    return "not finite" if u is None else f"{u:g} ulps"


def _where(cause: dict) -> str:
    w = cause.get("where")
    if isinstance(w, list):
        return "; ".join(_where({"where": x}) for x in w)
    return ", ".join(f"{a} {v[0]}..{v[1]}" if isinstance(v, list) else f"{a} {v}" for a, v in w.items())


def _cause_text(cause: dict) -> str:
    m = cause["mutant"]
    where = _where(cause)
    if m in ("k block lost", "split lost"):
        t = cause.get("tile", [])
        tile = f"one {t[0]}×{t[1]} output tile" if t else "one output tile"
        return f"{tile} is missing the products of one k block ({m}): {where}"
    if m == "bits flipped":
        return f"bits flipped (bit {', '.join(map(str, cause['bits']))}) at {where}"
    if m.endswith("scaled"):
        return f"{m} by {cause['factor']:.6g}: {where}"
    return f"{m}: {where}"


def _text(rd: CaptureReading) -> str:
    cap, r = rd.capture, rd.result
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
    reading = rd.reading
    tail = f"reading: {reading} (exit {rd.exit_code})"
    if r.answer == "identical":
        lines.append(f"IDENTICAL: all {r.n} outputs equal, bit for bit, the emulation with")
        lines.append(f"  {r.best.describe()}")
        if len(r.reproducing) > 1:
            lines.append(f"  ({len(r.reproducing)} schedules reproduce every output; the others:)")
            lines.extend(f"  - {c.describe()}" for c in r.reproducing[1:])
        lines.append("  The differences from an exact reference are rounding, not a bug.")
        return "\n".join(lines + [tail])
    if r.answer == "inside-ensemble":
        lines.append(
            f"INSIDE-ENSEMBLE: every one of the {r.n} outputs is the outcome of some order of fp32 atomic adds of the "
            f"split partials of ({r.n_identical} equal the splits added in order):"
        )
        lines.append(f"  {r.best.describe()}")
        lines.append("  A split-K kernel with atomics gives other bits on every run: this is rounding, not a bug.")
        return "\n".join(lines + [tail])
    if r.best is None:
        lines.append(f"DIFFERS: no schedule reproduces the {r.n} outputs")
        return "\n".join(lines + [tail])
    s = rd.nearest_suspects
    if reading == "mix-up":
        f = rd.mixup
        lines.append(
            f"DIFFERS as written: no schedule reproduces the file as it is (the nearest gets {r.n_identical} of {r.n})."
        )
        lines.append(
            f"MIX-UP: {f.mixup.describe()} ({', '.join(f'{k}: {v}' for k, v in f.mixup.match().items())}): "
            f"read so, {'every output equals' if f.result.answer == 'identical' else 'every output is an atomic-order outcome of'}, "
            "bit for bit, the emulation with"
        )
        lines.append(f"  {f.result.best.describe()}")
        lines.append(
            "  The file or its description does not match what the GPU computed; with it fixed, the differences "
            "from an exact reference are rounding."
        )
        return "\n".join(lines + [tail])
    head = "NOT MODELLED" if reading == "not-modelled" else "DIFFERS"
    lines.append(
        f"{head}: no schedule reproduces every output; the nearest gets {r.n_identical} of {r.n} "
        f"({s['n_differ']} differ, {s['pattern']}, at most {_ulps_text(s['ulps']['max'])}{_size_text(s)}):"
    )
    lines.append(f"  {r.best.describe()}")
    for e in s["elements"][:5]:
        where = ", ".join(f"{a}={e[a]}" for a in s["axes"])
        lines.append(
            f"  - ({where}): GPU {e['gpu']!r}, emulated {e['emulated']!r}, {_ulps_text(e['ulps'])} (|Δ| {e['abs']:.3g})"
        )
    if s["n_clusters"] <= 5:
        for c in s["clusters"]:
            box = ", ".join(f"{a} {c[a][0]}..{c[a][1]}" for a in s["axes"])
            lines.append(f"  cluster of {c['size']}: {box}")
    if reading == "not-modelled":
        lines.append(f"NOT MODELLED: {rd.not_modelled}; no mix-up of the file explains it either.")
        return "\n".join(lines + [tail])
    tried = f" (and none of {rd.screened} mix-ups of the file)" if rd.screened else ""
    lines.append(
        f"BUG SUSPECT: clustered or larger than 1 ulp, and no schedule{tried} explains the output "
        "(or the inputs are not the GPU's)."
    )
    if rd.cause:
        lines.append(f"  likely cause: {_cause_text(rd.cause)}")
    return "\n".join(lines + [tail])


def read_capture(path, hw: str | None = None, progress=None, mixups: bool = True, before_search=None) -> CaptureReading:
    """Load the capture at ``path`` and search its schedule (``hw``: a unit name that overrides
    the one the capture's ``gpu`` names; ``progress(stage, done, total)`` now and then); when no
    schedule reproduces it, the mix-ups of :mod:`validation.captures.mixups` (``mixups=False``
    skips them) and, when none explains it, the likely cause. ``before_search(capture)``, when
    given, is called once the capture is loaded (the command line compiles the search's kernels
    there). :class:`validation.captures.CaptureError` naming the field when the capture cannot be used."""
    cap = load_capture(path)
    if before_search is not None:
        before_search(cap)
    return reading_of(cap, search(cap, hw=hw, progress=progress), hw=hw, progress=progress, mixups=mixups)


def reading_of(
    cap: Capture, result: SearchResult, hw: str | None = None, progress=None, mixups: bool = True
) -> CaptureReading:
    """The :class:`CaptureReading` of a search result: the mix-up search and the likely cause
    where no schedule reproduces the capture."""
    rd = CaptureReading(cap, result)
    if result.answer in _REPRODUCES or result.best is None or not mixups or rd.named_not_modelled:
        return rd
    found, screened = find_mixup(cap, result.unit, hw=hw, progress=progress, result=result)
    rd = CaptureReading(cap, result, found, None, screened)
    if rd.reading == "bug-suspect":
        rd.cause = likely_cause(cap, result)
        if rd.cause is None and result.emulated is not None:
            rd.order_bound = within_order_bound(cap, result.emulated)
    return rd
