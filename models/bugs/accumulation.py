"""Mutants of the accumulation: the unit's accumulator narrowed to the tensors' format (fp16,
bf16), and the split-K partial sums lost, repeated, scaled or raced."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from emu.faults import add_partials, gemm_fp16_accumulator, member_sum, scale_fp32
from emu.gemm import GemmOrder
from emu.gemm import gemm as emu_gemm
from emu.rounding import cast_rne

from .base import Mutant, SplitKMutant, pick, sum_partials, tile_ids, unsupported

# --- unit ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fp16Accumulator(Mutant):
    """The kernel's unit with an fp16 accumulator (each step's result rounded to fp16, RNE)."""

    name: ClassVar[str] = "fp16-accumulator"
    bug: ClassVar[str] = (
        "The accumulator is declared half (or the fp16-output MFMA/HMMA variant is selected), so "
        "every partial sum is rounded to fp16 instead of fp32."
    )

    def applies(self, problem, model):
        return unsupported(self.name, model.input)

    def gemm(self, ctx, sub, a, b):
        g = ctx.plan()[sub]
        return gemm_fp16_accumulator(a, b, g.unit, g.order)


@dataclass(frozen=True)
class Bf16Accumulator(Mutant):
    """A bf16 kernel's unit with a bf16 accumulator: after every step of the unit (its group of
    k values, one product for an FMA) the running sum is rounded to bf16 (RNE, overflow to ±inf)
    and fed back as C. The bf16 form of :class:`Fp16Accumulator`."""

    name: ClassVar[str] = "bf16-accumulator"
    bug: ClassVar[str] = (
        "The accumulator is declared in the tensors' type, bf16 (a templated kernel instantiated with "
        "AccT = T), so every partial sum is rounded to bf16's 8 significant bits instead of fp32's 24."
    )

    def applies(self, problem, model):
        return unsupported(self.name, model.input)

    def gemm(self, ctx, sub, a, b):
        g = ctx.plan()[sub]
        return _element_accumulator_gemm(a, b, g.unit, g.order, "bf16")


def _element_accumulator_gemm(a, b, unit, order: GemmOrder, fmt: str) -> np.ndarray:
    """C = A·B through ``unit`` in ``order`` with the running sum rounded to ``fmt`` after every
    step of the unit: each step is :func:`emu.gemm` over one group of the order's gemmK sequence
    (padding positions as +0) from the rounded C, then :func:`emu.rounding.cast_rne`. Split-K
    chunks are accumulated apart from +0 and added in fp32, ascending (as
    :func:`emu.faults.gemm_fp16_accumulator`). Returns (M, N) float32."""
    seq = order.sequence(a.shape[1])
    take = np.maximum(seq, 0)
    a_seq, b_seq = np.take(a, take, axis=1), np.take(b, take, axis=0)
    a_seq[:, seq < 0] = 0  # gemmK padding: zero products
    b_seq[seq < 0, :] = 0
    step = max(1, int(unit.group_size or 1))
    total = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for chunk in order.chunks(len(seq)):
        c = np.zeros_like(total)
        for s0 in range(chunk.start, chunk.stop, step):
            s1 = min(s0 + step, chunk.stop)
            c = emu_gemm(np.ascontiguousarray(a_seq[:, s0:s1]), np.ascontiguousarray(b_seq[s0:s1]), c, unit)
            c = cast_rne(np.asarray(c, np.float32).astype(np.float64), fmt).astype(np.float32)
        total = total + c
    return total


# --- split-K partials ---------------------------------------------------------------------------


_LOST = -0.0  # a partial replaced by −0.0 is removed exactly from any add order (emu.faults.member_sum)


@dataclass(frozen=True)
class SplitKPartialCount(SplitKMutant):
    """Partial ``index`` (negative: from the end) added ``times`` times (0: lost, 2: twice).

    Add order: the correct kernel's. In ascending order the partial is skipped or repeated in
    place; for an atomic kernel emulated as ensemble member m (``KernelRun.member``, as the design
    sweep compares it with member seed mod 128), the other partials are added in member m's
    order and each repeat of the partial comes after the last one (a retried launch)."""

    index: int = -1
    times: int = 0
    name: ClassVar[str] = "split-k-count"
    bug: ClassVar[str] = (
        "One split-K workgroup's atomic add is lost (its block never launched, or the workspace was "
        "zeroed after it) or done twice (a retried or duplicated launch)."
    )

    def combine(self, ctx, parts):
        i = pick(self.index, parts.n_split, "partial")
        if ctx.member is not None:
            lost = {i: np.full(parts.size, _LOST, np.float32)} if self.times == 0 else None
            return member_sum(parts, ctx.member, ctx.granularity, lost, [i] * max(0, self.times - 1))
        order = [j for j in range(parts.n_split) for _ in range(self.times if j == i else 1)]
        return add_partials(parts.parts, order)


@dataclass(frozen=True)
class SplitKPartialScale(SplitKMutant):
    """Partial ``index`` multiplied by ``factor`` (−1: wrong sign) before its atomic add, in the
    correct kernel's add order (ascending, or ensemble member ``KernelRun.member``'s)."""

    index: int = -1
    factor: float = -1.0
    name: ClassVar[str] = "split-k-scale"
    bug: ClassVar[str] = (
        "One split-K partial gets the wrong epilogue scale or sign (alpha applied per partial, or "
        "a subtract where an add belongs) before it is added to the workspace."
    )

    def combine(self, ctx, parts):
        i = pick(self.index, parts.n_split, "partial")
        if ctx.member is not None:
            return member_sum(parts, ctx.member, ctx.granularity, {i: scale_fp32(parts.parts[i], self.factor)})
        return add_partials(
            parts.parts, range(parts.n_split), [self.factor if j == i else 1.0 for j in range(parts.n_split)]
        )


@dataclass(frozen=True)
class StalePartialRace(SplitKMutant):
    """In output tile ``tile`` (negative: from the end), partial ``index`` is lost to a race; the
    other partials are added in the correct kernel's order (ascending, or ensemble member
    ``KernelRun.member``'s)."""

    tile: int = 0
    index: int = 0
    name: ClassVar[str] = "stale-partial-race"
    bug: ClassVar[str] = (
        "A non-atomic read-modify-write of the split-K workspace races: one workgroup reads a stale "
        "value and overwrites another's contribution in one output tile."
    )

    def combine(self, ctx, parts):
        i = pick(self.index, parts.n_split, "partial")
        tiles = tile_ids(ctx)
        t = pick(self.tile, int(tiles.max()) + 1, "tile")
        full = sum_partials(ctx, parts)
        if ctx.member is not None:
            lost = member_sum(parts, ctx.member, ctx.granularity, {i: np.full(parts.size, _LOST, np.float32)})
        else:
            lost = add_partials(parts.parts, [j for j in range(parts.n_split) if j != i])
        return np.where(tiles == t, lost, full)
