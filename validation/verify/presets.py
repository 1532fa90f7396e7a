"""Verdicts over a :class:`~validation.metrics.ComparisonResult`, the named presets, and (re-exported
from :mod:`validation.verify.study2022`) the 2022 study's verifier line.

A :class:`Thresholds` is an ordered list of checks (metric name, limit) plus how the comparison
is made (rounding of the validation, study quirks, allclose tolerances, what NaN/inf do). The
verdict prints one flag per check in order, ``[1 1 0]`` (1 = within the limit). Named presets
(:func:`preset`, :data:`PRESET_NAMES`):

``rocmlir-2022``
    The old rocMLIR verifier (``mcpuVerify5DFloat`` in
    ``mlir/lib/ExecutionEngine/conv-validation-wrappers.cpp`` on main, Aug 2022,
    github.com/ROCm/rocMLIR): an element fails if v ≠ k, |(v − k)/v| > 0.25 (fp16; 1e-6 for
    other types) and, for types narrower than 32 bits, |v| > 0.001; both values rounded to the
    data type and compared in its arithmetic (metric ``max_rel_diff_old_native``). Prints
    ``[1]`` or ``[0]``. As in that code, a NaN quotient does not fail.
``rocmlir``
    The verifier of rocMLIR PR #736: ``[RMS absDiff relDiff]`` with RMS ≤ 3e-5, maxAbsDiff ≤ 100,
    maxRelDiff ≤ 100 for fp16 and ≤ 1e-6 for other types (PR #736 hard-coded 1e-6 for them; PR
    #869 made it the default of ``-relDiff_threshold``); the validation rounded to the data type
    first (truncf → f16 → extf for fp16).
``study-2022``
    The study's instrumented line (:mod:`validation.verify.study2022`) with one run set's quirks
    (``run_set``, default ``fair_3``: the verifier after both fixes), verdict
    maxEpsilonDiff ≤ 2, the study's pass rule (its summary's "pass rate",
    github.com/zhanglx13/llvm-project-mlir-dev-utils ``fp16_experiment``). :meth:`Verdict.format`
    prints the line; :func:`format_study_line` / :func:`parse_study_line` print and read it.
``mlu-ops``
    Cambricon's acceptance classes (github.com/Cambricon/mlu-ops accuracy standard): ``conv``
    fp32 diff1, diff2 ≤ 1e-5 and fp16 (bf16) ≤ 3e-3; ``reduction``, ``activation``,
    ``composite``, ``atomic`` diff1, diff2 ≤ 3e-3;
    ``arithmetic``, ``io`` diff3_2 = 0; ``diff4=True`` adds the diff4 check (fails only with
    ≥ 100 distinct mismatches all on one side).
``torch``
    torch.testing.assert_close: every element within atol + rtol·|v|, defaults per data type
    (:data:`~validation.metrics.TORCH_TOLERANCES`).
``miopen``
    MIOpenDriver (github.com/ROCm/MIOpen): RMS (``rms_range``) ≤ 8.2e-3 for fp16, 1.5e-6 for fp32 and the 1-byte fp8 types, 8 × 8.2e-3 for bf16
    (MIOpen drivers' ``GetTolerance``: "bf16 mantissa has 7 bits, by 3 bits shorter than fp16");
    fp64 takes fp32's limit (MIOpen has none for it).

NaN and infinity: with ``nonfinite="fail"`` (the default, and the presets whose C code ends up
with an inf or NaN metric there) a NaN or a pair of unequal infinities fails every flag; with
``"metric"`` only the metric values decide (the C verifiers whose maxima skip NaN).
"""

from __future__ import annotations

import dataclasses
import html
import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from emu.formats import resolve_format
from emu.rounding import cast_rne

from ..metrics import (
    DEFAULT_CHUNK,
    METRIC_NAMES,
    TORCH_TOLERANCES,
    ComparisonResult,
    compare,
    json_float,
    resolve_dtype,
)
from .study2022 import (
    STUDY_RUN_SETS,
    StudyLine,
    StudyTail,
    format_study_line,
    parse_study_line,
    resolve_study_quirks,
    study_line,
    study_line_of,
)

