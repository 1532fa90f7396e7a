"""Emulated instruction steps (``UnitParams.step_size``): one instruction computed by narrower ones.

PTX ``mma.sync`` with fp8 operands (m16n8k32, e4m3 / e5m2) on Hopper (sm_90) and Blackwell
(sm_100) runs as the fp16 tensor-core instruction does, as measured rows show (Khattak &
Mikaitis, arXiv 2512.07004, measured outputs in north-numerical-computing/MATLAB-tensor-core
``model_validation/``): the fp8 values are widened to fp16 (exactly), the step's 32 products
are summed by two fp16 steps of 16 (T-FDPA on fp16 values) from a zero accumulator, and the
result is added to the accumulator c with one IEEE addition in the output format (RNE).

Which products go to which fp16 step follows the register layout: an fp8 fragment register
holds four consecutive k (4i … 4i + 3), and widening it gives two fp16 registers, (4i, 4i + 1)
and (4i + 2, 4i + 3). So pairs of products alternate between the steps: pair p (products 2p and
2p + 1) goes to step p mod n, n = S / group_size. The order inside a step does not change a
T-FDPA result; the order of the steps does (the second starts from the first's rounded result).

This module holds the mechanism only: the order of a step's products (:func:`step_order`), the
operands laid out in that order, padded with +0 to whole steps (:func:`step_operands`), the
parameters of the inner steps (:func:`inner_params`) and the fold of the steps' results into c
(:func:`fold_steps`). :func:`emu.dot.dot_add` and :func:`emu.dot.run_kernel` call them.
"""

from __future__ import annotations

import numpy as np

from .units import SAME_AS_A, Format, InputFormat, UnitParams

__all__ = ["step_order", "step_operands", "inner_params", "fold_steps"]


def step_order(S: int, L: int) -> np.ndarray:
    """The positions of one step's S products in the order the inner steps take them: the n =
    S / L groups one after another, group g holding the pairs p ≡ g (mod n) in increasing p."""
    n = S // L
    pairs = np.arange(S // 2)
    return np.concatenate([np.stack([2 * p, 2 * p + 1], axis=1).reshape(-1) for p in (pairs[g::n] for g in range(n))])


def step_operands(x: np.ndarray, axis: int, S: int, L: int) -> tuple[np.ndarray, int]:
    """``x`` with its K axis (``axis``) padded with zeros (+0: bit pattern 0, value 0.0) to a
    multiple of S and each step's products put in :func:`step_order`; and the number of steps."""
    axis = axis % x.ndim
    K = x.shape[axis]
    steps = max(1, -(-K // S))
    if steps * S != K:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (0, steps * S - K)
        x = np.pad(x, pad)
    order = (np.arange(steps)[:, None] * S + step_order(S, L)[None, :]).reshape(-1)
    return np.take(x, order, axis=axis), steps


def inner_params(params: UnitParams) -> UnitParams:
    """The unit of the inner (fp16) steps: the same fields, fp16 operands, no steps (inputs are
    flushed, if the unit flushes them, by their own format's rule before they are widened)."""
    return params._replace(
        step_size=0, input_format=int(InputFormat.FP16), b_input_format=SAME_AS_A, flush_inputs=False
    )


def fold_steps(c: np.ndarray, parts: np.ndarray, output_format: int) -> np.ndarray:
    """c + part_0 + part_1 + … (the last axis of ``parts``), one IEEE addition each, RNE, in the
    output format: float32 additions (each correctly rounded), or for fp16 the exact float64 sum
    of two fp16 values (at most 40 significant bits) rounded once to fp16. Returns float32 (fp16
    values for an fp16 output) of the broadcast shape."""
    fp16 = output_format == Format.FP16
    acc = np.broadcast_to(np.asarray(c, np.float32), np.broadcast_shapes(np.shape(c), parts.shape[:-1]))
    with np.errstate(invalid="ignore", over="ignore"):
        for j in range(parts.shape[-1]):
            part = parts[..., j]
            if fp16:
                acc = (acc.astype(np.float64) + part.astype(np.float64)).astype(np.float16).astype(np.float32)
            else:
                acc = acc + part.astype(np.float32)
    return np.array(acc, np.float32)
