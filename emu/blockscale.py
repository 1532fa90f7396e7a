"""Block-scaled operands and their dot products: OCP MX (fp8, fp6, fp4 with a UE8M0 scale per 32
values) and NVFP4 (fp4 with a UE4M3 scale per 16).

A block-scaled unit (:data:`emu.units.BLOCK_SCALED`) multiplies operands whose every block of
``block_size`` consecutive values along K shares one scale, one per operand: ``scale_a`` for
the block of A, ``scale_b`` for B's (OCP Microscaling Formats (MX) Specification v1.0, 2023;
NVIDIA PTX ISA 8.7, ``tcgen05.mma … .block_scale`` and ``mma.sync … .block_scale``). The
arithmetic is MMA-Sim's (PyPI mmasim 2.1.1, mmasim/arithmetic/fdpa.py ``st_fdpa``,
``gst_fdpa``); the kernel is :mod:`emu.kernels.scaled`.

Operands: the ``ml_dtypes`` type of each format (``float8_e4m3fn``, ``float8_e5m2``,
``float6_e3m2fn``, ``float6_e2m3fn``, ``float4_e2m1fn``) or its bit patterns as uint8 (fp6 and
fp4 in the low bits). Scales: UE8M0 as ``ml_dtypes.float8_e8m0fnu`` or uint8 patterns; UE4M3 as
``ml_dtypes.float8_e4m3fn`` or uint8 patterns, read without their sign bit (UE4M3 has none; the
bit is cleared, as MMA-Sim's ``truncate_e4m3_to_ue4m3`` does). Operands of shape (..., K) take
scales of shape (..., K // block_size), the batch shapes broadcasting with each other and with c.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .jit import run_tasks
from .kernels import task_count
from .kernels.scaled import scaled_dot
from .operands import PATTERN_BITS, input_name, pattern_dtype, value_dtype
from .units import (
    BLOCK_SCALED,
    INPUT_EMIN,
    InputFormat,
    ScaleFormat,
    UnitParams,
    kernel_vector,
    operand_formats,
)

__all__ = [
    "SCALE_DTYPES",
    "is_block_scaled",
    "operand_table",
    "scale_table",
    "scaled_dot_add",
    "scaled_gemm",
]

#: the ml_dtypes type of each scale format's values
SCALE_DTYPES = {
    ScaleFormat.UE8M0: np.dtype(ml_dtypes.float8_e8m0fnu),
    ScaleFormat.UE4M3: np.dtype(ml_dtypes.float8_e4m3fn),
}
_SCALE_NAMES = {ScaleFormat.UE8M0: "ue8m0", ScaleFormat.UE4M3: "ue4m3"}


def is_block_scaled(params: UnitParams) -> bool:
    return params.family in BLOCK_SCALED


def _powers(v: np.ndarray, emin: int) -> np.ndarray:
    """2^floor(log2|v|), 2^emin for values below it (subnormals), 0 for zero, 1 for inf / NaN."""
    finite = np.isfinite(v) & (v != 0)
    e = np.floor(np.log2(np.where(finite, np.abs(v), 1.0)))  # exact: |v| is a power of two times an odd integer < 2^8
    p = np.exp2(np.maximum(e, emin))
    return np.where(v == 0, 0.0, np.where(np.isfinite(v), p, 1.0))


def operand_table(fmt) -> tuple[np.ndarray, np.ndarray]:
    """(values, powers) of every pattern of an operand format, indexed by the pattern (float64;
    :mod:`emu.kernels.scaled`: the power of x is 2^(its field exponent), 0 for zero, 1 for inf
    and NaN)."""
    fmt = InputFormat(fmt)
    n = 1 << PATTERN_BITS.get(fmt, 8)
    v = np.arange(n, dtype=np.uint8).view(value_dtype(fmt)).astype(np.float64)
    return v, _powers(v, INPUT_EMIN[fmt])


def scale_table(scale: ScaleFormat) -> tuple[np.ndarray, np.ndarray]:
    """(values, powers) of every scale pattern (0 … 255), float64: UE8M0 x is 2^(x − 127) with
    power 2^(x − 127), 0xFF NaN (power 1); UE4M3 is e4m3 without its sign bit (the pattern's low
    seven bits), its power 2^(field exponent) (2^-6 for subnormals), 0 for zero, 0x7F NaN
    (power 1) (MMA-Sim frexp_and_normalize)."""
    scale = ScaleFormat(scale)
    if scale == ScaleFormat.UE8M0:
        x = np.arange(256, dtype=np.int64)
        v = np.where(x == 255, np.nan, np.exp2((x - 127).astype(np.float64)))
        return v, np.where(x == 255, 1.0, v)
    v = (np.arange(256, dtype=np.int64) & 0x7F).astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return v, _powers(v, -6)


def _patterns(x, name: str, fmt: InputFormat) -> np.ndarray:
    """uint8 patterns of an operand of ``fmt`` (values of its ml_dtypes type or uint8 patterns)."""
    x = np.asarray(x)
    vdt = value_dtype(fmt)
    if x.dtype == vdt:
        return x.view(np.uint8)
    if x.dtype == pattern_dtype(fmt):
        width = PATTERN_BITS.get(fmt, 8)
        if width < 8 and x.size and int(x.max()) >> width:
            raise ValueError(
                f"{name}: {input_name(fmt)} bit patterns are {width} bits (below {1 << width}), got {int(x.max())}"
            )
        return x
    raise TypeError(
        f"{name}: the unit multiplies {input_name(fmt)}: expected {vdt.name} values or uint8 bit patterns, got dtype {x.dtype}"
    )


def _scale_patterns(s, name: str, params: UnitParams) -> np.ndarray:
    scale = ScaleFormat(params.scale_format)
    if s is None:
        raise TypeError(
            f"{name}: the unit is block-scaled ({_SCALE_NAMES[scale]} per {params.block_size} values along K): "
            f"pass {SCALE_DTYPES[scale].name} scales (or uint8 patterns) of shape (..., K // {params.block_size})"
        )
    s = np.asarray(s)
    if s.dtype == SCALE_DTYPES[scale] or s.dtype == np.uint8:
        return s.view(np.uint8)
    raise TypeError(
        f"{name}: expected {_SCALE_NAMES[scale]} scales as {SCALE_DTYPES[scale].name} or uint8 patterns, got dtype {s.dtype}"
    )


def _rows(x, s, x_name, s_name, params, side):
    """(patterns, scale patterns, tables, batch shape): the distinct rows of one operand and its
    scales ((n, K) and (n, K // block) uint8), broadcast against each other; the tables decode
    them (:func:`_kernel_arrays`)."""
    fmt = operand_formats(params)[side == "b"]
    bits = _patterns(x, x_name, fmt)
    sbits = _scale_patterns(s, s_name, params)
    if bits.ndim == 0 or sbits.ndim == 0:
        raise ValueError(f"{x_name}, {s_name}: need at least one dimension (K; K // block_size)")
    K, blk = bits.shape[-1], params.block_size
    if K % blk:
        raise ValueError(f"{x_name}: K = {K} is not a multiple of the unit's block size {blk}")
    if sbits.shape[-1] != K // blk:
        raise ValueError(f"{s_name}: {sbits.shape[-1]} scales along K; K = {K} in blocks of {blk} needs {K // blk}")
    try:
        batch = np.broadcast_shapes(bits.shape[:-1], sbits.shape[:-1])
    except ValueError:
        raise ValueError(
            f"{x_name}, {s_name}: batch shapes {bits.shape[:-1]} and {sbits.shape[:-1]} do not broadcast"
        ) from None
    n = int(np.prod(batch))
    bits = np.broadcast_to(bits, batch + (K,)).reshape(n, K)
    sbits = np.broadcast_to(sbits, batch + (K // blk,)).reshape(n, K // blk)
    return bits, sbits, operand_table(fmt) + scale_table(ScaleFormat(params.scale_format)), batch


def _kernel_arrays(rows, index, lanes: bool) -> tuple:
    """(V, P, SV, SP) as :func:`emu.kernels.scaled.scaled_dot` takes one operand, for the rows
    ``index`` of ``rows`` (:func:`_rows`): values and powers float32 (exact: every operand value
    and power is an fp16 value), its scales' values and powers float64; (n, K) and (n, K // block),
    or with ``lanes`` transposed, (K, n). The patterns are selected and laid out first (one byte
    each), then decoded straight into the kernel's layout."""
    bits, sbits, (vt, pt, st, sp), _ = rows
    bits, sbits = bits[index], sbits[index]
    if lanes:
        bits, sbits = np.ascontiguousarray(bits.T), np.ascontiguousarray(sbits.T)
    return vt.astype(np.float32)[bits], pt.astype(np.float32)[bits], st[sbits], sp[sbits]


def _run(params, A, B, C: np.ndarray, a_lanes: bool) -> np.ndarray:
    """(M, N) float32 from kernel arrays A (GEMM: rows; a_lanes: lanes) and B (lanes)."""
    M, N = (1 if a_lanes else A[0].shape[0]), B[0].shape[1]
    out = np.empty((M, N), np.float32)
    if out.size:
        C = np.ascontiguousarray(np.broadcast_to(C, (M, N)), np.float32)
        if a_lanes:  # one A vector per output: the kernels' batched layout (1, K, N)
            A = tuple(x[None] for x in A)
        ops, prm = (*A[:2], *B[:2], *A[2:], *B[2:], C, out), kernel_vector(params)
        run_tasks(lambda t0, t1: scaled_dot(*ops, prm, t0, t1), task_count(M, N))
    return out


def scaled_dot_add(params: UnitParams, a, b, c32: np.ndarray, scale_a, scale_b) -> np.ndarray:
    """float32 d = c + Σ a_k·b_k·(block scales) of the broadcast batch shape (the block-scaled
    case of :func:`emu.dot_add`; ``c32`` float32 values)."""
    RA, RB = _rows(a, scale_a, "a", "scale_a", params, "a"), _rows(b, scale_b, "b", "scale_b", params, "b")
    if RA[0].shape[1] != RB[0].shape[1]:
        raise ValueError(f"a, b: K differs ({RA[0].shape[1]} vs {RB[0].shape[1]})")
    a_batch, b_batch = RA[3], RB[3]
    batch = np.broadcast_shapes(a_batch, b_batch, c32.shape)
    ia = np.broadcast_to(np.arange(RA[0].shape[0]).reshape(a_batch), batch)
    ib = np.broadcast_to(np.arange(RB[0].shape[0]).reshape(b_batch), batch)
    if batch and batch[-1] > 1 and ia.strides[-1] == 0 and all(st == 0 for st in ib.strides[:-1]):
        # a GEMM: A's row varies over the leading dimensions only, B's over the last only
        N = batch[-1]
        A = _kernel_arrays(RA, ia[..., 0].reshape(-1), False)
        B = _kernel_arrays(RB, ib.reshape(-1, N)[0], True)
        C = np.broadcast_to(c32, batch).reshape(-1, N)
        return _run(params, A, B, C, False).reshape(batch)
    A = _kernel_arrays(RA, ia.reshape(-1), True)
    B = _kernel_arrays(RB, ib.reshape(-1), True)
    return _run(params, A, B, np.broadcast_to(c32, batch).reshape(1, -1), True).reshape(batch)


def scaled_gemm(params: UnitParams, A, B, c32: np.ndarray, scale_a, scale_b) -> np.ndarray:
    """(M, N) float32 C + A·B with A (M, K) and its scales (M, K // block), B (K, N) and its
    scales (K // block, N): every output one chain over K (``c32`` broadcastable to (M, N))."""
    A, B = np.asarray(A), np.asarray(B)
    if A.ndim != 2 or B.ndim != 2:
        raise ValueError(f"A, B: need (M, K) and (K, N), got {A.shape} and {B.shape}")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"A, B: K differs ({A.shape[1]} vs {B.shape[0]})")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s is not None and np.ndim(s) != 2:
            need = "(M, K // block)" if name == "scale_a" else "(K // block, N)"
            raise ValueError(f"{name}: need {need}, got shape {np.shape(s)}")
    M, N = A.shape[0], B.shape[1]
    sb = None if scale_b is None else np.asarray(scale_b).T
    RA, RB = _rows(A, scale_a, "A", "scale_a", params, "a"), _rows(B.T, sb, "B", "scale_b", params, "b")
    if RA[3] != (M,) or RB[3] != (N,):
        raise ValueError(
            f"scale_a, scale_b: shapes {np.shape(scale_a)} and {np.shape(scale_b)} do not fit A {A.shape} and B {B.shape}"
        )
    return _run(params, _kernel_arrays(RA, slice(None), False), _kernel_arrays(RB, slice(None), True), c32, False)
