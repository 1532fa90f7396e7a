"""The two ends of the design and the variants between them: what each switch is when off (the
reference) or on (the kernel), the GEMM settings of a subset of switches (deduplicated by what
reaches the arithmetic), one pass over the convolution for all of them (:class:`emu.conv.ConvGemm`),
and the elementwise post-passes (the kernel's fp32 → fp16 cast)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from emu.conv import ConvArithmetic, ConvGemm
from emu.gemm import GemmOrder
from models.units import Unit
from models.units import unit as named_unit

from ..run import progress_bar
from .sources import FLUSH_BIT, ORDER_BIT, ROUND_BIT

_FP16_EXP_MASK = 0x7C00


@dataclass(frozen=True)
class End:
    """One end of the design: what each switch is when off (reference) or on (kernel)."""

    flush: bool
    units: tuple[Unit, ...]
    orders: tuple[GemmOrder, ...]
    output_rounding: bool
    overflow: bool


def kernel_end(model, problem) -> End:
    """The kernel end: its units (and their input flush), its gemmK orders, and the fp32 → fp16
    output cast unless the model is a validator."""
    plan = model.plan(problem)
    units = tuple(g.unit for g in plan)
    fp16_out = not model.validator
    return End(any(u.flush_inputs for u in units), units, tuple(g.order for g in plan), fp16_out, fp16_out)


def reference_end(validator, problem, reference: str) -> End:
    """The reference end: the validator's orders with an fp64 accumulator and nothing flushed or
    rounded (``reference="exact"``), or the whole validator rounded to fp16 (``"validator"``)."""
    plan = validator.plan(problem)
    orders = tuple(g.order for g in plan)
    if reference == "exact":
        fp64 = named_unit("fp64")
        return End(False, tuple(fp64 for _ in plan), orders, False, False)
    units = tuple(g.unit for g in plan)
    # the 2022 verifier rounded the validation value to fp16 (RNE) before comparing
    return End(any(u.flush_inputs for u in units), units, orders, True, True)


def flushable(arrays) -> bool:
    """Whether flushing inputs can change anything: a subnormal or a −0 among the patterns."""
    for a in arrays:
        if a is None:
            continue
        bits = np.asarray(a)
        bits = bits.view(np.uint16) if bits.dtype == np.float16 else bits.astype(np.uint16, copy=False)
        if np.any(((bits & _FP16_EXP_MASK) == 0) & (bits != 0)):
            return True
    return False


def gemm_setting(mask: int, kend: End, rend: End, flush_matters: bool):
    """(units, orders) of the GEMM variant with the switches of ``mask`` on."""
    flush = (kend.flush if mask & FLUSH_BIT else rend.flush) and flush_matters
    base = kend.units if mask & ROUND_BIT else rend.units
    units = tuple(u if bool(u.flush_inputs) == flush else dataclasses.replace(u, flush_inputs=flush) for u in base)
    orders = kend.orders if mask & ORDER_BIT else rend.orders
    return units, orders


def order_key(order: GemmOrder, k: int):
    """What of an order reaches the arithmetic: the gemmK sequence (padding included), the split
    and the combination order (``pad_k`` 4 on a K that is a multiple of 4 changes nothing)."""
    seed = order.combine_seed if order.combine == "random" and order.split_k > 1 else None
    return order.sequence(k).tobytes(), order.split_k, order.combine if order.split_k > 1 else None, seed


def gemm_key(units, orders, ks):
    """What of a GEMM setting reaches the arithmetic: the units' parameters and each order's key."""
    return tuple(u.params for u in units), tuple(order_key(o, k) for o, k in zip(orders, ks))


def run_gemms(op: ConvGemm, settings, n_chunk, progress: bool, desc: str) -> list[np.ndarray]:
    """Every GEMM setting over the convolution in one pass: each operand chunk is gathered once."""
    bar = progress_bar(sum(s.n for s in op.subs) * op.problem.groups, progress, desc)
    try:
        return op.compute(
            [ConvArithmetic(tuple(units), tuple(orders)) for units, orders in settings],
            n_chunk,
            progress=None if bar is None else bar.update,
        )
    finally:
        if bar is not None:
            bar.close()


class Post:
    """The elementwise post-passes of one GEMM output: the kernel's fp32 → fp16 cast (numpy: RNE,
    overflow to ±inf) applied to the elements that stay finite (output rounding) and/or to those
    that overflow (overflow)."""

    def __init__(self, x32: np.ndarray):
        self.x32 = x32
        with np.errstate(over="ignore", invalid="ignore"):
            self.r16 = x32.astype(np.float16).astype(np.float32)
        self.ovf = np.isinf(self.r16) & np.isfinite(x32)
        self.has_overflow = bool(self.ovf.any())
        changed = self.r16.view(np.uint32) != x32.view(np.uint32)
        self.rounds = bool(np.any(changed & ~self.ovf))

    def effective(self, rounding: bool, overflow: bool) -> tuple[bool, bool]:
        return rounding and self.rounds, overflow and self.has_overflow

    def array(self, rounding: bool, overflow: bool) -> np.ndarray:
        rounding, overflow = self.effective(rounding, overflow)
        if rounding and overflow:
            return self.r16
        if rounding:
            return np.where(self.ovf, self.x32, self.r16)
        if overflow:
            return np.where(self.ovf, self.r16, self.x32)
        return self.x32