__all__ = [
    "PRESET_NAMES",
    "MLU_OP_CLASSES",
    "Check",
    "CheckResult",
    "Thresholds",
    "Verdict",
    "preset",
    "compare_default",
    "evaluate",
    "verdict",
    "verify",
    "measure",
    "format_flags",
    "METRIC_ALIASES",
    "resolve_metric",
    "metric_unit",
    "StudyTail",
    "StudyLine",
    "study_line",
    "study_line_of",
    "format_study_line",
    "parse_study_line",
]

PRESET_NAMES = ("rocmlir-2022", "rocmlir", "study-2022", "mlu-ops", "torch", "miopen")
#: MLU-OPS operator classes (its accuracy standard) and the name each alias stands for.
MLU_OP_CLASSES: Mapping[str, str] = {
    "conv": "conv", "convolution": "conv",
    "reduction": "reduction", "activation": "activation", "composite": "composite",
    "atomic": "atomic", "atomic-add": "atomic",
    "arithmetic": "arithmetic", "io": "io", "pure-io": "io",
}  # fmt: skip

# ------------------------------------------------------------------------------------------------
# Metric names and units

#: Other names accepted for a metric (``--threshold absDiff=100``): the C verifiers' labels.
#: Matching ignores case, ``_`` and ``-``, so ``maxAbsDiff`` is ``max_abs_diff`` as well.
METRIC_ALIASES: Mapping[str, str] = {
    "absdiff": "max_abs_diff", "reldiff": "max_rel_diff", "reldiffold": "max_rel_diff_old",
    "epsilondiff": "max_epsilon_diff", "epsdiff": "max_epsilon_diff", "maxepsdiff": "max_epsilon_diff",
    "nonfinite": "n_nonfinite", "nan": "n_nonfinite",
}  # fmt: skip


def _norm(name: str) -> str:
    return str(name).lower().replace("_", "").replace("-", "").strip()


def resolve_metric(name: str) -> str:
    """The metric a name stands for: a name of :data:`~validation.metrics.METRIC_NAMES`, the same
    in another spelling (``maxAbsDiff``), or an alias of :data:`METRIC_ALIASES` (``absDiff``).
    ``ValueError`` naming the valid metrics otherwise."""
    if name in METRIC_NAMES:
        return name
    key = _norm(name)
    by_norm = {_norm(m): m for m in METRIC_NAMES}
    if key in by_norm:
        return by_norm[key]
    if key in METRIC_ALIASES:
        return METRIC_ALIASES[key]
    raise ValueError(f"unknown metric {name!r}; valid metrics: {', '.join(sorted(METRIC_NAMES))} "
                     f"(or the labels absDiff, relDiff, relDiff_old, epsilonDiff, RMS)")  # fmt: skip


_UNITS: Mapping[str, str] = {
    "max_abs_diff": "absolute, |v − k|",
    "ave_abs_diff": "mean |v − k| over all N",
    "max_rel_diff": "relative, |v − k| / |v| over v ≠ 0",
    "max_rel_diff_old": "relative, |v − k| / |v| over |v| > 1e-3",
    "ave_rel_diff": "Σ |v − k| / |v| over v ≠ 0, divided by all N",
    "rms": "sqrt(Σ(v − k)²) / (sqrt(N) · max|v|,|k|): normalised by N and the largest magnitude",
    "miopen_rms": "MIOpen rms_range: sqrt(Σ(v − k)²) / (sqrt(N) · max |v|, |k|)",
    "diff1": "MLU-OPS Σ|k − v| / Σ|v|",
    "diff2": "MLU-OPS sqrt(Σ(k − v)² / Σv²)",
    "diff3": "MLU-OPS max(relative over |v| ≥ th, absolute below)",
    "diff3_1": "MLU-OPS max |k − v| / |v|",
    "diff3_2": "MLU-OPS max |k − v|",
    "diff4": "MLU-OPS share of mismatches below the validation",
    "allclose": "elements outside atol + rtol·|v|",
    "n_nonfinite": "elements: NaN, or unequal infinities",
}


