"""Batches of independent dot products, a and b given as rows (P, K), and batches of GEMMs: one
parallel launch each.

The unit kernels want operands lane-major (k outer, outputs inner: the batched layout of
``kernels._tiles``). Decoding the whole (P, K) batch into that layout first and then running the
kernel reads every operand from memory three times, at a 4·P-byte stride, and two or three
parallel launches per call cost milliseconds on a loaded machine. Here the outputs are cut into
chunks of ``width`` (a multiple of the kernels' lane count); the chunks run in parallel
(:func:`emu.jit.run_tasks`), and each chunk decodes its rows transposed into a small buffer (in
cache) and runs the family kernel on it, over all its tasks on the chunk's thread; each parallel
task runs several chunks with one set of buffers, and rows of K a multiple of 4 are moved four
values per load (``decode.quads``). Every output is still computed by the same kernel code from
the same values, so the bits are those of the batched layout. The FMA family and pairwise groups
of 4, whose kernels are cheap next to the decoding, skip the decoded buffers: :func:`rows_fused`
decodes each lane's operands inside its k loop. A batch of GEMMs (G, M, N) runs its elements in
parallel, each decoded and computed by the family kernel in the GEMM layout on one thread.
"""

from __future__ import annotations

import functools

import numpy as np

from .decode import TILE, decode_tile, decode_tile4, fp16_value
from .jit import ALL_TASKS, jit, run_tasks, specialise
from .kernels import TASKS

__all__ = ["rows_driver", "driver", "rows_fused"]


@jit
def fill_rows(bits, flush, X):
    """X[k, i] = value of bits[k] for every lane i of the (K, w) buffer X."""
    for k in range(X.shape[0]):
        v = fp16_value(bits[k], flush)
        Xk = X[k]
        for i in range(X.shape[1]):
            Xk[i] = v


