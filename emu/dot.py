"""``dot_add``: one unit applied to vectors of K products, any batch shape."""

from __future__ import annotations

import numpy as np

from .kernels import KERNELS
from .units import Family, Format, UnitParams

__all__ = ["dot_add", "unit_params", "fp16_operand", "run_kernel"]

_FP16_EXPONENT_MASK = np.uint16(0x7C00)


def unit_params(unit) -> UnitParams:
    """Accept an ``emu.UnitParams`` or anything with a ``params`` attribute (``models.Unit``)."""
    params = getattr(unit, "params", unit)
    if not isinstance(params, UnitParams):
        raise TypeError(f"unit: expected models.Unit or emu.UnitParams, got {type(unit).__name__}")
    Family(params.family)  # raises ValueError for an unknown family
    if params.group_size < 1:
        raise ValueError(f"unit.group_size: must be ≥ 1, got {params.group_size}")
    if params.family == Family.PAIRWISE and params.group_size & (params.group_size - 1):
        raise ValueError(f"unit.group_size: a pairwise tree needs a power of two, got {params.group_size}")
    if params.family in (Family.TRUNCATED_FUSED, Family.TWO_STAGE) and not 0 <= params.fraction_bits <= 48:
        raise ValueError(f"unit.fraction_bits: must be in 0..48 (float64 exactness), got {params.fraction_bits}")
    return params


def fp16_operand(x, name: str) -> np.ndarray:
    """fp16 bit patterns (uint16) of an operand given as float16 values or uint16 patterns."""
    x = np.asarray(x)
    if x.dtype == np.float16:
        return x.view(np.uint16)
    if x.dtype == np.uint16:
        return x
    raise TypeError(f"{name}: expected float16 values or uint16 bit patterns, got dtype {x.dtype}")


def _accumulator(c, fmt: int) -> np.ndarray:
    dtype, bits = (np.float16, np.uint16) if fmt == Format.FP16 else (np.float32, np.uint32)
    c = np.asarray(c)
    if c.dtype == bits:
        return c.view(dtype)
    if c.dtype == dtype:
        return c
    converted = c.astype(dtype)
    if not np.array_equal(converted.astype(np.float64), c.astype(np.float64), equal_nan=True):
        raise TypeError(f"c: expected {np.dtype(dtype).name} values (got {c.dtype} not exactly representable)")
    return converted


def _values(bits: np.ndarray, flush: bool) -> np.ndarray:
    """Exact float32 values of fp16 patterns; with ``flush``, |x| < 2^-14 becomes +0."""
    if flush:
        bits = np.where((bits & _FP16_EXPONENT_MASK) == 0, np.uint16(0), bits)
    return bits.view(np.float16).astype(np.float32)


def run_kernel(params: UnitParams, A, B, C) -> np.ndarray:
    """Run the family kernel on prepared float32 operands: A (M, K) for a GEMM, or (1, K, N)
    for one a-vector per output (see ``kernels._tiles``); B (K, N); C (M, N)."""
    out = np.empty(C.shape, np.float32)
    if out.size:
        KERNELS[Family(params.family)](A, B, C, out, np.asarray(params, np.int64))
    return out


def dot_add(a, b, c, unit) -> np.ndarray:
    """d = c + Σ_k a_k·b_k as ``unit`` computes it.

    a, b: (..., K) float16 (or uint16 bit patterns); c: (...) float32 (float16 for a unit with
    fp16 output); the batch shapes broadcast. K is consumed from k = 0 upward in consecutive
    groups of the unit's group size, each group updating the running accumulator (c on entry).
    Returns float32 (float16 for fp16-output units) of the broadcast batch shape.
    """
    params = unit_params(unit)
    a_bits = fp16_operand(a, "a")
    b_bits = fp16_operand(b, "b")
    if a_bits.ndim == 0 or b_bits.ndim == 0:
        raise ValueError("a, b: need at least one dimension (K)")
    K = a_bits.shape[-1]
    if b_bits.shape[-1] != K:
        raise ValueError(f"a, b: K differs ({K} vs {b_bits.shape[-1]})")
    c_vals = _accumulator(c, params.output_format)
    batch = np.broadcast_shapes(a_bits.shape[:-1], b_bits.shape[:-1], c_vals.shape)
    a_vals = _values(a_bits, bool(params.flush_inputs))
    b_vals = _values(b_bits, bool(params.flush_inputs))
    c32 = c_vals.astype(np.float32)

    nd = len(batch)
    a_batch = (1,) * (nd - a_bits.ndim + 1) + a_bits.shape[:-1]
    b_batch = (1,) * (nd - b_bits.ndim + 1) + b_bits.shape[:-1]
    gemm_like = nd >= 2 and a_batch[-1] == 1 and batch[-1] > 1 and all(s == 1 for s in b_batch[:-1])
    if gemm_like:  # a varies over rows, b over columns: no broadcast copies, shared a per row
        M, N = int(np.prod(batch[:-1])), batch[-1]
        A = np.ascontiguousarray(np.broadcast_to(a_vals.reshape(a_batch[:-1] + (K,)), batch[:-1] + (K,)).reshape(M, K))
        B = np.ascontiguousarray(b_vals.reshape(N, K).T)
        C = np.ascontiguousarray(np.broadcast_to(c32, batch).reshape(M, N))
        out = run_kernel(params, A, B, C)
    else:
        P = int(np.prod(batch))
        A = np.ascontiguousarray(np.broadcast_to(a_vals, batch + (K,)).reshape(P, K).T)[None]
        B = np.ascontiguousarray(np.broadcast_to(b_vals, batch + (K,)).reshape(P, K).T)
        C = np.ascontiguousarray(np.broadcast_to(c32, batch).reshape(1, P))
        out = run_kernel(params, A, B, C)
    out = out.reshape(batch)
    if params.output_format == Format.FP16:
        return out.astype(np.float16)
    return out
