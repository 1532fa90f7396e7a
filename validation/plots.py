"""Pictures for the command line's ``--plot FILE.png`` and for notebooks (matplotlib, headless).

Every figure is titled with what it shows: the config, the hardware, the kernel, the validator and
the inputs (:data:`TITLE_FIELDS`); the title is the figure's ``suptitle`` and, in a PNG, its
``Title`` text chunk (:func:`read_png_text` reads it back). Figures are
:class:`matplotlib.figure.Figure` objects on the Agg canvas: no display, no pyplot state.

Panels: the epsilonDiff histogram (:meth:`validation.metrics.ComparisonResult.plot`), the error
against the output's magnitude (|kernel − validation| against |validation|, with half an ulp of
the kernel's format at the validation value drawn for scale), and a heat map of the largest error
in ulps of that format (fp16 unless the caller says) at the validation value, per channel (rows) and per tap or output position (columns), the other axes
reduced by their maximum.

:func:`check_path` is called before any computation: a missing or unwritable folder, a folder or
FIFO at the name, or a file type matplotlib cannot write here, is a usage error (exit 2).
:func:`save` writes through :func:`validation.files.write_atomically`.
"""

from __future__ import annotations

import io
import json
import struct
import textwrap
import zlib
from pathlib import Path

import numpy as np

from emu.formats import spacing

from .files import check_output_file, write_atomically

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
]

TITLE_FIELDS = ("config", "hardware", "kernel", "validator", "inputs")
SUFFIXES = (".png", ".pdf", ".svg")
MAX_POINTS = 20_000  # scatter points drawn (an evenly spaced subset beyond this)


def check_path(path, option: str = "--plot") -> Path:
    """``path`` as a Path when a figure can be written there (a known suffix, and
    :func:`validation.files.check_output_file`: a folder that exists and takes a new file, no
    folder, FIFO or device at the name); ValueError naming ``option`` otherwise."""
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise ValueError(f"{option}: {str(path)!r} must end in {', '.join(SUFFIXES)}")
    return check_output_file(p, option)


#: characters of a 9-point title line per inch of figure width (DejaVu Sans, a margin kept)
TITLE_CHARS_PER_INCH = 13


def title_text(fields: dict, width: int | None = None) -> str:
    """The title line(s): every field of :data:`TITLE_FIELDS` as ``name: value`` ("-" when unknown).

    With ``width`` (characters), a line that would be longer is split: the middle line into one
    line per field, and any field still longer wrapped at spaces, so that nothing is cut off."""
    parts = [f"{k}: {fields.get(k) if fields.get(k) not in (None, '') else '-'}" for k in TITLE_FIELDS]
    lines = [parts[0], " | ".join(parts[1:4]), parts[4]]
    if width is None:
        return "\n".join(lines)
    out = []
    for i, line in enumerate(lines):
        for seg in [line] if len(line) <= width or i != 1 else parts[1:4]:
            out.extend(textwrap.wrap(seg, width, break_long_words=False, break_on_hyphens=False) or [seg])
    return "\n".join(out)


def new_figure(fields: dict, ncols: int = 1, nrows: int = 1, width: float = 5.0, height: float = 4.0):
    """(Figure, axes array) titled with ``fields``; ``fig.fp16emu_fields`` keeps them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    title = title_text(fields, width=int(width * ncols * TITLE_CHARS_PER_INCH))
    extra = max(0, title.count("\n") - 2) * 0.16  # room for the lines a long title wraps into
    fig = Figure(figsize=(width * ncols, height * nrows + 0.9 + extra), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    fig.suptitle(title, fontsize=9)
    fig.fp16emu_fields = {k: fields.get(k) for k in TITLE_FIELDS}
    fig._repr_png_ = lambda: _png_bytes(fig)  # shown inline by Jupyter without pyplot
    return fig, axes


def _png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return buf.getvalue()


def save(fig, path) -> Path:
    """Write ``fig`` to ``path`` (PNG: the title and the fields as text chunks) with
    :func:`validation.files.write_atomically`: never through a link, the old file kept whole
    when the write fails."""
    p = Path(path)
    kw = {}
    if p.suffix.lower() == ".png":
        kw["metadata"] = {
            "Title": fig.get_suptitle(),
            "Description": json.dumps(getattr(fig, "fp16emu_fields", {}), default=str),
            "Software": "fp16emu",
        }
    try:  # a temporary file then a rename: a link at ``p`` is replaced, a cut-short write leaves the old file
        write_atomically(p, lambda fh: fig.savefig(fh, format=p.suffix[1:].lower() or "png", dpi=110, **kw), "--plot")
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


def _format_spacing(magnitudes: np.ndarray, fmt: str) -> np.ndarray:
    """The spacing of ``fmt`` at each magnitude: fp16's as numpy gives it at the fp16 value,
    another format's from :func:`emu.formats.spacing` (its binade's ulp; the subnormal one below)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if fmt == "fp16":
            return np.spacing(magnitudes.astype(np.float16)).astype(np.float64)
        return spacing(magnitudes, fmt)


