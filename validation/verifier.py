"""Verdicts over a :class:`~validation.metrics.ComparisonResult` (SPEC §3), the named presets, and
the 2022 study's verifier line (format and parse).

A :class:`Thresholds` is an ordered list of checks (metric name, limit) plus how the comparison
is made (rounding of the validation, study quirks, allclose tolerances, what NaN/inf do). The
verdict prints one flag per check in order, ``[1 1 0]`` (1 = within the limit). Named presets
(:func:`preset`, :data:`PRESET_NAMES`):

``rocmlir-2022``
    The old rocMLIR verifier (main, Aug 2022; ``reference/rocmlir_kernels_2022.md`` §2(f)): an
    element fails if v ≠ k, |(v − k)/v| > 0.25 (fp16; 1e-6 for other types) and, for types
    narrower than 32 bits, |v| > 0.001; both values rounded to the data type and compared in its
    arithmetic (metric ``max_rel_diff_old_native``). Prints ``[1]`` or ``[0]``. As in that code,
    a NaN quotient does not fail.
``rocmlir``
    The verifier of PR #736 (§3.1): ``[RMS absDiff relDiff]`` with RMS ≤ 3e-5, maxAbsDiff ≤ 100,
    maxRelDiff ≤ 100 for fp16 and ≤ 1e-6 for other types (PR #736 hard-coded 1e-6 for them; PR
    #869 made it the default of ``-relDiff_threshold``); the validation rounded to the data type
    first (truncf → f16 → extf for fp16).
``study-2022``
    The study's instrumented line (SPEC §3) with one run set's quirks (``run_set``, default
    ``fair_3``: the verifier after both fixes), verdict maxEpsilonDiff ≤ 2, the study's pass
    rule (``reference/study_results_2022.md`` §0 finding 5). :meth:`Verdict.format` prints the
    line; :func:`format_study_line` / :func:`parse_study_line` print and read it.
``mlu-ops``
    Cambricon's acceptance classes (SPEC §2): ``conv`` fp32 diff1, diff2 ≤ 1e-5 and fp16 (bf16)
    ≤ 3e-3; ``reduction``, ``activation``, ``composite``, ``atomic`` diff1, diff2 ≤ 3e-3;
    ``arithmetic``, ``io`` diff3_2 = 0; ``diff4=True`` adds the diff4 check (fails only with
    ≥ 100 distinct mismatches all on one side).
``torch``
    torch.testing.assert_close: every element within atol + rtol·|v|, defaults per data type
    (:data:`~validation.metrics.TORCH_TOLERANCES`).
``miopen``
    MIOpenDriver: RMS (``rms_range``) ≤ 8.2e-3 for fp16, 1.5e-6 for fp32, 8 × 8.2e-3 for bf16
    (MIOpen drivers' ``GetTolerance``: "bf16 mantissa has 7 bits, by 3 bits shorter than fp16");
    fp64 takes fp32's limit (MIOpen has none for it).

NaN and infinity: with ``nonfinite="fail"`` (the default, and the presets whose C code ends up
with an inf or NaN metric there) a NaN or a pair of unequal infinities fails every flag; with
``"metric"`` only the metric values decide (the C verifiers whose maxima skip NaN).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .metrics import (
    DEFAULT_CHUNK,
    METRIC_NAMES,
    STUDY_RUN_SETS,
    TORCH_TOLERANCES,
    ComparisonResult,
    StudyQuirks,
    _FMTS,
    _json_float,
    _study_compare,
    _to_native,
    compare,
    resolve_dtype,
    resolve_study_quirks,
)

__all__ = [
    "PRESET_NAMES",
    "MLU_OP_CLASSES",
    "Check",
    "CheckResult",
    "Thresholds",
    "Verdict",
    "preset",
    "evaluate",
    "verdict",
    "verify",
    "format_flags",
    "StudyTail",
    "StudyLine",
    "study_line",
    "study_line_of",
    "format_study_line",
    "parse_study_line",
]

PRESET_NAMES = ("rocmlir-2022", "rocmlir", "study-2022", "mlu-ops", "torch", "miopen")
#: MLU-OPS operator classes (SPEC §2) and the name each alias stands for.
MLU_OP_CLASSES: Mapping[str, str] = {
    "conv": "conv", "convolution": "conv",
    "reduction": "reduction", "activation": "activation", "composite": "composite",
    "atomic": "atomic", "atomic-add": "atomic",
    "arithmetic": "arithmetic", "io": "io", "pure-io": "io",
}  # fmt: skip

# ------------------------------------------------------------------------------------------------
# Thresholds and verdicts


@dataclass(frozen=True)
class Check:
    """One flag: pass when ``result.metric(metric) <= limit`` (``diff4``: MLU-OPS's rule)."""

    metric: str
    limit: float
    label: str = ""

    def __post_init__(self) -> None:
        if self.metric not in METRIC_NAMES:
            raise ValueError(
                f"unknown metric {self.metric!r}; valid metrics: {', '.join(sorted(METRIC_NAMES))}"
            )
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

    def compare_options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`~validation.metrics.compare` this verifier needs."""
        return {"dtype_hint": self.dtype, "study_quirks": self.study_quirks,
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
        if rv != self.round_validation and not (rv is None
                                                and result.validation_dtype == self.round_validation):
            problems.append(f"validation rounding {rv} (needs {self.round_validation})")
        if self.allclose is not None and (result.allclose.rtol, result.allclose.atol) != tuple(
                self.allclose):
            problems.append(f"allclose (rtol, atol) = ({result.allclose.rtol}, "
                            f"{result.allclose.atol}) (needs {tuple(self.allclose)})")
        if result.allclose.equal_nan != self.equal_nan:
            problems.append(f"equal_nan {result.allclose.equal_nan} (needs {self.equal_nan})")
        if problems:
            raise ValueError(
                f"the comparison does not fit verifier {self.name!r}: " + "; ".join(problems)
                + ". Measure with compare(..., **thresholds.compare_options()) or use verify()."
            )

    def with_limits(self, **limits: float) -> Thresholds:
        """A copy with some limits replaced, by metric name (``rms=7e-4``)."""
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
    """One evaluated check."""

    metric: str
    label: str
    value: float
    limit: float
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "label": self.label, "value": _json_float(self.value),
                "limit": _json_float(self.limit), "pass": self.passed}  # fmt: skip


def format_flags(flags: Iterable[int | bool]) -> str:
    """``[1 1 0]``: one digit per flag, 1 = within the limit."""
    return "[" + " ".join("1" if f else "0" for f in flags) + "]"


@dataclass(frozen=True)
class Verdict:
    """The flags of one :class:`Thresholds` on one :class:`ComparisonResult`."""

    result: ComparisonResult
    thresholds: Thresholds
    checks: tuple[CheckResult, ...]

    @property
    def flags(self) -> tuple[int, ...]:
        return tuple(int(c.passed) for c in self.checks)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def exit_code(self) -> int:
        """SPEC §3: 0 pass, 1 fail."""
        return 0 if self.passed else 1

    def format_flags(self) -> str:
        return format_flags(self.flags)

    def format(self) -> str:
        """What this verifier prints: the flags, or the study line for ``study-2022``."""
        if self.thresholds.output == "study-line":
            return format_study_line(self.result)
        return self.format_flags()

    def to_dict(self) -> dict[str, Any]:
        """The result's dict with ``flags`` and ``verdict`` filled, plus the checks."""
        out = self.result.to_dict()
        out["flags"] = list(self.flags)
        out["verdict"] = "pass" if self.passed else "fail"
        out["preset"] = self.thresholds.name
        out["checks"] = [c.to_dict() for c in self.checks]
        if self.result.study_quirks is not None:
            out["study_line"] = format_study_line(self.result)
        return out

    def format_text(self) -> str:
        """:meth:`report`: the checks with their values, then what the verifier prints."""
        return self.report()

    def report(self) -> str:
        """One line per check, then the flags."""
        lines = [f"{c.label}: {c.value:g} {'<=' if c.passed else '>'} {c.limit:g} "
                 f"{'pass' if c.passed else 'FAIL'}" for c in self.checks]  # fmt: skip
        nf = self.result.nonfinite
        if nf.n_mismatch:
            lines.append(f"nonfinite mismatches: {nf.n_mismatch} (NaN {nf.n_nan}, unequal inf "
                         f"{nf.n_inf_mismatch}); policy {self.thresholds.nonfinite}")  # fmt: skip
        lines.append(self.format())
        return "\n".join(lines)


def _check_passes(metric: str, value: float, limit: float) -> bool:
    if math.isnan(value):
        return False
    if metric == "diff4":
        # evaluator.cpp CHECK_ERROR: below 100 distinct mismatches diff4 is −1 (unused); it fails
        # only when every mismatch lies on one side (0.0 or 1.0)
        return not (value >= 0 and value in (0.0, 1.0))
    return value <= limit


def evaluate(result: ComparisonResult, thresholds: Thresholds) -> Verdict:
    """Apply ``thresholds`` to a result computed beforehand."""
    nf = result.nonfinite
    bad_nonfinite = nf.n_mismatch - (nf.n_nan_both if thresholds.equal_nan else 0)
    spoiled = thresholds.nonfinite == "fail" and bad_nonfinite > 0
    checks = []
    for c in thresholds.checks:
        value = result.metric(c.metric)
        ok = _check_passes(c.metric, value, c.limit) and not spoiled
        checks.append(CheckResult(c.metric, c.label, value, c.limit, ok))
    return Verdict(result=result, thresholds=thresholds, checks=tuple(checks))


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
        study_quirks=thresholds.study_quirks,
        round_validation=thresholds.round_validation,
        allclose=thresholds.allclose,
        equal_nan=thresholds.equal_nan,
    )
    return evaluate(result, thresholds)


