"""Error metrics between a validation result and a kernel result, streamed in chunks.

:func:`compare` walks two arrays of any shape (float16, bfloat16, float32, float64; the same
shape) in row-major order, ``chunk`` elements at a time, so a 205,520,896-element comparison
holds a few chunk-sized temporaries and never a float64 copy of the whole tensor. It returns a
:class:`ComparisonResult`: the rocMLIR verifiers' metrics (maxAbsDiff, maxRelDiff, epsilonDiff
in ulps, RMS), the MLU-OPS set, torch/numpy ``allclose``, MIOpen's RMS, the two histograms, the first element at each maximum and the ``top`` worst
elements (tensor coordinates, values, bit patterns). ``validation`` measures; it does not
implement the arithmetic of the emulated hardware.

Definitions (``v`` validation, ``k`` kernel, ``d = |v − k|``, N = all elements)
-------------------------------------------------------------------------------
Computed in float64 over the elements where both values are finite; NaN and ±inf are counted
and reported apart (:class:`NonFinite`) and never enter a maximum, a sum or a histogram bucket
other than ``"nonfinite"``. Equal infinities are exact matches (``v == k``), as in the C
verifiers.

* ``n_exact``: ``v == k`` (so −0 == +0, and inf == inf); ``n_eps1``: ε == 1;
  ``n_eps_ge2``: ε ≥ 2; ``n_eps_other``: any other finite difference (0 < ε < 1, 1 < ε < 2).
  ``n = n_exact + n_eps1 + n_eps_ge2 + n_eps_other + nonfinite.n_nan + nonfinite.n_inf_mismatch``.
* epsilonDiff ε = d / spacing(min(|v|, |k|)) with spacing(x) = 2^(max(⌊log2 x⌋, emin) − t) of
  the *epsilon format*: the data type (``dtype_hint``, default the kernel's dtype), so fp16 ulps
  for fp16 data (2^-24 below 2^-13); fp64 data use emin −1022, t 52.
* maxAbsDiff, maxRelDiff (over v ≠ 0), maxRelDiff_old (over |v| > 1e-3), maxEpsilonDiff: the
  largest value; the element reported at a maximum is its first occurrence in row-major order.
  A maximum over no element is 0 (the C verifiers' initial value).
* aveAbsDiff = Σd / N, aveRelDiff = Σ_{v≠0} d/|v| / N (both divide by all N, as the study).
* RMS = sqrt(Σd²) / (sqrt(N) · max over finite elements of max(|v|, |k|)); 0 when Σd² = 0.
  ``miopen_rms``: MIOpen's ``rms_range`` (the magnitude floored at DBL_MIN, N = 0 gives 0):
  the same value wherever RMS is defined (MIOpen's driver, github.com/ROCm/MIOpen).
* MLU-OPS accuracy standard (github.com/Cambricon/mlu-ops,
  ``test/mlu_op_gtest/pb_gtest/include/evaluator.h``), baseline b = v,
  evaluated e = k: diff1 = Σ|e−b| / (Σ|b| + 1e-9); diff2 = sqrt(Σ(e−b)² / (Σb² + 1e-9));
  diff3 = (m1, m2): m1 = max |e−b|/(|b| + 1e-9) over |b| ≥ th, m2 = max |e−b| over |b| < th,
  th = 1e-4 (fp16), 1e-6 (fp32), 0 otherwise (the evaluator's EPSILON_HALF / EPSILON_FLOAT;
  no fp16/fp32 value equals th, so ≥ and the standard's > agree); diff3_1 = max |e−b|/|b| over b ≠ 0;
  diff3_2 = max |e−b|; diff4 = (p1, p2, n) over the *distinct* mismatching (e, b) pairs, as
  the evaluator's ``unordered_set`` counts them: p1 share with e > b, p2 share with e < b (the
  evaluator's DIFF4 value), n the number of distinct pairs (p1, p2 are None when n = 0).
  ``diff4_all`` gives the same over all mismatching elements.
* ``allclose``: an element fails when d > atol + rtol·|v| (torch.testing.assert_close and
  numpy.isclose with the validation as the expected value), computed in float64; a non-finite
  element passes only when v == k (or both NaN with ``equal_nan``). Default (rtol, atol): the
  torch.testing defaults of the data type (:data:`TORCH_TOLERANCES`).
* ``max_rel_diff_old_native``: the old (Aug 2022) rocMLIR verifier's per-element quantity
  |(v − k)/v| computed in the data type's own arithmetic (fp16 for fp16 data, both values first
  rounded to it, RNE) over v ≠ k, restricted to |v| > 0.001 rounded to the type for types
  narrower than 32 bits (rocMLIR's ``mcpuVerify5DFloat`` in
  ``mlir/lib/ExecutionEngine/conv-validation-wrappers.cpp`` on main in Aug 2022,
  github.com/ROCm/rocMLIR); NaN quotients are ignored as the C ``>`` comparison ignores them.

Histograms (:class:`Histogram`; counts sum to N, percentages are of N)
-----------------------------------------------------------------------
* epsilonDiff (:data:`EPSILON_BUCKETS`): "0" = ``n_exact``; then (0,1], (1,2], (2,10],
  (10,100], >100, which are the study's buckets 1, 2, [3,10], [11,100], >100 for integer ε;
  "nonfinite" =
  NaN and unequal infinities.
* relDiff_old (:data:`REL_OLD_BUCKETS`): over the elements in its domain (|v| > 1e-3), "0" for
  exact ones, then (0,1e-6), [1e-6,1e-5), …, [0.1,1), >=1; outside the domain "v == 0" and
  "excluded" (0 < |v| <= 1e-3); "nonfinite" as above. The study's own edges are known only from
  its summary tables (github.com/zhanglx13/llvm-project-mlir-dev-utils, ``fp16_experiment``).

Worst elements: the ``top`` largest ε (ties: the lower index first), each an :class:`Element`
with row-major index, tensor coordinates, values and bit patterns; the first ``top`` non-finite
mismatches are listed apart (``nonfinite_elements``). diff4 keeps at most
:data:`DIFF4_DISTINCT_LIMIT` distinct pairs; beyond that it reports the shares over all
mismatching elements (``diff4_distinct`` False), which leaves MLU-OPS's verdict unchanged.

Study compatibility mode (``study_quirks``)
-------------------------------------------
With ``study_quirks`` naming a run set of the 2022 study (``fair_1``, ``fair_2``, ``fair_3``,
``fair_rand0``; :data:`STUDY_RUN_SETS`), the headline metrics follow the study's instrumented C
verifier ``mcpuVerify5DFloatFloat`` line for line (:mod:`validation.verifier2022` describes it,
its line and its quirks per run set): both values float32,
the validation first cast to float32 and then rounded to fp16 (RNE) and back; elements with
``v == k`` skipped; absDiff = fabs(v − k) in float32; ε = absDiff / halfFloatInterval(min(|v|,|k|))
in float32, where fair_1/fair_2 take 2^(e−10) for 2^e < x ≤ 2^(e+1) (the binade below at exact
powers of two; 2^-24 for x ≤ 2^-13) and fair_3/fair_rand0 the true fp16 ulp, and both give 0
above 2^16 (so ε = inf); relDiff = (double)absDiff / |v| over v ≠ 0; maxRelDiff_old over
|v| > 1.0004e-3f, except fair_1 over v > 1.0004e-3f (the sign bug); sums in double in element
order; averages and RMS divide by N; NaN and inf take part as they do in C (maxima skip NaN,
sums propagate it) and a NaN printed as ``-nan`` is made the way x86 makes it. The histograms
and the worst-element list then use that ε; the MLU-OPS, allclose and MIOpen metrics stay
float64 over the fp16-rounded validation. :func:`validation.verifier2022.format_study_line`
prints the line.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from emu.formats import FP16, FP32, FloatFormat, format_bits, resolve_format, spacing
from emu.rounding import cast_rne, round_rne

from .verifier2022 import (
    STUDY_REL_OLD_THRESHOLD,
    STUDY_RUN_SETS,
    StudyQuirks,
    resolve_study_quirks,
    study_interval,
)

__all__ = [
    "DEFAULT_CHUNK",
    "REL_OLD_THRESHOLD",
    "STUDY_REL_OLD_THRESHOLD",
    "TORCH_TOLERANCES",
    "MLU_EPSILON",
    "MLU_DIFF3_THRESHOLDS",
    "DIFF4_MIN_MISMATCHES",
    "DIFF4_DISTINCT_LIMIT",
    "EPSILON_BUCKETS",
    "REL_OLD_BUCKETS",
    "STABLE_KEYS",
    "METRIC_NAMES",
    "STUDY_RUN_SETS",
    "StudyQuirks",
    "resolve_study_quirks",
    "resolve_dtype",
    "spacing",
    "json_float",
    "Element",
    "Histogram",
    "NonFinite",
    "AllClose",
    "ComparisonResult",
    "Comparison",
    "compare",
]

#: Elements per chunk: about 8 MiB per float64 temporary.
DEFAULT_CHUNK = 1 << 20
#: maxRelDiff_old takes |v| above this (the old rocMLIR verifier's magnitude rule).
REL_OLD_THRESHOLD = 1e-3
#: torch.testing.assert_close defaults (rtol, atol) per data type (PyTorch's torch.testing table).
TORCH_TOLERANCES: Mapping[str, tuple[float, float]] = {
    "fp16": (1e-3, 1e-5),
    "bf16": (1.6e-2, 1e-5),
    "fp32": (1.3e-6, 1e-5),
    "fp64": (1e-7, 1e-7),
}
#: The ``EPSILON`` added to MLU-OPS denominators (evaluator.h).
MLU_EPSILON = 1e-9
#: diff3's split between relative and absolute error (evaluator.h EPSILON_HALF / EPSILON_FLOAT;
#: other types keep the evaluator's 0).
MLU_DIFF3_THRESHOLDS: Mapping[str, float] = {"fp16": 1e-4, "fp32": 1e-6, "bf16": 0.0, "fp64": 0.0}
#: diff4 is ignored below this many distinct mismatching pairs (evaluator.h ``computeDiff4``).
DIFF4_MIN_MISMATCHES = 100
#: Distinct diff4 pairs kept exactly (8 bytes each); beyond, diff4 is taken over all mismatches.
DIFF4_DISTINCT_LIMIT = 1 << 22

#: epsilonDiff histogram buckets (the study's 0, 1, 2, [3,10], [11,100], >100 for integer ε; written
#: as half-open intervals so fractional ε of non-fp16 data has a bucket too).
EPSILON_BUCKETS = ("0", "(0,1]", "(1,2]", "(2,10]", "(10,100]", ">100", "nonfinite")
_EPS_EDGES = np.array([1.0, 2.0, 10.0, 100.0])
#: relDiff_old histogram buckets (the study's) plus the elements outside its domain, so counts sum
#: to N.
REL_OLD_BUCKETS = (
    "0", "(0,1e-6)", "[1e-6,1e-5)", "[1e-5,1e-4)", "[1e-4,1e-3)", "[1e-3,1e-2)",
    "[1e-2,1e-1)", "[1e-1,1)", ">=1", "v == 0", "excluded", "nonfinite",
)  # fmt: skip
_REL_EDGES = np.array([1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0])

#: The keys every :meth:`ComparisonResult.to_dict` has, in this order (issue 4).
STABLE_KEYS = (
    "n", "n_exact", "n_eps1", "n_eps_ge2", "n_eps_other", "max_epsilon_diff", "max_abs_diff",
    "ave_abs_diff", "max_rel_diff", "max_rel_diff_old", "ave_rel_diff", "rms", "diff1", "diff2",
    "diff3", "diff4", "flags", "verdict",
)  # fmt: skip

_NEG_NAN = math.copysign(math.nan, -1.0)  # x86's default NaN: what 0/0, inf/inf give in C there

# ------------------------------------------------------------------------------------------------
# Data types


def resolve_dtype(dtype: Any) -> str:
    """Short name ("fp16", "bf16", "fp32", "fp64") of a data type given by name or numpy dtype
    (:func:`emu.formats.resolve_format`: ``ValueError`` naming the valid names for an unknown
    name, ``TypeError`` for a dtype that is not one of the four float types)."""
    return resolve_format(dtype).short_name


def _dtype_name_of(a: np.ndarray) -> str:
    """Short name of an input array's type; integer and bool arrays are read as float64."""
    if a.dtype.kind in "biu":
        return "fp64"
    return resolve_dtype(a.dtype)


