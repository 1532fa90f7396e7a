"""``dot_add``: one unit applied to vectors of K products, any batch shape."""

from __future__ import annotations

import numpy as np
from numba import get_num_threads

from .blockscale import is_block_scaled, scaled_dot_add
from .decode import TILE, quads
from .formats import FP16_TO_FP32, FP16_TO_FP32_FTZ
from .jit import jit, run_tasks
from .kernels import KERNELS, LANES, SERIAL
from .operands import decode_flush, is_wide, operand
from .rows import driver, rows_driver, rows_fused
from .steps import fold_steps, inner_params, step_operands
from .units import Family, Format, UnitParams, check_params, kernel_params, kernel_vector

__all__ = [
    "dot_add",
    "unit_params",
    "fp16_operand",
    "kernel_dtype",
    "run_kernel",
    "decode_operands",
    "compact_c",
    "accumulator_values",
]


def unit_params(unit) -> UnitParams:
    """Accept an ``emu.UnitParams`` or anything with a ``params`` attribute (``models.Unit``),
    validated (:func:`emu.units.check_params`)."""
    params = getattr(unit, "params", unit)
    if not isinstance(params, UnitParams):
        raise TypeError(f"unit: expected models.Unit or emu.UnitParams, got {type(unit).__name__}")
    return check_params(params)


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


#: tile of the transposing decode: source columns × source rows (see ``_decode_2d``)
_T_COLS, _T_ROWS = 16, 256
_DECODE_ROWS, _DECODE_COLS = 64, 512


