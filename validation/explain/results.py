"""What an explanation returns: :class:`Explanation` (with its text and its chart) and the
records it holds, :class:`MetricShares` (one metric's shares) and :class:`ElementExplanation` (one
of the worst elements)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import metrics as metrics_mod
from .sources import SOURCES

#: How the text and the chart name each metric.
METRIC_TITLES = {
    "rms": "RMS",
    "max_abs_diff": "maxAbsDiff",
    "max_epsilon_diff": "maxEpsilonDiff",
    "max_rel_diff": "maxRelDiff",
    "max_rel_diff_old": "maxRelDiff_old",
    "ave_abs_diff": "aveAbsDiff",
    "ave_rel_diff": "aveRelDiff",
    "n_nonfinite": "non-finite count",
}

_jf = metrics_mod.json_float  # JSON-safe float: non-finite as "inf" / "-inf" / "nan"


@dataclass(frozen=True)
class MetricShares:
    """One metric's attribution: ``total`` = metric(reference, kernel), ``shares`` the Shapley
    share of each source, ``interaction`` = total − Σ shares; ``values`` the metric of every
    variant (keys: the sources on, joined by "+", or "none")."""

    name: str
    total: float
    shares: Mapping[str, float]
    interaction: float
    main_effects: Mapping[str, float]
    values: Mapping[str, float]

    def fraction(self, source: str) -> float:
        """The share of ``source`` as a fraction of the total (nan when the total is 0)."""
        return self.shares[source] / self.total if self.total else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": _jf(self.total),
            "shares": {s: _jf(v) for s, v in self.shares.items()},
            "interaction": _jf(self.interaction),
            "main_effects": {s: _jf(v) for s, v in self.main_effects.items()},
            "variants": {k: _jf(v) for k, v in self.values.items()},
        }


@dataclass(frozen=True)
class ElementExplanation:
    """One of the worst elements: where, the reference and kernel values, and the smallest set of
    sources (``sources``, ``size`` of it) whose variant gives the kernel's value bit for bit."""

    index: int
    coords: tuple[int, ...]
    reference: float
    kernel: float
    epsilon_diff: float
    abs_diff: float
    sources: tuple[str, ...]
    epsilon_shares: Mapping[str, float]

    @property
    def size(self) -> int:
        return len(self.sources)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "coords": list(self.coords),
            "reference": _jf(self.reference),
            "kernel": _jf(self.kernel),
            "epsilon_diff": _jf(self.epsilon_diff),
            "abs_diff": _jf(self.abs_diff),
            "sources": list(self.sources),
            "size": self.size,
            "epsilon_shares": {s: _jf(v) for s, v in self.epsilon_shares.items()},
        }