def _bits_hex(value: Any, fmt: FloatFormat) -> str:
    """Bit pattern of one value of ``fmt``, as 0x-prefixed hex of the format's width."""
    return format_bits(int(np.asarray(value, dtype=fmt.float_dtype).view(fmt.uint_dtype)), fmt)


def _orig_bits(a: np.ndarray, i: int, fmt: FloatFormat) -> str:
    """Bit pattern of element ``i`` of an input array as stored (NaN payloads kept)."""
    x = np.asarray(a.flat[i])
    if x.dtype == fmt.float_dtype:
        return format_bits(int(x.view(fmt.uint_dtype)), fmt)
    return _bits_hex(float(x), fmt)  # integer input read as float64


# ------------------------------------------------------------------------------------------------
# Result records


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
    """Everything :func:`compare` measured. Field meanings: the module docstring."""

    n: int
    shape: tuple[int, ...]
    #: the data type the metrics were taken for (``dtype_hint``, default the kernel's type)
    dtype: str
    #: the input arrays' types (integer arrays count as fp64)
    validation_dtype: str
    kernel_dtype: str
    epsilon_format: str
    round_validation: str | None
    study_quirks: StudyQuirks | None
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

    def format_text(self, *, report: bool = False) -> str:
        """The metrics as text; ``report`` adds both histograms, the element at each maximum,
        the worst elements and the non-finite mismatches."""
        nf = self.nonfinite
        head = f"N {self.n} {self.dtype} shape {self.shape}"
        if self.study_quirks:
            head += f", study run set {self.study_quirks.run_set}"
        if self.round_validation:
            head += f", validation rounded to {self.round_validation}"
        lines = [
            head,
            f"exact {self.n_exact}  eps=1 {self.n_eps1}  eps>=2 {self.n_eps_ge2}  "
            f"other {self.n_eps_other}",
            f"nonfinite: NaN {nf.n_nan}  inf {nf.n_inf} (equal {nf.n_inf_equal}, "
            f"mismatched {nf.n_inf_mismatch})",
            f"maxEpsilonDiff {self.max_epsilon_diff:g}  maxAbsDiff {self.max_abs_diff:g}  "
            f"aveAbsDiff {self.ave_abs_diff:g}",
            f"maxRelDiff {self.max_rel_diff:g}  maxRelDiff_old {self.max_rel_diff_old:g}  "
            f"aveRelDiff {self.ave_rel_diff:g}  RMS {self.rms:g}",
            f"MLU-OPS diff1 {self.diff1:g}  diff2 {self.diff2:g}  diff3 ({self.diff3[0]:g}, "
            f"{self.diff3[1]:g})  diff4 {self.diff4}",
            f"allclose(rtol={self.allclose.rtol:g}, atol={self.allclose.atol:g}): "
            f"{self.allclose.n_fail} fail",
        ]
        hists = [("epsilonDiff", self.epsilon_histogram)]
        if report:
            hists.append(("relDiff_old", self.rel_old_histogram))
        for name, h in hists:
            lines.append(f"{name}: " + "  ".join(
                f"{lab} {c} ({p:.4g}%)" for lab, c, p in zip(h.labels, h.counts, h.percent)))
        if not report:
            return "\n".join(lines)

        def show(e: Element) -> str:
            return (f"  {e.coords}: v {e.validation!r} ({e.validation_bits}) k {e.kernel!r} "
                    f"({e.kernel_bits}) eps {e.epsilon_diff:g} abs {e.abs_diff:g} "
                    f"rel {e.rel_diff:g}")

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