def metric_unit(metric: str, result: ComparisonResult | None = None) -> str:
    """What ``metric``'s value measures, in words (the epsilon format's ulps for epsilonDiff)."""
    if metric == "max_epsilon_diff":
        fmt = "fp16" if result is None else result.epsilon_format
        return f"{fmt} ulps of the smaller magnitude"
    if metric == "max_rel_diff_old_native":
        dt = "the data type's" if result is None else f"{result.dtype}"
        return f"relative, |v − k| / |v| in {dt} arithmetic over |v| > 0.001"
    if metric.startswith("n_"):
        return _UNITS.get(metric, "elements")
    return _UNITS.get(metric, "")


# ------------------------------------------------------------------------------------------------
# Thresholds and verdicts


@dataclass(frozen=True)
class Check:
    """One flag: pass when ``result.metric(metric) <= limit`` (``diff4``: MLU-OPS's rule)."""

    metric: str
    limit: float
    label: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "metric", resolve_metric(self.metric))
        object.__setattr__(self, "limit", float(self.limit))
        if not self.label:
            object.__setattr__(self, "label", self.metric)


@dataclass(frozen=True)
class Thresholds:
    """The checks of one verifier, in flag order, and how its comparison is made.

    ``checks`` may be given as ``(metric, limit)`` or ``(metric, limit, label)`` tuples.
    ``round_validation``: format the validation is rounded to first (RNE); ``study_quirks``: a
    run set name (study mode); ``allclose``: (rtol, atol) of the allclose metric;
    ``nonfinite``: "fail" or "metric" (module docstring); ``dtype``: the data type the limits
    were chosen for (used as the comparison's ``dtype_hint`` when none is given); ``output``:
    what :meth:`Verdict.format` prints, "flags" or "study-line".
    """

    checks: tuple[Check, ...]
    name: str = "custom"
    round_validation: str | None = None
    study_quirks: str | None = None
    allclose: tuple[float, float] | None = None
    equal_nan: bool = False
    nonfinite: str = "fail"
    dtype: str | None = None
    output: str = "flags"

    def __post_init__(self) -> None:
        checks = tuple(c if isinstance(c, Check) else Check(*c) for c in self.checks)
        object.__setattr__(self, "checks", checks)
        if not checks:
            raise ValueError("a verifier needs at least one check")
        if self.nonfinite not in ("fail", "metric"):
            raise ValueError(f"nonfinite must be 'fail' or 'metric', got {self.nonfinite!r}")
        if self.output not in ("flags", "study-line"):
            raise ValueError(f"output must be 'flags' or 'study-line', got {self.output!r}")
        if self.study_quirks is not None:
            resolve_study_quirks(self.study_quirks)  # raises on an unknown run set
        for name in ("dtype", "round_validation"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, resolve_dtype(value))
        if self.allclose is not None:
            rtol, atol = self.allclose
            object.__setattr__(self, "allclose", (float(rtol), float(atol)))

    @classmethod
    def from_mapping(cls, limits: Mapping[str, float], **options: Any) -> Thresholds:
        """Checks from ``{metric: limit}`` in the mapping's order; ``options`` as the fields."""
        return cls(checks=tuple(Check(m, float(x)) for m, x in limits.items()), **options)

    @property
    def reads_diff4(self) -> bool:
        """Whether a check reads MLU-OPS diff4 (which needs ``compare(distinct_pairs=True)``)."""
        return any(c.metric == "diff4" for c in self.checks)

    def compare_options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`~validation.metrics.compare` this verifier needs."""
        return {"dtype_hint": self.dtype, "study_quirks": resolve_study_quirks(self.study_quirks),
                "round_validation": self.round_validation, "allclose": self.allclose,
                "equal_nan": self.equal_nan}  # fmt: skip

    def check_result(self, result: ComparisonResult) -> None:
        """Raise ``ValueError`` if ``result`` was not measured the way this verifier measures.

        A validation already in the rounding format needs no rounding, so that case passes.
        """
        problems = []
        q = None if result.study_quirks is None else result.study_quirks.run_set
        if q != self.study_quirks:
            problems.append(f"study run set {q} (needs {self.study_quirks})")
        rv = result.round_validation
        if rv != self.round_validation and not (rv is None and result.validation_dtype == self.round_validation):
            problems.append(f"validation rounding {rv} (needs {self.round_validation})")
        if self.allclose is not None and (result.allclose.rtol, result.allclose.atol) != tuple(self.allclose):
            problems.append(
                f"allclose (rtol, atol) = ({result.allclose.rtol}, "
                f"{result.allclose.atol}) (needs {tuple(self.allclose)})"
            )
        if result.allclose.equal_nan != self.equal_nan:
            problems.append(f"equal_nan {result.allclose.equal_nan} (needs {self.equal_nan})")
        if not result.diff4_measured and self.reads_diff4:
            problems.append("no distinct mismatch pairs (needs them for diff4: distinct_pairs=True)")
        if problems:
            raise ValueError(
                f"the comparison does not fit verifier {self.name!r}: "
                + "; ".join(problems)
                + ". Measure with compare(..., **thresholds.compare_options()) or use verify()."
            )

    def with_limits(self, **limits: float) -> Thresholds:
        """A copy with some limits replaced, by metric name (``rms=7e-4``)."""
        limits = {resolve_metric(m): x for m, x in limits.items()}
        known = {c.metric for c in self.checks}
        unknown = set(limits) - known
        if unknown:
            raise ValueError(f"{self.name} has no check on {sorted(unknown)}; its checks: "
                             f"{[c.metric for c in self.checks]}")  # fmt: skip
        checks = tuple(Check(c.metric, float(limits.get(c.metric, c.limit)), c.label)
                       for c in self.checks)  # fmt: skip
        return Thresholds(checks=checks, name=self.name, round_validation=self.round_validation,
                          study_quirks=self.study_quirks, allclose=self.allclose,
                          equal_nan=self.equal_nan, nonfinite=self.nonfinite, dtype=self.dtype,
                          output=self.output)  # fmt: skip


@dataclass(frozen=True)
class CheckResult:
    """One evaluated check. ``passed`` is the harness's flag (a NaN or unequal infinity fails every
    flag of a ``nonfinite="fail"`` verifier); ``within`` is this metric alone against its limit,
    what the check's line shows; ``unit`` says what the value measures."""

    metric: str
    label: str
    value: float
    limit: float
    passed: bool
    within: bool | None = None
    unit: str = ""

    @property
    def own_pass(self) -> bool:
        return self.passed if self.within is None else self.within

    def line(self) -> str:
        """``max_abs_diff (absDiff): 350 > 100 [absolute, |v − k|] FAIL``: this metric alone."""
        ok = self.own_pass
        name = self.metric if self.label in ("", self.metric) else f"{self.metric} ({self.label})"
        unit = f"  [{self.unit}]" if self.unit else ""
        return f"{name}: {self.value:g} {'<=' if ok else '>'} {self.limit:g} {'pass' if ok else 'FAIL'}{unit}"

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "label": self.label, "value": json_float(self.value),
                "limit": json_float(self.limit), "pass": self.passed, "within": self.own_pass,
                "unit": self.unit}  # fmt: skip


