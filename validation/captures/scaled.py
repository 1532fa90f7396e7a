"""The fp8 search: which accumulation and epilogue reproduce a ``scaled_mm`` capture.

The first tier runs every candidate of the space's ``fp8`` family
(:func:`validation.captures.space.scaled_candidates`: one chain or two-level accumulation, the
scale orders, the bias's FMA or add) on the first :data:`SCALED_ROWS` rows, then the survivors
on every output. When none reproduces, the split-K tier: each accumulation of
:func:`validation.captures.space.scaled_split_schedules` is computed once and every epilogue
(:func:`validation.captures.space.epilogues`) applied to it (:func:`emu.gemm.finish`: the
epilogue follows the reduction), on the first rows and then, for at most :data:`MAX_FULL`
accumulations, on every output.

A block-scaled capture (MX, NVFP4: a ``block`` in ``extra``) is searched by
:func:`search_block_scaled`: the block scales apply per block inside the unit (the unit's own
arithmetic, ``emu.gemm`` with ``scale_a`` / ``scale_b``), so the search is over how K is split:
one chain, or split-K with split bounds on multiples of the block (:func:`block_split_schedules`),
each split's chain from +0, the partials added in fp32 in split order, then the output rounding.
"""

from __future__ import annotations

import re
import time

import numpy as np

import emu
import models
from emu.gemm import combine, finish
from emu.schedule import Schedule
from models.libraries import unit_from_gpu

from .capture import Capture, CaptureError
from .gemms import Candidate, SearchResult, Variant, bits, model_unit, resolve_unit
from .space import BOUNDS, candidates, epilogues, scaled_split_schedules, with_epilogue

__all__ = [
    "MAX_FULL",
    "SCALED_ROWS",
    "block_scaled_unit",
    "block_scaled_units",
    "block_split_schedules",
    "run_block_scaled",
    "run_scaled",
    "search_block_scaled",
    "search_scaled",
]

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
    if "block" in cap.extra:
        return search_block_scaled(cap, hw, progress)
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
    hints.append("fp8 (scaled_mm) captures: the schedules are checked on synthetic captures only, no GPU capture yet")
    return _result(want, reproducing, (best, best_same, best_out), searched, t0, stages, hints, unit_name)


def _result(want, reproducing, nearest, searched: int, t0: float, stages, hints, unit_name: str) -> SearchResult:
    """The search result of the scaled searches: ``nearest`` is (candidate, identical outputs,
    its output) of the nearest when none reproduces; a hint when several do."""
    best, best_same, best_out = nearest
    if len(reproducing) > 1:
        hints.insert(-1, f"{len(reproducing)} schedules reproduce every output: the capture cannot tell them apart")
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


# --- block-scaled (MX, NVFP4) captures --------------------------------------------------------

#: GPU names whose block-scaled unit :func:`models.libraries.unit_from_gpu` does not name
_BLOCK_GPUS = ((r"rtx 50\d\d|rtx pro 6000|\bsm_?120\b", "rtx-blackwell"), (r"mi35[05]|gfx950", "mi355"))


def block_scaled_unit(cap: Capture, hw: str | None = None):
    """(name, ``models.Unit``) of a block-scaled capture: ``hw`` or the unit its ``gpu`` names,
    for the capture's operand formats, scale format and block; CaptureError naming ``--hw`` or
    ``gpu`` when neither gives a block-scaled unit that has them."""
    name, field = hw, "--hw"
    if not name:
        field, text = "gpu", str(cap.gpu).lower()
        name = next((u for pattern, u in _BLOCK_GPUS if re.search(pattern, text)), None) or unit_from_gpu(text)
        if name is None:
            raise CaptureError(
                f"gpu: {cap.gpu or 'not recorded'!r} is not a GPU with a modelled block-scaled unit; name the unit "
                f"with --hw (one of {', '.join(models.SCALED_UNIT_NAMES)})"
            )
    fa, _, fb = cap.input.partition("x")
    try:
        unit = models.unit(name, input=(fa, fb or fa), scale=cap.extra["scale_format"], block=cap.extra["block"])
    except ValueError as exc:
        raise CaptureError(f"{field}: {exc}") from None
    return name, unit


def block_scaled_units(cap: Capture, hw: str | None = None) -> tuple[str, list[tuple[str, object]]]:
    """(name, [(label, unit), …]) of a block-scaled capture: :func:`block_scaled_unit`'s unit,
    then each other instruction kind (:data:`models.SCALED_KINDS`) of that GPU that multiplies
    the capture's formats with its scale and block in other arithmetic (on Blackwell, e2m1 with
    UE8M0 per 32 is kind::mxf4 or kind::mxf8f6f4: which one a library takes is read from the
    output). The label is the name, with ``kind::KIND`` where there is more than one."""
    name, unit = block_scaled_unit(cap, hw)
    fa, _, fb = cap.input.partition("x")
    found: list[tuple[str, object]] = []  # (kind, unit), the default unit's kind first
    for kind in models.SCALED_KINDS:
        try:
            u = models.unit(
                name, input=(fa, fb or fa), scale=cap.extra["scale_format"], block=cap.extra["block"], kind=kind
            )
        except ValueError:
            continue
        if any(u.params == v.params for _, v in found):
            continue
        if u.params == unit.params:
            found.insert(0, (kind, u))
        else:
            found.append((kind, u))
    if len(found) <= 1:
        return name, [(name, unit)]
    return name, [(f"{name} kind::{k}", u) for k, u in found]