# ------------------------------------------------------------------------------------------------
# Streaming accumulators


class _FirstMax:
    """max(values) with the index of its first occurrence, skipping NaN, starting at 0.

    The C verifiers' ``if (x > best) { best = x; where = i; }``: a later equal value does not
    move the index, NaN never compares greater.
    """

    def __init__(self) -> None:
        self.value = 0.0
        self.index: int | None = None

    def add(self, values: np.ndarray, index: np.ndarray) -> None:
        if values.size == 0:
            return
        m = float(np.fmax.reduce(values))
        if m > self.value:  # False for NaN (all-NaN chunk)
            self.value = m
            self.index = int(index[int(np.argmax(values == m))])


class _SeqSum:
    """A double sum taken strictly in element order, as ``sum += x`` in C (study mode).

    A NaN result keeps the sign of the first NaN term (x86 returns the NaN operand; terms are
    never −inf, so no new NaN is made).
    """

    def __init__(self) -> None:
        self.value = 0.0

    def add(self, terms: np.ndarray) -> None:
        if terms.size == 0 or math.isnan(self.value):
            return
        nan = np.isnan(terms)
        if nan.any():
            self.value = float(terms[int(np.argmax(nan))])
            return
        self.value = float(np.cumsum(np.concatenate(([self.value], terms)))[-1])


class _PairSum:
    """A float64 sum: numpy's pairwise sum per chunk, the chunk sums added exactly (fsum)."""

    def __init__(self) -> None:
        self.parts: list[float] = []

    def add(self, terms: np.ndarray) -> None:
        if terms.size:
            self.parts.append(float(np.sum(terms)))

    @property
    def value(self) -> float:
        return math.fsum(self.parts)


class _TopK:
    """The k largest ε with their flat indices; ties go to the lower index; NaN is skipped."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.eps = np.empty(0)
        self.index = np.empty(0, dtype=np.int64)

    def add(self, eps: np.ndarray, index: np.ndarray) -> None:
        if self.k <= 0 or eps.size == 0:
            return
        keep = ~np.isnan(eps)
        eps, index = eps[keep], index[keep]
        if eps.size > self.k:
            # Pre-select: all above the k-th largest, then the first of those equal to it (the
            # batch is in index order, so these are the lowest indices among the ties).
            kth = np.partition(eps, eps.size - self.k)[eps.size - self.k]
            above = eps > kth
            n_tie = self.k - int(np.count_nonzero(above))
            tie = np.flatnonzero(eps == kth)[:n_tie]
            sel = np.sort(np.concatenate((np.flatnonzero(above), tie)))
            eps, index = eps[sel], index[sel]
        eps = np.concatenate((self.eps, eps))
        index = np.concatenate((self.index, index))
        order = np.lexsort((index, -eps))[: self.k]
        self.eps, self.index = eps[order], index[order]


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Distinct rows of a uint64 array (1-D, or 2-D compared row-wise), sorted.

    Sort-based: numpy 2's hash-based ``np.unique`` is much slower on these keys.
    """
    if keys.ndim == 1:
        keys = np.sort(keys)
        return keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if keys.size else keys
    keys = keys[np.lexsort(keys.T[::-1])]
    if keys.shape[0] == 0:
        return keys
    new = np.concatenate(([True], np.any(keys[1:] != keys[:-1], axis=1)))
    return keys[new]