def format_flags(flags: Iterable[int | bool]) -> str:
    """``[1 1 0]``: one digit per flag, 1 = within the limit."""
    return "[" + " ".join("1" if f else "0" for f in flags) + "]"


@dataclass(frozen=True)
class Verdict:
    """The flags of one :class:`Thresholds` on one :class:`ComparisonResult`.

    ``nonfinite_check``: the NaN/inf rule as its own check (NaN anywhere or unequal infinities
    fail a ``nonfinite="fail"`` verifier), None for verifiers whose metrics alone decide."""

    result: ComparisonResult
    thresholds: Thresholds
    checks: tuple[CheckResult, ...]
    nonfinite_check: CheckResult | None = None

    @property
    def flags(self) -> tuple[int, ...]:
        return tuple(int(c.passed) for c in self.checks)

    @property
    def passed(self) -> bool:
        nf_ok = self.nonfinite_check is None or self.nonfinite_check.passed
        return nf_ok and all(c.passed for c in self.checks)

    @property
    def exit_code(self) -> int:
        """0 pass, 1 fail (the CLI's exit status)."""
        return 0 if self.passed else 1

    @property
    def failing(self) -> tuple[CheckResult, ...]:
        """The checks that fail on their own metric (the NaN/inf check first)."""
        out = [self.nonfinite_check] if self.nonfinite_check is not None and not self.nonfinite_check.passed else []
        return tuple(out + [c for c in self.checks if not c.own_pass])

    @property
    def notes(self) -> tuple[str, ...]:
        """Where this verifier's rules differ from what a reader may assume (NaN let through)."""
        nf = self.result.nonfinite
        out = []
        if self.thresholds.nonfinite == "metric" and not any(c.metric == "allclose" for c in self.checks):
            seen = (
                f"{nf.n_mismatch} NaN/inf mismatches here do not fail it"
                if nf.n_mismatch
                else "no NaN/inf mismatch here"
            )
            out.append(
                f"{self.thresholds.name} lets NaN and unequal infinities through (its metrics skip them, as "
                f"the original code does): {seen}; the rocmlir preset fails on any"
            )
        return tuple(out)

    def format_flags(self) -> str:
        return format_flags(self.flags)

    def format(self) -> str:
        """What this verifier prints: the flags, or the study line for ``study-2022``."""
        if self.thresholds.output == "study-line":
            return format_study_line(self.result)
        return self.format_flags()

    def verdict_line(self) -> str:
        """``PASS (rocmlir)`` or ``FAIL (rocmlir): max_abs_diff 350 > 100 (absolute); …``."""
        name = self.thresholds.name
        if self.passed:
            return f"PASS ({name}: {len(self.checks)} check{'s' if len(self.checks) != 1 else ''} within limits)"
        why = "; ".join(
            f"{c.metric} {c.value:g} > {c.limit:g}" + (f" ({c.unit})" if c.unit else "") for c in self.failing
        )
        return f"FAIL ({name}): {why or 'the flags above'}"

    def to_dict(self) -> dict[str, Any]:
        """The result's dict with ``flags`` and ``verdict`` filled, plus the checks."""
        out = self.result.to_dict()
        out["flags"] = list(self.flags)
        out["verdict"] = "pass" if self.passed else "fail"
        out["preset"] = self.thresholds.name
        out["checks"] = [c.to_dict() for c in self.checks]
        out["nonfinite_check"] = None if self.nonfinite_check is None else self.nonfinite_check.to_dict()
        out["failing"] = [c.metric for c in self.failing]
        out["verdict_line"] = self.verdict_line()
        out["notes"] = list(self.notes)
        if self.result.study_quirks is not None:
            out["study_line"] = format_study_line(self.result)
        return out

    def format_text(self) -> str:
        """:meth:`report`: the checks with their values, then what the verifier prints."""
        return self.report()

    def report(self) -> str:
        """One line per check (each its own metric), the NaN/inf check, what the verifier prints,
        the PASS/FAIL line and the notes."""
        lines = [c.line() for c in self.checks]
        nf = self.result.nonfinite
        if self.nonfinite_check is not None:
            c = self.nonfinite_check
            lines.append(
                f"nonfinite mismatches: {nf.n_mismatch} (NaN {nf.n_nan}, unequal inf {nf.n_inf_mismatch}) "
                f"{'<=' if c.passed else '>'} 0 {'pass' if c.passed else 'FAIL'}"
                + ("" if c.passed else ": any NaN or unequal infinity fails every flag of this verifier")
            )
        elif nf.n_mismatch:
            lines.append(
                f"nonfinite mismatches: {nf.n_mismatch} (NaN {nf.n_nan}, unequal inf {nf.n_inf_mismatch}); "
                f"not a check of {self.thresholds.name}"
            )
        printed = self.format()
        if self.thresholds.output != "study-line":
            # the bare flags ("[1]") mean nothing out of context: say whose they are
            printed = f"{self.thresholds.name} prints: {printed} (one flag per check, 1 = pass)"
        lines.append(printed)
        lines.append(self.verdict_line())
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Verdict {self.verdict_line()} flags {self.format_flags()}>"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(c.metric)}</td><td>{html.escape(c.label)}</td><td>{c.value:g}</td>"
            f"<td>{c.limit:g}</td><td>{html.escape(c.unit)}</td><td>{'pass' if c.own_pass else '<b>FAIL</b>'}</td></tr>"
            for c in ((*self.checks, self.nonfinite_check) if self.nonfinite_check else self.checks)
        )
        notes = "".join(f"<p><i>note: {html.escape(n)}</i></p>" for n in self.notes)
        return (
            f"<p><b>{html.escape(self.verdict_line())}</b></p><table><tr><th>metric</th><th>label</th>"
            f"<th>value</th><th>limit</th><th>unit</th><th></th></tr>{rows}</table>{notes}"
        )


