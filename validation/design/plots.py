"""The distribution of a metric's samples against thresholds (validation design).

Shared parts (titles, saving, the common panels): :mod:`validation.plots`.
"""

from __future__ import annotations

import numpy as np

from ..plots import new_figure

__all__ = ["distribution_figure"]


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