class _DistinctPairs:
    """Distinct (v, k) mismatch pairs with k > v and with k < v (MLU-OPS diff4).

    Exact up to :data:`DIFF4_DISTINCT_LIMIT` stored pairs; beyond that the sets are dropped
    (``overflow``) and diff4 falls back to the shares over all mismatching elements. The verdict
    does not change: n ≥ 100 is then certain, and the mismatches are one-sided exactly when the
    distinct pairs are.
    """

    def __init__(self, pack32: bool) -> None:
        self.pack32 = pack32
        self.gt: list[np.ndarray] = []
        self.lt: list[np.ndarray] = []
        self._pending = 0
        self.overflow = False

    def _keys(self, v: np.ndarray, k: np.ndarray) -> np.ndarray:
        v = v + 0.0  # −0 → +0: the evaluator's tuple compares values, and −0 == +0
        k = k + 0.0
        if self.pack32:  # values of ≤ 32-bit formats: both patterns in one uint64
            vb = v.astype(np.float32).view(np.uint32).astype(np.uint64)
            kb = k.astype(np.float32).view(np.uint32).astype(np.uint64)
            return _sorted_unique((vb << np.uint64(32)) | kb)
        return _sorted_unique(np.stack([v.view(np.uint64), k.view(np.uint64)], axis=1))

    def add(self, v: np.ndarray, k: np.ndarray) -> None:
        if v.size == 0 or self.overflow:
            return
        up = k > v
        for part, sel in ((self.gt, up), (self.lt, ~up)):
            if sel.any():
                part.append(self._keys(v[sel], k[sel]))
                self._pending += len(part[-1])
        if self._pending > DIFF4_DISTINCT_LIMIT // 4:
            self._consolidate()

    def _consolidate(self) -> None:
        for part in (self.gt, self.lt):
            if len(part) > 1:
                merged = _sorted_unique(np.concatenate(part))
                part.clear()
                part.append(merged)
        self._pending = 0
        if sum(len(p[0]) for p in (self.gt, self.lt) if p) > DIFF4_DISTINCT_LIMIT:
            self.overflow = True
            self.gt.clear()
            self.lt.clear()

    def counts(self) -> tuple[int, int] | None:
        """(pairs with k > v, pairs with k < v), or None after an overflow."""
        if self.overflow:
            return None
        self._consolidate()
        if self.overflow:
            return None
        return (len(self.gt[0]) if self.gt else 0, len(self.lt[0]) if self.lt else 0)


def _shares(n_gt: int, n_lt: int) -> tuple[float | None, float | None, int]:
    n = n_gt + n_lt
    if n == 0:
        return (None, None, 0)
    return (n_gt / n, n_lt / n, n)


def _c_div(num: float, den: float) -> float:
    """num / den with C's IEEE results on x86: 0/0 and inf/inf give −NaN, x/0 gives ±inf."""
    if math.isnan(num):
        return num
    if math.isnan(den):
        return den
    if den == 0.0:
        if num == 0.0:
            return _NEG_NAN
        return math.copysign(math.inf, num) * math.copysign(1.0, den)
    if math.isinf(num) and math.isinf(den):
        return _NEG_NAN
    return num / den


def _chunks(a: np.ndarray, size: int) -> Iterator[tuple[int, np.ndarray]]:
    """(start, 1-D chunk) in row-major order; contiguous arrays are sliced without copying."""
    flat = a.reshape(-1) if a.flags.c_contiguous else None
    for start in range(0, a.size, size):
        stop = min(start + size, a.size)
        yield start, (flat[start:stop] if flat is not None else a.flat[start:stop])


