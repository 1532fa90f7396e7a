"""Library bug mutants: a legal schedule's output with one real library bug planted.

Each mutant takes a legal schedule (:class:`validation.captures.gemms.Candidate`) of a problem and
computes what a buggy library would return, through the same GEMM path as the legal schedules
(:func:`validation.design.library.run_schedule`): the operands, C, scales or schedule it is given
change, or one output tile is replaced. Tile mutants act on one ``TILE`` × ``TILE`` output tile
of the first GEMM (a kernel's CTA tile), as a bug in one CTA does.

=======================  ===================================================================
``k-tile-dropped``       the last k tile of split 0 is not accumulated in one output tile
                         (a split-K bug found by fuzzing: facebookexperimental/triton #2767)
``split-lost``           the last split's partial never reaches one output tile (a lost
                         workspace write; fp16emu identify's "split lost" cause)
``partials-rounded``     split-K partials rounded to the 16-bit output type before the
                         reduction (NVIDIA/TransformerEngine #3440)
``bias-twice``           the bias (or C) added in the GEMM's epilogue and again after it
``scale-twice``          fp8: scale_a applied twice; other ops: alpha applied twice
``scale-missing``        fp8: scale_a never applied; other ops: alpha never applied
``fast-accumulation``    fp8: one chain of the tensor core's fast accumulator where
                         ``use_fast_accum=False`` asked for promotion to fp32
``operand-transposed``   B's memory read with the other layout (a wrong transpose flag)
``stale-tile``           one output tile never written: it keeps the previous call's values
                         (the library form of models.bugs' ``uninitialised-tile``)
=======================  ===================================================================

A mutant that has nothing to act on (no split, no bias, no scale) raises :class:`NotApplicable`
with the reason.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..captures.capture import Capture
from ..captures.gemms import Candidate, jobs_of
from .library import run_schedule

__all__ = ["LIBRARY_MUTANTS", "TILE", "LibraryMutant", "NotApplicable", "library_mutant", "run_mutant"]

#: the output tile a tile mutant hits (rows and columns of the first GEMM, clipped to its size)
TILE = 64


class NotApplicable(ValueError):
    """The mutant has nothing to act on in this schedule or op."""


@dataclass(frozen=True)
class LibraryMutant:
    name: str
    bug: str
    source: str


#: every library mutant, by name (module docstring)
LIBRARY_MUTANTS: dict[str, LibraryMutant] = {
    m.name: m
    for m in (
        LibraryMutant(
            "k-tile-dropped",
            "the last k tile of split 0 is not accumulated in one output tile",
            "facebookexperimental/triton #2767",
        ),
        LibraryMutant("split-lost", "the last split's partial is lost in one output tile", "fp16emu identify"),
        LibraryMutant(
            "partials-rounded",
            "split-K partials rounded to the 16-bit output type before the reduction",
            "NVIDIA/TransformerEngine #3440",
        ),
        LibraryMutant("bias-twice", "the bias (or C) added twice", "epilogue fusion"),
        LibraryMutant("scale-twice", "scale_a (fp8) or alpha applied twice", "epilogue fusion"),
        LibraryMutant("scale-missing", "scale_a (fp8) or alpha not applied", "epilogue fusion"),
        LibraryMutant(
            "fast-accumulation",
            "fp8 fast accumulation (one tensor-core chain) where exact (promoted) accumulation was asked",
            "torch._scaled_mm use_fast_accum; CUTLASS fp8_accumulation.hpp",
        ),
        LibraryMutant("operand-transposed", "B read with the other layout (a wrong transpose flag)", "layout flags"),
        LibraryMutant(
            "stale-tile", "one output tile keeps the previous call's values", "models.bugs uninitialised-tile"
        ),
    )
}


def library_mutant(name: str) -> LibraryMutant:
    if name not in LIBRARY_MUTANTS:
        raise ValueError(f"--mutants: {name!r} is not one of {', '.join(LIBRARY_MUTANTS)}")
    return LIBRARY_MUTANTS[name]


def _positions(sch, K: int, which: str) -> np.ndarray:
    """The k indices (of the GEMM as the kernel walks it) a k-range mutant removes."""
    seq = sch.sequence(K)
    ranges = sch.split_ranges(len(seq))
    if which == "split":
        pos = np.arange(len(seq))[ranges[-1]]
    else:
        r = ranges[0]
        kt = sch.k_tile if sch.k_tile > 1 else TILE
        start = r.start + ((r.stop - r.start - 1) // kt) * kt
        pos = np.arange(max(r.start, start), r.stop)
    k = seq[pos]
    return k[k >= 0]


def _tile_index(cap: Capture, cand: Candidate) -> np.ndarray:
    if cap.op == "scaled_mm":
        M, N = cap.out.shape
        idx = np.arange(M * N).reshape(M, N)
    else:
        idx = jobs_of(cap, cand.variant)[0].out_index
    return idx[:TILE, :TILE].reshape(-1)


def _in_tile(cap: Capture, cand: Candidate, legal: np.ndarray, edit) -> np.ndarray:
    """``legal`` with the first GEMM's first output tile as ``edit`` computes it."""
    calls = [0]

    def first_only(A, B, C, sch, extra):
        calls[0] += 1
        return edit(A, B, C, sch, extra) if calls[0] == 1 else (A, B, C, sch, extra)

    mutated = run_schedule(cap, cand, first_only)
    out = legal.copy().reshape(-1)
    idx = _tile_index(cap, cand)
    out[idx] = mutated.reshape(-1)[idx]
    return out.reshape(legal.shape)


