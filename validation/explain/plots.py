"""The figure of an explanation (``fp16emu explain --plot``).

Shared parts (titles, saving, the common panels): :mod:`validation.plots`.
"""

from __future__ import annotations

from ..plots import error_vs_magnitude, new_figure, ulps_heatmap
from .sources import SOURCES

__all__ = ["explain_figure"]


def explain_figure(expl, problem=None, fields: dict | None = None):
    """The shares (stacked bars) of a :class:`validation.explain.Explanation`; with its arrays
    (``keep_arrays=True``) also the kernel's error vs magnitude and, given the ``problem``, the heat
    map of the subnormal-flush variant's error (where the flushed subnormals sit)."""
    f = {"config": f"{expl.config} ({expl.direction})", "hardware": expl.hw, "kernel": expl.kernel,
         "validator": f"{expl.validator}; reference {expl.reference}", "inputs": None}  # fmt: skip
    f.update(fields or {})
    arrays = expl.arrays
    fig, ax = new_figure(f, ncols=3 if arrays is not None else 1, width=5.5)
    expl.plot(ax=ax[0, 0])
    if arrays is not None:
        ref, kern = arrays["none"], arrays["+".join(SOURCES)]
        fmt = expl.format  # the tensors' format: the panels in its ulps, as the text
        error_vs_magnitude(ax[0, 1], ref, kern, label="kernel vs exact", fmt=fmt)
        if problem is not None:
            role = problem.result_role
            axes = tuple(problem.layout5(role))
            sizes = problem.letter_sizes(role)
            ulps_heatmap(ax[0, 2], ref, arrays["subnormal_flush"], axes, tuple(sizes[a] for a in axes),
                         title="error of the subnormal flush alone (where subnormals sit)", fmt=fmt)  # fmt: skip
        else:
            ax[0, 2].axis("off")
    return fig