def _rows_launch(task, a2, b2, a4, b4, c1, flush, a_same, b_same, c_same, width, per, out, prm):
    """out[p] = KERNEL(a2[p], b2[p], c1[p]) for chunks of ``width`` outputs, ``per`` chunks per
    parallel task (one set of buffers per task), a2, b2 or c1 of one row when ``a_same``,
    ``b_same``, ``c_same`` (the same operand for every output). ``a4``/``b4``: the rows as
    :func:`emu.decode.quads` (K/4 uint64 each), or of shape (0, 0) to decode them one by one.
    Each task is ``task`` (:func:`_rows_task` for one kernel), the tasks on threads
    (:func:`emu.jit.run_tasks`)."""
    n_ch = -(-out.shape[0] // width)
    args = (a2, b2, a4, b4, c1, flush, a_same, b_same, c_same, width, per, out, prm)
    run_tasks(lambda t0, t1: task(*args, t0, t1), -(-n_ch // per))


def _rows_task(a2, b2, a4, b4, c1, flush, a_same, b_same, c_same, width, per, out, prm, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`_rows_launch`."""
    for task in range(t0, t1):
        _rows_one(a2, b2, a4, b4, c1, flush, a_same, b_same, c_same, width, per, out, prm, task)


def _rows_one(a2, b2, a4, b4, c1, flush, a_same, b_same, c_same, width, per, out, prm, task):
    """Task ``task`` of :func:`_rows_launch`."""
    P, K = out.shape[0], a2.shape[1]
    n_ch = (P + width - 1) // width
    tmp = np.empty((K, TILE), np.uint16)
    tmp4 = np.empty((K // 4, TILE), np.uint64)
    A_full = np.empty((1, K, width), np.float32)
    B_full = np.empty((K, width), np.float32)
    C_full = np.empty((1, 1 if c_same else width), np.float32)
    o_full = np.empty((1, width), np.float32)
    if a_same:  # the same a for every lane of every chunk: decoded once per task
        fill_rows(a2[0], flush, A_full[0])
    if b_same:
        fill_rows(b2[0], flush, B_full)
    for ch in range(task * per, min(n_ch, (task + 1) * per)):
        p0 = ch * width
        w = min(width, P - p0)
        if w == width:
            A, B, C, o = A_full, B_full, C_full, o_full
        else:  # the last, short chunk: buffers of its own (C-ordered, one kernel signature)
            A = np.empty((1, K, w), np.float32)
            B = np.empty((K, w), np.float32)
            C = np.empty((1, 1 if c_same else w), np.float32)
            o = np.empty((1, w), np.float32)
            if a_same:
                fill_rows(a2[0], flush, A[0])
            if b_same:
                fill_rows(b2[0], flush, B)
        if a_same:  # filled above
            pass
        elif a4.shape[0] > 0:
            for q0 in range(0, w, TILE):
                decode_tile4(a4, p0 + q0, min(TILE, w - q0), flush, tmp4, A[0], q0)
        else:
            for q0 in range(0, w, TILE):
                decode_tile(a2, p0 + q0, min(TILE, w - q0), flush, tmp, A[0], q0)
        if b_same:  # filled above
            pass
        elif b4.shape[0] > 0:
            for q0 in range(0, w, TILE):
                decode_tile4(b4, p0 + q0, min(TILE, w - q0), flush, tmp4, B, q0)
        else:
            for q0 in range(0, w, TILE):
                decode_tile(b2, p0 + q0, min(TILE, w - q0), flush, tmp, B, q0)
        if c_same:
            C[0, 0] = c1[0]
        else:
            for i in range(w):
                C[0, i] = c1[p0 + i]
        KERNEL(A, B, C, o, prm, 0, ALL_TASKS)  # noqa: F821  (bound by specialise)
        for i in range(w):
            out[p0 + i] = o[0, i]


def _gemms_launch(task, a3, b3, c3, flush, out, prm):
    """out[g] = KERNEL(a3[g] (M, K), b3[g] (N, K), c3[g]) in the GEMM layout, the batch elements
    in parallel (a3, b3 or c3 of one element when it repeats; c3[g] is (1 or M, 1 or N)); ``task``
    is :func:`_gemms_task` for one kernel."""
    run_tasks(lambda t0, t1: task(a3, b3, c3, flush, out, prm, t0, t1), out.shape[0])


def _gemms_task(a3, b3, c3, flush, out, prm, t0, t1):
    """Elements ``t0`` … ``t1`` − 1 of :func:`_gemms_launch`."""
    for g in range(t0, t1):
        _gemms_one(a3, b3, c3, flush, out, prm, g)


def _gemms_one(a3, b3, c3, flush, out, prm, g):
    """Element ``g`` of :func:`_gemms_launch`."""
    G, M, N = out.shape
    K = a3.shape[2]
    sa = 1 if a3.shape[0] > 1 else 0
    sb = 1 if b3.shape[0] > 1 else 0
    sc = 1 if c3.shape[0] > 1 else 0
    ag = a3[g * sa]
    A = np.empty((M, K), np.float32)
    for m in range(M):
        for k in range(K):
            A[m, k] = fp16_value(ag[m, k], flush)
    B = np.empty((K, N), np.float32)
    tmp = np.empty((K, TILE), np.uint16)
    bg = b3[g * sb]
    for q0 in range(0, N, TILE):
        decode_tile(bg, q0, min(TILE, N - q0), flush, tmp, B, q0)
    o = np.empty((M, N), np.float32)
    KERNEL(A, B, c3[g * sc], o, prm, 0, ALL_TASKS)  # noqa: F821  (bound by specialise)
    for m in range(M):  # element by element: a slice assignment compiles numba's shape-error text
        for n in range(N):
            out[g, m, n] = o[m, n]


_DRIVERS: dict = {}
_PARTS = {"rows": (_rows_launch, _rows_task, _rows_one), "gemms": (_gemms_launch, _gemms_task, _gemms_one)}


def driver(family, kind: str = "rows"):
    """The one-launch driver of ``kind`` ("rows": :func:`_rows_launch`, "gemms": a batch of GEMMs,
    :func:`_gemms_launch`) for ``family``'s kernel (built once per process, cached on disk): its
    task compiled once per kernel, with the family's kernel (:data:`emu.kernels.TASKS`) bound in."""
    if (family, kind) not in _DRIVERS:
        kernel = TASKS[family]
        launch, tasks, one = _PARTS[kind]
        one = specialise(one, f"{kind}_one_{kernel.__name__}", KERNEL=kernel)
        tasks = specialise(tasks, f"{kind}_task_{kernel.__name__}", **{f"_{kind}_one": one})
        _DRIVERS[family, kind] = functools.partial(launch, tasks)
    return _DRIVERS[family, kind]


def rows_driver(family):
    """:func:`driver` of kind "rows"."""
    return driver(family, "rows")


_TINY32 = np.float32(2.0**-126)  # the smallest normal float32
_Q16, _Q32, _Q48 = np.uint64(16), np.uint64(32), np.uint64(48)


def rows_fused(a4, b4, c1, flush, c_same, flush_c, flush_out, pairwise, per, out):
    """The FMA family (``emu.kernels.fma``: c ← RNE32(c + a_k·b_k) for k = 0, 1, …) or, with
    ``pairwise``, the pairwise family with groups of 4 (``emu.kernels.pairwise``: c ← RNE32(c +
    ((a0·b0 + a1·b1) + (a2·b2 + a3·b3))) per group, K a multiple of 4), c flushed to +0 on entry
    with ``flush_c``, the sum flushed keeping its sign after the first product (group) with
    ``flush_out``, on rows given as :func:`emu.decode.quads`, decoded per lane inside the k loop:
    tiles of ``TILE`` rows are transposed four values per load and never stored as float32. The
    same float32 operations in the same order as the kernels (whose docstrings show why their
    other flushes are the identity), so the same bits; only where two NaNs meet in one operation
    may the result's NaN payload differ (which operand's payload wins is the compiler's order)."""
    n_t = -(-out.shape[0] // TILE)
    args = (a4, b4, c1, flush, c_same, flush_c, flush_out, pairwise, per, out)
    run_tasks(lambda t0, t1: _rows_fused_tasks(*args, t0, t1), -(-n_t // per))


@jit
def _rows_fused_tasks(a4, b4, c1, flush, c_same, flush_c, flush_out, pairwise, per, out, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`rows_fused`."""
    for task in range(t0, t1):
        _rows_fused_task(a4, b4, c1, flush, c_same, flush_c, flush_out, pairwise, per, out, task)


@jit
def _rows_fused_task(a4, b4, c1, flush, c_same, flush_c, flush_out, pairwise, per, out, task):
    """Task ``task`` of :func:`rows_fused`."""
    P = out.shape[0]
    K4 = a4.shape[1]
    n_t = (P + TILE - 1) // TILE
    ta = np.empty((K4, TILE), np.uint64)
    tb = np.empty((K4, TILE), np.uint64)
    acc = np.empty(TILE, np.float32)
    for t in range(task * per, min(n_t, (task + 1) * per)):
        p0 = t * TILE
        n = min(TILE, P - p0)
        for i in range(n):
            sa = a4[p0 + i]
            sb = b4[p0 + i]
            for k in range(K4):
                ta[k, i] = sa[k]
                tb[k, i] = sb[k]
        for i in range(n):
            c = c1[0 if c_same else p0 + i]
            acc[i] = (c - c if abs(c) < _TINY32 else c) if flush_c else c
        for k in range(K4):
            ra = ta[k]
            rb = tb[k]
            if pairwise:
                for i in range(n):
                    x = ra[i]
                    y = rb[i]
                    s01 = fp16_value(x, flush) * fp16_value(y, flush) + fp16_value(x >> _Q16, flush) * fp16_value(
                        y >> _Q16, flush
                    )
                    s23 = fp16_value(x >> _Q32, flush) * fp16_value(y >> _Q32, flush) + fp16_value(
                        x >> _Q48, flush
                    ) * fp16_value(y >> _Q48, flush)
                    s = acc[i] + (s01 + s23)
                    if flush_out and k == 0 and abs(s) < _TINY32:
                        s = np.copysign(s - s, s)
                    acc[i] = s
                continue
            for i in range(n):
                x = ra[i]
                y = rb[i]
                s = acc[i] + fp16_value(x, flush) * fp16_value(y, flush)
                if flush_out and k == 0 and abs(s) < _TINY32:
                    s = np.copysign(s - s, s)
                s = s + fp16_value(x >> _Q16, flush) * fp16_value(y >> _Q16, flush)
                s = s + fp16_value(x >> _Q32, flush) * fp16_value(y >> _Q32, flush)
                s = s + fp16_value(x >> _Q48, flush) * fp16_value(y >> _Q48, flush)
                acc[i] = s
        for i in range(n):
            out[p0 + i] = acc[i]