# ------------------------------------------------------------------------------------------------
# Presets


def _in_type(x: float, dtype: str) -> float:
    """``x`` rounded to the data type (RNE): the limit as the C code held it."""
    return float(_to_native(np.array([x]), _FMTS[dtype])[0])


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
        tol = {"fp16": 8.2e-3, "bf16": 8.2e-3 * 8.0, "fp32": 1.5e-6, "fp64": 1.5e-6}[dt]
        th = Thresholds(checks=(Check("miopen_rms", tol, "RMS"),), name=name, nonfinite="fail",
                        dtype=dt)  # fmt: skip
    else:
        raise ValueError(f"unknown verifier preset {name!r}; valid presets: "
                         f"{', '.join(PRESET_NAMES)}")  # fmt: skip
    if rtol is not None or atol is not None or equal_nan:
        if name != "torch":
            raise ValueError("rtol, atol and equal_nan apply to the torch preset only")
    return th.with_limits(**limits) if limits else th


_preset = preset  # the name `preset` is a parameter of verdict()


# ------------------------------------------------------------------------------------------------
# The 2022 study's verifier line

# ``%.1f``, ``%.10f``, ``%f``/``%lf`` and ``%.1e`` as glibc prints them: digits, inf, nan, -nan.
_F = r"(-?(?:\d+\.\d+|inf|nan))"
_E = r"(-?(?:\d\.\de[+-]\d\d+|inf|nan))"
_HEAD = r"^(\d+) +\((\d+) (\d+) (\d+) (\d+)\) " + _F + r" \(" + _F + " " + _F + r"\)"
_LINE_A = re.compile(_HEAD + "  " + _F + "  " + _F + ("  " + _E) * 4 + r"(.*)$", re.S)
_LINE_B = re.compile(
    _HEAD + " " + _F + " " + _F + " " + _E + " " + _E + r" \(" + _F + " " + _F + r"\) "
    + _E + " " + _E + r"(.*)$", re.S,
)  # fmt: skip
_TAIL = re.compile(r"^ ((?:[01] ){7})(\S+) (\S+) \((\d+) of (\d+)\)$")