def run_mutant(name: str, cap: Capture, cand: Candidate, legal: np.ndarray, stale: np.ndarray | None = None):
    """Mutant ``name`` of ``cand`` on the operands of ``cap`` (``legal``: cand's own output there;
    ``stale``: the previous call's output, for ``stale-tile``); :class:`NotApplicable` with why."""
    library_mutant(name)
    sch = cand.schedule
    scaled = cap.op == "scaled_mm"
    if name in ("k-tile-dropped", "split-lost"):

        def drop(A, B, C, s, extra):
            k = _positions(s, A.shape[1], "tile" if name == "k-tile-dropped" else "split")
            A = A.copy()
            A[:TILE, k] = 0
            return A, B, C, s, extra

        if name == "split-lost" and sch.splits == 1:
            raise NotApplicable("one split: no split to lose")
        if name == "k-tile-dropped" and sch.split_rule == "strided" and sch.split_bounds is None:
            raise NotApplicable("strided lanes: no k tile")
        return _in_tile(cap, cand, legal, drop)
    if name == "partials-rounded":
        if sch.splits == 1:
            raise NotApplicable("one split: no partials")
        if cap.out_format == "fp32":
            raise NotApplicable("an fp32 output: the partials are already fp32")
        return run_schedule(
            cap, dataclasses.replace(cand, schedule=dataclasses.replace(sch, partial_format=cap.out_format))
        )
    if name == "bias-twice":
        has_c = (scaled and "bias" in cap.extra) or any(k in cap.operands for k in ("C", "bias"))
        if not has_c:
            raise NotApplicable("no bias or C")

        def twice(A, B, C, s, extra):
            return A, B, None if C is None else np.asarray(C, np.float32) * 2, s, extra

        return run_schedule(cap, cand, twice)
    if name in ("scale-twice", "scale-missing"):
        if scaled:

            def scale(A, B, C, s, extra):
                sa = np.asarray(extra["scale_a"], np.float32)
                sa = sa * sa if name == "scale-twice" else np.ones_like(sa)
                return A, B, C, s, {**extra, "scale_a": sa}

            if np.all(np.asarray(cap.extra["scale_a"]) == 1):
                raise NotApplicable("scale_a is 1: applying it twice or not at all changes nothing")
            return run_schedule(cap, cand, scale)
        if sch.alpha == 1:
            raise NotApplicable("no scale (alpha is 1)")
        alpha = sch.alpha * sch.alpha if name == "scale-twice" else 1.0
        return run_schedule(cap, dataclasses.replace(cand, schedule=dataclasses.replace(sch, alpha=alpha)))
    if name == "fast-accumulation":
        if not scaled or sch.promotion_interval == 0:
            raise NotApplicable("no promoted (exact) fp8 accumulation to replace")
        return run_schedule(
            cap, dataclasses.replace(cand, schedule=dataclasses.replace(sch, promotion_interval=0, k_tile=1))
        )
    if name == "operand-transposed":

        def transposed(A, B, C, s, extra):
            K, N = B.shape
            return A, np.ascontiguousarray(B).reshape(N, K).T.copy(), C, s, extra

        B0 = cap.operands["B"] if scaled else jobs_of(cap, cand.variant)[0].B
        if min(B0.shape) == 1:
            raise NotApplicable("B is a vector: both layouts hold the same values")
        return run_schedule(cap, cand, transposed)
    if name == "stale-tile":
        if stale is None:
            raise NotApplicable("no previous call")
        out = legal.copy().reshape(-1)
        idx = _tile_index(cap, cand)
        out[idx] = stale.reshape(-1)[idx]
        return out.reshape(legal.shape)
    raise AssertionError(name)