def _check_passes(metric: str, value: float, limit: float) -> bool:
    if math.isnan(value):
        return False
    if metric == "diff4":
        # evaluator.cpp CHECK_ERROR: below 100 distinct mismatches diff4 is −1 (unused); it fails
        # only when every mismatch lies on one side (0.0 or 1.0)
        return not (value >= 0 and value in (0.0, 1.0))
    return value <= limit


def evaluate(result: ComparisonResult, thresholds: Thresholds) -> Verdict:
    """Apply ``thresholds`` to a result computed beforehand; ValueError for a result of no
    elements (a verdict on nothing would be a PASS that says nothing)."""
    if result.n == 0:
        raise ValueError("validation, kernel: both arrays are empty: there is nothing to judge")
    nf = result.nonfinite
    bad_nonfinite = nf.n_mismatch - (nf.n_nan_both if thresholds.equal_nan else 0)
    spoiled = thresholds.nonfinite == "fail" and bad_nonfinite > 0
    checks = []
    for c in thresholds.checks:
        value = result.metric(c.metric)
        within = _check_passes(c.metric, value, c.limit)
        unit = metric_unit(c.metric, result)
        checks.append(CheckResult(c.metric, c.label, value, c.limit, within and not spoiled, within, unit))
    nf_check = None
    if thresholds.nonfinite == "fail":
        nf_check = CheckResult("n_nonfinite", "NaN/inf", float(bad_nonfinite), 0.0, bad_nonfinite == 0,
                               bad_nonfinite == 0, "elements: NaN, or unequal infinities")  # fmt: skip
    return Verdict(result=result, thresholds=thresholds, checks=tuple(checks), nonfinite_check=nf_check)