@dataclass(frozen=True)
class StudyTail:
    """What ``batch_run.sh`` appended: ``$tags $testFileName ($i of $cnt)``.

    ``tags``: isRand, isRandOption, isRandType, isXdlops, isXdlopsOption, isPv, isPvOption;
    then the direction (``reference/study_results_2022.md`` §1).
    """

    tags: tuple[int, ...]
    direction: str
    test_name: str
    test_index: int
    tests_in_file: int

    def format(self) -> str:
        tags = " ".join(str(t) for t in self.tags)
        where = f"({self.test_index} of {self.tests_in_file})"
        return f" {tags} {self.direction} {self.test_name} {where}"


@dataclass(frozen=True)
class StudyLine:
    """The fields of one study verifier line (column meanings: study_results_2022.md §1).

    ``val_at_max_rel_old`` / ``kern_at_max_rel_old`` are None in format A (fair_1).
    """

    n: int
    n_exact: int
    n_eps1: int
    n_eps_ge2: int
    n_eps_other: int
    max_epsilon_diff: float
    val_at_max_eps: float
    kern_at_max_eps: float
    max_abs_diff: float
    ave_abs_diff: float
    max_rel_diff: float
    max_rel_diff_old: float
    val_at_max_rel_old: float | None
    kern_at_max_rel_old: float | None
    ave_rel_diff: float
    rms: float
    line_format: str = "B"
    tail: StudyTail | None = field(default=None, compare=False)

    def fields(self) -> dict[str, str]:
        """Each field as the C printf prints it, by name: compare two lines field for field."""
        out = {
            "n": str(self.n),
            "n_exact": str(self.n_exact),
            "n_eps1": str(self.n_eps1),
            "n_eps_ge2": str(self.n_eps_ge2),
            "n_eps_other": str(self.n_eps_other),
            "max_epsilon_diff": _cfmt("%.1f", self.max_epsilon_diff),
            "val_at_max_eps": _cfmt("%.10f", self.val_at_max_eps),
            "kern_at_max_eps": _cfmt("%.10f", self.kern_at_max_eps),
            "max_abs_diff": _cfmt("%f", self.max_abs_diff),
            "ave_abs_diff": _cfmt("%f", self.ave_abs_diff),
            "max_rel_diff": _cfmt("%.1e", self.max_rel_diff),
            "max_rel_diff_old": _cfmt("%.1e", self.max_rel_diff_old),
        }
        if self.line_format == "B":
            out["val_at_max_rel_old"] = _cfmt("%.10f", _or_zero(self.val_at_max_rel_old))
            out["kern_at_max_rel_old"] = _cfmt("%.10f", _or_zero(self.kern_at_max_rel_old))
        out["ave_rel_diff"] = _cfmt("%.1e", self.ave_rel_diff)
        out["rms"] = _cfmt("%.1e", self.rms)
        return out

    def mismatches(self, other: StudyLine) -> list[str]:
        """Names of the printed fields that differ from ``other``'s."""
        a, b = self.fields(), other.fields()
        return [k for k in a if k in b and a[k] != b[k]]