def block_split_schedules(K: int, block: int) -> list[Schedule]:
    """The accumulation schedules of a block-scaled GEMM: one chain over K, then split-K as
    :func:`scaled_split_schedules` cuts K (k tiles of 64, 128 and 256, ⌈tiles/splits⌉ a split,
    bounds in 32-wide k-blocks), only those whose bounds fall on multiples of ``block`` (a
    split never cuts a scale's block); no promotion (the unit accumulates in fp32)."""
    out = [Schedule()]
    for sch in scaled_split_schedules(K):
        if sch.promotion_interval == 0 and all(sch.k_tile * b % block == 0 for b in sch.split_bounds):
            out.append(Schedule(k_tile=sch.k_tile, splits=sch.splits, split_bounds=sch.split_bounds))
    return out


def _block_partial(cap: Capture, unit, rows, k0: int, k1: int) -> np.ndarray:
    """The fp32 chain over k0 … k1 (whole blocks) from +0, for A's ``rows`` (None: all)."""
    blk = cap.extra["block"]
    A, sa = cap.operands["A"], cap.extra["scale_a"]
    if rows is not None:
        A, sa = A[rows], sa[rows]
    b0, b1 = k0 // blk, k1 // blk
    sb = np.ascontiguousarray(cap.extra["scale_b"][:, b0:b1].T)
    return emu.gemm(A[:, k0:k1], cap.operands["B"][k0:k1], None, unit, scale_a=sa[:, b0:b1], scale_b=sb)


def run_block_scaled(cap: Capture, unit, schedule: Schedule, rows=None, cache: dict | None = None) -> np.ndarray:
    """A block-scaled capture's output (its ``rows`` of A only, when given) under ``schedule``:
    each split's chain (:func:`_block_partial`, kept in ``cache`` by its k range), the partials
    reduced and rounded to the output format (:func:`emu.gemm.combine`)."""
    K = cap.operands["A"].shape[1]
    bounds = [0, K] if schedule.splits == 1 else [min(K, b * schedule.k_tile) for b in schedule.split_bounds]
    cache = {} if cache is None else cache
    partials = []
    for k0, k1 in zip(bounds[:-1], bounds[1:]):
        if (k0, k1) not in cache:
            cache[(k0, k1)] = _block_partial(cap, unit, rows, k0, k1)
        partials.append(cache[(k0, k1)])
    plain = Schedule(splits=len(partials), output=cap.out_format)
    return np.asarray(combine(unit, partials, None, plain))


def search_block_scaled(cap: Capture, hw: str | None = None, progress=None) -> SearchResult:
    """The search for a block-scaled ``scaled_mm`` capture: every :func:`block_split_schedules`
    schedule on the first :data:`SCALED_ROWS` rows of A, the survivors (at most
    :data:`MAX_FULL`; else the nearest) on every output."""
    t0 = time.perf_counter()
    name, units = block_scaled_units(cap, hw)
    K = cap.operands["A"].shape[1]
    scheds = [(label, unit, sch) for label, unit in units for sch in block_split_schedules(K, cap.extra["block"])]
    rows = np.arange(min(SCALED_ROWS, cap.out.shape[0]))
    want_rows = bits(cap.out[rows]).reshape(-1)
    caches: dict = {label: {} for label, _ in units}
    scored = []
    for i, (label, unit, sch) in enumerate(scheds):
        got = run_block_scaled(cap, unit, sch, rows, caches[label])
        scored.append(int(np.count_nonzero(bits(got).reshape(-1) == want_rows)))
        if progress:
            progress("block-scaled schedules, first rows", i + 1, len(scheds))
    survivors = [s for s, n in zip(scheds, scored) if n == want_rows.size]
    stages = [
        (f"block-scaled schedules: first {rows.size} rows ({want_rows.size} outputs)", len(scheds), len(survivors))
    ]
    want = bits(cap.out).reshape(-1)
    reproducing, best, best_same, best_out = [], None, -1, None
    caches = {label: {} for label, _ in units}
    for label, unit, sch in survivors[:MAX_FULL] or [scheds[int(np.argmax(scored))]]:
        got = run_block_scaled(cap, unit, sch, None, caches[label])
        same = int(np.count_nonzero(bits(got).reshape(-1) == want))
        family = "block-scaled" if sch.splits == 1 else "block-scaled-split-k"
        cand = Candidate(label, Variant(), _with_output(sch, cap), family)
        if same == want.size:
            reproducing.append(cand)
        if same > best_same:
            best, best_same, best_out = cand, same, got
    stages.append((f"every output ({want.size})", max(1, min(len(survivors), MAX_FULL)), len(reproducing)))
    hints = [f"unit {label}: {unit.description}" for label, unit in units]
    hints.append("block scales applied per block inside the unit (emu.gemm)")
    if len(survivors) > MAX_FULL:
        hints.append(f"{len(survivors) - MAX_FULL} more schedules reproduce the first rows; not run in full")
    hints.append("block-scaled captures: the schedules are checked on synthetic captures only, no GPU capture yet")
    return _result(want, reproducing, (best, best_same, best_out), len(scheds), t0, stages, hints, name)


def _with_output(sch: Schedule, cap: Capture) -> Schedule:
    """``sch`` with the capture's output format (what the candidate reports)."""
    return Schedule(k_tile=sch.k_tile, splits=sch.splits, split_bounds=sch.split_bounds, output=cap.out_format)