def verdict(
    result: ComparisonResult,
    preset: str | None = None,
    thresholds: Mapping[str, float] | None = None,
    **preset_options: Any,
) -> Verdict:
    """Judge a result computed beforehand by a preset, by ``{metric: limit}``, or both.

    With both, the mapping replaces the preset's limits of the metrics it names and appends
    checks for the others. The preset's data type is the result's. Raises ``ValueError`` when
    the result was not measured as the preset measures (:meth:`Thresholds.check_result`).
    """
    extra = dict(thresholds or {})
    if preset is not None and extra:
        labels = {_norm(c.label): c.metric for c in _preset(preset, result.dtype, **preset_options).checks}
        extra = {labels.get(_norm(m), m) if m not in METRIC_NAMES else m: x for m, x in extra.items()}
    extra = {resolve_metric(m): x for m, x in extra.items()}
    if preset is None:
        if not extra:
            raise ValueError("give a preset, thresholds, or both")
        if preset_options:
            raise TypeError(f"preset options {sorted(preset_options)} given without a preset")
        th = Thresholds.from_mapping(extra)
    else:
        th = _preset(preset, result.dtype, **preset_options)
        own = {c.metric for c in th.checks}
        th = th.with_limits(**{m: x for m, x in extra.items() if m in own})
        added = tuple(Check(m, float(x)) for m, x in extra.items() if m not in own)
        if added:
            th = dataclasses.replace(th, checks=th.checks + added)
        th.check_result(result)
    return evaluate(result, th)


def _all_fp16(a: np.ndarray) -> bool:
    """Whether every value of the float array ``a`` is an fp16 value (NaN counts as one)."""
    with np.errstate(over="ignore", invalid="ignore"):
        back = a.astype(np.float16).astype(a.dtype)
    return bool(a.size) and bool(np.all((back == a) | (np.isnan(back) & np.isnan(a))))