def _or_zero(x: float | None) -> float:
    return 0.0 if x is None else x


def _cfmt(spec: str, x: float) -> str:
    """C printf of one double: Python's ``%`` gives the same digits (both round the exact binary
    value correctly); NaN is ``-nan`` when its sign bit is set, as glibc prints it."""
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    return spec % x


def _pfloat(token: str) -> float:
    if token.endswith("nan"):
        return math.copysign(math.nan, -1.0 if token.startswith("-") else 1.0)
    return float(token)


def study_line(result: ComparisonResult, *, tail: StudyTail | None = None,
               line_format: str | None = None) -> StudyLine:  # fmt: skip
    """The :class:`StudyLine` of a result computed in study mode (``study_quirks``)."""
    q: StudyQuirks | None = result.study_quirks
    if q is None:
        raise ValueError("a study line needs a result computed with study_quirks=<run set>")
    fmt = line_format or q.line_format
    if fmt not in ("A", "B"):
        raise ValueError(f"line_format must be 'A' or 'B', got {fmt!r}")

    def pair(key: str) -> tuple[float, float]:
        e = result.at_max.get(key)
        return (0.0, 0.0) if e is None else (e.validation, e.kernel)  # C: initialised to 0.0f

    v_eps, k_eps = pair("epsilon_diff")
    v_old, k_old = pair("rel_diff_old")
    return StudyLine(
        n=result.n,
        n_exact=result.n_exact,
        n_eps1=result.n_eps1,
        n_eps_ge2=result.n_eps_ge2,
        n_eps_other=result.n_eps_other,
        max_epsilon_diff=result.max_epsilon_diff,
        val_at_max_eps=v_eps,
        kern_at_max_eps=k_eps,
        max_abs_diff=result.max_abs_diff,
        ave_abs_diff=result.ave_abs_diff,
        max_rel_diff=result.max_rel_diff,
        max_rel_diff_old=result.max_rel_diff_old,
        val_at_max_rel_old=v_old if fmt == "B" else None,
        kern_at_max_rel_old=k_old if fmt == "B" else None,
        ave_rel_diff=result.ave_rel_diff,
        rms=result.rms,
        line_format=fmt,
        tail=tail,
    )