@dataclass
class Explanation:
    """What :func:`explain` found. ``metrics`` maps each metric name to its :class:`MetricShares`;
    ``elements`` are the worst elements; ``verdict`` the paragraph in words; ``inactive`` says which
    switches cannot change anything here and why; ``comparison`` is the full
    :class:`validation.metrics.ComparisonResult` of the kernel against the reference."""

    config: str
    direction: str
    shape: tuple[int, ...]
    hw: str | None
    kernel: str
    validator: str
    reference: str
    metrics: dict[str, MetricShares]
    elements: list[ElementExplanation]
    verdict: str
    inactive: dict[str, str]
    comparison: Any = field(repr=False, default=None)
    gemm_variants: int = 0
    compared_variants: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    #: with ``keep_arrays=True``: every variant's output (float32, the result tensor's shape), keyed
    #: like :attr:`MetricShares.values` ("none" is the reference, the five sources joined the kernel)
    arrays: dict[str, np.ndarray] | None = field(repr=False, default=None)
    #: the inputs (:class:`validation.run.inputs.InputsInfo`): distribution, range, seed and sources
    inputs: Any = field(repr=False, default=None)
    #: the tensors' element format ("fp16" or "bf16"): what the kernel multiplies and writes, what
    #: the output-rounding and overflow switches round to, and the ulps of epsilonDiff
    format: str = "fp16"
    #: for a rocmlir-gen GEMM config, its :class:`validation.configs.GemmShape`: :attr:`shape` is
    #: then C's and the elements' coords are C's indices (g, m, n; g, n, m with -transC)
    gemm: Any = None

    def to_dict(self) -> dict[str, Any]:
        """``{"metrics": {METRIC: {"total", "shares", "interaction", …}}, "elements": [...],
        "verdict": "…"}`` plus the run's description; JSON-ready (non-finite floats as strings)."""
        return {
            "metrics": {k: m.to_dict() for k, m in self.metrics.items()},
            "elements": [e.to_dict() for e in self.elements],
            "verdict": self.verdict,
            "config": self.config,
            "direction": self.direction,
            "shape": list(self.shape),
            "hw": self.hw,
            "kernel": self.kernel,
            "validator": self.validator,
            "reference": self.reference,
            "sources": list(SOURCES),
            "inactive": dict(self.inactive),
            "element_sizes": _size_counts(self.elements),
            "gemm_variants": self.gemm_variants,
            "compared_variants": self.compared_variants,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "inputs": None if self.inputs is None else self.inputs.to_dict(),
            "format": self.format,
            "gemm": None if self.gemm is None else self.gemm.to_dict(),
        }

    def format_text(self) -> str:
        operation = "convolution" if self.gemm is None else "GEMM"
        ref = (
            f"exact fp64 {operation} (fp64 accumulation in the validator's order, rounded once to fp32)"
            if self.reference == "exact"
            else f"the validator {self.validator} (rounded to {self.format} as the verifier did)"
        )
        what = self.direction
        if self.gemm is not None:
            what = f"{self.gemm.describe()}, {self.format}; C {''.join(self.gemm.c_axes)}"
        lines = [
            f"{self.config}: {what}, result {'x'.join(map(str, self.shape))}",
            f"kernel {self.kernel}" + (f" on {self.hw}" if self.hw else "") + f"; reference: {ref}",
        ]
        if self.format != "fp16":  # fp16 is the default every fp16 report has always assumed
            lines.append(
                f"format: {self.format} tensors and {self.format} output; the output switches round to "
                f"{self.format}, epsilonDiff in {self.format} ulps"
            )
        if self.inputs is not None:
            lines.append(f"inputs: {self.inputs.text()}")
        for s, why in self.inactive.items():
            lines.append(f"  {s}: no effect here ({why})")
        width = max(len(s) for s in SOURCES)
        for name, m in self.metrics.items():
            lines.append(f"{METRIC_TITLES.get(name, name)} = {m.total:.6g}")
            for s in SOURCES:
                v = m.shares[s]
                pct = f"{100 * v / m.total:6.1f}%" if m.total and math.isfinite(v) else "      -"
                lines.append(f"  {s:<{width}}  {v:12.6g}  {pct}")
            lines.append(f"  {'interaction':<{width}}  {m.interaction:12.6g}")
        if self.elements:
            lines.append(
                f"worst {len(self.elements)} elements by epsilonDiff (smallest set of sources reproducing "
                f"the kernel's value bit for bit):"
            )
            for e in self.elements:
                lines.append(
                    f"  {e.coords}: ref {e.reference!r} kernel {e.kernel!r} eps {e.epsilon_diff:g} "
                    f"← {' + '.join(e.sources) or 'none'} ({e.size})"
                )
            sizes = _size_counts(self.elements)
            lines.append("  sizes: " + ", ".join(f"{k} source(s): {v}" for k, v in sizes.items()))
        lines.append("verdict: " + self.verdict)
        lines.append(
            f"({self.gemm_variants} GEMM variants, {self.compared_variants} distinct outputs measured, "
            f"{self.seconds.get('total', 0.0):.1f} s)"
        )
        return "\n".join(lines)

    def summary(self) -> str:
        return self.format_text()

    def plot(self, ax: Any = None) -> Any:
        """Stacked bars of the shares per metric, each as a fraction of the metric's total
        (negative shares stack below zero); returns the matplotlib Axes."""
        import matplotlib.pyplot as plt  # optional dependency, imported only here

        if ax is None:
            _, ax = plt.subplots(figsize=(1.6 + 1.4 * max(1, len(self.metrics)), 3.8))
        names = list(self.metrics)
        colors = dict(zip(SOURCES + ("interaction",), plt.get_cmap("tab10").colors))
        pos = np.zeros(len(names))
        neg = np.zeros(len(names))
        for part in SOURCES + ("interaction",):
            fr = np.array([_fraction(self.metrics[n], part) for n in names])
            base = np.where(fr >= 0, pos, neg)
            ax.bar(range(len(names)), fr, bottom=base, color=colors[part], label=part.replace("_", " "))
            pos += np.where(fr >= 0, fr, 0)
            neg += np.where(fr < 0, fr, 0)
        ax.set_xticks(range(len(names)), [METRIC_TITLES.get(n, n) for n in names])
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_ylabel("share of the total")
        ax.set_title(f"{self.kernel} on {self.hw or '-'}: error sources")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return ax


def _fraction(m: MetricShares, part: str) -> float:
    value = m.interaction if part == "interaction" else m.shares[part]
    if not m.total or not math.isfinite(value) or not math.isfinite(m.total):
        return 0.0
    return value / m.total


def _size_counts(elements: Sequence[ElementExplanation]) -> dict[int, int]:
    out: dict[int, int] = {}
    for e in elements:
        out[e.size] = out.get(e.size, 0) + 1
    return dict(sorted(out.items()))
