"""The picture of a capture search: where the GPU's output differs from the schedule found (or the
nearest one), in ulps, over the output laid out as a matrix."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from ..files import write_atomically
from .capture import Capture
from .gemms import SearchResult
from .report import suspects, ulps_between

__all__ = ["plot_capture"]


def _as_matrix(x: np.ndarray) -> np.ndarray:
    """An output as 2-D: GEMMs as they are, batches stacked, convolutions (N·K or K·C) × (rest)."""
    if x.ndim == 2:
        return x
    if x.ndim == 1:
        return x[None]
    if x.ndim == 3:
        return x.reshape(-1, x.shape[-1])
    return x.reshape(x.shape[0] * x.shape[1], -1)


def _span(v) -> tuple[int, int]:
    """An axis of a cause's place: one index, or an inclusive [first, last] range."""
    return (int(v), int(v)) if np.isscalar(v) else (int(v[0]), int(v[1]))


def _box_cause(ax, cause: dict, cap: Capture) -> None:
    """Box each output place the likely cause names (a tile, or the elements whose bits flipped),
    and say what it is."""
    from matplotlib.patches import Rectangle

    places = cause["where"] if isinstance(cause["where"], list) else [cause["where"]]
    for w in places:
        if "m" not in w or "n" not in w:
            continue
        (m0, m1), (n0, n1) = _span(w["m"]), _span(w["n"])
        if "batch" in w and cap.out.ndim == 3:  # batches are stacked by rows (_as_matrix)
            b0, b1 = _span(w["batch"])
            m0, m1 = m0 + b0 * cap.out.shape[1], m1 + b1 * cap.out.shape[1]
        ax.add_patch(Rectangle((n0 - 0.5, m0 - 0.5), n1 - n0 + 1, m1 - m0 + 1, fill=False, edgecolor="#2166ac", lw=1.5))
        label = cause["mutant"] + (f": k {w['k'][0]}..{w['k'][1]}" if "k" in w else "")
        ax.annotate(label, (n0, m0), xytext=(0, 3), textcoords="offset points", fontsize=7, color="#2166ac")


def plot_capture(cap: Capture, result: SearchResult, path, reading=None) -> None:
    """Save the figure to ``path`` (PNG, SVG or PDF by its suffix). ``reading``: the
    :class:`validation.captures.report.CaptureReading` whose one word the title states (for a
    mix-up, the figure shows the capture read as the match says, against its schedule)."""
    word = reading.reading if reading is not None else None
    how = ""
    if reading is not None and reading.mixup is not None:
        cap, result = reading.mixup.mixup.capture, reading.mixup.result
        how = f" ({reading.mixup.mixup.describe()})"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    got = np.ascontiguousarray(cap.out)
    emulated = np.ascontiguousarray(result.emulated.astype(cap.out.dtype))
    ulps = ulps_between(got, emulated)
    ulps = np.where(np.isfinite(ulps), ulps, np.nan)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.8), gridspec_kw={"width_ratios": [1.6, 1]})
    mat = _as_matrix(ulps).astype(float)
    if (mat > 0).any():
        im = ax0.imshow(np.where(mat > 0, mat, np.nan), aspect="auto", interpolation="nearest", cmap="magma_r")
        fig.colorbar(im, ax=ax0, label="|GPU − emulated|\n(ulps of the output format at the larger magnitude)")
    else:
        ax0.imshow(np.zeros_like(mat), aspect="auto", interpolation="nearest", cmap="Greys", vmin=0, vmax=4)
    cause = reading.cause if reading is not None else None
    if cause and cause.get("where"):
        _box_cause(ax0, cause, cap)
    rows = "rows: " + ("m" if cap.conv is None else "(n, k)" if cap.op == "conv2d" else "leading axes")
    ax0.set_xlabel("columns (the output's trailing axes)")
    ax0.set_ylabel(rows)
    s = suspects(cap, emulated)
    ax0.set_title(
        f"{s['n_differ']} of {result.n} outputs differ" if s["n_differ"] else f"all {result.n} outputs identical"
    )
    d = ulps[np.isfinite(ulps) & (ulps > 0)]
    if d.size:
        ax1.hist(np.log2(d.astype(float)), bins=min(40, max(5, int(np.log2(d.max()) + 1))), color="#b2182b")
        ax1.set_xlabel("log2 ulps of the differing outputs")
        ax1.set_ylabel("outputs")
    else:
        ax1.text(0.5, 0.5, "every output bit\nreproduced", ha="center", va="center", fontsize=13)
        ax1.set_axis_off()
    schedule = result.best.describe() if result.best else "-"
    label = "schedule" if result.answer in ("identical", "inside-ensemble") else "nearest schedule"
    why = f"; likely cause: {cause['mutant']}" if cause else ""
    title = f"{cap.op} {cap.describe().split(': ', 1)[1]} — {(word or result.answer).upper()}{how}{why} (unit {result.unit})"
    sub = textwrap.fill(f"{label}: {schedule}", 150)
    fig.suptitle(title + "\n" + sub, fontsize=8.5)
    fig.tight_layout(rect=(0, 0, 1, 0.86))
    try:  # the one writer (validation.files): a temporary file then a rename, never through a link
        fmt = Path(path).suffix[1:].lower() or "png"
        write_atomically(path, lambda fh: fig.savefig(fh, format=fmt, dpi=110), "--plot")
    except OSError as err:
        raise ValueError(f"--plot: cannot write {str(path)!r} ({err.strerror or err})") from None
    finally:
        plt.close(fig)