def study_line_of(validation: Any, kernel: Any, run_set: str | StudyQuirks, *,
                  tail: StudyTail | None = None, line_format: str | None = None,
                  differing: tuple[np.ndarray, float] | None = None) -> StudyLine:
    """The study verifier's line for a (validation, kernel) pair, computed on the differing
    elements only: the same line as ``study_line(compare(validation, kernel, dtype_hint="fp16",
    study_quirks=run_set))``, several times faster when most elements are equal. ``differing``:
    ``metrics._study_differing(validation, kernel)``, shared by the run sets of one pair."""
    return study_line(_study_compare(validation, kernel, study_quirks=run_set, differing=differing), tail=tail,
                      line_format=line_format)


def format_study_line(line: StudyLine | ComparisonResult, *, tail: StudyTail | None = None,
                      line_format: str | None = None) -> str:  # fmt: skip
    """The study verifier's printed line, field for field.

    Format B is the indexed printf ``"%-10ld (%d %d %d %d) %.1f (%.10f %.10f) %f %lf %.1e %.1e
    (%.10f %.10f) %.1e %.1e"``; format A (fair_1) has no pair after maxRelDiff_old and two
    spaces before each of the last eight fields. A :class:`StudyLine`'s own tail is printed
    unless ``tail`` replaces it; a :class:`ComparisonResult` is printed through
    :func:`study_line`.
    """
    if isinstance(line, ComparisonResult):
        line = study_line(line, tail=tail, line_format=line_format)
    elif line_format is not None and line_format != line.line_format:
        raise ValueError(f"this line is format {line.line_format}; cannot print it as "
                         f"{line_format}")
    f = line.fields()
    head = (f"{line.n:<10d} ({f['n_exact']} {f['n_eps1']} {f['n_eps_ge2']} {f['n_eps_other']}) "
            f"{f['max_epsilon_diff']} ({f['val_at_max_eps']} {f['kern_at_max_eps']})")  # fmt: skip
    if line.line_format == "A":
        last_six = ("max_abs_diff", "ave_abs_diff", "max_rel_diff", "max_rel_diff_old",
                    "ave_rel_diff", "rms")
        body = "".join("  " + f[k] for k in last_six)
    else:
        body = (f" {f['max_abs_diff']} {f['ave_abs_diff']} {f['max_rel_diff']} "
                f"{f['max_rel_diff_old']} ({f['val_at_max_rel_old']} {f['kern_at_max_rel_old']}) "
                f"{f['ave_rel_diff']} {f['rms']}")  # fmt: skip
    t = tail if tail is not None else line.tail
    return head + body + ("" if t is None else t.format())


def parse_study_line(text: str) -> StudyLine:
    """Read one measured line of ``reference/fp16_study_raw_results`` (either format, with or
    without the ``batch_run.sh`` tail; a final newline is ignored).

    Raises ``ValueError`` when the text is not such a line.
    """
    s = text[:-1] if text.endswith("\n") else text
    s = s[:-1] if s.endswith("\r") else s
    m = _LINE_A.match(s)
    fmt = "A"
    if m is None:
        m = _LINE_B.match(s)
        fmt = "B"
    if m is None:
        raise ValueError(f"not a study verifier line: {text[:120]!r}")
    g = m.groups()
    rest = g[-1]
    tail = None
    if rest:
        t = _TAIL.match(rest)
        if t is None:
            raise ValueError(f"study line tail is not '<7 tags> <direction> <test> (<i> of <n>)': "
                             f"{rest[:120]!r}")  # fmt: skip
        tail = StudyTail(tags=tuple(int(x) for x in t.group(1).split()), direction=t.group(2),
                         test_name=t.group(3), test_index=int(t.group(4)),
                         tests_in_file=int(t.group(5)))  # fmt: skip
    ints = [int(x) for x in g[:5]]
    fl = [_pfloat(x) for x in g[5:-1]]
    if fmt == "A":
        (eps, ve, ke, mabs, aabs, mrel, mold, arel, rms) = fl
        vo = ko = None
    else:
        (eps, ve, ke, mabs, aabs, mrel, mold, vo, ko, arel, rms) = fl
    return StudyLine(n=ints[0], n_exact=ints[1], n_eps1=ints[2], n_eps_ge2=ints[3],
                     n_eps_other=ints[4], max_epsilon_diff=eps, val_at_max_eps=ve,
                     kern_at_max_eps=ke, max_abs_diff=mabs, ave_abs_diff=aabs, max_rel_diff=mrel,
                     max_rel_diff_old=mold, val_at_max_rel_old=vo, kern_at_max_rel_old=ko,
                     ave_rel_diff=arel, rms=rms, line_format=fmt, tail=tail)  # fmt: skip
