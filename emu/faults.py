"""Arithmetic that fault-injection models need: an fp32 result scaled, split-K partial sums
added with a partial missing, repeated, or scaled (in ascending order, :func:`add_partials`, or
in the add order of a member of the atomic-add ensemble, :func:`member_sum`), and a GEMM whose
accumulator is fp16.

Every operation is fp32 with round-to-nearest-even, as the GPU's VALU and its fp32 atomic adds
do (IEEE 754-2019 multiplication and addition); numpy's float32 arithmetic is exactly that.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .atomics import SplitPartials
from .dot import decode_operands, fp16_operand, run_kernel, unit_params
from .gemm import GemmOrder
from .rounding import fp32_to_fp16

__all__ = ["scale_fp32", "add_partials", "member_sum", "gemm_fp16_accumulator"]


def scale_fp32(values: np.ndarray, factor: float) -> np.ndarray:
    """RNE32(x · factor) elementwise: float32 in, float32 out (a power-of-two factor or −1 is
    exact unless it overflows or underflows)."""
    x = np.asarray(values, dtype=np.float32)
    return (x * np.float32(factor)).astype(np.float32)


def add_partials(parts: np.ndarray, order: Sequence[int], factors: Sequence[float] | None = None) -> np.ndarray:
    """The fp32 sum of rows of ``parts`` (S × size, float32) added one by one onto +0 in
    ``order`` (row indices; a row may be missing or repeated), each row first multiplied by its
    entry of ``factors`` (RNE32) when given. ``order = range(S)`` without factors is
    :meth:`emu.atomics.SplitPartials.ascending`."""
    parts = np.asarray(parts, dtype=np.float32)
    if parts.ndim != 2:
        raise ValueError(f"parts: need (S, size), got shape {parts.shape}")
    order = [int(i) for i in order]
    bad = [i for i in order if not 0 <= i < parts.shape[0]]
    if bad:
        raise ValueError(f"order: partial index {bad[0]} outside 0..{parts.shape[0] - 1}")
    if factors is not None and len(factors) != len(order):
        raise ValueError(f"factors: need one per entry of order ({len(order)}), got {len(factors)}")
    ws = np.zeros(parts.shape[1], np.float32)
    for j, i in enumerate(order):
        ws = ws + (parts[i] if factors is None else scale_fp32(parts[i], factors[j]))
    return ws


def member_sum(
    parts: SplitPartials,
    index: int,
    granularity: str = "element",
    replace: dict[int, np.ndarray] | None = None,
    extra: Sequence[int] = (),
) -> np.ndarray:
    """fp32: member ``index`` of ``parts``' add-order ensemble
    (:meth:`emu.atomics.SplitPartials.member_fp32`, the same per-element order) with partial
    rows replaced (``replace``: row → float32 values; −0.0 removes a partial exactly, since
    x + (−0) = x for every x under RNE, ±0 included), then the partials of ``extra`` added
    once more each, in that order, after the last one (RNE32 each add)."""
    changed = SplitPartials(parts.n_split, parts.size, parts.seed)
    changed.parts[:] = parts.parts
    changed.tiles[:] = parts.tiles
    for row, values in (replace or {}).items():
        changed.parts[int(row)] = np.asarray(values, np.float32)
    ws = changed.member_fp32(index, granularity)
    for i in extra:
        ws = ws + parts.parts[int(i)]
    return ws


def gemm_fp16_accumulator(A, B, unit, order: GemmOrder | None = None, step: int | None = None) -> np.ndarray:
    """:func:`emu.gemm.gemm` (A (M, K), B (K, N) fp16, C = +0) with the accumulator held in fp16:
    after every ``step`` k values of the order's sequence (default: the unit's group size, 1 for
    an FMA) the running sum is rounded to fp16 (RNE, overflow to ±inf) and fed back as C.
    Split-K chunks are accumulated apart from +0 and their fp16 results added in fp32, ascending.
    Returns (M, N) float32 holding fp16 values (the split-K sum: fp32)."""
    order = order or GemmOrder()
    params = unit_params(unit)
    a_bits, b_bits = fp16_operand(A, "A"), fp16_operand(B, "B")
    seq = order.sequence(a_bits.shape[1])
    step = int(step or params.group_size or 1)
    if step < 1:
        raise ValueError(f"step: must be ≥ 1, got {step}")
    flush = bool(params.flush_inputs)
    # operands in accumulation order, decoded once; gemmK padding (−1) as +0
    a_seq = decode_operands(
        np.where(seq[None, :] < 0, np.uint16(0), np.take(a_bits, np.maximum(seq, 0), axis=1)), flush
    )
    b_seq = decode_operands(
        np.where(seq[:, None] < 0, np.uint16(0), np.take(b_bits, np.maximum(seq, 0), axis=0)), flush
    )
    total = np.zeros((a_bits.shape[0], b_bits.shape[1]), np.float32)
    for chunk in order.chunks(len(seq)):
        c = np.zeros_like(total)
        for s0 in range(chunk.start, chunk.stop, step):
            s1 = min(s0 + step, chunk.stop)
            c = run_kernel(params, a_seq[:, s0:s1], b_seq[s0:s1], c)
            c = fp32_to_fp16(c).astype(np.float32)
        total = total + c
    return total
