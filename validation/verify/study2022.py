"""The 2022 fp16 study's instrumented rocMLIR verifier: run sets, its printed line, a fast path.

In 2022 an AMD study ran the 107 fp16 convolution tests of rocMLIR's suite on MI100 and MI200
GPUs (github.com/zhanglx13/llvm-project-mlir-dev-utils, ``fp16_experiment``; its measured lines
are in ``fp16_experiment/raw_results``, commit 3b042e7). Each test ended with one line printed by
an instrumented copy of rocMLIR's host verifier, ``mcpuVerify5DFloatFloat`` in
``mlir/lib/ExecutionEngine/conv-validation-wrappers.cpp`` (a 2022 development version of
github.com/ROCm/rocMLIR), followed by what the study's ``batch_run.sh`` appended::

    N (n_exact n_eps1 n_eps_ge2 n_eps_other) maxEps (v k) maxAbs aveAbs maxRel maxRelOld (v k)
      aveRel RMS tags direction test (i of n)

printed as ``"%-10ld (%d %d %d %d) %.1f (%.10f %.10f) %f %lf %.1e %.1e (%.10f %.10f) %.1e %.1e"``.
``v`` is the validation result (CPU or GPU reference), ``k`` the kernel under test; both are
float32, and the validation was first rounded to fp16 (RNE) and back (every printed ``v`` is an
fp16 value). The loop skips elements with ``v == k`` (−0 == +0, inf == inf) and, over the others:

* ``N``: all elements; ``n_exact``: ``v == k``; ``n_eps1``: ε == 1; ``n_eps_ge2``: ε ≥ 2 (inf
  included); ``n_eps_other``: the rest (0 < ε < 1, 1 < ε < 2, NaN), 0 in every measured line.
* ε = ``fabs(v − k) / halfFloatInterval(min(|v|, |k|))`` in float32; the interval is the fp16
  spacing (rule per run set, below) and 0 above 2^16, so ε = inf there. ``maxEps`` and the
  ``(v k)`` after it: the largest ε and the first element that reaches it (row-major order).
* ``maxAbs``: max ``fabs(v − k)`` in float32; ``aveAbs``: their sum (double, element order) / N.
* ``maxRel``: max ``(double)|v − k| / |v|`` over v ≠ 0; ``aveRel``: their sum / N.
* ``maxRelOld``: maxRel over ``|v| > 1.0004e-3f`` and the ``(v k)`` where it is reached.
* ``RMS``: ``sqrt(Σ(v − k)²) / (maxMag · sqrt(N))``, the sum in double, ``maxMag`` the largest
  ``std::max(|v|, |k|)`` over *all* elements, equal ones included (NaN never wins).

C's IEEE semantics carry through: maxima skip NaN, sums propagate it, 0/0 and inf/inf give the
x86 default NaN, printed ``-nan``; an overflow to inf on both sides makes ``maxMag`` inf and the
RMS 0. Every field of :class:`StudyLine` reproduces the measured lines character for character.

Quirks per run set (:data:`STUDY_RUN_SETS`, read from the raw results):

* ``fair_1`` (seed 1, first validator, first verifier): line format A, without the ``(v k)``
  after maxRelOld and with two spaces before each of the last six fields; the interval is
  ``2^(e−10)`` for ``2^e < x ≤ 2^(e+1)`` (``2^-24`` for x ≤ 2^-13), so at an exact power of two
  it is the spacing of the binade *below* and one ulp across a power of two reads ε = 2;
  maxRelOld over ``v > thr`` (a sign bug: negative validation values are skipped).
* ``fair_2``: fair_1 re-run with the maxRelOld bugs fixed: format B, ``|v| > thr``, same interval.
* ``fair_3`` (the "acc 4" CPU validator, + input flush on MI200) and ``fair_rand0`` (time
  seed): format B, and the interval is the true fp16 ulp of min(|v|, |k|).

Here: the run sets (:class:`StudyQuirks`, :func:`resolve_study_quirks`), the interval
(:func:`study_interval`), the line (:class:`StudyLine`, :class:`StudyTail`, :func:`study_line`,
:func:`format_study_line`, :func:`parse_study_line`) and a fast path for tensors that mostly
agree (:func:`differing_elements`, :func:`compare_differing`, :func:`study_line_of`). The
arithmetic itself is :func:`validation.metrics.compare` with ``study_quirks=`` the run set's policy (:class:`StudyQuirks`); the
verdict (maxEpsilonDiff ≤ 2, the study's pass rule) is the ``study-2022`` preset of
:mod:`validation.verify`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from emu.formats import FP16, spacing
from emu.rounding import fp16_rne_differs

from ..metrics import DEFAULT_CHUNK, Comparison, ComparisonResult

__all__ = [
    "STUDY_REL_OLD_THRESHOLD",
    "STUDY_RUN_SETS",
    "StudyQuirks",
    "resolve_study_quirks",
    "study_quirks",
    "study_interval",
    "differing_elements",
    "compare_differing",
    "StudyTail",
    "StudyLine",
    "study_line",
    "study_line_of",
    "format_study_line",
    "parse_study_line",
]

#: The verifier's ``float thr = 1.0004e-03``: maxRelDiff_old takes |v| above it.
STUDY_REL_OLD_THRESHOLD = float(np.float32(1.0004e-03))

# ------------------------------------------------------------------------------------------------
# Run sets


@dataclass(frozen=True)
class StudyQuirks:
    """How one run set of the 2022 study's instrumented verifier behaved (module docstring).

    ``line_format``: "A" (fair_1: no pair after maxRelDiff_old, two spaces between the last
    eight fields) or "B" (the verifier's printf). ``epsilon_rule``: "binade_below" (spacing
    2^(e−10) for 2^e < x ≤ 2^(e+1), so exact powers of two take the binade below) or "ulp" (the
    true fp16 ulp); a rule of :func:`emu.formats.spacing`. ``rel_old_signed``: maxRelDiff_old
    over ``v > thr`` instead of ``|v| > thr``.
    """

    run_set: str
    line_format: str
    epsilon_rule: str
    rel_old_signed: bool

    @property
    def rel_old_threshold(self) -> float:
        """The verifier's ``thr`` (:data:`STUDY_REL_OLD_THRESHOLD`)."""
        return STUDY_REL_OLD_THRESHOLD

    def interval(self, m32: np.ndarray) -> np.ndarray:
        """``halfFloatInterval`` of float32 magnitudes under this run set's ε rule (:func:`study_interval`)."""
        return study_interval(m32, self.epsilon_rule)


