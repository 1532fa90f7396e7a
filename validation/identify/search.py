"""Identify the arithmetic of a matrix unit from measured dot products.

Given rows ``d = c + Σ_k a_k·b_k`` as one matrix instruction computed them (:class:`Rows`),
:func:`identify` returns the points of ``models.space`` that reproduce every row bit for bit
(NaN results compare as one class: devices write different NaN payloads), the named units
among them, and — when more than one point remains — the probes that split the remaining set
best (:func:`next_probes`). When no point explains every row, it returns the points that
explain the most rows and the rows each of them fails: it never forces the data onto the
nearest point.

Speed: every point is first run on a small screen of rows spread over the data (a point that
fails a screen row is out); only the survivors see every row. Each evaluation is one
vectorised ``emu.dot_add`` over the rows. When no point survives, every point is run on every
row, to rank them honestly.

Adaptive identification (:func:`adaptive_identify`): from no data at all, pick the probe that
splits the live points best (the smallest expected number of points left), ask the device for
its output, drop the points that disagree, repeat. Points that no probe of the candidate pool
splits are reported together: an equivalence class of the pool, not a proof that no fp16 input
splits them (the proven classes are written once in the space: ``models.space.EQUIVALENCES``).

Inputs: :mod:`validation.identify.rows` (:class:`Rows`, :func:`load_rows`); the command line:
:mod:`validation.cli.identify`.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import numba
import numpy as np

import emu
import models
from emu.operands import input_name
from emu.units import Format
from models import space

from . import probes as probe_mod
from .rows import Rows, load_rows

__all__ = [
    "Identification",
    "Nearest",
    "Rows",
    "adaptive_identify",
    "canonical_bits",
    "evaluate",
    "identify",
    "instruction_matches",
    "load_rows",
    "next_probes",
    "pool_outputs",
    "single_threaded",
]

SCREEN_ROWS = 256  # rows every point is first run on
NEAREST = 5  # points reported when none explains every row
FAILED_ROWS_SHOWN = 10
POOL_ROWS = 4096  # candidate probes for next_probes
POOL_SEED = 1_000_003


# --- evaluation ---------------------------------------------------------------------------------


def canonical_bits(bits: np.ndarray) -> np.ndarray:
    """Bit patterns with every NaN replaced by the quiet NaN (0x7fc00000 / 0x7e00): devices and
    models write different NaN payloads, and a NaN result is compared as a class."""
    bits = np.asarray(bits)
    if bits.dtype == np.uint16:
        nan = ((bits & 0x7C00) == 0x7C00) & ((bits & 0x03FF) != 0)
        return np.where(nan, np.uint16(0x7E00), bits)
    nan = ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)
    return np.where(nan, np.uint32(0x7FC00000), bits).astype(np.uint32)


def evaluate(point: space.Point, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The canonical output bits (:func:`canonical_bits`) of ``point`` on rows a, b (R, K) (bit
    patterns of the point's operand format: uint16 fp16/bf16, uint32 tf32, uint8 fp8) and c (R,)
    (uint32 fp32 or uint16 fp16 patterns, matching the point's output format)."""
    perm = space.k_permutation(point, a.shape[1])
    if perm is not None:
        a, b = a[:, perm], b[:, perm]
    fp16 = point.unit.output_format == Format.FP16
    if fp16 != (c.dtype == np.uint16):
        raise ValueError(f"c: {c.dtype} patterns do not fit a point with {'fp16' if fp16 else 'fp32'} output")
    d = emu.dot_add(a, b, c.view(np.float16 if fp16 else np.float32), point.unit)
    return canonical_bits(d.view(np.uint16 if fp16 else np.uint32))


@contextlib.contextmanager
def single_threaded():
    """Run the numba kernels on one thread inside the block (restored after). Identification
    makes thousands of small kernel calls; waking a thread pool for each costs more than the
    arithmetic, and on a loaded machine each parallel call waits for a time slice."""
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _outputs(points, a, b, c) -> np.ndarray:
    """(P, R) canonical output bits of every point on the rows."""
    dtype = np.uint16 if c.dtype == np.uint16 else np.uint32
    out = np.empty((len(points), a.shape[0]), dtype)
    for i, point in enumerate(points):
        out[i] = evaluate(point, a, b, c)
    return out


