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

Inputs (:func:`load_rows`): a probe-output ``.npz`` (a, b (R, K) uint16; c (R,) uint32, or uint16
for an fp16 accumulator; d (R,) uint32, or uint16 for fp16 outputs), a CSV of rows (columns a,
b: K space-separated hex words; c, d: hex or 32-character binary words), or a directory in the
layout of north-numerical-computing/MATLAB-tensor-core ``model_validation/`` (a_*.txt, b_*.txt,
c_*_fp32.txt, d_*_fp32.txt and d_*_fp16.txt; for fp16 outputs C is rounded to fp16 with RNE
first, as those measurements did on the GPU).
"""

from __future__ import annotations

import contextlib
import csv
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import emu
from emu.units import Format
from models import space

from . import probe as probe_mod

__all__ = [
    "Identification",
    "Nearest",
    "Rows",
    "adaptive_identify",
    "canonical_bits",
    "evaluate",
    "identify",
    "load_rows",
    "next_probes",
    "pool_outputs",
    "register_cli",
    "single_threaded",
]

SCREEN_ROWS = 256  # rows every point is first run on
NEAREST = 5  # points reported when none explains every row
FAILED_ROWS_SHOWN = 10
POOL_ROWS = 4096  # candidate probes for next_probes
POOL_SEED = 1_000_003


@dataclass(frozen=True)
class Rows:
    """Measured dot products: row i is ``d[i] = c[i] + Σ_k a[i,k]·b[i,k]``.

    ``a``, ``b``: (R, K) uint16 fp16 patterns; ``c``: (R,) uint32 fp32 patterns (uint16 fp16
    patterns for an fp16 accumulator); ``d``: (R,) uint32 (uint16 for fp16 outputs);
    ``source``: where they came from; ``notes``: conversions made while reading."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d: np.ndarray
    source: str = ""
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        a, b, c, d = self.a, self.b, self.c, self.d
        if a.dtype != np.uint16 or b.dtype != np.uint16 or a.ndim != 2 or a.shape != b.shape:
            raise ValueError(f"a, b: expected two (R, K) uint16 arrays of one shape, got {a.shape} {a.dtype}, "
                             f"{b.shape} {b.dtype}")
        R = a.shape[0]
        if d.dtype not in (np.uint32, np.uint16) or d.shape != (R,):
            raise ValueError(f"d: expected ({R},) uint32 (fp32 outputs) or uint16 (fp16 outputs), got {d.shape} {d.dtype}")
        want = np.uint16 if d.dtype == np.uint16 else np.uint32
        if c.dtype != want or c.shape != (R,):
            raise ValueError(f"c: expected ({R},) {np.dtype(want).name} (the accumulator of "
                             f"{'fp16' if want == np.uint16 else 'fp32'} outputs), got {c.shape} {c.dtype}")
        if a.shape[1] < 1:
            raise ValueError("a, b: K must be at least 1")
        if R < 1:
            raise ValueError("rows: no rows to identify from")

    def __len__(self) -> int:
        return self.a.shape[0]

    @property
    def k(self) -> int:
        return self.a.shape[1]

    @property
    def output_format(self) -> Format:
        return Format.FP16 if self.d.dtype == np.uint16 else Format.FP32

    def take(self, rows) -> Rows:
        return Rows(self.a[rows], self.b[rows], self.c[rows], self.d[rows], self.source, self.notes)


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
    """The canonical output bits (:func:`canonical_bits`) of ``point`` on rows a, b (R, K) uint16
    and c (R,) (uint32 fp32 or uint16 fp16 patterns, matching the point's output format)."""
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
    import numba

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
    """The answer of :func:`identify` (see the module docstring).

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

    def to_dict(self) -> dict:
        """JSON-ready: {"consistent": [...], "named": ..., "rows": n, "explained": n,
        "next_probes": [...], ...}."""
        return {
            "consistent": [dict(space.as_dict(p), label=space.describe(p), names=list(space.names_of(p)))
                           for p in self.consistent],
            "named": self.named,
            "named_among": self.named_among,
            "rows": self.rows,
            "explained": self.explained,
            "k": self.k,
            "output_format": self.output_format.name,
            "points_searched": self.points_searched,
            "nearest": [{"point": dict(space.as_dict(n.point), label=space.describe(n.point)),
                         "explained": n.explained, "failed": n.failed, "failed_rows": list(n.failed_rows)}
                        for n in self.nearest],
            "classes": [[space.describe(p) for p in cls] for cls in self.classes],
            "next_probes": self.next_probes,
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
        }

    def format_text(self) -> str:
        lines = [(f"{self.rows} rows of K = {self.k}, {self.output_format.name.lower()} output; "
                 f"{self.points_searched} points searched in {self.seconds:.2f} s")]
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
                lines.append(f"the candidate probes split them into {len(self.classes)} class(es)"
                             + ("; points within a class were not split by any candidate" if
                                any(len(c) > 1 for c in self.classes) else ""))
            if self.next_probes:
                lines.append(f"next probes ({len(self.next_probes)}), each splitting the remaining points further:")
                for i, pr in enumerate(self.next_probes):
                    lines.append(f"  {i + 1}: c={pr['c']} a=[{' '.join(pr['a'])}] b=[{' '.join(pr['b'])}] "
                                 f"({pr['classes']} classes, largest {pr['largest']})")
        else:
            lines.append(f"no point reproduces every row; the best explain {self.explained} of {self.rows}:")
            for n in self.nearest:
                shown = ", ".join(map(str, n.failed_rows)) + (" …" if n.failed > len(n.failed_rows) else "")
                names = space.names_of(n.point)
                lines.append(f"  {space.describe(n.point)}" + (f" (= {', '.join(names)})" if names else "")
                             + f": fails {n.failed} row(s): {shown}")
        return "\n".join(lines)


def _screen_rows(n: int, count: int) -> np.ndarray:
    if n <= count:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, count).round().astype(np.int64))


def identify(rows: Rows, points=None, *, screen: int = SCREEN_ROWS, next_count: int = 8,
             pool_rows: int = POOL_ROWS, nearest: int = NEAREST) -> Identification:
    """The points of the space consistent with every row of ``rows`` (module docstring).

    ``points``: the candidates (default: ``models.space.points`` for the rows' output format
    and K); ``next_count``: how many splitting probes to propose when several points remain (0:
    none); ``pool_rows``: candidate probes they are chosen from; ``nearest``: points reported
    when none is consistent."""
    t0 = time.perf_counter()
    if points is None:
        points = space.points(rows.output_format, rows.k)
    points = list(points)
    if not points:
        raise ValueError(f"points: no point of the space has K = {rows.k} a multiple of its group size "
                         f"and {rows.output_format.name.lower()} output")
    with single_threaded():
        return _identify(rows, points, screen, next_count, pool_rows, nearest, t0)


def _identify(rows, points, screen, next_count, pool_rows, nearest, t0) -> Identification:
    d = canonical_bits(rows.d)
    idx = _screen_rows(len(rows), screen)
    first = rows.take(idx)
    survivors = [p for p in points if np.array_equal(evaluate(p, first.a, first.b, first.c), d[idx])]
    consistent = [p for p in survivors if np.array_equal(evaluate(p, rows.a, rows.b, rows.c), d)]
    result = Identification(rows=len(rows), k=rows.k, output_format=rows.output_format, points_searched=len(points),
                            consistent=consistent, named=None, named_among=[], explained=len(rows) if consistent else 0,
                            notes=rows.notes)
    if consistent:
        names = [n for p in consistent for n in space.names_of(p)]
        result.named_among = list(dict.fromkeys(names))
        if len(consistent) == 1 and names:
            result.named = names[0] if len(names) == 1 else " = ".join(names)
        if len(consistent) > 1 and next_count > 0:
            probes, classes = next_probes(consistent, rows.k, rows.output_format, count=next_count,
                                          pool_rows=pool_rows)
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
        result.nearest = [Nearest(points[i], len(rows) - int(fails[i]), int(fails[i]),
                                  tuple(int(r) for r in np.flatnonzero(masks[i])[:FAILED_ROWS_SHOWN]))
                          for i in order]
    result.seconds = time.perf_counter() - t0
    return result


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
        _, labels = np.unique(np.stack([labels, outputs[:, best].astype(np.int64)], axis=1), axis=0,
                              return_inverse=True)
        labels = labels.ravel()
        if current == P:
            break
    return chosen


def pool_outputs(points, k: int, output_format: Format, pool_rows: int = POOL_ROWS, seed: int = POOL_SEED):
    """(pool, outputs): a probe set of ``pool_rows`` candidate rows and the (P, pool_rows)
    canonical output bits of every point on it."""
    pool = probe_mod.probe_set(pool_rows, k, seed=seed,
                               accumulator="fp16" if output_format == Format.FP16 else "fp32")
    with single_threaded():
        return pool, _outputs(list(points), pool.a, pool.b, pool.c)


def _hex(x, width) -> str:
    return f"0x{int(x):0{width}x}"


def next_probes(points, k: int, output_format: Format, *, count: int = 8, pool_rows: int = POOL_ROWS,
                seed: int = POOL_SEED):
    """(probes, classes): up to ``count`` rows of a candidate pool chosen greedily to split
    ``points`` best, as dicts {a, b (hex lists), c (hex), classes, largest, predicted {label:
    hex}} — ``classes``/``largest``: the number of classes and the largest class after asking
    this probe and the ones before it — and the classes of points no pool row splits."""
    points = list(points)
    pool, outputs = pool_outputs(points, k, output_format, pool_rows, seed)
    chosen = _greedy(outputs, count)
    classes_labels = _partition(outputs)
    classes = [[points[i] for i in np.flatnonzero(classes_labels == lab)] for lab in np.unique(classes_labels)]
    width = 4 if output_format == Format.FP16 else 8
    probes = []
    for n, r in enumerate(chosen):
        labels = _partition(outputs[:, chosen[: n + 1]])
        sizes = np.bincount(labels)
        probes.append({
            "a": [_hex(x, 4) for x in pool.a[r]],
            "b": [_hex(x, 4) for x in pool.b[r]],
            "c": _hex(pool.c[r], width),
            "category": str(pool.category[r]),
            "classes": int(sizes.size),
            "largest": int(sizes.max()),
            "predicted": {space.describe(p): _hex(outputs[i, r], width) for i, p in enumerate(points[:16])},
        })
    return probes, classes


def adaptive_identify(device, points=None, *, k: int = 16, output_format: Format = Format.FP32,
                      pool_rows: int = POOL_ROWS, seed: int = POOL_SEED, max_probes: int = 64, pool=None):
    """Identify a device by asking it one probe at a time.

    ``device(a, b, c)``: the device's output bits (uint32, or uint16 for fp16 output) for rows
    a, b (R, K) uint16 and c (R,) patterns; ``pool``: optionally a precomputed
    (probe set, outputs) from :func:`pool_outputs` for ``points``. Returns (live points, the
    pool rows asked, the device's answers): the live points are those agreeing with every answer;
    more than one remain only when no pool row splits them (or ``max_probes`` is reached)."""
    if points is None:
        points = space.points(output_format, k)
    points = list(points)
    if pool is None:
        pool = pool_outputs(points, k, output_format, pool_rows, seed)
    probes, outputs = pool
    live = np.arange(len(points))
    asked: list[int] = []
    answers: list[int] = []
    while live.size > 1 and len(asked) < max_probes:
        scores = _refined_sizes(np.zeros(live.size, np.int64), outputs[live])
        r = int(np.argmin(scores))
        if scores[r] >= float(live.size) ** 2:
            break  # no pool row splits the live points
        got = canonical_bits(np.asarray(device(probes.a[r:r + 1], probes.b[r:r + 1], probes.c[r:r + 1])))[0]
        asked.append(r)
        answers.append(int(got))
        live = live[outputs[live, r] == got]
    return [points[i] for i in live], asked, answers


# --- reading results ----------------------------------------------------------------------------


def _words(text: str, what: str, path) -> list[int]:
    out = []
    for w in text.split():
        try:
            out.append(int(w, 2) if len(w) == 32 and set(w) <= {"0", "1"} else int(w, 16))
        except ValueError:
            raise ValueError(f"{path}: {what}: {w!r} is not a hex or 32-bit binary word") from None
    return out


def _fp16_from_words(words: np.ndarray, what: str, path, fp32: bool | None = None) -> np.ndarray:
    """uint16 fp16 patterns from words that are fp16 patterns or fp32 patterns of fp16 values
    (as the MATLAB-tensor-core files write them). ``fp32`` None: fp32 patterns when any word
    exceeds 0xffff (every non-zero fp16 value's fp32 pattern does, and so does −0)."""
    words = np.asarray(words, np.uint64)
    if fp32 is None:
        fp32 = bool(words.size) and int(words.max()) > 0xFFFF
    if not fp32:
        return words.astype(np.uint16)
    if words.size and int(words.max()) > 0xFFFFFFFF:
        raise ValueError(f"{path}: {what}: a word is wider than 32 bits")
    as32 = words.astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore"):
        as16 = as32.astype(np.float16)
    if not np.array_equal(as16.astype(np.float32).view(np.uint32), words.astype(np.uint32)):
        raise ValueError(f"{path}: {what}: a value is not an fp16 value")
    return as16.view(np.uint16)


def _rne16(c32: np.ndarray) -> np.ndarray:
    return c32.view(np.float32).astype(np.float16).view(np.uint16)


def _finish(a, b, c_words, d_words, output: str | None, path, notes: list[str], *, c16: bool, d16: bool) -> Rows:
    """Rows from parsed words. ``c16``/``d16``: the c/d words are fp16 patterns (else fp32
    patterns; fp32 d words of an fp16 output must be fp16 values). ``output`` (None: fp16 when
    ``d16``): with fp16 outputs an fp32 c is rounded to fp16 (RNE), noted in ``notes``."""
    c_words = np.asarray(c_words, np.uint64)
    d_words = np.asarray(d_words, np.uint64)
    if output is None:
        output = "fp16" if d16 else "fp32"
    if output == "fp16":
        d = d_words.astype(np.uint16) if d16 else _fp16_from_words(d_words, "d", path, fp32=True)
        if c16:
            c = c_words.astype(np.uint16)
        else:
            c = _rne16(c_words.astype(np.uint32))
            notes.append("c given as fp32: rounded to fp16 (RNE) for the fp16 accumulator")
    else:
        if d16 or c16:
            raise ValueError(f"{path}: fp32 outputs asked (--output fp32) but {'d' if d16 else 'c'} holds fp16 patterns")
        c = c_words.astype(np.uint32)
        d = d_words.astype(np.uint32)
    return Rows(np.ascontiguousarray(a), np.ascontiguousarray(b), c, d, str(path), tuple(notes))


def _load_npz(path, output):
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: cannot read as .npz ({' '.join(str(err).split())})") from None
    if not hasattr(data, "files"):
        raise ValueError(f"{path}: a single array, not an .npz with a, b, c, d")
    missing = [n for n in ("a", "b", "c", "d") if n not in data.files]
    if missing:
        raise ValueError(f"{path}: no array {', '.join(missing)} (has {', '.join(data.files) or 'none'}); "
                         "a probe file needs its outputs d (run it on the device first)")
    a, b, c, d = (data[n] for n in ("a", "b", "c", "d"))
    for name, arr in (("a", a), ("b", b)):
        if arr.dtype != np.uint16 or arr.ndim != 2:
            raise ValueError(f"{path}: {name} must be an (R, K) uint16 array of fp16 bit patterns, got {arr.shape} {arr.dtype}")
    if a.shape != b.shape:
        raise ValueError(f"{path}: a is {a.shape}, b is {b.shape}")
    for name, arr in (("c", c), ("d", d)):
        if arr.dtype not in (np.uint16, np.uint32) or arr.shape != (a.shape[0],):
            raise ValueError(f"{path}: {name} must be an ({a.shape[0]},) uint32 or uint16 array of bit patterns, "
                             f"got {arr.shape} {arr.dtype}")
    return _finish(a, b, c, d, output, path, [], c16=c.dtype == np.uint16, d16=d.dtype == np.uint16)


def _load_csv(path, output):
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: cannot read ({err})") from None
    reader = csv.DictReader(text.splitlines())
    fields = reader.fieldnames or []
    missing = [n for n in ("a", "b", "c", "d") if n not in fields]
    if missing:
        raise ValueError(f"{path}: CSV needs columns a, b, c, d (a, b: K space-separated hex words); "
                         f"missing {', '.join(missing)}")
    A, B, C, D, widths, c_widths, d_widths = [], [], [], [], set(), set(), set()
    for line_no, rec in enumerate(reader, start=2):
        try:
            A.append(_words(rec["a"] or "", "a", path))
            B.append(_words(rec["b"] or "", "b", path))
            C.append(_words(rec["c"] or "", "c", path))
            D.append(_words(rec["d"] or "", "d", path))
        except ValueError as err:
            raise ValueError(f"{err} (line {line_no})") from None
        if len(C[-1]) != 1 or len(D[-1]) != 1:
            raise ValueError(f"{path}: line {line_no}: c and d must be one word each")
        widths.add((len(A[-1]), len(B[-1])))
        c_widths.add(_digits(rec["c"]))
        d_widths.add(_digits(rec["d"]))
    if not A:
        raise ValueError(f"{path}: no rows")
    if len(widths) != 1 or next(iter(widths))[0] != next(iter(widths))[1] or next(iter(widths))[0] < 1:
        raise ValueError(f"{path}: every row needs the same number K ≥ 1 of a and b words, got {sorted(widths)}")
    a = _fp16_from_words(np.array(A, np.uint64), "a", path)
    b = _fp16_from_words(np.array(B, np.uint64), "b", path)
    return _finish(a, b, [c[0] for c in C], [d[0] for d in D], output, path, [], c16=c_widths == {4},
                   d16=d_widths == {4})


def _digits(word: str) -> int:
    """Hex digits of a word (32 for a binary word): 4 marks an fp16 pattern in a CSV."""
    w = word.strip()
    if len(w) == 32 and set(w) <= {"0", "1"}:
        return 32
    return len(w[2:] if w.lower().startswith("0x") else w)


def _read_matrix(path: Path) -> list[list[int]]:
    return [_words(line, path.name, path) for line in path.read_text().splitlines() if line.strip()]


def _load_directory(path: Path, output):
    def one(pattern):
        found = sorted(path.glob(pattern))
        if len(found) != 1:
            raise ValueError(f"{path}: expected one file {pattern}, found {len(found)}"
                             + (" (a directory of the study's verifier lines is not supported: see docs/identify.md)"
                                if not found and pattern == "a_*.txt" else ""))
        return found[0]
    output = output or "fp32"
    a_words = _read_matrix(one("a_*.txt"))
    b_words = _read_matrix(one("b_*.txt"))
    c_words = [r[0] for r in _read_matrix(one("c_*_fp32.txt"))]
    d_words = [r[0] for r in _read_matrix(one(f"d_*_{output}.txt"))]
    if len({len(r) for r in a_words + b_words}) != 1:
        raise ValueError(f"{path}: a and b rows must all hold K words")
    R = len(a_words)
    if not (len(b_words) == len(c_words) == len(d_words) == R):
        raise ValueError(f"{path}: a, b, c, d have {R}, {len(b_words)}, {len(c_words)}, {len(d_words)} rows")
    a = _fp16_from_words(np.array(a_words, np.uint64), "a", path)
    b = _fp16_from_words(np.array(b_words, np.uint64), "b", path)
    notes = []
    if output == "fp16":
        notes.append("fp16 outputs: C rounded to fp16 (RNE) first, as on the GPU side of these measurements")
    return _finish(a, b, c_words, d_words, output, path, notes, c16=False, d16=False)


def load_rows(path, output: str | None = None) -> Rows:
    """Measured rows from ``path`` (module docstring: .npz, .csv or a directory). ``output``:
    "fp32" or "fp16" to say which outputs the file holds (default: from the data; a directory
    defaults to fp32). ValueError naming the file and what is wrong."""
    if output not in (None, "fp32", "fp16"):
        raise ValueError(f"output: {output!r} is not one of 'fp32', 'fp16'")
    p = Path(path)
    if not p.exists():
        raise ValueError(f"{path}: no such file or directory")
    if p.is_dir():
        return _load_directory(p, output)
    if p.suffix.lower() == ".csv":
        return _load_csv(p, output)
    return _load_npz(p, output)


# --- command line -------------------------------------------------------------------------------


def register_cli(subparsers):
    """Add ``probe`` and ``identify`` to an argparse ``subparsers``; each handler (``func``)
    returns the exit code. Bad files and values raise ValueError (exit 2, one line)."""
    p = subparsers.add_parser(
        "probe", help="write a probe set (.npz) that tells the model space's points apart",
        description="Writes a, b (R, K) uint16 fp16 patterns and c (R,) uint32 fp32 patterns (uint16 with "
                    "--accumulator fp16). Run it on a GPU with `python -m validation.probe_gpu FILE.npz`, then "
                    "`fp16emu identify FILE.out.npz`.")
    p.add_argument("--out", required=True, help="the .npz to write")
    p.add_argument("--k", default="16", help="products per row (default 16; the GPU's instruction K)")
    p.add_argument("--rows", default="4096", help="rows (default 4096)")
    p.add_argument("--seed", default="0", help="generator seed (default 0)")
    p.add_argument("--accumulator", default="fp32", help="fp32 (default) or fp16")
    p.add_argument("--emulate", default=None, metavar="UNIT",
                   help="also write d as the named unit computes it (a stand-in device, e.g. h100)")
    p.set_defaults(func=_cmd_probe)

    q = subparsers.add_parser(
        "identify", help="which arithmetic (model-space points, named units) reproduces measured rows",
        description="RESULTS: an .npz with a, b, c, d (probe outputs), a CSV with columns a, b, c, d, or a "
                    "directory of MATLAB-tensor-core model_validation files (a_*.txt, b_*.txt, c_*_fp32.txt, d_*).")
    q.add_argument("results")
    q.add_argument("--output", default=None, help="fp32 or fp16: which outputs the data hold (default: from the data)")
    q.add_argument("--format", default="text", help="text or json")
    q.add_argument("--next", default="8", help="splitting probes to propose when several points remain (default 8)")
    q.add_argument("--next-out", default=None, metavar="FILE.npz", help="write the proposed probes as a probe set")
    q.add_argument("--test", default=None,
                   help="with the 2022 study's raw results folder as RESULTS: the suite test whose measured lines "
                        "identify the xdlops kernel (forward: unit and gemmK order; backward weight: KBlocks)")
    q.add_argument("--gpu", default="mi100,mi200", help="with --test: mi100, mi200 or both (default)")
    q.set_defaults(func=_cmd_identify)
    return p, q


def _int_option(value: str, name: str, lo: int, hi: int) -> int:
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: {value!r} is not an integer") from None
    if not lo <= v <= hi:
        raise ValueError(f"{name}: must be in {lo} … {hi}, got {v}")
    return v


def _cmd_probe(args) -> int:
    from models import unit

    k = _int_option(args.k, "--k", 1, 64)
    rows = _int_option(args.rows, "--rows", 1, 10_000_000)
    seed = _int_option(args.seed, "--seed", 0, 2**63 - 1)
    if args.accumulator not in ("fp32", "fp16"):
        raise ValueError(f"--accumulator: {args.accumulator!r} is not one of fp32, fp16")
    probes = probe_mod.probe_set(rows, k, seed=seed, accumulator=args.accumulator)
    d = None
    extra = {}
    if args.emulate:
        u = unit(args.emulate, output=args.accumulator)
        d = emu.dot_add(probes.a, probes.b, probes.c_values(), u)
        d = d.view(np.uint16 if args.accumulator == "fp16" else np.uint32)
        extra["device"] = np.array(f"fp16emu emulation of {u.name} ({args.accumulator} output)")
    try:
        probe_mod.save(args.out, probes, d, **extra)
    except OSError as err:
        raise ValueError(f"--out: cannot write {args.out!r} ({err.strerror or err})") from None
    print(f"wrote {args.out}: {len(probes)} rows of K = {k}, {args.accumulator} accumulator"
          + (f", d from {args.emulate}" if d is not None else ""))
    return 0


def _cmd_identify(args) -> int:
    import json

    if args.format not in ("text", "json"):
        raise ValueError(f"--format: {args.format!r} is not one of text, json")
    count = _int_option(args.next, "--next", 0, 64)
    if Path(args.results).is_dir() and any(Path(args.results).glob("verify_results_*")):
        return _cmd_identify_study(args)
    if args.test is not None:
        raise ValueError("--test: RESULTS must be the study's raw results folder (verify_results_<run set>_<GPU>/)")
    rows = load_rows(args.results, args.output)
    result = identify(rows, next_count=count)
    if args.next_out and result.next_probes:
        a = np.array([[int(x, 16) for x in p["a"]] for p in result.next_probes], np.uint16)
        b = np.array([[int(x, 16) for x in p["b"]] for p in result.next_probes], np.uint16)
        c = np.array([int(p["c"], 16) for p in result.next_probes],
                     np.uint16 if rows.output_format == Format.FP16 else np.uint32)
        try:
            probe_mod.save(args.next_out, probe_mod.ProbeSet(a, b, c, np.array([p["category"] for p in result.next_probes])))
        except OSError as err:
            raise ValueError(f"--next-out: cannot write {args.next_out!r} ({err.strerror or err})") from None
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(result.format_text())
        if args.next_out:
            print(f"next probes written to {args.next_out}" if result.next_probes
                  else f"no next probes: nothing written to {args.next_out}")
    return 0


def _cmd_identify_study(args) -> int:
    """``fp16emu identify RAW_RESULTS --test NAME``: the study-line identification of one test."""
    import json

    from . import identify_study
    from .suites import suite_entry

    if not args.test:
        raise ValueError("--test: give the suite test whose measured lines to use (RESULTS is the study's raw "
                         "results folder)")
    name = suite_entry(args.test).name
    gpus = tuple(g.strip().lower() for g in args.gpu.split(",") if g.strip())
    bad = [g for g in gpus if g not in ("mi100", "mi200")]
    if bad or not gpus:
        raise ValueError(f"--gpu: {', '.join(bad) or 'none given'} not among mi100, mi200")
    from .study import atomic_reorders
    from .suites import suite_config

    direction = suite_config(name).problem.direction
    if direction != "bwd_weight" or not atomic_reorders(name):
        found = identify_study.identify_forward(args.results, [name], gpus=gpus)
        doc = {g: [c.label() for c in found.get((name, g), [])] for g in gpus}
        kind = f"{direction}: units and gemmK orders reproducing every measured -pv_with_gpu xdlops line"
    else:
        found = identify_study.identify_kblocks(args.results, [name], gpus=gpus)
        doc = {g: {str(v.kblocks): {"verdict": v.verdict, "detail": list(v.detail)} for v in found.get((name, g), [])}
               for g in gpus}
        kind = "bwd_weight with split-K atomics: KBlocks candidates against the measured xdlops lines"
    if not any(doc.values()):
        raise ValueError(f"--test: no measured fair_1 xdlops lines of {name} in {args.results}")
    if args.format == "json":
        print(json.dumps({"test": name, "kind": kind, "result": doc}, indent=1))
        return 0
    print(f"{name} ({kind})")
    for g, res in doc.items():
        if isinstance(res, list):
            print(f"  {g}: " + ("; ".join(res) if res else "no candidate is consistent"))
        else:
            print(f"  {g}: " + ", ".join(f"KBlocks {kb} {v['verdict']}" for kb, v in res.items()))
    return 0