def _decode_2d(bits, lut, out):
    """out[r, c] = lut[bits[r, c]] for a 2-D uint16 array of any strides. A column-major source (a
    transposed view) is read in its own memory order, in tiles of 16 columns × 256 rows: each
    source column segment is contiguous, and each tile row of ``out`` is one cache line."""
    R, Ncol = bits.shape
    if R > 1 and Ncol > 1 and abs(bits.strides[0]) < abs(bits.strides[1]):
        n = -(-Ncol // _T_COLS) * -(-R // _T_ROWS)
        run_tasks(lambda t0, t1: _decode_2d_t(bits, lut, out, t0, t1), n)
    else:  # row-major: tiles of 64 rows × 512 columns, each row segment contiguous
        n = -(-R // _DECODE_ROWS) * -(-Ncol // _DECODE_COLS)
        run_tasks(lambda t0, t1: _decode_2d_c(bits, lut, out, t0, t1), n)


@jit
def _decode_2d_t(bits, lut, out, t0, t1):
    """Tiles ``t0`` … ``t1`` − 1 of :func:`_decode_2d` for a column-major source."""
    R, Ncol = bits.shape
    n_rb = (R + _T_ROWS - 1) // _T_ROWS
    for t in range(t0, t1):
        cb, rb = t // n_rb, t % n_rb
        c0, r0 = cb * _T_COLS, rb * _T_ROWS
        c1, r1 = min(Ncol, c0 + _T_COLS), min(R, r0 + _T_ROWS)
        for c in range(c0, c1):
            src = bits[r0:r1, c]
            for i in range(r1 - r0):
                out[r0 + i, c] = lut[src[i]]


@jit
def _decode_2d_c(bits, lut, out, t0, t1):
    """Tiles ``t0`` … ``t1`` − 1 of :func:`_decode_2d` for a row-major source."""
    R, Ncol = bits.shape
    n_cb = (Ncol + _DECODE_COLS - 1) // _DECODE_COLS
    for t in range(t0, t1):
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


#: the float32 kernels' proofs (written for fp16 operands) hold for any operands whose nonzero
#: finite values have at most 11 significant bits and lie in [2^NARROW_EMIN, 2^16): products exact
#: in fp32, at least 2^-48 and below 2^32, on a grid no finer than 2^-68 (see the kernels' module
#: docstrings). bf16 and tf32 operands in that range run there, with NARROW_EMIN as the lowest
#: field exponent (their own subnormals lie far below the range).
NARROW_EMIN = -24
_NARROW_LOW, _NARROW_HIGH = 2.0**NARROW_EMIN, 2.0**16


@jit
def _all_narrow(flat):
    """One pass, stopping at the first value outside the range (numpy's masks took 4 ms per
    2^21 values, a tenth of a bf16 GEMM's time in bench_formats)."""
    for i in range(flat.size):
        a = abs(flat[i])
        if a < _NARROW_LOW and a != 0.0:
            return False
        if a >= _NARROW_HIGH and a - a == 0.0:  # finite (inf - inf and NaN are NaN)
            return False
    return True


def narrow_range(x: np.ndarray) -> bool:
    """Whether every finite nonzero value of the float64 array ``x`` lies in [2^-24, 2^16), where
    the float32 kernels compute bf16 and tf32 operands exactly as the float64 ones do."""
    return bool(_all_narrow(np.ascontiguousarray(x, np.float64).reshape(-1)))


def kernel_dtype(params: UnitParams):
    """The dtype of the operand values the kernels take: float64 for the wide input formats
    (bf16, tf32), float32 (fp16 values) otherwise."""
    return np.float64 if is_wide(params) else np.float32


#: outputs per launch of the float64 batched layout: bounds its broadcast copies
WIDE_ROWS = 1 << 15


def run_kernel(params: UnitParams, A, B, C) -> np.ndarray:
    """Run the family kernel on prepared operand values (float32 fp16 values; float64 for bf16 and
    tf32, :func:`kernel_dtype`): A (M, K) for a GEMM, or (1, K, N) for one a-vector per output
    (see ``kernels._tiles``); B (K, N); C (M, N), or broadcastable to it as (1 or M, 1 or N).
    Returns (M, N) float32."""
    if params.step_size:  # an emulated instruction: its inner steps, then c (emu.steps)
        return _run_steps(params, A, B, C)
    dtype = kernel_dtype(params)
    # C-ordered and writable (a read-only operand is copied): one compiled type per layout
    A, B = (np.require(x, dtype, ("C", "W")) for x in (A, B))
    emin = None
    if dtype == np.float64 and params.family != Family.FUSED_EXACT and narrow_range(A) and narrow_range(B):
        # wide operands whose values all lie where the float32 kernels are exact (NARROW_EMIN)
        A, B, emin = A.astype(np.float32), B.astype(np.float32), NARROW_EMIN
    C = np.require(C, np.float32, ("C", "W"))
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
        params = kernel_params(params)
        kernel, prm = KERNELS[Family(params.family)], kernel_vector(params, emin)
        if A.ndim == 3 and out.size <= DIRECT_ROWS:  # a small batch: on this thread (emu.kernels.SERIAL)
            kernel = SERIAL[Family(params.family)]
        if A.dtype == np.float64 and A.ndim == 2 and params.family != Family.FUSED_EXACT:
            # float64 operands run in the batched layout only (one compiled kernel per family, not
            # two: they are the rare operands outside the narrow range), a block of rows at a time;
            # the exact fused family (MI100's bf16, always float64) keeps its GEMM layout
            rows = max(1, WIDE_ROWS // max(N, 1))
            for m0 in range(0, M, rows):
                m1 = min(M, m0 + rows)
                a3 = np.ascontiguousarray(np.broadcast_to(A[m0:m1, :, None], (m1 - m0, K, N)).transpose(1, 0, 2))
                b3 = np.ascontiguousarray(np.broadcast_to(B[:, None, :], (K, m1 - m0, N)))
                c3 = np.broadcast_to(C, (M, N))[m0:m1].reshape(1, -1)
                block = np.empty((1, (m1 - m0) * N), np.float32)
                kernel(a3.reshape(1, K, -1), b3.reshape(K, -1), np.ascontiguousarray(c3), block, prm)
                out[m0:m1] = block.reshape(m1 - m0, N)
        else:
            kernel(A, B, C, out, prm)
    return out


#: decoded operand values per chunk of the batched layout (a and b together, float32 values):
#: small enough to stay in a core's cache between the decode and the kernel
CHUNK_VALUES = 1 << 17
#: parallel tasks per numba thread in the rows layout (each task runs several chunks with one
#: set of buffers; more tasks balance a loaded machine better)
CHUNK_TASKS = 4
#: whether FMA-family and 4-wide pairwise rows (K a multiple of 4) take the fused decode of
#: ``emu.rows.rows_fused``
FUSED = True
#: a batched GEMM (G, M, 1, K) × (G, 1, N, K) runs its G elements in parallel in one launch when
#: G is at least this (None: the numba thread count), else one parallel GEMM per element
BATCH_MIN_G = None


def _run_steps(params: UnitParams, A, B, C) -> np.ndarray:
    """:func:`run_kernel` for a unit with ``step_size``: each step's products (in
    :func:`emu.steps.step_order`, padded with +0) by the inner unit from +0, folded into C."""
    S, L = params.step_size, params.group_size
    A, steps = step_operands(np.asarray(A), 1, S, L)
    B, _ = step_operands(np.asarray(B), 0, S, L)
    inner, zero = inner_params(params), np.zeros((1, 1), np.float32)
    parts = [run_kernel(inner, A[:, j * S : (j + 1) * S], B[j * S : (j + 1) * S], zero) for j in range(steps)]
    return fold_steps(np.asarray(C, np.float32), np.stack(parts, axis=-1), params.output_format)


def _gemm_like(a_batch: tuple, b_batch: tuple, batch: tuple) -> bool:
    """a varies over the leading batch dimensions only, b over the last only."""
    return len(batch) >= 2 and a_batch[-1] == 1 and batch[-1] > 1 and all(s == 1 for s in b_batch[:-1])


def _dot_batch(params, a_bits, b_bits, c32, batch, flush) -> np.ndarray:
    """float32 results of ``batch`` shape (see :func:`dot_add`), in the cheapest layout."""
    params = kernel_params(params)
    K = a_bits.shape[-1]
    nd = len(batch)
    a_batch = (1,) * (nd - a_bits.ndim + 1) + a_bits.shape[:-1]
    b_batch = (1,) * (nd - b_bits.ndim + 1) + b_bits.shape[:-1]
    if _gemm_like(a_batch, b_batch, batch):  # a varies over rows, b over columns: shared a per row
        M, N = int(np.prod(batch[:-1])), batch[-1]
        a_rows = np.broadcast_to(a_bits.reshape(a_batch[:-1] + (K,)), batch[:-1] + (K,)).reshape(M, K)
        A = decode_operands(a_rows, flush)
        b_cols = np.broadcast_to(b_bits.reshape(b_batch[-1], K), (N, K))
        B = decode_operands(b_cols.T, flush)  # (K, N), transposed while decoding
        return run_kernel(params, A, B, compact_c(c32, batch, M, N))
    if nd >= 3 and batch[0] > 1 and _gemm_like(a_batch[1:], b_batch[1:], batch[1:]):  # a batched GEMM
        G, M, N = batch[0], int(np.prod(batch[1:-1])), batch[-1]
        a_full = a_bits.reshape(a_batch + (K,))
        b_full = b_bits.reshape(b_batch + (K,))
        c_full = np.broadcast_to(c32, batch)
        if G >= (BATCH_MIN_G or get_num_threads()):  # the elements in parallel, one launch
            a3 = np.broadcast_to(a_full, (a_batch[0],) + batch[1:-1] + (1, K)).reshape(a_batch[0], M, K)
            b3 = np.broadcast_to(b_full, (b_batch[0],) + (1,) * (nd - 2) + (N, K)).reshape(b_batch[0], N, K)
            one_c = all(st == 0 for st in c_full.strides)
            c3 = c_full.reshape(-1)[:1].reshape(1, 1, 1) if one_c else c_full.reshape(G, M, N)
            out = np.empty((G, M, N), np.float32)
            driver(Family(params.family), "gemms")(
                np.ascontiguousarray(a3),
                np.ascontiguousarray(b3),
                np.ascontiguousarray(c3),
                flush,
                out,
                kernel_vector(params),
            )
            return out
        out = np.empty(batch, np.float32)  # few elements: one parallel GEMM each
        for g in range(G):
            ag, bg = a_full[g if a_batch[0] > 1 else 0], b_full[g if b_batch[0] > 1 else 0]
            out[g] = _dot_batch(params, ag, bg, c_full[g], batch[1:], flush).reshape(batch[1:])
        return out
    P = int(np.prod(batch))
    a2 = np.broadcast_to(a_bits, batch + (K,)).reshape(P, K)
    b2 = np.broadcast_to(b_bits, batch + (K,)).reshape(P, K)
    c1 = np.broadcast_to(c32, batch).reshape(P)
    return _rows(params, a2, b2, c1, flush).reshape(1, P)


#: batches of at most this many rows (outputs) that :func:`_rows` would send to the rows driver
#: run the family kernel in the batched layout instead, on the calling thread (:func:`run_kernel`),
#: their operands decoded by table: the kernel the narrow-range bf16/tf32 rows use, so a first
#: call compiles one kernel per family rather than also the driver and its tasks; the same code
#: computes the same bits. Identification runs such batches on one thread anyway.
DIRECT_ROWS = 4096


def _readonly(x: np.ndarray) -> np.ndarray:
    """A read-only view of ``x`` (no copy): numba compiles a kernel once per argument type, and a
    read-only array (a broadcast operand) is another type than a writable one."""
    v = x.view()
    v.flags.writeable = False
    return v


def _rows(params, a2, b2, c1, flush) -> np.ndarray:
    """out[p] = unit(a2[p], b2[p], c1[p]) for (P, K) pattern arrays of any strides (a row that
    repeats has stride 0) and a (P,) accumulator, in the batched layout, chunk by chunk in one
    parallel launch (:mod:`emu.rows`); up to :data:`DIRECT_ROWS` rows that the rows driver would
    take run the family kernel directly."""
    P, K = a2.shape
    out = np.empty(P, np.float32)
    if P == 0:
        return out
    rows = a2, b2, c1
    width = max(LANES, CHUNK_VALUES // max(2 * K, 1) // LANES * LANES)
    spread = -(-P // (4 * get_num_threads())) // LANES * LANES + LANES  # ≥ 4 chunks per thread
    width = min(width, max(LANES, spread))
    same = [bool(P == 1 or x.strides[0] == 0) for x in (a2, b2, c1)]
    # C-ordered operands (one row for a repeated one): one compiled signature, and rows read
    # twice as fast as through strides
    a2, b2, c1 = (np.ascontiguousarray(x[:1] if s else x) for x, s in zip((a2, b2, c1), same))
    prm = kernel_vector(params)
    pairwise = params.family == Family.PAIRWISE and params.group_size == 4
    if (params.family == Family.FMA or pairwise) and not (same[0] or same[1]) and FUSED:
        a4, b4 = quads(a2), quads(b2)
        if a4 is not None and b4 is not None:  # decoded per lane inside the k loop (emu.rows)
            n_t = -(-P // TILE)
            per = max(1, n_t // (CHUNK_TASKS * get_num_threads()))
            fc, fo = bool(params.flush_c), bool(params.flush_output)
            rows_fused(_readonly(a4), _readonly(b4), _readonly(c1), flush, same[2], fc, fo, pairwise, per, out)
            return out
    if P <= DIRECT_ROWS:
        a2, b2, c1 = rows
        lut = FP16_TO_FP32_FTZ if flush else FP16_TO_FP32
        A = lut[a2.T][None]  # (1, K, P): one a-vector per output (the batched layout)
        return run_kernel(params, A, lut[b2.T], c1.reshape(1, P))[0]
    none = np.empty((0, 0), np.uint64)
    a4, b4 = ((None if s else quads(x)) for x, s in zip((a2, b2), same))
    a4, b4 = (none if x is None else x for x in (a4, b4))
    n_ch = -(-P // width)
    per = max(1, n_ch // (CHUNK_TASKS * get_num_threads()))  # chunks per task, one buffer set each
    a2, b2, a4, b4, c1 = (_readonly(x) for x in (a2, b2, a4, b4, c1))
    rows_driver(Family(params.family))(a2, b2, a4, b4, c1, flush, *same, width, per, out, prm)
    return out


def _dot_values(params, a, b, c32, batch) -> np.ndarray:
    """float32 results of ``batch`` shape for float64 operand values (bf16, tf32): a GEMM when a
    varies over rows and b over columns, else rows in the batched layout, a block at a time."""
    K = a.shape[-1]
    nd = len(batch)
    a_batch = (1,) * (nd - a.ndim + 1) + a.shape[:-1]
    b_batch = (1,) * (nd - b.ndim + 1) + b.shape[:-1]
    if _gemm_like(a_batch, b_batch, batch):
        M, N = int(np.prod(batch[:-1])), batch[-1]
        A = np.broadcast_to(a.reshape(a_batch[:-1] + (K,)), batch[:-1] + (K,)).reshape(M, K)
        B = np.broadcast_to(b.reshape(b_batch[-1], K), (N, K)).T
        return run_kernel(params, A, B, compact_c(c32, batch, M, N))
    P = int(np.prod(batch))
    a2 = np.broadcast_to(a, batch + (K,)).reshape(P, K)
    b2 = np.broadcast_to(b, batch + (K,)).reshape(P, K)
    c1 = np.broadcast_to(c32, batch).reshape(P)
    out = np.empty(P, np.float32)
    for p0 in range(0, P, WIDE_ROWS):
        p1 = min(P, p0 + WIDE_ROWS)
        out[p0:p1] = run_kernel(params, a2[p0:p1].T[None], b2[p0:p1].T, c1[p0:p1].reshape(1, -1))[0]
    return out


def dot_add(a, b, c, unit, *, scale_a=None, scale_b=None) -> np.ndarray:
    """d = c + Σ_k a_k·b_k as ``unit`` computes it.

    a, b: (..., K) values of the unit's input format or their bit patterns (fp16: float16 or
    uint16; bf16: ``ml_dtypes.bfloat16`` or uint16; tf32: float32 or uint32; fp8: the
    ``ml_dtypes`` float8 type or uint8; :func:`emu.operands.operand`); c: (...) float32 (float16
    for a unit with fp16 output); the batch shapes broadcast. K is consumed from k = 0 upward in
    consecutive groups of the unit's group size, each group updating the running accumulator (c
    on entry). Returns float32 (float16 for fp16-output units) of the broadcast batch shape.

    A block-scaled unit (MX, NVFP4: :mod:`emu.blockscale`) needs ``scale_a`` and ``scale_b``,
    one scale per ``block_size`` values along K: shapes (..., K // block_size), as
    ``ml_dtypes.float8_e8m0fnu`` (UE8M0) or ``float8_e4m3fn`` (UE4M3, sign bit ignored) values or
    uint8 patterns; a and b as the ``ml_dtypes`` fp8 / fp6 / fp4 types or uint8 patterns. Other
    units take no scales.
    """
    params = unit_params(unit)
    if is_block_scaled(params):
        c32 = accumulator_values(c, params.output_format).astype(np.float32, copy=False)
        return scaled_dot_add(params, a, b, c32, scale_a, scale_b)
    if scale_a is not None or scale_b is not None:
        raise TypeError("scale_a, scale_b: the unit is not block-scaled; it takes no block scales")
    a_bits = operand(a, "a", params)
    b_bits = operand(b, "b", params, side="b")
    if a_bits.ndim == 0 or b_bits.ndim == 0:
        raise ValueError("a, b: need at least one dimension (K)")
    K = a_bits.shape[-1]
    if b_bits.shape[-1] != K:
        raise ValueError(f"a, b: K differs ({K} vs {b_bits.shape[-1]})")
    c_vals = accumulator_values(c, params.output_format)
    batch = np.broadcast_shapes(a_bits.shape[:-1], b_bits.shape[:-1], c_vals.shape)
    c32 = c_vals.astype(np.float32, copy=False)
    if params.step_size:  # an emulated instruction (emu.steps): fp16 steps from +0, then c
        S = params.step_size
        a_s, steps = step_operands(a_bits, -1, S, params.group_size)
        b_s, _ = step_operands(b_bits, -1, S, params.group_size)
        a_s = a_s.reshape(a_s.shape[:-1] + (steps, S))
        b_s = b_s.reshape(b_s.shape[:-1] + (steps, S))
        zero = np.zeros((), np.float16 if params.output_format == Format.FP16 else np.float32)
        parts = dot_add(a_s, b_s, zero, inner_params(params))
        out = fold_steps(c32, np.asarray(parts, np.float32), params.output_format).reshape(batch)
        return out.astype(np.float16) if params.output_format == Format.FP16 else out

    if is_wide(params):
        out = _dot_values(params, a_bits, b_bits, c32, batch)
    else:
        out = _dot_batch(params, a_bits, b_bits, c32, batch, decode_flush(params))
    out = out.reshape(batch)
    if params.output_format == Format.FP16:
        return out.astype(np.float16)
    return out