# --- identification -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Nearest:
    """A point that explains all but ``failed`` rows; ``failed_rows``: the first few of them."""

    point: space.Point
    explained: int
    failed: int
    failed_rows: tuple[int, ...]


@dataclass
class Identification:
    """The answer of :func:`identify` (see the module docstring); ``input_format``: the operands'
    format (fp16, bf16, tf32, e4m3, e5m2, e4m3fnuz, e5m2fnuz).

    ``consistent``: the points that reproduce every row; ``named``: the named unit they are,
    when they are one named point (else None); ``named_among``: named units among the
    consistent points; ``explained``: rows explained by the best point; ``nearest``: when no
    point is consistent, the points explaining the most rows; ``next_probes``: probes that split
    the consistent set (see :func:`next_probes`); ``classes``: the consistent points grouped by
    what the candidate pool can tell apart; ``seconds``: the time taken."""

    rows: int
    k: int
    output_format: Format
    points_searched: int
    consistent: list[space.Point]
    named: str | None
    named_among: list[str]
    explained: int
    nearest: list[Nearest] = field(default_factory=list)
    next_probes: list[dict] = field(default_factory=list)
    classes: list[list[space.Point]] = field(default_factory=list)
    seconds: float = 0.0
    notes: tuple[str, ...] = ()
    input_format: str = "fp16"

    def to_dict(self) -> dict:
        """JSON-ready: {"consistent": [...], "named": ..., "rows": n, "explained": n,
        "next_probes": [...], ...}."""
        return {
            "consistent": [
                dict(space.as_dict(p), label=space.describe(p), names=list(space.names_of(p))) for p in self.consistent
            ],
            "named": self.named,
            "named_among": self.named_among,
            "rows": self.rows,
            "explained": self.explained,
            "k": self.k,
            "input_format": self.input_format,
            "output_format": self.output_format.name,
            "points_searched": self.points_searched,
            "nearest": [
                {
                    "point": dict(space.as_dict(n.point), label=space.describe(n.point)),
                    "explained": n.explained,
                    "failed": n.failed,
                    "failed_rows": list(n.failed_rows),
                }
                for n in self.nearest
            ],
            "classes": [[space.describe(p) for p in cls] for cls in self.classes],
            "next_probes": self.next_probes,
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
        }

    def format_text(self) -> str:
        lines = [
            (
                f"{self.rows} rows of K = {self.k}, {self.input_format} operands, "
                f"{self.output_format.name.lower()} output; "
                f"{self.points_searched} points searched in {self.seconds:.2f} s"
            )
        ]
        lines += [f"note: {n}" for n in self.notes]
        if self.consistent:
            lines.append(f"{len(self.consistent)} point(s) reproduce every row:")
            for p in self.consistent[:40]:
                names = space.names_of(p)
                lines.append(f"  {space.describe(p)}" + (f"   = {', '.join(names)}" if names else ""))
            if len(self.consistent) > 40:
                lines.append(f"  … and {len(self.consistent) - 40} more (--format json lists all)")
            if self.named:
                lines.append(f"named unit: {self.named}")
            elif self.named_among:
                lines.append(f"named units among them: {', '.join(self.named_among)}")
            else:
                lines.append("named unit: none of the consistent points is a named unit")
            if len(self.classes) > 1 or (self.classes and len(self.classes[0]) > 1):
                lines.append(
                    f"the candidate probes split them into {len(self.classes)} class(es)"
                    + (
                        "; points within a class were not split by any candidate"
                        if any(len(c) > 1 for c in self.classes)
                        else ""
                    )
                )
            if self.next_probes:
                lines.append(f"next probes ({len(self.next_probes)}), each splitting the remaining points further:")
                for i, pr in enumerate(self.next_probes):
                    lines.append(
                        f"  {i + 1}: c={pr['c']} a=[{' '.join(pr['a'])}] b=[{' '.join(pr['b'])}] "
                        f"({pr['classes']} classes, largest {pr['largest']})"
                    )
        else:
            lines.append(f"no point reproduces every row; the best explain {self.explained} of {self.rows}:")
            for n in self.nearest:
                shown = ", ".join(map(str, n.failed_rows)) + (" …" if n.failed > len(n.failed_rows) else "")
                names = space.names_of(n.point)
                lines.append(
                    f"  {space.describe(n.point)}"
                    + (f" (= {', '.join(names)})" if names else "")
                    + f": fails {n.failed} row(s): {shown}"
                )
        return "\n".join(lines)


