"""The fp8 search: which accumulation and epilogue reproduce a ``scaled_mm`` capture.

The first tier runs every candidate of the space's ``fp8`` family
(:func:`validation.captures.space.scaled_candidates`: one chain or two-level accumulation, the
scale orders, the bias's FMA or add) on the first :data:`SCALED_ROWS` rows, then the survivors
on every output. When none reproduces, the split-K tier: each accumulation of
:func:`validation.captures.space.scaled_split_schedules` is computed once and every epilogue
(:func:`validation.captures.space.epilogues`) applied to it (:func:`emu.gemm.finish`: the
epilogue follows the reduction), on the first rows and then, for at most :data:`MAX_FULL`
accumulations, on every output.
"""

from __future__ import annotations

import time

import numpy as np

import emu
from emu.gemm import finish
from emu.schedule import Schedule

from .capture import Capture
from .gemms import Candidate, SearchResult, Variant, bits, model_unit, resolve_unit
from .space import BOUNDS, candidates, epilogues, scaled_split_schedules, with_epilogue

__all__ = ["MAX_FULL", "SCALED_ROWS", "run_scaled", "search_scaled"]

#: rows of A the first stage of a scaled_mm search runs (every column)
SCALED_ROWS = 8
#: accumulations run on every output at most
MAX_FULL = BOUNDS.max_full


def _scaled_split_tier(cap: Capture, unit_name: str, rows: np.ndarray, want_rows: np.ndarray, progress=None):
    """The split-K tier of a ``scaled_mm`` search on the sample ``rows``: each accumulation
    schedule of :func:`scaled_split_schedules` run once (its reduced fp32 accumulator), every
    epilogue applied to it (``emu.gemm.finish``: the epilogue follows the reduction). Returns
    (the candidates that reproduce the rows, grouped by accumulation schedule; how many were
    tried; the nearest (accumulation schedule, candidate) and how many of the rows it reproduces)."""
    unit = model_unit(unit_name, cap.input)
    sa, sb = cap.extra["scale_a"], cap.extra["scale_b"]
    sa = sa[rows] if sa.shape[0] > 1 else sa
    accs = scaled_split_schedules(cap.operands["A"].shape[1])
    groups: dict[Schedule, list[Candidate]] = {}
    tried, nearest, nearest_same = 0, None, -1
    for i, sch in enumerate(accs):
        acc = emu.gemm(cap.operands["A"][rows], cap.operands["B"], None, unit, sch)
        for order, fma in epilogues(cap):
            cand = Candidate(unit_name, Variant(), with_epilogue(cap, sch, order, fma), "fp8-split-k")
            got = finish(unit, acc, cap.extra.get("bias"), cand.schedule, sa, sb)
            same = int(np.count_nonzero(bits(np.asarray(got)).reshape(-1) == want_rows))
            tried += 1
            if same == want_rows.size:
                groups.setdefault(sch, []).append(cand)
            if same > nearest_same:
                nearest, nearest_same = (sch, cand), same
        if progress:
            progress("fp8 split-K schedules, first rows", i + 1, len(accs))
    return groups, tried, nearest, nearest_same


def run_scaled(cap: Capture, cand: Candidate, rows=None) -> np.ndarray:
    """A ``scaled_mm`` capture's output (its ``rows`` of A only, when given) as the candidate
    computes it: ``emu.gemm`` with the scales and bias of the capture."""
    A, B = cap.operands["A"], cap.operands["B"]
    sa, sb = cap.extra["scale_a"], cap.extra["scale_b"]
    if rows is not None:
        A = A[rows]
        sa = sa[rows] if sa.shape[0] > 1 else sa
    unit = model_unit(cand.unit, cap.input)
    return emu.gemm(A, B, cap.extra.get("bias"), unit, cand.schedule, scale_a=sa, scale_b=sb)


def search_scaled(cap: Capture, hw: str | None = None, progress=None) -> SearchResult:
    """The search for a ``scaled_mm`` (fp8) capture: every :func:`scaled_candidates` schedule on
    the first :data:`SCALED_ROWS` rows, the survivors on every output; when none reproduces,
    the split-K tier (:func:`scaled_split_schedules` times the epilogues) the same way, at most
    :data:`MAX_FULL` accumulations in full."""
    t0 = time.perf_counter()
    unit_name = resolve_unit(cap, hw)
    cands, _ = candidates(cap, unit_name)
    want = bits(cap.out).reshape(-1)
    rows = np.arange(min(SCALED_ROWS, cap.out.shape[0]))
    want_rows = bits(cap.out[rows]).reshape(-1)
    scored = []
    for i, c in enumerate(cands):
        scored.append(int(np.count_nonzero(bits(run_scaled(cap, c, rows)).reshape(-1) == want_rows)))
        if progress:
            progress("fp8 schedules, first rows", i + 1, len(cands))
    survivors = [c for c, n in zip(cands, scored) if n == want_rows.size]
    stages = [(f"fp8 schedules: first {rows.size} rows ({want_rows.size} outputs)", len(cands), len(survivors))]
    reproducing, best, best_same, best_out = [], None, -1, None

    for c in survivors or [cands[int(np.argmax(scored))]]:
        got = run_scaled(cap, c)
        same = int(np.count_nonzero(bits(got).reshape(-1) == want))
        if same == want.size:
            reproducing.append(c)
        if same > best_same:
            best, best_same, best_out = c, same, got
    stages.append((f"every output ({want.size})", max(1, len(survivors)), len(reproducing)))
    hints = []
    searched = len(cands)
    if not reproducing:  # a split-K kernel: splitKreduce after fp8 chains
        groups, tried, nearest, nearest_same = _scaled_split_tier(cap, unit_name, rows, want_rows, progress)
        searched += tried
        n_rows = sum(len(g) for g in groups.values())
        stages.append((f"fp8 split-K schedules: first {rows.size} rows", tried, n_rows))
        if not groups and nearest_same > max(scored):
            groups = {nearest[0]: [nearest[1]]}  # nothing reproduces: the nearest in full, for the report
        unit = model_unit(unit_name, cap.input)
        for acc_schedule in list(groups)[:MAX_FULL]:  # each accumulator once in full, then its epilogues
            acc = emu.gemm(cap.operands["A"], cap.operands["B"], None, unit, acc_schedule)
            for c in groups[acc_schedule]:
                got = finish(unit, acc, cap.extra.get("bias"), c.schedule, cap.extra["scale_a"], cap.extra["scale_b"])
                same = int(np.count_nonzero(bits(np.asarray(got)).reshape(-1) == want))
                if same == want.size:
                    reproducing.append(c)
                if same > best_same:
                    best, best_same, best_out = c, same, np.asarray(got)
        stages.append((f"fp8 split-K: every output ({want.size})", min(MAX_FULL, len(groups)), len(reproducing)))
        if len(groups) > MAX_FULL:
            hints.append(
                f"{len(groups) - MAX_FULL} more split-K accumulations reproduce the first rows; not run in full"
            )
    if len(reproducing) > 1:
        hints.append(f"{len(reproducing)} schedules reproduce every output: the capture cannot tell them apart")
    hints.append("fp8 (scaled_mm) captures: the schedules are checked on synthetic captures only, no GPU capture yet")
    return SearchResult(
        answer="identical" if reproducing else "differs",
        n=int(want.size),
        n_identical=int(best_same),
        best=reproducing[0] if reproducing else best,
        reproducing=reproducing,
        emulated=best_out,
        searched=searched,
        seconds=time.perf_counter() - t0,
        stages=stages,
        hints=hints,
        unit=unit_name,
    )