def verify(
    validation: Any,
    kernel: Any,
    thresholds: Thresholds | str = "rocmlir",
    *,
    dtype_hint: Any = None,
    chunk: int = DEFAULT_CHUNK,
    top: int = 10,
    **preset_options: Any,
) -> Verdict:
    """Compare and judge in one call.

    ``thresholds`` is a :class:`Thresholds` or a preset name (``preset_options`` go to
    :func:`preset`). The data type is ``dtype_hint``, else the thresholds' ``dtype``, else the
    kernel array's type.
    """
    dtype = None if dtype_hint is None else resolve_dtype(dtype_hint)
    if isinstance(thresholds, str):
        if dtype is None:
            ka = np.asarray(kernel)
            dtype = "fp64" if ka.dtype.kind in "biu" else resolve_dtype(ka.dtype)
            if ka.dtype in (np.float32, np.float64) and _all_fp16(ka):
                # as fp16emu compare warns: the preset is chosen by the array's type, and an fp16
                # kernel's output held in float64 is judged in float64 ulps (a far tighter limit)
                warnings.warn(
                    f"kernel is {ka.dtype.name} but every value is an fp16 value: if the kernel wrote fp16, pass "
                    f"dtype_hint='fp16' (judged as {dtype} now)",
                    UserWarning,
                    stacklevel=2,
                )
        thresholds = preset(thresholds, dtype, **preset_options)
    elif preset_options:
        raise TypeError(f"preset options {sorted(preset_options)} given with a Thresholds object")
    if dtype is None:
        dtype = thresholds.dtype
    result = compare(
        validation,
        kernel,
        dtype_hint=dtype,
        chunk=chunk,
        top=top,
        study_quirks=resolve_study_quirks(thresholds.study_quirks),
        round_validation=thresholds.round_validation,
        allclose=thresholds.allclose,
        equal_nan=thresholds.equal_nan,
    )
    return evaluate(result, thresholds)


# ------------------------------------------------------------------------------------------------
# Presets


def _in_type(x: float, dtype: str) -> float:
    """``x`` rounded to the data type (RNE): the limit as the C code held it."""
    return float(cast_rne(np.array([x]), dtype)[0])


def preset(
    name: str,
    dtype: Any = "fp16",
    *,
    op_class: str = "conv",
    run_set: str = "fair_3",
    diff4: bool = False,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    limits: Mapping[str, float] | None = None,
) -> Thresholds:
    """The :class:`Thresholds` of a named verifier (module docstring) for data type ``dtype``.

    ``op_class``: MLU-OPS operator class; ``run_set``: study run set; ``diff4``: add MLU-OPS's
    diff4 check; ``rtol``/``atol``/``equal_nan``: torch tolerances; ``limits``: replace limits
    by metric name (e.g. ``{"rms": 7e-4}`` for rocMLIR's bwd regression tests).
    Raises ``ValueError`` naming the valid presets for an unknown name.
    """
    dt = resolve_dtype(dtype)
    if name == "rocmlir-2022":
        limit = _in_type(0.25 if dt == "fp16" else 1e-6, dt)
        th = Thresholds(checks=(Check("max_rel_diff_old_native", limit, "relDiff_old"),),
                        name=name, round_validation=dt, nonfinite="metric", dtype=dt)  # fmt: skip
    elif name == "rocmlir":
        th = Thresholds(
            checks=(Check("rms", 3e-5, "RMS"), Check("max_abs_diff", 100.0, "absDiff"),
                    Check("max_rel_diff", 100.0 if dt == "fp16" else 1e-6, "relDiff")),
            name=name, round_validation=dt, nonfinite="fail", dtype=dt,
        )  # fmt: skip
    elif name == "study-2022":
        if dt != "fp16":
            raise ValueError(f"the 2022 study verifier is fp16 only, got {dt}")
        if run_set not in STUDY_RUN_SETS:
            raise ValueError(f"unknown study run set {run_set!r}; valid names: "
                             f"{', '.join(STUDY_RUN_SETS)}")  # fmt: skip
        th = Thresholds(checks=(Check("max_epsilon_diff", 2.0, "maxEpsilonDiff"),), name=name,
                        round_validation="fp16", study_quirks=run_set, nonfinite="metric",
                        dtype="fp16", output="study-line")  # fmt: skip
    elif name == "mlu-ops":
        try:
            cls = MLU_OP_CLASSES[op_class]
        except KeyError:
            raise ValueError(f"unknown MLU-OPS operator class {op_class!r}; valid classes: "
                             f"{', '.join(MLU_OP_CLASSES)}") from None  # fmt: skip
        if cls == "conv":
            lim = 1e-5 if dt in ("fp32", "fp64") else 3e-3
            checks = [Check("diff1", lim), Check("diff2", lim)]
        elif cls in ("arithmetic", "io"):
            checks = [Check("diff3_2", 0.0)]
        else:
            checks = [Check("diff1", 3e-3), Check("diff2", 3e-3)]
        if diff4:
            checks.append(Check("diff4", 0.0))
        th = Thresholds(checks=tuple(checks), name=name, nonfinite="fail", dtype=dt)
    elif name == "torch":
        r0, a0 = TORCH_TOLERANCES[dt]
        tol = (r0 if rtol is None else float(rtol), a0 if atol is None else float(atol))
        th = Thresholds(checks=(Check("allclose", 0.0, "allclose"),), name=name, allclose=tol,
                        equal_nan=equal_nan, nonfinite="metric", dtype=dt)  # fmt: skip
    elif name == "miopen":
        # conv_driver.hpp GetDefaultTolerance: 1.5e-6 for 4- and 1-byte types (fp8 too)
        tol = {"fp16": 8.2e-3, "bf16": 8.2e-3 * 8.0}.get(dt, 1.5e-6)
        th = Thresholds(checks=(Check("miopen_rms", tol, "RMS"),), name=name, nonfinite="fail",
                        dtype=dt)  # fmt: skip
    else:
        raise ValueError(f"unknown verifier preset {name!r}; valid presets: "
                         f"{', '.join(PRESET_NAMES)}")  # fmt: skip
    if rtol is not None or atol is not None or equal_nan:
        if name != "torch":
            raise ValueError("rtol, atol and equal_nan apply to the torch preset only")
    return th.with_limits(**limits) if limits else th