def _screen_rows(n: int, count: int) -> np.ndarray:
    if n <= count:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, count).round().astype(np.int64))


def identify(
    rows: Rows,
    points=None,
    *,
    screen: int = SCREEN_ROWS,
    next_count: int = 8,
    pool_rows: int = POOL_ROWS,
    nearest: int = NEAREST,
) -> Identification:
    """The points of the space consistent with every row of ``rows`` (module docstring).

    ``points``: the candidates (default: ``models.space.points`` for the rows' output format,
    K and operand format: the units that multiply it and the space around them); ``next_count``: how many splitting probes to propose when several points remain (0:
    none); ``pool_rows``: candidate probes they are chosen from; ``nearest``: points reported
    when none is consistent."""
    t0 = time.perf_counter()
    if not isinstance(rows, Rows):
        raise TypeError(f"rows: expected validation.identify.Rows (load_rows reads a file), got {type(rows).__name__}")
    for name, v in (("next_count", next_count), ("screen", screen), ("pool_rows", pool_rows), ("nearest", nearest)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name}: a whole number ≥ 0, got {v!r}")
    if points is None:
        points = space.points(rows.output_format, rows.k, rows.input_format)
    points = list(points)
    if not points:
        raise ValueError(
            f"points: no point of the space has K = {rows.k} a multiple of its group size, "
            f"{rows.input_format} operands and {rows.output_format.name.lower()} output"
        )
    wrong = [p for p in points if input_name(p.unit.input_format) != rows.input_format]
    if wrong:
        raise ValueError(
            f"points: {space.describe(wrong[0])} multiplies {input_name(wrong[0].unit.input_format)}, "
            f"the rows hold {rows.input_format} operands"
        )
    with single_threaded():
        return _identify(rows, points, screen, next_count, pool_rows, nearest, t0)


def _identify(rows, points, screen, next_count, pool_rows, nearest, t0) -> Identification:
    d = canonical_bits(rows.d)
    idx = _screen_rows(len(rows), screen)
    first = rows.take(idx)
    survivors = [p for p in points if np.array_equal(evaluate(p, first.a, first.b, first.c), d[idx])]
    consistent = [p for p in survivors if np.array_equal(evaluate(p, rows.a, rows.b, rows.c), d)]
    result = Identification(
        rows=len(rows),
        k=rows.k,
        output_format=rows.output_format,
        points_searched=len(points),
        consistent=consistent,
        named=None,
        named_among=[],
        explained=len(rows) if consistent else 0,
        notes=rows.notes,
        input_format=rows.input_format,
    )
    if consistent:
        names = [n for p in consistent for n in space.names_of(p)]
        result.named_among = list(dict.fromkeys(names))
        if len(consistent) == 1 and names:
            result.named = names[0] if len(names) == 1 else " = ".join(names)
        if len(consistent) > 1 and next_count > 0:
            probes, classes = next_probes(
                consistent, rows.k, rows.output_format, count=next_count, pool_rows=pool_rows, input=rows.input_format
            )
            result.next_probes = probes
            result.classes = classes
        else:
            result.classes = [consistent]
    else:
        fails = np.empty(len(points), np.int64)
        masks = []
        for i, p in enumerate(points):
            bad = evaluate(p, rows.a, rows.b, rows.c) != d
            fails[i] = int(bad.sum())
            masks.append(bad)
        order = np.argsort(fails, kind="stable")[:nearest]
        result.explained = len(rows) - int(fails[order[0]])
        result.nearest = [
            Nearest(
                points[i],
                len(rows) - int(fails[i]),
                int(fails[i]),
                tuple(int(r) for r in np.flatnonzero(masks[i])[:FAILED_ROWS_SHOWN]),
            )
            for i in order
        ]
    matches = instruction_matches(rows, d)
    if matches:
        result.named_among = list(dict.fromkeys([*result.named_among, *matches]))
        if not consistent:  # the rows are an instruction outside the space: named, every row explained
            result.named = " = ".join(matches)
            result.explained = len(rows)
        result.notes = (
            *result.notes,
            f"every row equals {' = '.join(matches)}, a per-instruction unit outside the searched space "
            "(models.unit(NAME, input=…, instruction=…))",
        )
    result.seconds = time.perf_counter() - t0
    return result