def _ulps(validation: np.ndarray, kernel: np.ndarray, fmt: str = "fp16") -> np.ndarray:
    """|kernel − validation| in ulps of ``fmt`` (the kernel's format) at the validation value."""
    v, k = _flat64(validation), _flat64(kernel)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.abs(k - v) / _format_spacing(np.abs(v), fmt)


def error_vs_magnitude(
    ax, validation, kernel, label: str = "elements", rounded_exact: int | None = None, fmt: str = "fp16"
):
    """Scatter |kernel − validation| against |validation| (log-log), with half an ulp of ``fmt`` (the
    kernel's format) for scale; exact elements counted in the title. ``rounded_exact``: the count of
    elements exact against the validation rounded to ``fmt`` (the text report's "exact"), said
    beside the unrounded count so the two agree."""
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
        half = _format_spacing(xs, fmt) / 2
        ax.plot(xs, half, color="black", linewidth=0.8, label=f"½ {fmt} ulp of |validation|")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("|validation| (output magnitude)")
    ax.set_ylabel("|kernel − validation|")
    if rounded_exact is None:
        ax.set_title(f"error vs magnitude ({int((ok & (err == 0)).sum())} of {v.size} exact)", fontsize=9)
    else:
        # the text's "exact" compares with the validation rounded to fmt; the scatter with its fp32 value
        ax.set_title(
            f"|kernel − fp32 validation, unrounded|: {int((ok & (err == 0)).sum())} of {v.size} equal\n"
            f"(rounded to {fmt} first: {rounded_exact} of {v.size} exact, as in the text)",
            fontsize=8,
        )
    ax.legend(fontsize=7)
    return ax


def _heat_layout(axes: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    channel = "k" if "k" in axes else ("c" if "c" in axes else axes[0])
    taps = tuple(a for a in axes if a in ("y", "x")) or tuple(a for a in axes if a in ("h", "w"))
    if channel == "k" and "c" in axes and not taps:
        taps = ("c",)
    return channel, taps


def ulps_heatmap(
    ax,
    validation,
    kernel,
    axes: tuple[str, ...],
    dims: tuple[int, ...],
    title: str | None = None,
    fmt: str = "fp16",
):
    """Max error in ulps of ``fmt`` (the kernel's format) per channel (rows) and per tap / position
    (columns, the spatial axes flattened); the remaining axes reduced by their maximum. ``axes``
    names the result tensor's axes in memory order (e.g. ``("n", "h", "w", "g", "k")``), ``dims``
    their sizes."""
    u = _ulps(validation, kernel, fmt).reshape(dims)
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
    ax.figure.colorbar(im, ax=ax, label=f"max error ({fmt} ulps)")
    ax.set_ylabel(f"channel {channel}")
    ax.set_xlabel(f"{'tap' if set(taps) <= {'y', 'x', 'c'} and taps else 'position'} {'·'.join(taps) or '-'}")
    ax.set_title(title or f"where the error sits (max over {', '.join(axes[i] for i in rest) or '-'})", fontsize=9)
    return ax


# --- figures ------------------------------------------------------------------------------------