#: The four run sets of the study's raw results.
STUDY_RUN_SETS: Mapping[str, StudyQuirks] = {
    "fair_1": StudyQuirks("fair_1", "A", "binade_below", True),
    "fair_2": StudyQuirks("fair_2", "B", "binade_below", False),
    "fair_3": StudyQuirks("fair_3", "B", "ulp", False),
    "fair_rand0": StudyQuirks("fair_rand0", "B", "ulp", False),
}


def study_quirks(run_set: str) -> StudyQuirks:
    """The policy of one run set of the study, by name (what ``compare(..., study_quirks=)`` receives)."""
    quirks = resolve_study_quirks(run_set)
    if quirks is None:
        raise ValueError(f"unknown study run set {run_set!r}; valid names: {', '.join(STUDY_RUN_SETS)}")
    return quirks


def resolve_study_quirks(quirks: Any) -> StudyQuirks | None:
    """A :class:`StudyQuirks` from a run-set name, an instance, or None (no study mode)."""
    if quirks is None or isinstance(quirks, StudyQuirks):
        return quirks
    if isinstance(quirks, str) and quirks in STUDY_RUN_SETS:
        return STUDY_RUN_SETS[quirks]
    raise ValueError(f"unknown study run set {quirks!r}; valid names: {', '.join(STUDY_RUN_SETS)}")


def study_interval(m32: np.ndarray, rule: str) -> np.ndarray:
    """``halfFloatInterval`` of the study verifier on float32 magnitudes, as float32.

    The fp16 spacing of :func:`emu.formats.spacing` with ``rule`` ("ulp" or "binade_below"),
    and 0 above 2^16 and for inf/NaN, as the instrumented code does (what the fixed code of
    fair_3/fair_rand0 did there is unknown; with fp16 values only inf reaches it, where any
    choice gives the same ε).
    """
    m = m32.astype(np.float64)
    finite_range = np.isfinite(m) & (m <= 2.0**16)
    with np.errstate(invalid="ignore"):
        sp = spacing(np.where(finite_range, m, 0.0), FP16, rule)
    return np.where(finite_range, sp, 0.0).astype(np.float32)


# ------------------------------------------------------------------------------------------------
# Fast path: only the differing elements


def differing_elements(validation: Any, kernel: Any) -> tuple[np.ndarray, float]:
    """(flat row-major indices where the study verifier sees ``v != k``, max over all elements of
    max(|v|, |k|) as C's std::max takes it): what :func:`compare_differing` needs of the equal
    elements. The same for every run set, so a caller comparing one pair under several run sets
    computes it once.

    ``v`` is ``(float)validation`` rounded to fp16 (RNE), ``k`` is ``(float)kernel``
    (:func:`emu.rounding.fp16_rne_differs`).
    """
    flat_v = np.asarray(validation).reshape(-1)
    flat_k = np.asarray(kernel).reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        # (float)v: float32 and float64 are read as they are (the pass rounds float64 to float32)
        v32 = flat_v if flat_v.dtype in (np.float32, np.float64) else flat_v.astype(np.float32)
        k32 = flat_k if flat_k.dtype in (np.float16, np.float32) else flat_k.astype(np.float32)
    mask, max_mag = fp16_rne_differs(v32, k32)
    return np.flatnonzero(mask), max_mag