#: the instruction names as PTX writes them
_PTX = {"mma": "mma.sync", "wgmma": "wgmma", "tcgen05": "tcgen05.mma", "mfma": "v_mfma"}


def instruction_matches(rows: Rows, d: np.ndarray | None = None) -> list[str]:
    """The per-instruction units outside the space (``models.unit(NAME, …, instruction=…)`` that
    is not the unit's default arithmetic: fp8 ``mma.sync`` on Hopper and Blackwell) that
    reproduce every row, named "<unit> <instruction>" (e.g. "b200 mma.sync")."""
    d = canonical_bits(rows.d) if d is None else d
    out = []
    fp16 = rows.output_format == Format.FP16
    for name, instructions in models.UNIT_INSTRUCTIONS.items():
        for ins in instructions[1:]:
            try:
                u = models.unit(name, input=rows.input_format, output="fp16" if fp16 else "fp32", instruction=ins)
                default = models.unit(name, input=rows.input_format, output="fp16" if fp16 else "fp32")
            except ValueError:
                continue  # no such format, pair or output for this unit
            if u.params == default.params:
                continue  # the same arithmetic as the searched unit
            got = emu.dot_add(rows.a, rows.b, rows.c.view(np.float16 if fp16 else np.float32), u)
            if np.array_equal(canonical_bits(np.asarray(got).view(np.uint16 if fp16 else np.uint32)), d):
                out.append(f"{name} {_PTX[ins]}")
    return out


# --- choosing probes ----------------------------------------------------------------------------


def _refined_sizes(labels: np.ndarray, outputs: np.ndarray) -> np.ndarray:
    """For every candidate row r: Σ over the classes of (labels, outputs[:, r]) of size², the
    expected number of live points after asking row r, times the number of points."""
    keys = (labels.astype(np.uint64)[:, None] << np.uint64(32)) | outputs.astype(np.uint64)
    s = np.sort(keys, axis=0)
    new = np.ones(s.shape, bool)
    new[1:] = s[1:] != s[:-1]
    run = np.cumsum(new.T.ravel()) - 1
    sizes = np.bincount(run).astype(np.float64)
    col_of_run = np.repeat(np.arange(s.shape[1]), new.sum(axis=0))
    return np.bincount(col_of_run, weights=sizes**2, minlength=s.shape[1])


def _partition(outputs: np.ndarray) -> np.ndarray:
    """Labels 0… of the points by their rows of outputs (equal rows, equal label)."""
    _, labels = np.unique(outputs, axis=0, return_inverse=True)
    return labels.ravel()


def _greedy(outputs: np.ndarray, count: int) -> list[int]:
    """Up to ``count`` column indices of ``outputs`` (P, R), each chosen to minimise the expected
    class size given the earlier ones; stops when no column splits further."""
    P = outputs.shape[0]
    labels = np.zeros(P, np.int64)
    chosen: list[int] = []
    current = float(P) ** 2
    while len(chosen) < count:
        scores = _refined_sizes(labels, outputs)
        best = int(np.argmin(scores))
        if scores[best] >= current:
            break
        chosen.append(best)
        current = float(scores[best])
        _, labels = np.unique(
            np.stack([labels, outputs[:, best].astype(np.int64)], axis=1), axis=0, return_inverse=True
        )
        labels = labels.ravel()
        if current == P:
            break
    return chosen


