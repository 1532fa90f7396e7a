"""``dot_add``: one unit applied to vectors of K products, any batch shape."""

from __future__ import annotations

import numpy as np

from .formats import FP16_TO_FP32, FP16_TO_FP32_FTZ
from .jit import jit, prange
from .kernels import KERNELS
from .units import Family, Format, UnitParams

__all__ = ["dot_add", "unit_params", "fp16_operand", "run_kernel", "decode_operands", "compact_c", "accumulator_values"]


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


def accumulator_values(c, fmt: int) -> np.ndarray:
    """``c`` as the accumulator format's values (float16 for ``Format.FP16``, else float32), from
    values or bit patterns; TypeError for values the format cannot hold exactly."""
    dtype, bits = (np.float16, np.uint16) if fmt == Format.FP16 else (np.float32, np.uint32)
    if c is None:
        raise TypeError(
            f"c: expected {np.dtype(dtype).name} values or {np.dtype(bits).name} bit patterns, got None "
            f"(pass 0 for a zero accumulator)"
        )
    c = np.asarray(c)
    if c.dtype.kind not in "fiu":
        raise TypeError(
            f"c: expected {np.dtype(dtype).name} values or {np.dtype(bits).name} bit patterns, got dtype {c.dtype}"
        )
    if c.dtype == bits:
        return c.view(dtype)
    if c.dtype == dtype:
        return c
    converted = c.astype(dtype)
    if not np.array_equal(converted.astype(np.float64), c.astype(np.float64), equal_nan=True):
        raise TypeError(f"c: expected {np.dtype(dtype).name} values (got {c.dtype} not exactly representable)")
    return converted


_DECODE_ROWS, _DECODE_COLS = 64, 512


@jit(parallel=True)
def _decode_2d(bits, lut, out):
    """out[r, c] = lut[bits[r, c]] for a 2-D uint16 array of any strides (a transposed view is
    read in blocks, so a transpose costs no more than a copy)."""
    R, Ncol = bits.shape
    n_rb = (R + _DECODE_ROWS - 1) // _DECODE_ROWS
    n_cb = (Ncol + _DECODE_COLS - 1) // _DECODE_COLS
    for t in prange(n_rb * n_cb):
        rb, cb = t // n_cb, t % n_cb
        c0 = cb * _DECODE_COLS
        c1 = min(Ncol, c0 + _DECODE_COLS)
        for r in range(rb * _DECODE_ROWS, min(R, (rb + 1) * _DECODE_ROWS)):
            src = bits[r, c0:c1]
            dst = out[r, c0:c1]
            for j in range(c1 - c0):
                dst[j] = lut[src[j]]


def decode_operands(bits: np.ndarray, flush: bool) -> np.ndarray:
    """C-contiguous float32 values of a 2-D array of fp16 patterns (uint16, any strides; a
    transposed view costs no more than a copy); with ``flush``, |x| < 2^-14 becomes +0
    (:data:`emu.formats.FP16_TO_FP32_FTZ`)."""
    out = np.empty(bits.shape, np.float32)
    if out.size:
        _decode_2d(bits, FP16_TO_FP32_FTZ if flush else FP16_TO_FP32, out)
    return out


def compact_c(c: np.ndarray, batch: tuple, M: int, N: int) -> np.ndarray:
    """c broadcast to ``batch`` and seen as (M, N) rows × columns, as the smallest C the kernels
    accept: (1, 1) when it is one value, (1, N) when the rows repeat, (M, 1) when the columns
    repeat, else (M, N). Copies only what is not repeated."""
    cb = np.broadcast_to(c, batch)
    if cb.ndim == 0:
        return cb.reshape(1, 1).copy()
    rows_vary = any(st != 0 and d > 1 for st, d in zip(cb.strides[:-1], cb.shape[:-1]))
    cols_vary = cb.strides[-1] != 0 and cb.shape[-1] > 1
    if not rows_vary:
        row = cb[(0,) * (cb.ndim - 1)]
        return np.ascontiguousarray(row if cols_vary else row[:1]).reshape(1, N if cols_vary else 1)
    if not cols_vary:
        return np.ascontiguousarray(cb[..., 0]).reshape(M, 1)
    return np.ascontiguousarray(cb).reshape(M, N)


def run_kernel(params: UnitParams, A, B, C) -> np.ndarray:
    """Run the family kernel on prepared float32 operands (fp16 values): A (M, K) for a GEMM, or
    (1, K, N) for one a-vector per output (see ``kernels._tiles``); B (K, N); C (M, N), or
    broadcastable to it as (1 or M, 1 or N). Returns (M, N) float32."""
    A, B = np.ascontiguousarray(A, np.float32), np.ascontiguousarray(B, np.float32)
    C = np.ascontiguousarray(C, np.float32)
    K, N = B.shape
    if A.ndim == 2 and A.shape[1] == K:
        M = A.shape[0]
    elif A.shape == (1, K, N):
        M = 1
    else:
        raise ValueError(f"A: shape {A.shape} does not fit B {B.shape}")
    if C.ndim != 2 or C.shape[0] not in (1, M) or C.shape[1] not in (1, N):
        raise ValueError(f"C: shape {C.shape} does not broadcast to ({M}, {N})")
    out = np.empty((M, N), np.float32)
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
    c_vals = accumulator_values(c, params.output_format)
    batch = np.broadcast_shapes(a_bits.shape[:-1], b_bits.shape[:-1], c_vals.shape)
    flush = bool(params.flush_inputs)
    c32 = c_vals.astype(np.float32, copy=False)

    nd = len(batch)
    a_batch = (1,) * (nd - a_bits.ndim + 1) + a_bits.shape[:-1]
    b_batch = (1,) * (nd - b_bits.ndim + 1) + b_bits.shape[:-1]
    gemm_like = nd >= 2 and a_batch[-1] == 1 and batch[-1] > 1 and all(s == 1 for s in b_batch[:-1])
    if gemm_like:  # a varies over rows, b over columns: no broadcast copies, shared a per row
        M, N = int(np.prod(batch[:-1])), batch[-1]
        a_rows = np.broadcast_to(a_bits.reshape(a_batch[:-1] + (K,)), batch[:-1] + (K,)).reshape(M, K)
        A = decode_operands(a_rows, flush)
        b_cols = np.broadcast_to(b_bits.reshape(b_batch[-1], K), (N, K))
        B = decode_operands(b_cols.T, flush)  # (K, N), transposed while decoding
        out = run_kernel(params, A, B, compact_c(c32, batch, M, N))
    else:
        P = int(np.prod(batch))
        A = decode_operands(np.broadcast_to(a_bits, batch + (K,)).reshape(P, K).T, flush)[None]
        B = decode_operands(np.broadcast_to(b_bits, batch + (K,)).reshape(P, K).T, flush)
        out = run_kernel(params, A, B, compact_c(np.broadcast_to(c32, batch).reshape(P), (P,), 1, P))
    out = out.reshape(batch)
    if params.output_format == Format.FP16:
        return out.astype(np.float16)
    return out