class _Accumulator:
    """Running state of :func:`compare`; :meth:`add` takes one chunk, :meth:`result` finishes."""

    def __init__(self, *, fmt: FloatFormat, quirks: StudyQuirks | None, top: int,
                 allclose: tuple[float, float], equal_nan: bool, pack32: bool,
                 on_grid: tuple[bool, bool]) -> None:  # fmt: skip
        self.fmt = fmt
        # whether v / k already hold values of fmt (so rounding them to it can be skipped)
        self.v_on_grid, self.k_on_grid = on_grid
        self.quirks = quirks
        self.study = quirks is not None
        self.eps_fmt = "fp16" if self.study else fmt.short_name
        self.rtol, self.atol = allclose
        self.equal_nan = equal_nan
        self.n = 0
        self.n_exact = 0
        self.n_eps1 = 0
        self.n_eps_ge2 = 0
        self.n_eps_other = 0
        self.max_eps = _FirstMax()
        self.max_abs = _FirstMax()
        self.max_rel = _FirstMax()
        self.max_rel_old = _FirstMax()
        summer = _SeqSum if self.study else _PairSum
        self.sum_abs, self.sum_sq, self.sum_rel = summer(), summer(), summer()
        self.max_mag = 0.0
        # float64 metrics over finite elements (MLU-OPS, MIOpen, allclose)
        self.f_max_mag = 0.0
        self.f_sum_d, self.f_sum_d2 = _PairSum(), _PairSum()
        self.f_sum_b, self.f_sum_b2 = _PairSum(), _PairSum()
        self.d3_rel, self.d3_abs = _FirstMax(), _FirstMax()
        self.d3_1, self.d3_2 = _FirstMax(), _FirstMax()
        self.d3_th = MLU_DIFF3_THRESHOLDS[fmt.short_name]
        self.pairs = _DistinctPairs(pack32)
        self.all_gt = 0
        self.all_lt = 0
        self.close_fail = 0
        self.close_first: int | None = None
        self.native = _FirstMax()
        self.native_thr = float(cast_rne(np.array([0.001]), fmt)[0]) if fmt.bits < 32 else None
        # non-finite bookkeeping
        self.nf = dict.fromkeys(
            ("n_nan", "n_nan_validation", "n_nan_kernel", "n_nan_both", "n_inf",
             "n_inf_validation", "n_inf_kernel", "n_inf_equal"), 0)  # fmt: skip
        self.nf_first: list[int] = []
        self.top = top
        self.topk = _TopK(top)
        self.eps_hist = np.zeros(len(EPSILON_BUCKETS), dtype=np.int64)
        self.rel_hist = np.zeros(len(REL_OLD_BUCKETS), dtype=np.int64)

    # -- per chunk ---------------------------------------------------------------------------------

    def add(self, start: int, v: np.ndarray, k: np.ndarray) -> None:
        """One chunk: ``v`` validation as compared and ``k`` kernel, both float64, 1-D."""
        size = v.size
        self.n += size
        index0 = np.int64(start)
        eq = v == k
        fin = np.isfinite(v) & np.isfinite(k)
        all_finite = bool(fin.all())
        self.n_exact += int(np.count_nonzero(eq))

        # 1. NaN and infinity, counted apart.
        if not all_finite:
            self._count_nonfinite(start, v, k, eq, fin)
        nonfinite_mismatch = None if all_finite else (~fin & ~eq)
        nan_any = None if all_finite else (np.isnan(v) | np.isnan(k))

        # 2. Magnitudes: the RMS denominators and the MLU-OPS baseline sums.
        av, ak = np.abs(v), np.abs(k)
        if all_finite:
            av_f, ak_f = av, ak
        else:
            av_f, ak_f = av[fin], ak[fin]
        if av_f.size:
            self.f_max_mag = max(self.f_max_mag, float(av_f.max()), float(ak_f.max()))
        self.f_sum_b.add(av_f)
        self.f_sum_b2.add(np.square(av_f))
        if self.study:
            # C: maxMag = std::max(maxMag, std::max(|c|, |g|)); NaN never wins a comparison
            mag = np.where(av < ak, ak, av)
            if mag.size:
                self.max_mag = max(self.max_mag, float(np.fmax.reduce(mag)))

        # 3. Differing elements: float64 metrics over the finite ones.
        ne = ~eq
        diff_all = np.flatnonzero(ne)
        diff_f = diff_all if all_finite else np.flatnonzero(fin & ne)
        vf, kf = v[diff_f], k[diff_f]
        df = np.abs(vf - kf)
        gidx_f = diff_f + index0
        self._mlu_allclose(vf, kf, df, gidx_f)

        # 4. The headline metrics, per mode.
        if self.study:
            self._study_batch(v[diff_all], k[diff_all], diff_all + index0)
        else:
            self._float64_batch(vf, kf, df, gidx_f)

        # 5. allclose: non-finite elements pass only if equal (or both NaN with equal_nan).
        if not all_finite:
            bad = nonfinite_mismatch
            if self.equal_nan:
                bad = bad & ~(np.isnan(v) & np.isnan(k))
            nbad = int(np.count_nonzero(bad))
            if nbad:
                self.close_fail += nbad
                first = int(np.argmax(bad)) + start
                self.close_first = first if self.close_first is None else min(self.close_first,
                                                                              first)

        # 6. The old rocMLIR verifier's quotient in the data type's arithmetic.
        self._native_rel(v[diff_all], k[diff_all])

        # 7. Histograms: elements outside the differing batches.
        self.eps_hist[0] += int(np.count_nonzero(eq))
        self._rel_hist_static(v, eq, av, nan_any, nonfinite_mismatch)

    def add_equal(self, count: int, max_mag: float) -> None:
        """``count`` elements with ``v == k`` that :meth:`add` did not see (study mode's fast path,
        :func:`validation.verifier2022.compare_differing`): they enter N, ``n_exact`` and the
        study RMS denominator (``max_mag``: the largest max(|v|, |k|) over them, or over all
        elements; the larger of it and the running one is kept), and nothing else (histograms,
        the float64 metrics and their magnitude stay over the elements given to :meth:`add`)."""
        self.n += count
        self.n_exact += count
        self.max_mag = max(self.max_mag, max_mag)

    def _count_nonfinite(self, start: int, v: np.ndarray, k: np.ndarray, eq: np.ndarray,
                         fin: np.ndarray) -> None:  # fmt: skip
        nan_v, nan_k = np.isnan(v), np.isnan(k)
        inf_v, inf_k = np.isinf(v), np.isinf(k)
        nan_any = nan_v | nan_k
        inf_any = (inf_v | inf_k) & ~nan_any
        c = self.nf
        c["n_nan"] += int(np.count_nonzero(nan_any))
        c["n_nan_validation"] += int(np.count_nonzero(nan_v))
        c["n_nan_kernel"] += int(np.count_nonzero(nan_k))
        c["n_nan_both"] += int(np.count_nonzero(nan_v & nan_k))
        c["n_inf"] += int(np.count_nonzero(inf_any))
        c["n_inf_validation"] += int(np.count_nonzero(inf_v))
        c["n_inf_kernel"] += int(np.count_nonzero(inf_k))
        c["n_inf_equal"] += int(np.count_nonzero(inf_any & eq))
        if len(self.nf_first) < self.top:
            where = np.flatnonzero(~fin & ~eq)[: self.top - len(self.nf_first)]
            self.nf_first.extend(int(i) + start for i in where)
        if not self.study:
            self.eps_hist[6] += int(np.count_nonzero(~fin & ~eq))

    def _mlu_allclose(self, vf: np.ndarray, kf: np.ndarray, df: np.ndarray,
                      gidx: np.ndarray) -> None:  # fmt: skip
        """MLU-OPS numerators, diff3/diff4, and allclose over the finite differing elements."""
        self.f_sum_d.add(df)
        self.f_sum_d2.add(np.square(df))
        if df.size == 0:
            return
        ab = np.abs(vf)
        rel_side = ab >= self.d3_th
        self.d3_rel.add(df[rel_side] / (ab[rel_side] + MLU_EPSILON), gidx[rel_side])
        self.d3_abs.add(df[~rel_side], gidx[~rel_side])
        nz = ab != 0
        self.d3_1.add(df[nz] / ab[nz], gidx[nz])
        self.d3_2.add(df, gidx)
        self.pairs.add(vf, kf)
        n_gt = int(np.count_nonzero(kf > vf))
        self.all_gt += n_gt
        self.all_lt += kf.size - n_gt
        fail = df > self.atol + self.rtol * ab
        nfail = int(np.count_nonzero(fail))
        if nfail:
            self.close_fail += nfail
            first = int(gidx[int(np.argmax(fail))])
            self.close_first = first if self.close_first is None else min(self.close_first, first)

    def _float64_batch(self, v: np.ndarray, k: np.ndarray, d: np.ndarray,
                       gidx: np.ndarray) -> None:  # fmt: skip
        """The headline metrics over finite differing elements, in float64."""
        with np.errstate(divide="ignore", invalid="ignore"):
            eps = d / spacing(np.minimum(np.abs(v), np.abs(k)), self.eps_fmt, "ulp")
        nz = v != 0
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(nz, d / np.abs(v), np.nan)
        old = np.abs(v) > REL_OLD_THRESHOLD
        self._common_batch(v, k, d, eps, rel, nz, old, gidx)
        self._rel_hist_batch(rel[old & nz], nan_bucket=False)

    def _study_batch(self, v: np.ndarray, k: np.ndarray, gidx: np.ndarray) -> None:
        """The study verifier's loop body over ``cpuVal != gpuVal``, vectorised
        (:mod:`validation.verifier2022`)."""
        q = self.quirks
        assert q is not None
        c32, g32 = v.astype(np.float32), k.astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            abs32 = np.abs(c32 - g32)  # float absDiff = fabs(cpuVal - gpuVal)
            ac, ag = np.abs(c32), np.abs(g32)
            m32 = np.where(ag < ac, ag, ac)  # std::min(|c|, |g|)
            interval = study_interval(m32, q.epsilon_rule)
        with np.errstate(divide="ignore", invalid="ignore"):
            eps = (abs32 / interval).astype(np.float64)  # float division, exact (power of two)
        d = abs32.astype(np.float64)
        nz = c32 != 0  # NaN != 0 is true, as in C
        ac64 = ac.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(nz, d / ac64, np.nan)
        # Signs of NaN as x86 makes them: fabs gives +NaN; inf/inf the default −NaN.
        rel = np.where(np.isnan(d), math.nan, rel)
        rel = np.where(nz & np.isinf(d) & np.isinf(ac64), _NEG_NAN, rel)
        thr = STUDY_REL_OLD_THRESHOLD
        old = (c32 > thr) if q.rel_old_signed else (ac > thr)  # NaN compares false
        self._common_batch(v, k, d, eps, rel, nz, old, gidx)
        in_dom = old & nz & ~np.isnan(v) & ~np.isnan(k)
        self._rel_hist_batch(rel[in_dom], nan_bucket=True)
        # ε histogram: NaN ε (a NaN input) is the "nonfinite" bucket, inf ε is ">100"
        nan_eps = np.isnan(eps)
        self.eps_hist[6] += int(np.count_nonzero(nan_eps))

    def _common_batch(self, v: np.ndarray, k: np.ndarray, d: np.ndarray, eps: np.ndarray,
                      rel: np.ndarray, nz: np.ndarray, old: np.ndarray,
                      gidx: np.ndarray) -> None:  # fmt: skip
        """Counts, maxima, sums, ε histogram and worst list of one batch of differing elements."""
        one = eps == 1.0
        ge2 = eps >= 2.0
        self.n_eps1 += int(np.count_nonzero(one))
        self.n_eps_ge2 += int(np.count_nonzero(ge2))
        self.n_eps_other += eps.size - int(np.count_nonzero(one)) - int(np.count_nonzero(ge2))
        self.max_eps.add(eps, gidx)
        self.max_abs.add(d, gidx)
        self.sum_abs.add(d)
        self.sum_sq.add(np.square(d))
        self.max_rel.add(rel[nz], gidx[nz])
        self.sum_rel.add(rel[nz])
        sel = old & nz
        self.max_rel_old.add(rel[sel], gidx[sel])
        # (0,1], (1,2], (2,10], (10,100], >100 from cumulative counts; NaN is in none of them
        at_most = [int(np.count_nonzero(eps <= e)) for e in _EPS_EDGES]
        at_most.append(at_most[-1] + int(np.count_nonzero(eps > _EPS_EDGES[-1])))
        self.eps_hist[1:6] += np.diff(np.array([0, *at_most]))
        self.topk.add(eps, gidx)

    def _rel_hist_batch(self, rel: np.ndarray, *, nan_bucket: bool) -> None:
        """relDiff_old buckets of differing elements inside the relDiff_old domain."""
        nan = np.isnan(rel)
        if nan_bucket:
            self.rel_hist[11] += int(np.count_nonzero(nan))
        r = rel[~nan]
        below = [int(np.count_nonzero(r < e)) for e in _REL_EDGES]  # (0,1e-6), [1e-6,1e-5), …
        self.rel_hist[1:9] += np.diff(np.array([0, *below, r.size]))

    def _rel_hist_static(self, v: np.ndarray, eq: np.ndarray, av: np.ndarray,
                         nan_any: np.ndarray | None,
                         nonfinite_mismatch: np.ndarray | None) -> None:  # fmt: skip
        """relDiff_old buckets that need no per-element error: nonfinite, v == 0, excluded, 0."""
        if self.study:
            bad = nan_any
        else:
            bad = nonfinite_mismatch
        valid = np.ones(v.size, bool) if bad is None else ~bad
        if bad is not None:
            self.rel_hist[11] += int(np.count_nonzero(bad))
        zero = valid & (v == 0)
        if self.study:
            thr = STUDY_REL_OLD_THRESHOLD
            signed = self.quirks is not None and self.quirks.rel_old_signed
            dom = (v > thr) if signed else (av > thr)
        else:
            dom = av > REL_OLD_THRESHOLD
        dom = dom & valid & ~zero
        self.rel_hist[9] += int(np.count_nonzero(zero))
        self.rel_hist[10] += int(np.count_nonzero(valid & ~zero & ~dom))
        self.rel_hist[0] += int(np.count_nonzero(dom & eq))

    def _native_rel(self, v: np.ndarray, k: np.ndarray) -> None:
        """max |(v − k)/v| in the data type's arithmetic (the old rocMLIR verifier, Aug 2022)."""
        if v.size == 0:
            return
        fmt = self.fmt
        with np.errstate(all="ignore"):
            if fmt.short_name == "fp16":
                # numpy's float16 ufuncs are slow; the same results in float64: c − g is exact
                # there, and one float64 rounding before the fp16 one is innocuous for − and ÷
                # of fp16 operands (53 >= 2·11 + 2, Figueroa 1995)
                c = v if self.v_on_grid else round_rne(v, fmt)
                g = k if self.k_on_grid else round_rne(k, fmt)
                diff = (c - g).astype(np.float16).astype(np.float64)
                rel = np.abs((diff / c).astype(np.float16)).astype(np.float64)
            else:
                c, g = cast_rne(v, fmt), cast_rne(k, fmt)
                rel = np.abs((c - g) / c).astype(np.float64)
            keep = c != g
            if self.native_thr is not None:
                keep &= np.abs(c) > self.native_thr
        r = rel[keep]
        self.native.add(r, np.zeros(r.size, dtype=np.int64))

    # -- finish ------------------------------------------------------------------------------------

    def result(self, *, shape: tuple[int, ...], element: Any, round_validation: str | None,
               input_dtypes: tuple[str, str]) -> ComparisonResult:  # fmt: skip
        n = self.n
        if self.study:
            ave_abs = _c_div(self.sum_abs.value, float(n))
            ave_rel = _c_div(self.sum_rel.value, float(n))
            s = self.sum_sq.value
            rms = _c_div(s if math.isnan(s) else math.sqrt(s), self.max_mag * math.sqrt(n))
        else:
            ave_abs = self.sum_abs.value / n if n else 0.0
            ave_rel = self.sum_rel.value / n if n else 0.0
            s = self.sum_sq.value
            rms = 0.0 if s == 0.0 else math.sqrt(s) / (math.sqrt(n) * self.f_max_mag)
        s2 = self.f_sum_d2.value
        mag = max(self.f_max_mag, np.finfo(np.float64).tiny)
        miopen_rms = 0.0 if n == 0 else math.sqrt(s2) / (math.sqrt(n) * mag)
        diff1 = self.f_sum_d.value / (self.f_sum_b.value + MLU_EPSILON)
        diff2 = math.sqrt(s2 / (self.f_sum_b2.value + MLU_EPSILON))
        distinct = self.pairs.counts()

        trackers = {"epsilon_diff": self.max_eps, "abs_diff": self.max_abs,
                    "rel_diff": self.max_rel, "rel_diff_old": self.max_rel_old}  # fmt: skip
        at_max = {key: None if t.index is None else element(t.index) for key, t in trackers.items()}
        nonfinite = NonFinite(**self.nf)
        return ComparisonResult(
            n=n,
            shape=shape,
            dtype=self.fmt.short_name,
            validation_dtype=input_dtypes[0],
            kernel_dtype=input_dtypes[1],
            epsilon_format=self.eps_fmt,
            round_validation=round_validation,
            study_quirks=self.quirks,
            n_exact=self.n_exact,
            n_eps1=self.n_eps1,
            n_eps_ge2=self.n_eps_ge2,
            n_eps_other=self.n_eps_other,
            max_epsilon_diff=self.max_eps.value,
            max_abs_diff=self.max_abs.value,
            ave_abs_diff=ave_abs,
            max_rel_diff=self.max_rel.value,
            max_rel_diff_old=self.max_rel_old.value,
            ave_rel_diff=ave_rel,
            rms=rms,
            miopen_rms=miopen_rms,
            diff1=diff1,
            diff2=diff2,
            diff3=(self.d3_rel.value, self.d3_abs.value),
            diff3_1=self.d3_1.value,
            diff3_2=self.d3_2.value,
            diff4=_shares(*distinct) if distinct else _shares(self.all_gt, self.all_lt),
            diff4_distinct=distinct is not None,
            diff4_all=_shares(self.all_gt, self.all_lt),
            allclose=AllClose(self.rtol, self.atol, self.equal_nan, self.close_fail,
                              self.close_first),
            max_rel_diff_old_native=self.native.value,
            nonfinite=nonfinite,
            epsilon_histogram=Histogram(EPSILON_BUCKETS, tuple(int(c) for c in self.eps_hist), n),
            rel_old_histogram=Histogram(REL_OLD_BUCKETS, tuple(int(c) for c in self.rel_hist), n),
            at_max=at_max,
            worst=tuple(element(int(i)) for i in self.topk.index),
            nonfinite_elements=tuple(element(i) for i in sorted(self.nf_first)[: self.top]),
        )