def compare_differing(
    validation: Any,
    kernel: Any,
    *,
    study_quirks: Any,
    chunk: int | None = None,
    differing: tuple[np.ndarray, float] | None = None,
) -> ComparisonResult:
    """:func:`validation.metrics.compare` in study mode (fp16), visiting only the elements that
    differ.

    The study verifier's fields depend on the equal elements only through their count and the RMS
    denominator's max(|v|, |k|); both come from :func:`differing_elements` (or ``differing``, its
    result computed beforehand), and the per-element loop then runs over the differing elements
    alone, in their order, ``chunk`` at a time (default ``metrics.DEFAULT_CHUNK``). Every study
    field, and the elements at the maxima, equal :func:`~validation.metrics.compare`'s bit for bit
    (tested). The other metrics of the result (MLU-OPS, allclose, MIOpen's RMS, histograms) cover
    only the differing elements: this is the fast path of :func:`study_line_of`, not a general
    comparison.
    """
    va = np.asarray(validation)
    ka = np.asarray(kernel)
    if va.shape != ka.shape:
        raise ValueError(f"shapes differ: validation {va.shape}, kernel {ka.shape}")
    quirks = resolve_study_quirks(study_quirks)
    if quirks is None:
        raise ValueError("study_quirks: a run set of the 2022 study is required")
    chunk = DEFAULT_CHUNK if chunk is None else chunk
    where, max_mag = differing_elements(va, ka) if differing is None else differing
    comparison = Comparison(va, ka, dtype_hint="fp16", study_quirks=quirks)
    flat_v = va.reshape(-1)
    flat_k = ka.reshape(-1)
    for start in range(0, where.size, chunk):
        sel = where[start : start + chunk]
        comparison.add(start, flat_v[sel], flat_k[sel])
    comparison.add_equal(int(va.size) - int(where.size), max_mag)
    return comparison.result(positions=where)


# ------------------------------------------------------------------------------------------------
# The printed line

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

    ``tags``: isRand, isRandOption, isRandType, isXdlops, isXdlopsOption, isPv, isPvOption (the
    script's ``getConfigTags``: substring tests on the test's RUN line); then the direction.
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
    """The fields of one study verifier line (column meanings: the module docstring).

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


def study_line_of(
    validation: Any,
    kernel: Any,
    run_set: str | StudyQuirks,
    *,
    tail: StudyTail | None = None,
    line_format: str | None = None,
    differing: tuple[np.ndarray, float] | None = None,
) -> StudyLine:
    """The study verifier's line for a (validation, kernel) pair, computed on the differing
    elements only: the same line as ``study_line(compare(validation, kernel, dtype_hint="fp16",
    study_quirks=run_set))``, several times faster when most elements are equal. ``differing``:
    :func:`differing_elements` of the pair, shared by the run sets of one pair."""
    result = compare_differing(validation, kernel, study_quirks=run_set, differing=differing)
    return study_line(result, tail=tail, line_format=line_format)


def format_study_line(line: StudyLine | ComparisonResult, *, tail: StudyTail | None = None,
                      line_format: str | None = None) -> str:  # fmt: skip
    """The study verifier's printed line, field for field.

    Format B is the indexed printf ``"%-10ld (%d %d %d %d) %.1f (%.10f %.10f) %f %lf %.1e %.1e
    (%.10f %.10f) %.1e %.1e"``; format A (fair_1) has no pair after maxRelDiff_old and two
    spaces before each of the last eight fields. A :class:`StudyLine`'s own tail is printed
    unless ``tail`` replaces it; a :class:`ComparisonResult` is printed through
    :func:`study_line`.
    """
    if not isinstance(line, StudyLine):  # a ComparisonResult
        line = study_line(line, tail=tail, line_format=line_format)
    elif line_format is not None and line_format != line.line_format:
        raise ValueError(f"this line is format {line.line_format}; cannot print it as {line_format}")
    f = line.fields()
    head = (f"{line.n:<10d} ({f['n_exact']} {f['n_eps1']} {f['n_eps_ge2']} {f['n_eps_other']}) "
            f"{f['max_epsilon_diff']} ({f['val_at_max_eps']} {f['kern_at_max_eps']})")  # fmt: skip
    if line.line_format == "A":
        last_six = ("max_abs_diff", "ave_abs_diff", "max_rel_diff", "max_rel_diff_old", "ave_rel_diff", "rms")
        body = "".join("  " + f[k] for k in last_six)
    else:
        body = (f" {f['max_abs_diff']} {f['ave_abs_diff']} {f['max_rel_diff']} "
                f"{f['max_rel_diff_old']} ({f['val_at_max_rel_old']} {f['kern_at_max_rel_old']}) "
                f"{f['ave_rel_diff']} {f['rms']}")  # fmt: skip
    t = tail if tail is not None else line.tail
    return head + body + ("" if t is None else t.format())


def parse_study_line(text: str) -> StudyLine:
    """Read one measured line of the study's ``fp16_experiment/raw_results`` (either format, with
    or without the ``batch_run.sh`` tail; a final newline is ignored).

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
