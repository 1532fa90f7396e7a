"""Figures of a run and of two arrays compared (``fp16emu run/compare --plot``).

Shared parts (titles, saving, the common panels): :mod:`validation.plots`.
"""

from __future__ import annotations

import numpy as np

from .. import metrics
from ..plots import error_vs_magnitude, new_figure, ulps_heatmap

__all__ = ["run_figure", "compare_figure"]


def run_figure(result, comparison=None, fields: dict | None = None):
    """Histogram, error vs magnitude and the channel/tap heat map of a
    :class:`validation.run.RunResult` (kernel output against the validation)."""
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
    fmt = comparison.epsilon_format  # the kernel's format: every panel in its ulps, as the text
    error_vs_magnitude(ax[0, 1], v, k, rounded_exact=getattr(comparison, "n_exact", None), fmt=fmt)
    ulps_heatmap(ax[0, 2], v, k, axes, dims, fmt=fmt)
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
    validation, kernel = np.asarray(validation), np.asarray(kernel)
    if comparison is None:
        comparison = metrics.compare(validation, kernel)
    fig, ax = new_figure(fields or {}, ncols=3)
    comparison.plot(ax=ax[0, 0])
    fmt = comparison.epsilon_format  # the kernel's format: every panel in its ulps, as the text
    error_vs_magnitude(ax[0, 1], validation, kernel, fmt=fmt)
    axes, dims = _array_axes(validation.shape)
    title = "max error per axis 1 (rows) and later axes"
    ulps_heatmap(ax[0, 2], validation, kernel, axes, dims, title=title, fmt=fmt)
    return fig
