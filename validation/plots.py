"""Pictures for the command line's ``--plot FILE.png`` and for notebooks (matplotlib, headless).

Every figure is titled with what it shows: the config, the hardware, the kernel, the validator and
the inputs (:data:`TITLE_FIELDS`); the title is the figure's ``suptitle`` and, in a PNG, its
``Title`` text chunk (:func:`read_png_text` reads it back). Figures are
:class:`matplotlib.figure.Figure` objects on the Agg canvas: no display, no pyplot state.

Panels: the epsilonDiff histogram (:meth:`validation.metrics.ComparisonResult.plot`), the error
against the output's magnitude (|kernel − validation| against |validation|, with half an fp16 ulp
of the validation value drawn for scale), and a heat map of the largest error in fp16 ulps of the
validation value, per channel (rows) and per tap or output position (columns), the other axes
reduced by their maximum.

:func:`check_path` is called before any computation: a missing or unwritable folder, or a file
type matplotlib cannot write here, is a usage error (exit 2).
"""

from __future__ import annotations

import io
import json
import os
import struct
import zlib
from pathlib import Path

import numpy as np

__all__ = [
    "TITLE_FIELDS",
    "SUFFIXES",
    "check_path",
    "title_text",
    "new_figure",
    "save",
    "read_png_text",
    "error_vs_magnitude",
    "ulps_heatmap",
    "run_figure",
    "compare_figure",
    "explain_figure",
    "study_figure",
    "identify_figure",
    "identify_study_figure",
    "distribution_figure",
]

TITLE_FIELDS = ("config", "hardware", "kernel", "validator", "inputs")
SUFFIXES = (".png", ".pdf", ".svg")
MAX_POINTS = 20_000  # scatter points drawn (an evenly spaced subset beyond this)


