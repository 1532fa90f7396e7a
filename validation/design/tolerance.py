"""A tolerance for a library op: every legal schedule's error against the exact result, the
library bug mutants, and the rules people paste, each with its false-alarm rate over the legal
schedules and its detection rate per mutant (Clopper–Pearson intervals, :mod:`.stats`).

The rules (every one a check of the op's output ``out`` against ``ref``, the exact result in
float64, over every element):

* ``assert_close defaults``: ``|out − ref| ≤ atol + rtol·|ref|`` with ``torch.testing.assert_close``'s
  defaults for the output's dtype (fp16 rtol 1e-3, atol 1e-5; bf16 1.6e-2, 1e-5; fp32 1.3e-6,
  1e-5: pytorch/pytorch ``torch/testing/_comparison.py``, ``_DTYPE_PRECISIONS``). torch has no
  defaults for fp8 tensors; an fp8 GEMM's output is bf16, fp16 or fp32 and takes that dtype's.
* ``recommended``: the same form with ``rtol`` the output format's unit roundoff (2^-8 bf16,
  2^-11 fp16, 2^-24 fp32: its own last rounding) and ``atol`` ``margin`` times the largest
  ``|out − ref| − rtol·|ref|`` over every legal schedule and operand set, never below
  ``K·2^-24·rms(ref)`` (the fp32 accumulation's own scale: never zero for float inputs).
* ``FlashAttention 2x``: ``max|out − ref| ≤ 2·max|plain − ref|``, ``plain`` the same op in the
  same dtype by one plain schedule (one chain of the first GPU's unit) — Dao-AILab/flash-attention
  ``tests/test_flash_attn.py``.
* ``rocBLAS K·tol``: ``|out − ref| ≤ K·tol``, tol 1/100 for bf16, 1/900 for fp16, fp32's epsilon
  otherwise (ROCm/rocBLAS ``clients/include/near.hpp``: ``sum_error_tolerance``; the gemm tests'
  ``tol = K * sum_error_tolerance<Tc>``); none for fp8.
* ``c·sqrt(K)``: assert_close's default rtol with ``atol = c·√K·ε`` (ε torch.finfo(out dtype).eps,
  c = 1): the rounding noise of a K-term sum grows as √K (pytorch/pytorch #180333).
* ``bit-exact (pinned)``: the output's bits equal the pinned schedule's (the capture's own
  schedule, or the first legal one). It never fails where the schedule is pinned (same GPU,
  same library, same shape); its false-alarm rate here is over the *other* legal schedules:
  what it costs when the CI's GPUs or library versions differ.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from models.libraries import unit_from_gpu

from ..captures.gemms import Candidate, bits
from .library import LibraryProblem, bounded, legal_schedules, operand_sets, reference, run_schedule
from .mutants import LIBRARY_MUTANTS, NotApplicable, run_mutant
from .stats import Rate

__all__ = [
    "ASSERT_CLOSE_DEFAULTS",
    "ROCBLAS_SUM_TOLERANCE",
    "LibraryDesign",
    "ToleranceRule",
    "design_library",
    "parse_tolerance",
]

#: torch.testing.assert_close's (rtol, atol) per output dtype (torch/testing/_comparison.py)
ASSERT_CLOSE_DEFAULTS = {"fp16": (1e-3, 1e-5), "bf16": (1.6e-2, 1e-5), "fp32": (1.3e-6, 1e-5)}
#: rocBLAS clients' sum_error_tolerance per input type (fp32: its epsilon)
ROCBLAS_SUM_TOLERANCE = {"bf16": 1 / 100, "fp16": 1 / 900, "fp32": 2.0**-23, "tf32": 2.0**-23}
#: torch.finfo(dtype).eps of the output dtypes
EPS = {"fp16": 2.0**-10, "bf16": 2.0**-7, "fp32": 2.0**-23}


@dataclass
class Run:
    """One output judged: a legal schedule's (``mutant`` None) or a mutant's, on one operand set."""

    schedule: int
    operands: int
    out: np.ndarray
    mutant: str | None = None
    label: str = ""

    def error(self, ref: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore"):
            return np.abs(self.out.astype(np.float64) - ref)


@dataclass(frozen=True)
class ToleranceRule:
    """A rule: its name, its text, and ``ratio(run, ref, ctx)``: the worst element's error over
    what the rule allows (a run fails when it is above 1; inf where it allows nothing)."""

    name: str
    text: str
    ratio: Callable
    rtol: float | None = None
    atol: float | None = None
    note: str = ""


def _close_ratio(err: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> float:
    allowed = atol + rtol * np.abs(ref)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(err == 0, 0.0, err / allowed)
    r = np.where(np.isnan(r), np.inf, r)
    return float(r.max()) if r.size else 0.0


def close_rule(name: str, rtol: float, atol: float, text: str = "", note: str = "") -> ToleranceRule:
    def ratio(run: Run, ref, ctx):
        return _close_ratio(run.error(ref), ref, rtol, atol)

    text = text or f"assert_close(out, ref, rtol={rtol:.3g}, atol={atol:.3g})"
    return ToleranceRule(name, text, ratio, rtol, atol, note)


def parse_tolerance(text: str) -> tuple[float, float]:
    """``"rtol=1e-2,atol=1e-3"`` → (rtol, atol); ValueError naming the part otherwise."""
    got = {}
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        key, eq, value = part.partition("=")
        if not eq or key not in ("rtol", "atol"):
            raise ValueError(f"--check: {part!r} is not rtol=NUMBER or atol=NUMBER (e.g. 'rtol=1e-2,atol=1e-3')")
        try:
            v = float(value)
        except ValueError:
            raise ValueError(f"--check: {key}={value!r} is not a number") from None
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"--check: {key}={value} must be a finite number ≥ 0")
        got[key] = v
    if not got:
        raise ValueError("--check: give rtol=…,atol=… (e.g. 'rtol=1e-2,atol=1e-3')")
    return got.get("rtol", 0.0), got.get("atol", 0.0)


@dataclass
class LibraryDesign:
    """What :func:`design_library` found (see :mod:`validation.design.library_report`)."""

    problem: LibraryProblem
    schedules: list[Candidate]
    total_schedules: int
    operand_labels: list[str]
    refs: list[np.ndarray]
    legal: list[Run]
    mutant_runs: list[Run]
    not_applicable: dict[str, str]
    rules: list[ToleranceRule]
    recommended: tuple[float, float]
    notes: list[str] = field(default_factory=list)
    identified: str | None = None
    seconds: float = 0.0
    ctx: dict = field(default_factory=dict)

    def ratios(self, rule: ToleranceRule, runs: list[Run]) -> list[float]:
        return [rule.ratio(r, self.refs[r.operands], self.ctx_of(r)) for r in runs]

    def ctx_of(self, run: Run) -> dict:
        pinned = self.ctx["outs"][(run.schedule if run.mutant else 0, run.operands)]
        return {"plain": self.ctx["plain"][run.operands], "pinned": pinned}

    def false_alarms(self, rule: ToleranceRule) -> Rate:
        return Rate(sum(x > 1 for x in self.ratios(rule, self.legal)), len(self.legal))

    def detection(self, rule: ToleranceRule, mutant: str) -> Rate:
        runs = [r for r in self.mutant_runs if r.mutant == mutant]
        return Rate(sum(x > 1 for x in self.ratios(rule, runs)), len(runs))

    def mutant_names(self) -> list[str]:
        return [m for m in LIBRARY_MUTANTS if any(r.mutant == m for r in self.mutant_runs)]

    def check(self, rtol: float, atol: float) -> dict:
        """Whether ``assert_close(out, ref, rtol, atol)`` fails a legal schedule or misses a mutant, and which."""
        rule = close_rule("checked", rtol, atol)
        failing = [
            {"schedule": r.label, "operands": self.operand_labels[r.operands], "ratio": x}
            for r, x in zip(self.legal, self.ratios(rule, self.legal))
            if x > 1
        ]
        missed = []
        for m in self.mutant_names():
            rate = self.detection(rule, m)
            if rate.failed < rate.runs:
                missed.append({"mutant": m, "missed": rate.runs - rate.failed, "trials": rate.runs})
        return {"rtol": rtol, "atol": atol, "fails_legal": failing, "misses_mutants": missed,
                "ok": not failing and not missed}  # fmt: skip


def _recommended(problem: LibraryProblem, legal: list[Run], refs, margin: float) -> tuple[float, float]:
    fmt = problem.cap.out_format
    rtol = EPS[fmt] / 2
    excess = 0.0
    for r in legal:
        ref = refs[r.operands]
        e = r.error(ref) - rtol * np.abs(ref)
        if e.size:
            excess = max(excess, float(np.nanmax(e)))
    # the fp32 accumulation's own scale: K products' rounding at 2^-24 of the typical magnitude
    floor = problem.K * 2.0**-24 * max(float(np.sqrt(np.mean(np.square(ref)))) for ref in refs)
    atol = max(margin * excess, floor, np.finfo(np.float32).tiny)
    step = 10.0 ** (math.floor(math.log10(atol)) - 2)  # three significant digits, rounded up
    return rtol, float(f"{math.ceil(atol / step * (1 - 1e-12)) * step:.3g}")


def rules_for(problem: LibraryProblem, recommended: tuple[float, float], c: float = 1.0) -> list[ToleranceRule]:
    """The rules of the module docstring for ``problem``."""
    fmt = problem.cap.out_format
    K = problem.K
    out = []
    fp8 = problem.cap.op == "scaled_mm"
    rtol_d, atol_d = ASSERT_CLOSE_DEFAULTS[fmt]
    note = " (torch has no fp8 defaults: the output dtype's)" if fp8 else ""
    out.append(close_rule("assert_close defaults", rtol_d, atol_d, note=f"{fmt} defaults{note}"))
    rtol, atol = recommended
    out.append(close_rule("recommended", rtol, atol, note="fitted on the legal schedules, with a margin"))

    def fa(run, ref, ctx):
        e = float(run.error(ref).max()) if run.out.size else 0.0
        allowed = 2 * ctx["plain"]
        return 0.0 if e == 0 else (e / allowed if allowed > 0 else math.inf)

    out.append(ToleranceRule("FlashAttention 2x", "max|out − ref| ≤ 2·max|plain − ref|", fa))
    if not fp8:
        tol = ROCBLAS_SUM_TOLERANCE.get(problem.cap.input, ROCBLAS_SUM_TOLERANCE.get(fmt))
        out.append(close_rule("rocBLAS K·tol", 0.0, K * tol, text=f"|out − ref| ≤ K·{tol:.3g} = {K * tol:.3g}"))
    sk = c * math.sqrt(K) * EPS[fmt]
    out.append(close_rule("c·sqrt(K)", rtol_d, sk, text=f"assert_close(rtol={rtol_d:g}, atol={c:g}·√{K}·ε = {sk:.3g})"))

    def exact(run, ref, ctx):
        return 0.0 if np.array_equal(bits(run.out), bits(ctx["pinned"])) else math.inf

    out.append(ToleranceRule("bit-exact (pinned)", "bits == the pinned schedule's", exact))
    return out


def design_library(
    problem: LibraryProblem,
    *,
    max_schedules: int = 16,
    n_operands: int = 2,
    mutant_bases: int = 2,
    mutants=None,
    margin: float = 2.0,
    seed: int = 0,
    identify: bool = True,
    max_outputs: int = 1 << 16,
    progress=None,
    total=None,
) -> LibraryDesign:
    """Run the legal schedules and the mutants of ``problem`` and judge every rule (module
    docstring): at most ``max_schedules`` schedules (sampled), on ``n_operands`` operand sets
    (the problem's own and generated ones), each mutant planted in ``mutant_bases`` legal
    schedules (split ones first) on every operand set. ``identify``: search the capture's own
    schedule first (it is pinned, and legal). An op of more than ``max_outputs`` outputs keeps its
    first rows (:func:`validation.design.library.bounded`; the report says so). ``progress(n)`` after each run; ``total(n)`` once."""
    import time

    t0 = time.perf_counter()
    names = list(LIBRARY_MUTANTS) if mutants is None else list(mutants)
    first, identified, notes = [], None, []
    if problem.measured and identify:  # on the whole capture: the GPU's schedule is the whole shape's
        from ..captures.report import reading_of
        from ..captures.search import search

        own = problem.cap.gpu and unit_from_gpu(problem.cap.gpu)  # the GPU that ran it, named or not
        hw = None if own or problem.cap.input == "fp32" else problem.units[0]
        rd = reading_of(problem.cap, search(problem.cap, hw=hw))
        if rd.reading == "rounding" and rd.result.best is not None:
            first = [rd.result.best]
            identified = rd.result.best.describe()
        else:
            notes.append(f"the capture's output is not reproduced by any schedule (identify reads {rd.reading})")
    problem, cut = bounded(problem, max_outputs)
    if cut:
        notes.append(cut)
    schedules, n_total, more = legal_schedules(problem, max_schedules, first, seed)
    notes += more
    sets = operand_sets(problem, n_operands)
    bases = [i for i, c in enumerate(schedules) if c.schedule.splits > 1 and c.schedule.split_rule != "strided"]
    bases = (bases + [i for i in range(len(schedules)) if i not in bases])[:mutant_bases]
    n_runs = len(schedules) * len(sets) + len(names) * len(bases) * len(sets)
    if total:
        total(n_runs)
    refs = [reference(cap) for cap in sets]
    legal: list[Run] = []
    outs: dict[tuple[int, int], np.ndarray] = {}
    for j, cap in enumerate(sets):
        for i, cand in enumerate(schedules):
            outs[(i, j)] = run_schedule(cap, cand)
            legal.append(Run(i, j, outs[(i, j)], label=cand.describe()))
            if progress:
                progress(1)
    labels = [problem.cap.path if problem.measured else "the described operands"] + [c.path for c in sets[1:]]
    if problem.measured and identified is None:  # reproduced: the identified schedule's run is the GPU's
        legal.append(Run(0, 0, problem.cap.out, label="the capture's GPU output"))
    plain_i = next((i for i, c in enumerate(schedules) if c.unit == problem.units[0] and c.schedule.splits == 1), 0)
    ctx = {
        "plain": [float(np.max(np.abs(outs[(plain_i, j)].astype(np.float64) - refs[j]))) for j in range(len(sets))],
        "outs": outs,
    }
    mutant_runs, not_applicable = [], {}
    for name in names:
        for i in bases:
            for j, cap in enumerate(sets):
                stale = outs[(i, (j + 1) % len(sets))] if len(sets) > 1 else None
                try:
                    out = run_mutant(name, cap, schedules[i], outs[(i, j)], stale)
                except NotApplicable as exc:
                    not_applicable.setdefault(name, str(exc))
                    if progress:
                        progress(1)
                    continue
                mutant_runs.append(Run(i, j, out, name, f"{name} in {schedules[i].describe()}"))
                if progress:
                    progress(1)
    for name in names:  # applicable in some base: the others' reasons are no longer the answer
        if any(r.mutant == name for r in mutant_runs):
            not_applicable.pop(name, None)
    rec = _recommended(problem, legal, refs, margin)
    d = LibraryDesign(problem, schedules, n_total, labels, refs, legal, mutant_runs, not_applicable,
                      rules_for(problem, rec), rec, notes, identified, 0.0, ctx)  # fmt: skip
    d.seconds = time.perf_counter() - t0
    return d
