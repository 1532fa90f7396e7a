"""The result records of :func:`validation.metrics.compare`: :class:`ComparisonResult` and its text,
JSON and plot output; the :class:`Element`, :class:`Histogram`, :class:`NonFinite` and
:class:`AllClose` it holds; :data:`METRIC_NAMES`, what a verifier check can name; and
:func:`json_float`. Records only: nothing here measures."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .constants import DIFF4_MIN_MISMATCHES
from .policy import StudyPolicy


def json_float(x: Any) -> Any:
    """A float for JSON: finite as is; inf, -inf and NaN as the strings "inf", "-inf", "nan"."""
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


@dataclass(frozen=True)
class Element:
    """One element of the compared tensors.

    ``index`` is the row-major flat index, ``coords`` the same as tensor coordinates
    (``np.unravel_index``). ``validation`` is the value as compared (after any rounding) and
    ``validation_bits`` its pattern in ``validation_format``; ``validation_input`` is the value
    as given. Errors are those of the mode that measured them (NaN where undefined).
    """

    index: int
    coords: tuple[int, ...]
    validation: float
    kernel: float
    validation_bits: str
    kernel_bits: str
    validation_format: str
    kernel_format: str
    validation_input: float
    abs_diff: float
    rel_diff: float
    epsilon_diff: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "coords": list(self.coords),
            "validation": json_float(self.validation),
            "kernel": json_float(self.kernel),
            "validation_bits": self.validation_bits,
            "kernel_bits": self.kernel_bits,
            "validation_format": self.validation_format,
            "kernel_format": self.kernel_format,
            "validation_input": json_float(self.validation_input),
            "abs_diff": json_float(self.abs_diff),
            "rel_diff": json_float(self.rel_diff),
            "epsilon_diff": json_float(self.epsilon_diff),
        }


@dataclass(frozen=True)
class Histogram:
    """Counts per bucket; ``total`` is N, so ``percent`` are shares of all elements."""

    labels: tuple[str, ...]
    counts: tuple[int, ...]
    total: int

    @property
    def percent(self) -> tuple[float, ...]:
        if self.total == 0:
            return tuple(0.0 for _ in self.counts)
        return tuple(100.0 * c / self.total for c in self.counts)

    def as_dict(self) -> dict[str, int]:
        """``{label: count}`` in bucket order."""
        return dict(zip(self.labels, self.counts))

    def to_dict(self) -> dict[str, Any]:
        return {"labels": list(self.labels), "counts": list(self.counts),
                "percent": list(self.percent), "total": self.total}  # fmt: skip


@dataclass(frozen=True)
class NonFinite:
    """NaN and infinity, counted apart from the finite metrics.

    ``n_nan``: elements with a NaN on either side (``n_nan_both`` on both). ``n_inf``: elements
    with no NaN and an infinity on either side; ``n_inf_equal`` of them have v == k (counted in
    ``n_exact`` as well), ``n_inf_mismatch`` do not.
    """

    n_nan: int = 0
    n_nan_validation: int = 0
    n_nan_kernel: int = 0
    n_nan_both: int = 0
    n_inf: int = 0
    n_inf_validation: int = 0
    n_inf_kernel: int = 0
    n_inf_equal: int = 0

    @property
    def n_inf_mismatch(self) -> int:
        return self.n_inf - self.n_inf_equal

    @property
    def n_mismatch(self) -> int:
        """Elements whose mismatch no finite metric sees (NaN anywhere, or unequal infinities)."""
        return self.n_nan + self.n_inf_mismatch

    def to_dict(self) -> dict[str, int]:
        return {
            "n_nan": self.n_nan, "n_nan_validation": self.n_nan_validation,
            "n_nan_kernel": self.n_nan_kernel, "n_nan_both": self.n_nan_both,
            "n_inf": self.n_inf, "n_inf_validation": self.n_inf_validation,
            "n_inf_kernel": self.n_inf_kernel, "n_inf_equal": self.n_inf_equal,
            "n_inf_mismatch": self.n_inf_mismatch,
        }  # fmt: skip


@dataclass(frozen=True)
class AllClose:
    """Elementwise ``|k − v| <= atol + rtol·|v|``: how many elements fail, and the first one."""

    rtol: float
    atol: float
    equal_nan: bool
    n_fail: int
    first_fail: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"rtol": self.rtol, "atol": self.atol, "equal_nan": self.equal_nan,
                "n_fail": self.n_fail, "first_fail": self.first_fail}  # fmt: skip


@dataclass(frozen=True)
class ComparisonResult:
    """Everything :func:`compare` measured. Field meanings: :mod:`validation.metrics`."""

    n: int
    shape: tuple[int, ...]
    #: the data type the metrics were taken for (``dtype_hint``, default the kernel's type)
    dtype: str
    #: the input arrays' types (integer arrays count as fp64)
    validation_dtype: str
    kernel_dtype: str
    epsilon_format: str
    round_validation: str | None
    study_quirks: StudyPolicy | None
    n_exact: int
    n_eps1: int
    n_eps_ge2: int
    n_eps_other: int
    max_epsilon_diff: float
    max_abs_diff: float
    ave_abs_diff: float
    max_rel_diff: float
    max_rel_diff_old: float
    ave_rel_diff: float
    rms: float
    miopen_rms: float
    diff1: float
    diff2: float
    diff3: tuple[float, float]
    diff3_1: float
    diff3_2: float
    diff4: tuple[float | None, float | None, int]
    #: False when more than DIFF4_DISTINCT_LIMIT distinct pairs made diff4 fall back to diff4_all
    diff4_distinct: bool
    diff4_all: tuple[float | None, float | None, int]
    allclose: AllClose
    max_rel_diff_old_native: float
    nonfinite: NonFinite
    epsilon_histogram: Histogram
    rel_old_histogram: Histogram
    #: first element at each maximum: keys "epsilon_diff", "abs_diff", "rel_diff", "rel_diff_old";
    #: None where the maximum is the initial 0 (no element reached it)
    at_max: Mapping[str, Element | None]
    worst: tuple[Element, ...]
    nonfinite_elements: tuple[Element, ...]
    #: False when :func:`compare` ran with ``distinct_pairs=False``: diff4 is then not MLU-OPS's
    #: (``diff4`` holds the shares over all mismatches) and ``metric("diff4")`` raises
    diff4_measured: bool = True

    # -- what the verifier reads -----------------------------------------------------------------

    @property
    def diff4_value(self) -> float:
        """MLU-OPS's single DIFF4 number: p2, or −1 when fewer than 100 distinct mismatches."""
        p2, n = self.diff4[1], self.diff4[2]
        return -1.0 if n < DIFF4_MIN_MISMATCHES or p2 is None else float(p2)

    def metric(self, name: str) -> float:
        """The scalar a verifier check compares with its limit, by name.

        Names: the float fields (``rms``, ``max_abs_diff``, ``max_epsilon_diff``, ``diff1``, …),
        the counts (``n_eps_ge2``, …), ``diff3`` (max(m1, m2), MLU-OPS's single DIFF3 value),
        ``diff4`` (:attr:`diff4_value`), ``allclose`` (failing elements) and ``n_nonfinite``
        (:attr:`NonFinite.n_mismatch`).
        """
        if name == "diff3":
            return float(max(self.diff3))
        if name == "diff4":
            if not self.diff4_measured:
                raise ValueError("diff4 was not measured: compare(..., distinct_pairs=False) skips MLU-OPS's "
                                 "distinct mismatch pairs; compare again with distinct_pairs=True")  # fmt: skip
            return self.diff4_value
        if name == "allclose":
            return float(self.allclose.n_fail)
        if name == "n_nonfinite":
            return float(self.nonfinite.n_mismatch)
        if name in _METRIC_FIELDS:
            return float(getattr(self, name))
        valid = ", ".join(sorted(METRIC_NAMES))
        raise ValueError(f"unknown metric {name!r}; valid metrics: {valid}")

    # -- output ------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: :data:`STABLE_KEYS` first (``flags`` [] and ``verdict`` None until a
        verifier fills them), then detail keys. Non-finite floats are the strings "inf", "-inf",
        "nan", so ``json.dumps(..., allow_nan=False)`` works."""
        p1, p2, n4 = self.diff4
        a1, a2, an = self.diff4_all
        out: dict[str, Any] = {
            "n": self.n,
            "n_exact": self.n_exact,
            "n_eps1": self.n_eps1,
            "n_eps_ge2": self.n_eps_ge2,
            "n_eps_other": self.n_eps_other,
            "max_epsilon_diff": json_float(self.max_epsilon_diff),
            "max_abs_diff": json_float(self.max_abs_diff),
            "ave_abs_diff": json_float(self.ave_abs_diff),
            "max_rel_diff": json_float(self.max_rel_diff),
            "max_rel_diff_old": json_float(self.max_rel_diff_old),
            "ave_rel_diff": json_float(self.ave_rel_diff),
            "rms": json_float(self.rms),
            "diff1": json_float(self.diff1),
            "diff2": json_float(self.diff2),
            "diff3": [json_float(self.diff3[0]), json_float(self.diff3[1])],
            "diff4": [json_float(p1), json_float(p2), n4],
            "flags": [],
            "verdict": None,
            # details
            "shape": list(self.shape),
            "dtype": self.dtype,
            "validation_dtype": self.validation_dtype,
            "kernel_dtype": self.kernel_dtype,
            "epsilon_format": self.epsilon_format,
            "round_validation": self.round_validation,
            "study_run_set": None if self.study_quirks is None else self.study_quirks.run_set,
            "diff3_1": json_float(self.diff3_1),
            "diff3_2": json_float(self.diff3_2),
            "diff4_distinct": self.diff4_distinct,
            "diff4_all": [json_float(a1), json_float(a2), an],
            **({} if self.diff4_measured else {"diff4_measured": False}),
            "miopen_rms": json_float(self.miopen_rms),
            "allclose": self.allclose.to_dict(),
            "max_rel_diff_old_native": json_float(self.max_rel_diff_old_native),
            "nonfinite": self.nonfinite.to_dict(),
            "histograms": {
                "epsilon_diff": self.epsilon_histogram.to_dict(),
                "rel_diff_old": self.rel_old_histogram.to_dict(),
            },
            "at_max": {k: (None if e is None else e.to_dict()) for k, e in self.at_max.items()},
            "worst": [e.to_dict() for e in self.worst],
            "nonfinite_elements": [e.to_dict() for e in self.nonfinite_elements],
        }
        return out

    def format_text(self, *, report: bool = False, axes: tuple[str, ...] | None = None) -> str:
        """The metrics as text; ``report`` adds both histograms, the element at each maximum,
        the worst elements and the non-finite mismatches (coordinates named by ``axes``, e.g.
        ``("n", "k", "h", "w")``, when given)."""
        nf = self.nonfinite
        head = f"N {self.n} {self.dtype} shape {self.shape}"
        if self.study_quirks:
            head += f", study run set {self.study_quirks.run_set}"
        if self.round_validation:
            head += f", validation rounded to {self.round_validation}"
        lines = [
            head,
            (f"exact {self.n_exact}  eps=1 {self.n_eps1}  eps>=2 {self.n_eps_ge2}  other {self.n_eps_other}"),
            (f"nonfinite: NaN {nf.n_nan}  inf {nf.n_inf} (equal {nf.n_inf_equal}, mismatched {nf.n_inf_mismatch})"),
            (
                f"maxEpsilonDiff {self.max_epsilon_diff:g} ({self.epsilon_format} ulps)  maxAbsDiff "
                f"{self.max_abs_diff:g}  aveAbsDiff {self.ave_abs_diff:g}"
            ),
            (
                f"maxRelDiff {self.max_rel_diff:g}  maxRelDiff_old {self.max_rel_diff_old:g}  "
                f"aveRelDiff {self.ave_rel_diff:g}  RMS {self.rms:g} (sqrt(Σd²)/(sqrt(N)·max|v|,|k|))"
            ),
            (
                f"MLU-OPS diff1 {self.diff1:g}  diff2 {self.diff2:g}  diff3 ({self.diff3[0]:g}, "
                f"{self.diff3[1]:g})  diff4 {self.diff4}"
            ),
            (f"allclose(rtol={self.allclose.rtol:g}, atol={self.allclose.atol:g}): {self.allclose.n_fail} fail"),
        ]
        hists = [("epsilonDiff", self.epsilon_histogram)]
        if report:
            hists.append(("relDiff_old", self.rel_old_histogram))
        for name, h in hists:
            lines.append(
                f"{name}: " + "  ".join(f"{lab} {c} ({p:.4g}%)" for lab, c, p in zip(h.labels, h.counts, h.percent))
            )
        if not report:
            return "\n".join(lines)

        def show(e: Element) -> str:
            named = axes is not None and len(axes) == len(e.coords)
            where = " ".join(f"{a}={c}" for a, c in zip(axes, e.coords)) if named else f"{e.coords}"
            return (
                f"  {where}: v {e.validation!r} ({e.validation_bits}) k {e.kernel!r} "
                f"({e.kernel_bits}) eps {e.epsilon_diff:g} abs {e.abs_diff:g} "
                f"rel {e.rel_diff:g}"
            )

        for key, e in self.at_max.items():
            if e is not None:
                lines.append(f"max {key}:" + show(e))
        if self.worst:
            lines.append(f"worst {len(self.worst)} by epsilonDiff:")
            lines.extend(show(e) for e in self.worst)
        if self.nonfinite_elements:
            lines.append("non-finite mismatches:")
            lines.extend(show(e) for e in self.nonfinite_elements)
        return "\n".join(lines)

    def summary(self) -> str:
        """:meth:`format_text` with the full report (for a notebook or a terminal)."""
        return self.format_text(report=True)

    def __repr__(self) -> str:
        nf = self.nonfinite.n_mismatch
        return (
            f"<ComparisonResult N {self.n} {self.dtype} shape {self.shape}: exact {self.n_exact}, maxEpsilonDiff "
            f"{self.max_epsilon_diff:g} {self.epsilon_format} ulps, maxAbsDiff {self.max_abs_diff:g}, RMS "
            f"{self.rms:g}" + (f", {nf} NaN/inf mismatches" if nf else "") + ">"
        )

    def _repr_html_(self) -> str:
        return "<pre>" + html.escape(self.format_text()) + "</pre>"

    def plot(self, ax: Any = None, *, log: bool = True) -> Any:
        """Bar chart of the epsilonDiff histogram (matplotlib); returns the Axes."""
        import matplotlib.pyplot as plt  # optional dependency, imported only here

        if ax is None:
            _, ax = plt.subplots(figsize=(7, 3.5))
        h = self.epsilon_histogram
        bars = ax.bar(range(len(h.counts)), h.counts, color="tab:blue", log=log)
        ax.set_xticks(range(len(h.labels)), h.labels)
        for bar, pct in zip(bars, h.percent):
            if bar.get_height() > 0:
                ax.annotate(f"{pct:.3g}%", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=8)  # fmt: skip
        ax.set_xlabel(f"epsilonDiff ({self.epsilon_format} ulps)")
        ax.set_ylabel("elements")
        ax.set_title(f"epsilonDiff, N = {self.n}, max {self.max_epsilon_diff:g}")
        return ax


_METRIC_FIELDS = (
    "n", "n_exact", "n_eps1", "n_eps_ge2", "n_eps_other", "max_epsilon_diff", "max_abs_diff",
    "ave_abs_diff", "max_rel_diff", "max_rel_diff_old", "ave_rel_diff", "rms", "miopen_rms",
    "diff1", "diff2", "diff3_1", "diff3_2", "max_rel_diff_old_native",
)  # fmt: skip
#: Every name :meth:`ComparisonResult.metric` accepts (what a verifier check can name).
METRIC_NAMES = (*_METRIC_FIELDS, "diff3", "diff4", "allclose", "n_nonfinite")