#: the unit roundoff of fp16, the format rocMLIR's RMS ≤ 3e-5 was set for
_U_FP16 = 2.0**-11


def compare_default(dtype: Any) -> tuple[str, dict[str, float], str]:
    """The verifier ``fp16emu compare`` judges with when none is named, per format: (preset
    name, limits that replace the preset's, what they are). fp16, fp32 and fp64: rocMLIR's
    ``rocmlir`` preset as it is. The narrower formats (bf16, the fp8 types), for which rocMLIR's
    maxRelDiff ≤ 1e-6 would fail a single one-ulp difference: the same preset with fp16's
    maxRelDiff (100) and its RMS limit scaled by the format's unit roundoff over fp16's
    (bf16 × 8, as MIOpen scales its bf16 tolerance; e4m3 × 128, e5m2 × 256)."""
    dt = resolve_dtype(dtype)
    if dt in ("fp16", "fp32", "fp64"):
        return "rocmlir", {}, f"rocMLIR's limits for {dt}"
    u = 2.0 ** -resolve_format(dt).precision
    scale = u / _U_FP16
    limits = {"rms": 3e-5 * scale, "max_rel_diff": 100.0}
    text = (
        f"rocMLIR's fp16 limits scaled to {dt}: RMS ≤ {limits['rms']:.3g} (3e-5 × {scale:g}, the unit roundoff "
        f"2^-{resolve_format(dt).precision} over fp16's 2^-11), maxRelDiff ≤ 100, maxAbsDiff ≤ 100"
    )
    return "rocmlir", limits, text


_preset = preset  # the name `preset` is a parameter of verdict()


def measure(
    validation: Any,
    kernel: Any,
    verifier: str,
    dtype: str | None = None,
    thresholds: Mapping[str, float] | None = None,
) -> tuple[ComparisonResult, Verdict]:
    """Compare as the preset ``verifier`` measures, and judge: (the comparison, its verdict).

    ``dtype``: the kernel's own format (default: the kernel array's type, fp64 for arrays that hold
    no floats); ``thresholds``: limits by metric name that replace the preset's.
    """
    kernel = np.asarray(kernel)
    if dtype is None:
        dtype = resolve_dtype(kernel.dtype) if kernel.dtype.kind == "f" or str(kernel.dtype) == "bfloat16" else "fp64"
    options = preset(verifier, dtype).compare_options()
    comparison = compare(validation, kernel, **options)
    return comparison, verdict(comparison, preset=verifier, thresholds=dict(thresholds or {}))