# ------------------------------------------------------------------------------------------------
# Entry point



def _preparer(quirks: StudyQuirks | None, rv: FloatFormat | None):
    """The chunk preparation of :func:`compare`: (validation, kernel) chunks as float64, in the
    study's float arithmetic and rounded as the verifier rounds the validation."""

    def prepare(vc: np.ndarray, kc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v64 = vc.astype(np.float64)
        k64 = kc.astype(np.float64)
        if quirks is not None:
            # C: the validation is a float ((float)acc), then truncf to f16 and back
            with np.errstate(over="ignore", invalid="ignore"):
                v64 = v64.astype(np.float32).astype(np.float64)
                k64 = k64.astype(np.float32).astype(np.float64)
        if rv is not None:
            v64 = round_rne(v64, rv)
        return v64, k64

    return prepare


def _element_reader(va: np.ndarray, ka: np.ndarray, fmt: FloatFormat, quirks: StudyQuirks | None,
                    rv: FloatFormat | None, prepare, v_name: str, k_name: str, v_cmp_name: str,
                    k_cmp_name: str):  # fmt: skip
    """element(i): the :class:`Element` at flat index ``i`` of :func:`compare`'s inputs."""
    shape = tuple(int(s) for s in va.shape)
    v_fmt, k_fmt = resolve_format(v_cmp_name), resolve_format(k_cmp_name)
    eps_rule = "ulp" if quirks is None else quirks.epsilon_rule

    def element(i: int) -> Element:
        coords = tuple(int(c) for c in np.unravel_index(i, shape)) if shape else ()
        v_in = np.asarray(va.flat[i]).reshape(1)
        v64, k64 = prepare(v_in, np.asarray(ka.flat[i]).reshape(1))
        v, k = float(v64[0]), float(k64[0])
        with np.errstate(all="ignore"):
            if quirks is not None:
                c32, g32 = np.float32(v), np.float32(k)
                d = float(np.abs(c32 - g32))
                interval = float(study_interval(np.array([min(abs(c32), abs(g32))],
                                                         np.float32), eps_rule)[0])  # fmt: skip
            else:
                d = abs(v - k)
                interval = float(spacing(min(abs(v), abs(k)), fmt, "ulp"))
            eps = 0.0 if v == k else (d / interval if interval else math.inf)
            rel = d / abs(v) if v != 0 and v == v else math.nan
        if v == k:
            d, rel = 0.0, (0.0 if v != 0 else math.nan)
        return Element(
            index=i,
            coords=coords,
            validation=v,
            kernel=k,
            validation_bits=_orig_bits(va, i, v_fmt) if v_fmt.short_name == v_name and rv is None
            else _bits_hex(v, v_fmt),
            kernel_bits=(_orig_bits(ka, i, k_fmt) if k_fmt.short_name == k_name
                         else _bits_hex(k, k_fmt)),
            validation_format=v_fmt.short_name,
            kernel_format=k_fmt.short_name,
            validation_input=float(np.asarray(v_in, dtype=np.float64)[0]),
            abs_diff=d,
            rel_diff=rel,
            epsilon_diff=eps,
        )

    return element


class Comparison:
    """:func:`compare` one piece at a time, for callers that choose which elements to visit.

    The constructor takes the two whole arrays and the options of :func:`compare` (and resolves
    them the same way); :meth:`add` feeds input values (as given, 1-D) in visiting order,
    :meth:`add_equal` accounts for equal elements left out (study mode), :meth:`result`
    finishes. ``compare(v, k, **options)`` is ``Comparison(v, k, **options)`` fed every element
    in row-major order, ``chunk`` at a time.
    """

    def __init__(
        self,
        validation: Any,
        kernel: Any,
        *,
        dtype_hint: Any = None,
        top: int = 10,
        study_quirks: Any = None,
        round_validation: Any = None,
        allclose: tuple[float, float] | None = None,
        equal_nan: bool = False,
    ) -> None:
        va = np.asarray(validation)
        ka = np.asarray(kernel)
        if va.shape != ka.shape:
            raise ValueError(f"shapes differ: validation {va.shape}, kernel {ka.shape}")
        v_name, k_name = _dtype_name_of(va), _dtype_name_of(ka)
        fmt = resolve_format(dtype_hint if dtype_hint is not None else k_name)
        quirks = resolve_study_quirks(study_quirks)
        rv = None if round_validation is None else resolve_format(round_validation)
        if quirks is not None:
            if rv is not None and rv.short_name != "fp16":
                raise ValueError("study mode rounds the validation to fp16; round_validation must "
                                 f"be None or 'fp16', got {rv.short_name!r}")  # fmt: skip
            rv = FP16
        if allclose is None:
            tol = TORCH_TOLERANCES[fmt.short_name]
        else:
            tol = (float(allclose[0]), float(allclose[1]))
        if tol[0] < 0 or tol[1] < 0:
            raise ValueError(f"allclose tolerances must be >= 0, got rtol={tol[0]}, atol={tol[1]}")
        v_cmp = rv if rv is not None else resolve_format(v_name)
        k_cmp = resolve_format(k_name)
        if quirks is not None and k_cmp.bits > 32:
            k_cmp = FP32  # C: (float)gpuVal
        pack32 = v_cmp.bits <= 32 and k_cmp.bits <= 32
        self._shape = tuple(int(s) for s in va.shape)
        self._input_dtypes = (v_name, k_name)
        self._round_validation = None if rv is None else rv.short_name
        self._prepare = _preparer(quirks, rv)
        on_grid = (v_cmp.short_name == fmt.short_name, k_cmp.short_name == fmt.short_name)
        self._acc = _Accumulator(fmt=fmt, quirks=quirks, top=top, allclose=tol, equal_nan=equal_nan,
                                 pack32=pack32, on_grid=on_grid)  # fmt: skip
        self._element = _element_reader(va, ka, fmt, quirks, rv, self._prepare, v_name, k_name,
                                        v_cmp.short_name, k_cmp.short_name)  # fmt: skip

    def add(self, position: int, validation: np.ndarray, kernel: np.ndarray) -> None:
        """Elements at visiting positions ``position``, ``position + 1``, ...: 1-D input values as
        given (they are rounded and widened here as :func:`compare` does)."""
        v64, k64 = self._prepare(validation, kernel)
        self._acc.add(position, v64, k64)

    def add_equal(self, count: int, max_mag: float) -> None:
        """``count`` elements with ``v == k`` that were not added, and the largest
        max(|v|, |k|) among them (study mode: they count in N, the exact matches and the RMS
        denominator only; the histograms and float64 metrics cover the added elements)."""
        self._acc.add_equal(count, max_mag)

    def result(self, positions: np.ndarray | None = None) -> ComparisonResult:
        """The :class:`ComparisonResult`. ``positions[p]``: the flat row-major index of the element
        added at visiting position ``p`` (default: positions are the flat indices)."""
        element = self._element
        if positions is not None:
            element_at = element

            def element(p: int) -> Element:
                return element_at(int(positions[p]))

        return self._acc.result(shape=self._shape, element=element,
                                round_validation=self._round_validation,
                                input_dtypes=self._input_dtypes)  # fmt: skip


def compare(
    validation: Any,
    kernel: Any,
    *,
    dtype_hint: Any = None,
    chunk: int = DEFAULT_CHUNK,
    top: int = 10,
    study_quirks: Any = None,
    round_validation: Any = None,
    allclose: tuple[float, float] | None = None,
    equal_nan: bool = False,
) -> ComparisonResult:
    """Measure how far ``kernel`` is from ``validation``, element by element.

    Parameters
    ----------
    validation, kernel
        Arrays of the same shape (float16, bfloat16, float32 or float64; integer arrays are read
        as float64). Visited in row-major order, which decides the first element at a maximum:
        to reproduce a C verifier's reported pairs, pass arrays shaped in the tensor's memory
        layout.
    dtype_hint
        The test's data type ("fp16", "bf16", "fp32", "fp64" or a dtype): the epsilon format,
        the torch tolerances, the MLU-OPS diff3 split and the native arithmetic of
        ``max_rel_diff_old_native``. Default: the kernel array's type.
    chunk
        Elements per chunk (memory scales with it, not with the array size).
    top
        How many worst elements (by epsilonDiff) and non-finite mismatches to keep.
    study_quirks
        A run set of the 2022 study (``"fair_1"``, ``"fair_2"``, ``"fair_3"``,
        ``"fair_rand0"``) or a :class:`StudyQuirks`: the headline metrics then follow that run
        set's C verifier exactly (module docstring). Implies ``round_validation="fp16"``.
    round_validation
        Round the validation to this format (RNE) before measuring, as rocMLIR's verifiers did
        (``truncf`` to f16). None: measure the values as given.
    allclose
        (rtol, atol) of the allclose metric; default the torch.testing defaults of the data type.
    equal_nan
        Whether NaN against NaN passes allclose.

    Returns
    -------
    ComparisonResult
    """
    va = np.asarray(validation)
    ka = np.asarray(kernel)
    if va.shape != ka.shape:
        raise ValueError(f"shapes differ: validation {va.shape}, kernel {ka.shape}")
    if chunk < 1:
        raise ValueError(f"chunk must be positive, got {chunk}")
    comparison = Comparison(va, ka, dtype_hint=dtype_hint, top=top, study_quirks=study_quirks,
                            round_validation=round_validation, allclose=allclose,
                            equal_nan=equal_nan)  # fmt: skip
    for (start, vc), (_, kc) in zip(_chunks(va, chunk), _chunks(ka, chunk)):
        comparison.add(start, vc, kc)
    return comparison.result()