def check_path(path, option: str = "--plot") -> Path:
    """``path`` as a Path when a figure can be written there; ValueError naming ``option`` otherwise."""
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise ValueError(f"{option}: {str(path)!r} must end in {', '.join(SUFFIXES)}")
    if p.is_dir():
        raise ValueError(f"{option}: {str(path)!r} is a folder; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{option}: folder {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"{option}: folder {str(parent)!r} is not writable")
    return p


def title_text(fields: dict) -> str:
    """The title line(s): every field of :data:`TITLE_FIELDS` as ``name: value`` ("-" when unknown)."""
    parts = [f"{k}: {fields.get(k) if fields.get(k) not in (None, '') else '-'}" for k in TITLE_FIELDS]
    return f"{parts[0]}\n{' | '.join(parts[1:4])}\n{parts[4]}"


def new_figure(fields: dict, ncols: int = 1, nrows: int = 1, width: float = 5.0, height: float = 4.0):
    """(Figure, axes array) titled with ``fields``; ``fig.fp16emu_fields`` keeps them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows + 0.9), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    fig.suptitle(title_text(fields), fontsize=9)
    fig.fp16emu_fields = {k: fields.get(k) for k in TITLE_FIELDS}
    fig._repr_png_ = lambda: _png_bytes(fig)  # shown inline by Jupyter without pyplot
    return fig, axes


def _png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return buf.getvalue()


def save(fig, path) -> Path:
    """Write ``fig`` to ``path`` (PNG: the title and the fields as text chunks)."""
    p = Path(path)
    kw = {}
    if p.suffix.lower() == ".png":
        kw["metadata"] = {
            "Title": fig.get_suptitle(),
            "Description": json.dumps(getattr(fig, "fp16emu_fields", {}), default=str),
            "Software": "fp16emu",
        }
    try:
        fig.savefig(p, dpi=110, **kw)
    except OSError as err:
        raise ValueError(f"--plot: cannot write {str(p)!r} ({err.strerror or err})") from None
    return p


def read_png_text(path) -> dict[str, str]:
    """The tEXt / zTXt / iTXt chunks of a PNG file as a dict (what :func:`save` wrote)."""
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    out, i = {}, 8
    while i + 8 <= len(data):
        (length,) = struct.unpack(">I", data[i : i + 4])
        kind, body = data[i + 4 : i + 8], data[i + 8 : i + 8 + length]
        i += 12 + length
        if kind == b"tEXt":
            k, _, v = body.partition(b"\0")
            out[k.decode("latin-1")] = v.decode("latin-1")
        elif kind == b"zTXt":
            k, _, v = body.partition(b"\0")
            out[k.decode("latin-1")] = zlib.decompress(v[1:]).decode("latin-1")
        elif kind == b"iTXt":
            k, _, rest = body.partition(b"\0")
            flag, rest = rest[0], rest[2:]
            _lang, _, rest = rest.partition(b"\0")
            _tkey, _, text = rest.partition(b"\0")
            out[k.decode("latin-1")] = (zlib.decompress(text) if flag else text).decode("utf-8")
        elif kind == b"IEND":
            break
    return out


# --- panels -------------------------------------------------------------------------------------


def _flat64(a) -> np.ndarray:
    return np.asarray(a).astype(np.float64).reshape(-1)


def _ulps(validation: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """|kernel − validation| in fp16 ulps of the validation value (spacing of fp16 at |v|)."""
    v, k = _flat64(validation), _flat64(kernel)
    with np.errstate(over="ignore", invalid="ignore"):
        spacing = np.spacing(np.abs(v).astype(np.float16)).astype(np.float64)
        return np.abs(k - v) / spacing


def error_vs_magnitude(ax, validation, kernel, label: str = "elements"):
    """Scatter |kernel − validation| against |validation| (log-log); exact elements counted in the legend."""
    v, k = _flat64(validation), _flat64(kernel)
    ok = np.isfinite(v) & np.isfinite(k)
    err = np.abs(k - v)
    nz = ok & (err > 0) & (v != 0)
    idx = np.flatnonzero(nz)
    if idx.size > MAX_POINTS:
        idx = idx[np.linspace(0, idx.size - 1, MAX_POINTS).astype(np.int64)]
    ax.scatter(np.abs(v[idx]), err[idx], s=4, alpha=0.5, label=f"{label}: {int(nz.sum())} differ")
    if idx.size:
        xs = np.logspace(np.log10(np.abs(v[idx]).min()), np.log10(np.abs(v[idx]).max()), 64)
        half = np.spacing(xs.astype(np.float16)).astype(np.float64) / 2
        ax.plot(xs, half, color="black", linewidth=0.8, label="½ fp16 ulp of |validation|")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("|validation| (output magnitude)")
    ax.set_ylabel("|kernel − validation|")
    ax.set_title(f"error vs magnitude ({int((ok & (err == 0)).sum())} of {v.size} exact)", fontsize=9)
    ax.legend(fontsize=7)
    return ax


def _heat_layout(axes: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    channel = "k" if "k" in axes else ("c" if "c" in axes else axes[0])
    taps = tuple(a for a in axes if a in ("y", "x")) or tuple(a for a in axes if a in ("h", "w"))
    if channel == "k" and "c" in axes and not taps:
        taps = ("c",)
    return channel, taps


def ulps_heatmap(ax, validation, kernel, axes: tuple[str, ...], dims: tuple[int, ...], title: str | None = None):
    """Max error in fp16 ulps per channel (rows) and per tap / position (columns, the spatial
    axes flattened); the remaining axes reduced by their maximum. ``axes`` names the result
    tensor's axes in memory order (e.g. ``("n", "h", "w", "g", "k")``), ``dims`` their sizes."""
    u = _ulps(validation, kernel).reshape(dims)
    u = np.where(np.isfinite(u), u, np.nan)
    channel, taps = _heat_layout(tuple(axes))
    order = [axes.index(channel)] + [axes.index(t) for t in taps]
    rest = [i for i in range(len(axes)) if i not in order]
    m = np.transpose(u, order + rest)
    m = m.reshape(dims[order[0]], int(np.prod([dims[i] for i in order[1:]], dtype=np.int64)), -1)
    with np.errstate(invalid="ignore"):
        m = np.nanmax(np.where(np.isnan(m), -np.inf, m), axis=2) if m.shape[2] else m[..., 0]
    m = np.where(np.isfinite(m), m, np.nan)
    im = ax.imshow(m, aspect="auto", interpolation="nearest", cmap="viridis")
    ax.figure.colorbar(im, ax=ax, label="max error (fp16 ulps)")
    ax.set_ylabel(f"channel {channel}")
    ax.set_xlabel(f"{'tap' if set(taps) <= {'y', 'x', 'c'} and taps else 'position'} {'·'.join(taps) or '-'}")
    ax.set_title(title or f"where the error sits (max over {', '.join(axes[i] for i in rest) or '-'})", fontsize=9)
    return ax


# --- figures ------------------------------------------------------------------------------------


def run_figure(result, comparison=None, fields: dict | None = None):
    """Histogram, error vs magnitude and the channel/tap heat map of a
    :class:`validation.run.RunResult` (kernel output against the validation)."""
    from . import metrics

    p = result.problem
    role = p.result_role
    axes = tuple(p.layout5(role))
    sizes = p.letter_sizes(role)
    dims = tuple(sizes[a] for a in axes)
    v, k = result.validation_output.reshape(-1), result.kernel_output.reshape(-1)
    if comparison is None:
        comparison = metrics.compare(v, k)
    used = result.inputs_used
    f = {
        "config": f"{result.config.name or ' '.join(result.config.source.split())[:80]} ({p.direction})",
        "hardware": result.kernel.hw,
        "kernel": result.kernel.key,
        "validator": result.validator.key,
        "inputs": f"seed {used.get('seed')}, {used.get('rand_type', 'int')} in "
        f"[{used.get('rand_min')}, {used.get('rand_max')})",
    }
    f.update(fields or {})
    fig, ax = new_figure(f, ncols=3)
    comparison.plot(ax=ax[0, 0])
    error_vs_magnitude(ax[0, 1], v, k)
    ulps_heatmap(ax[0, 2], v, k, axes, dims)
    return fig


def _array_axes(shape: tuple[int, ...]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Plain arrays: NCHW-like names (axis 1 the channel, the rest positions)."""
    if len(shape) <= 1:
        return ("k", "w"), (1, int(np.prod(shape, dtype=np.int64)))
    if len(shape) == 2:
        return ("k", "w"), tuple(shape)
    names = ("n", "k") + ("h", "w", "d", "e", "f")[: len(shape) - 2]
    return names, tuple(shape)


def compare_figure(validation, kernel, comparison=None, fields: dict | None = None):
    """Histogram, error vs magnitude and a heat map (axis 1 as the channel, the later axes as
    positions, axis 0 reduced) of two arrays."""
    from . import metrics

    validation, kernel = np.asarray(validation), np.asarray(kernel)
    if comparison is None:
        comparison = metrics.compare(validation, kernel)
    fig, ax = new_figure(fields or {}, ncols=3)
    comparison.plot(ax=ax[0, 0])
    error_vs_magnitude(ax[0, 1], validation, kernel)
    axes, dims = _array_axes(validation.shape)
    ulps_heatmap(ax[0, 2], validation, kernel, axes, dims, title="max error per axis 1 (rows) and later axes")
    return fig


def explain_figure(expl, problem=None, fields: dict | None = None):
    """The shares (stacked bars) of a :class:`validation.explain.Explanation`; with its arrays
    (``keep_arrays=True``) also the kernel's error vs magnitude and, given the ``problem``, the heat
    map of the subnormal-flush variant's error (where the flushed subnormals sit)."""
    from .explain import SOURCES

    f = {"config": f"{expl.config} ({expl.direction})", "hardware": expl.hw, "kernel": expl.kernel,
         "validator": f"{expl.validator}; reference {expl.reference}", "inputs": None}  # fmt: skip
    f.update(fields or {})
    arrays = expl.arrays
    fig, ax = new_figure(f, ncols=3 if arrays is not None else 1, width=5.5)
    expl.plot(ax=ax[0, 0])
    if arrays is not None:
        ref, kern = arrays["none"], arrays["+".join(SOURCES)]
        error_vs_magnitude(ax[0, 1], ref, kern, label="kernel vs exact")
        if problem is not None:
            role = problem.result_role
            axes = tuple(problem.layout5(role))
            sizes = problem.letter_sizes(role)
            ulps_heatmap(ax[0, 2], ref, arrays["subnormal_flush"], axes, tuple(sizes[a] for a in axes),
                         title="error of the subnormal flush alone (where subnormals sit)")  # fmt: skip
        else:
            ax[0, 2].axis("off")
    return fig


_STUDY_FIELDS = ("max_epsilon_diff", "max_abs_diff", "max_rel_diff", "rms")


def study_figure(report, fields: dict | None = None):
    """Emulated against measured for each line of a :class:`validation.study.Report`: one scatter
    per field (log-log), split-K ensembles drawn as ranges (vertical bars), the diagonal y = x."""
    from .study.judge import num

    lines = report.lines
    combos = sorted({r.measured.combo for r in lines})

    def join(i):
        return ",".join(sorted({c[i] for c in combos})) or "-"

    tests = sorted({r.measured.test_name for r in lines})
    f = {
        "config": f"2022 study, {len(lines)} lines of {len(tests)} tests"
        + (f" ({tests[0]})" if len(tests) == 1 else ""),
        "hardware": join(1),
        "kernel": join(2),
        "validator": join(3) + " (cpu = -pv, gpu = -pv_with_gpu)",
        "inputs": f"run sets {join(0)}, ranges {join(4)}, seed 1",
    }
    f.update(fields or {})
    fig, ax = new_figure(f, ncols=len(_STUDY_FIELDS), width=3.8, height=3.8)
    for a, name in zip(ax[0], _STUDY_FIELDS):
        xs, lo, hi, ok = [], [], [], []
        for r in lines:
            if name not in r.fields:
                continue
            xs.append(num(r.fields[name]))
            b = r.bound(name)
            lo.append(b[0])
            hi.append(b[1])
            ok.append(r.ok)
        xs, lo, hi, ok = map(np.asarray, (xs, lo, hi, ok))
        if xs.size == 0:
            a.axis("off")
            continue
        mid = (lo + hi) / 2
        for good, color, label in ((True, "tab:green", "reproduced / inside"), (False, "tab:red", "differs")):
            s = ok == good
            if s.any():
                a.errorbar(xs[s], mid[s], yerr=[mid[s] - lo[s], hi[s] - mid[s]], fmt="o", ms=3, color=color,
                           elinewidth=1, label=f"{label} ({int(s.sum())})")  # fmt: skip
        pos = np.concatenate([xs, lo, hi])
        pos = pos[np.isfinite(pos) & (pos > 0)]
        if pos.size:
            span = [pos.min() / 1.5, pos.max() * 1.5]
            a.plot(span, span, color="black", linewidth=0.6)
            a.set_xscale("log")
            a.set_yscale("log")
        a.set_xlabel(f"measured {name}")
        a.set_ylabel(f"emulated {name} (range: ensemble)")
        a.legend(fontsize=7)
    return fig


def identify_figure(result, rows=None, fields: dict | None = None):
    """Rows reproduced bit for bit per candidate point of a :class:`validation.identify.Identification`
    (the consistent points, then the nearest ones)."""
    from models import space

    labels, explained = [], []
    for p in result.consistent[:12]:
        labels.append(space.describe(p))
        explained.append(result.rows)
    for n in result.nearest[:12]:
        labels.append(space.describe(n.point))
        explained.append(n.explained)
    f = {
        "config": f"probe rows from {getattr(rows, 'source', '') or '-'}",
        "hardware": result.named or "unknown (not a named unit)",
        "kernel": f"matrix unit, K = {result.k}, {getattr(result.output_format, 'name', result.output_format)} output",
        "validator": "bit-exact match per row against each model-space point",
        "inputs": f"{result.rows} rows, {result.points_searched} points searched",
    }
    f.update(fields or {})
    fig, ax = new_figure(f, width=8, height=max(3.0, 0.3 * len(labels) + 1))
    a = ax[0, 0]
    if labels:
        y = np.arange(len(labels))
        colors = ["tab:green" if e == result.rows else "tab:orange" for e in explained]
        a.barh(y, explained, color=colors)
        a.set_yticks(y, [lb[:70] for lb in labels], fontsize=6)
        a.invert_yaxis()
        a.axvline(result.rows, color="black", linewidth=0.6)
    a.set_xlabel(f"rows reproduced bit for bit (of {result.rows})")
    a.set_title(f"{len(result.consistent)} consistent points; named: {result.named or '-'}", fontsize=9)
    return fig


def _study_fields(test: str, gpus, kernel: str, validator: str, ranges, run_set: str) -> dict:
    return {
        "config": f"2022 study test {test}",
        "hardware": f"{','.join(gpus)} (measured lines)",
        "kernel": kernel,
        "validator": validator,
        "inputs": f"run set {run_set}, ranges {','.join(ranges) or '-'}, seed 1",
    }


def _cell_grid(a, colors, texts, row_labels, col_labels, good_rows):
    """A table of coloured cells (rows × columns) with text; ``good_rows`` labelled in bold green."""
    n_rows, n_cols = len(row_labels), len(col_labels)
    if not n_rows or not n_cols:
        a.axis("off")
        return
    a.imshow(np.asarray(colors, dtype=np.float64).reshape(n_rows, n_cols, 3), aspect="auto")
    for i in range(n_rows):
        for j in range(n_cols):
            a.text(j, i, texts[i][j], ha="center", va="center", fontsize=6)
    a.set_xticks(np.arange(n_cols), col_labels, fontsize=7)
    a.set_yticks(np.arange(n_rows), row_labels, fontsize=7)
    for i, tick in enumerate(a.get_yticklabels()):
        if i in good_rows:
            tick.set_color("tab:green")
            tick.set_fontweight("bold")


_GREEN, _RED, _ORANGE, _GREY = (0.70, 0.90, 0.70), (0.97, 0.70, 0.70), (0.99, 0.85, 0.60), (0.9, 0.9, 0.9)


def identify_study_figure(test: str, found: dict, lines: dict | None = None, *, gpus=("mi100", "mi200"),
                          run_set: str = "fair_1", fields: dict | None = None):  # fmt: skip
    """The study-line identification of one suite test (``fp16emu identify RAW_RESULTS --test``),
    one panel per GPU. Forward (``found``: {(test, gpu): [consistent StudyCandidate]}, ``lines``
    from ``identify_forward(..., lines_out=)``): a cell per candidate × range, green when the
    emulated line equals the measured one in every printed field, red with the number of fields
    that differ otherwise; n_exact emulated / measured in each cell; consistent candidates in bold
    green. Backward weight (``found``: {(test, gpu): [KBlocksVerdict]}): a cell per KBlocks ×
    (range, validator) with the measured n_exact against the emulated value or range; green
    inside, red outside (excluded), orange outside sampled orders (not shown)."""
    from .identify_study import ORDERS, UNITS, KBlocksVerdict

    gpus = [g for g in gpus if (test, g) in found]
    kblocks = any(isinstance(v, KBlocksVerdict) for g in gpus for v in found[(test, g)])
    if kblocks:
        cols = sorted({(c.range, c.validator) for g in gpus for v in found[(test, g)] for c in v.checks})
        ranges = sorted({r for r, _ in cols})
        f = _study_fields(
            test,
            gpus,
            "xdlops, split-K atomics; KBlocks " + ", ".join(str(v.kblocks) for v in found[(test, gpus[0])]),
            "-pv, -pv_with_gpu: n_exact (KBlocks ≤ 2: every field)",
            ranges,
            run_set,
        )
    else:
        lines = lines or {}
        ranges = sorted({r for g in gpus for r in lines.get((test, g), {}).get("measured", {})})
        f = _study_fields(
            test,
            gpus,
            f"xdlops; units {', '.join(UNITS)} × gemmK {', '.join(ORDERS)}",
            "-pv_with_gpu, every printed field",
            ranges,
            run_set,
        )
    f.update(fields or {})
    fig, ax = new_figure(f, ncols=max(1, len(gpus)), width=11.0 if len(gpus) < 2 else 6.5, height=4.5)
    for a, g in zip(ax[0], gpus):
        if kblocks:
            verdicts = found[(test, g)]
            colors, texts = [], []
            for v in verdicts:
                by = {(c.range, c.validator): c for c in v.checks}
                row_c, row_t = [], []
                for key in cols:
                    c = by.get(key)
                    if c is None:
                        row_c.append(_GREY)
                        row_t.append("-")
                        continue
                    row_c.append(_GREEN if c.ok else (_RED if c.exhaustive else _ORANGE))
                    emu_text = str(c.lo) if c.lo == c.hi else f"[{c.lo},{c.hi}]"
                    row_t.append(f"{c.measured}\n{emu_text}" + ("\nline differs" if c.whole_line and not c.ok else ""))
                colors.append(row_c)
                texts.append(row_t)
            labels = [f"KBlocks {v.kblocks}: {v.verdict}" for v in verdicts]
            good = {i for i, v in enumerate(verdicts) if v.verdict == "consistent"}
            col_labels = [f"{r}/{'gpu' if v == 'gpu' else 'cpu'}" for r, v in cols]
            _cell_grid(a, colors, texts, labels, col_labels, good)
            a.set_title(f"{g}: n_exact measured / emulated (range over add orders); consistent in bold", fontsize=8)
        else:
            doc = lines.get((test, g), {"measured": {}, "emulated": {}})
            cands = sorted({c for c, _ in doc["emulated"]}, key=lambda c: (c.unit, ORDERS.index(c.order)))
            consistent = set(found[(test, g)])
            colors, texts = [], []
            for c in cands:
                row_c, row_t = [], []
                for r in ranges:
                    want, got = doc["measured"].get(r), doc["emulated"].get((c, r))
                    if want is None or got is None:
                        row_c.append(_GREY)
                        row_t.append("-")
                        continue
                    bad = [k for k in want if got.get(k) != want[k]]
                    row_c.append(_RED if bad else _GREEN)
                    row_t.append(
                        f"{got.get('n_exact')}/{want.get('n_exact')}" + (f"\n{len(bad)} differ" if bad else "")
                    )
                colors.append(row_c)
                texts.append(row_t)
            labels = [c.label() for c in cands]
            _cell_grid(a, colors, texts, labels, list(ranges), {i for i, c in enumerate(cands) if c in consistent})
            a.set_title(f"{g}: {len(consistent)} consistent (bold); n_exact emulated/measured", fontsize=8)
        a.set_xlabel("range/validator" if kblocks else "input range")
    if not gpus:
        ax[0, 0].axis("off")
    return fig


def distribution_figure(samples: dict, thresholds: dict | None = None, metric: str = "metric", fields=None):
    """Histograms of a metric's values per label (e.g. rounding noise vs bug mutants), with the
    thresholds as vertical lines: for ``fp16emu design``."""
    fig, ax = new_figure(fields or {}, width=7)
    a = ax[0, 0]
    for label, values in samples.items():
        v = np.asarray(values, dtype=np.float64)
        v = v[np.isfinite(v)]
        if v.size:
            a.hist(v, bins=40, alpha=0.5, label=f"{label} ({v.size})")
    for name, t in (thresholds or {}).items():
        a.axvline(t, color="black", linestyle="--", linewidth=0.8)
        a.annotate(name, (t, 0), xytext=(2, 10), textcoords="offset points", fontsize=7, rotation=90)
    a.set_xlabel(metric)
    a.set_ylabel("count")
    a.legend(fontsize=7)
    return fig