def pool_outputs(
    points, k: int, output_format: Format, pool_rows: int = POOL_ROWS, seed: int = POOL_SEED, input: str = "fp16"
):
    """(pool, outputs): a probe set of ``pool_rows`` candidate rows of operand format ``input``
    and the (P, pool_rows) canonical output bits of every point on it."""
    pool = probe_mod.probe_set(
        pool_rows, k, seed=seed, accumulator="fp16" if output_format == Format.FP16 else "fp32", input=input
    )
    with single_threaded():
        return pool, _outputs(list(points), pool.a, pool.b, pool.c)


def _hex(x, width) -> str:
    return f"0x{int(x):0{width}x}"


def next_probes(
    points,
    k: int,
    output_format: Format,
    *,
    count: int = 8,
    pool_rows: int = POOL_ROWS,
    seed: int = POOL_SEED,
    input: str = "fp16",
):
    """(probes, classes): up to ``count`` rows of a candidate pool (operand format ``input``)
    chosen greedily to split ``points`` best, as dicts {a, b (hex lists of the format's
    patterns), c (hex), classes, largest, predicted {label: hex}} — ``classes``/``largest``: the
    number of classes and the largest class after asking this probe and the ones before it —
    and the classes of points no pool row splits."""
    points = list(points)
    pool, outputs = pool_outputs(points, k, output_format, pool_rows, seed, input)
    operand_width = 2 * pool.a.dtype.itemsize
    chosen = _greedy(outputs, count)
    classes_labels = _partition(outputs)
    classes = [[points[i] for i in np.flatnonzero(classes_labels == lab)] for lab in np.unique(classes_labels)]
    width = 4 if output_format == Format.FP16 else 8
    probes = []
    for n, r in enumerate(chosen):
        labels = _partition(outputs[:, chosen[: n + 1]])
        sizes = np.bincount(labels)
        probes.append(
            {
                "a": [_hex(x, operand_width) for x in pool.a[r]],
                "b": [_hex(x, operand_width) for x in pool.b[r]],
                "c": _hex(pool.c[r], width),
                "category": str(pool.category[r]),
                "classes": int(sizes.size),
                "largest": int(sizes.max()),
                "predicted": {space.describe(p): _hex(outputs[i, r], width) for i, p in enumerate(points[:16])},
            }
        )
    return probes, classes


def adaptive_identify(
    device,
    points=None,
    *,
    k: int = 16,
    output_format: Format = Format.FP32,
    pool_rows: int = POOL_ROWS,
    seed: int = POOL_SEED,
    max_probes: int = 64,
    pool=None,
    input: str = "fp16",
):
    """Identify a device by asking it one probe at a time.

    ``device(a, b, c)``: the device's output bits (uint32, or uint16 for fp16 output) for rows
    a, b (R, K) bit patterns of operand format ``input`` and c (R,) patterns; ``pool``: optionally a precomputed
    (probe set, outputs) from :func:`pool_outputs` for ``points``. Returns (live points, the
    pool rows asked, the device's answers): the live points are those agreeing with every answer;
    more than one remain only when no pool row splits them (or ``max_probes`` is reached)."""
    if points is None:
        points = space.points(output_format, k, input)
    points = list(points)
    if pool is None:
        pool = pool_outputs(points, k, output_format, pool_rows, seed, input)
    probes, outputs = pool
    live = np.arange(len(points))
    asked: list[int] = []
    answers: list[int] = []
    while live.size > 1 and len(asked) < max_probes:
        scores = _refined_sizes(np.zeros(live.size, np.int64), outputs[live])
        r = int(np.argmin(scores))
        if scores[r] >= float(live.size) ** 2:
            break  # no pool row splits the live points
        got = canonical_bits(np.asarray(device(probes.a[r : r + 1], probes.b[r : r + 1], probes.c[r : r + 1])))[0]
        asked.append(r)
        answers.append(int(got))
        live = live[outputs[live, r] == got]
    return [points[i] for i in live], asked, answers
