"""The two ends of the design and the variants between them: what each switch is when off (the
reference) or on (the kernel), the GEMM settings of a subset of switches (deduplicated by what
reaches the arithmetic), one pass over the convolution for all of them (:class:`emu.conv.ConvGemm`),
and the elementwise post-passes (the kernel's fp32 → fp16 or bf16 cast)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from emu.conv import ConvArithmetic, ConvGemm
from emu.formats import resolve_format
from emu.gemm import GemmOrder
from emu.rounding import cast_rne
from models.units import Unit
from models.units import unit as named_unit

from ..progress import progress_bar
from .sources import FLUSH_BIT, ORDER_BIT, ROUND_BIT


@dataclass(frozen=True)
class End:
    """One end of the design: what each switch is when off (reference) or on (kernel)."""

    flush: bool
    units: tuple[Unit, ...]
    orders: tuple[GemmOrder, ...]
    output_rounding: bool
    overflow: bool


def kernel_end(model, problem) -> End:
    """The kernel end: its units (and their input flush), its gemmK orders, and the fp32 → output
    format cast (fp16 or bf16, the model's ``input``) unless the model is a validator."""
    plan = model.plan(problem)
    units = tuple(g.unit for g in plan)
    fp16_out = not model.validator
    return End(any(u.flush_inputs for u in units), units, tuple(g.order for g in plan), fp16_out, fp16_out)


def reference_end(validator, problem, reference: str) -> End:
    """The reference end: the validator's orders with an fp64 accumulator (multiplying the
    validator's format, fp16 or bf16) and nothing flushed or rounded (``reference="exact"``), or
    the whole validator rounded to that format (``"validator"``)."""
    plan = validator.plan(problem)
    orders = tuple(g.order for g in plan)
    if reference == "exact":
        fp64 = named_unit("fp64", input=getattr(validator, "input", "fp16"))
        return End(False, tuple(fp64 for _ in plan), orders, False, False)
    units = tuple(g.unit for g in plan)
    # the 2022 verifier rounded the validation value to the data type (RNE) before comparing
    return End(any(u.flush_inputs for u in units), units, orders, True, True)


def flushable(arrays, fmt: str = "fp16") -> bool:
    """Whether flushing inputs can change anything: a subnormal or a −0 among the tensors, values
    of ``fmt`` (fp16 or bf16) or their uint16 patterns (a zero exponent field: fp16 0x7C00, bf16
    0x7F80)."""
    f = resolve_format(fmt)
    exponent = np.uint16(f.exponent_mask << f.fraction_bits)
    for a in arrays:
        if a is None:
            continue
        bits = np.asarray(a)
        bits = bits.view(np.uint16) if bits.dtype != np.uint16 and bits.dtype.itemsize == 2 else bits
        bits = bits.astype(np.uint16, copy=False)
        if np.any(((bits & exponent) == 0) & (bits != 0)):
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


def round_to(x32: np.ndarray, fmt: str) -> np.ndarray:
    """The kernel's fp32 → ``fmt`` output cast (RNE, overflow to ±inf), back as float32: numpy's
    cast for fp16 (``v_cvt_f16_f32``), :func:`emu.rounding.cast_rne` for bf16 (one rounding; a
    float32 is exact in float64)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if fmt == "fp16":
            return x32.astype(np.float16).astype(np.float32)
        return cast_rne(x32.astype(np.float64), fmt).astype(np.float32)


class Post:
    """The elementwise post-passes of one GEMM output: the kernel's fp32 → output format cast
    (:func:`round_to`: fp16 or bf16, RNE, overflow to ±inf) applied to the elements that stay
    finite (output rounding) and/or to those that overflow (overflow)."""

    def __init__(self, x32: np.ndarray, fmt: str = "fp16"):
        self.x32 = x32
        self.rounded = round_to(x32, fmt)
        self.ovf = np.isinf(self.rounded) & np.isfinite(x32)
        self.has_overflow = bool(self.ovf.any())
        changed = self.rounded.view(np.uint32) != x32.view(np.uint32)
        self.rounds = bool(np.any(changed & ~self.ovf))

    def effective(self, rounding: bool, overflow: bool) -> tuple[bool, bool]:
        return rounding and self.rounds, overflow and self.has_overflow

    def array(self, rounding: bool, overflow: bool) -> np.ndarray:
        rounding, overflow = self.effective(rounding, overflow)
        if rounding and overflow:
            return self.rounded
        if rounding:
            return np.where(self.ovf, self.x32, self.rounded)
        if overflow:
            return np.where(self.ovf, self.rounded, self.x32)
        return self.x32
