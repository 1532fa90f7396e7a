"""The gather and scatter kernels: operand tiles read from flat fp16 tensors through an
:class:`emu.conv.indexing.IndexMap` (padding reads +0), results written back (padding dropped),
and the decoding gathers of the in-bounds pass. Parallel over outputs only; each output written
by one iteration."""

from __future__ import annotations

import numpy as np

from ..formats import FP16_TO_FP32, FP16_TO_FP32_FTZ
from ..jit import jit, run_tasks

__all__ = ["gather", "scatter", "taken_decoded", "has_flushable"]

_BLOCK = 2048  # columns per tile
_PARALLEL_MIN = 1 << 16  # elements below which a serial loop beats starting the thread pool


@jit
def _gather_tile(src, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, out, t):
    """Tile t (column block t // n_rows, row t % n_rows; block-major so a block's column indices
    stay in cache across the rows): out[i, j] =
    src[r_off[i] + c_off[j] + h·stride_h + w·stride_w], or 0 where (h, w) is outside the bounds
    (padding). ``src`` and ``out`` hold bit patterns (uint16, or uint32 for fp32 tensors)."""
    i = t % r_off.shape[0]
    j0 = (t // r_off.shape[0]) * _BLOCK
    j1 = min(j0 + _BLOCK, c_off.shape[0])
    ro, rh, rw = r_off[i], r_h[i], r_w[i]
    for j in range(j0, j1):
        h = rh + c_h[j]
        w = rw + c_w[j]
        if 0 <= h < bound_h and 0 <= w < bound_w:
            out[i, j] = src[ro + c_off[j] + h * stride_h + w * stride_w]
        else:
            out[i, j] = 0


@jit
def _scatter_tile(dst, values, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, t):
    """Tile t (as in _gather_tile): dst[r_off[i] + c_off[j] + h·stride_h + w·stride_w] = values[i, j]
    where (h, w) is inside the bounds; elements outside are dropped. Distinct (i, j) address
    distinct elements, so tiles never write the same place."""
    i = t % r_off.shape[0]
    j0 = (t // r_off.shape[0]) * _BLOCK
    j1 = min(j0 + _BLOCK, c_off.shape[0])
    ro, rh, rw = r_off[i], r_h[i], r_w[i]
    for j in range(j0, j1):
        h = rh + c_h[j]
        w = rw + c_w[j]
        if 0 <= h < bound_h and 0 <= w < bound_w:
            dst[ro + c_off[j] + h * stride_h + w * stride_w] = values[i, j]


@jit
def _gather_tasks(src, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, out, t0, t1):
    n_blocks = (c_off.shape[0] + _BLOCK - 1) // _BLOCK
    for t in range(t0, min(t1, r_off.shape[0] * n_blocks)):
        _gather_tile(src, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, out, t)


@jit
def _scatter_tasks(dst, values, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, t0, t1):
    n_blocks = (c_off.shape[0] + _BLOCK - 1) // _BLOCK
    for t in range(t0, min(t1, r_off.shape[0] * n_blocks)):
        _scatter_tile(dst, values, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, t)


@jit
def has_flushable(src):
    """Whether the fp16 patterns ``src`` hold a subnormal or −0 (what an input flush changes);
    one pass, stopping at the first."""
    flat = src.reshape(-1)
    for i in range(flat.size):
        x = flat[i]
        if (x & 0x7C00) == 0 and x != 0:
            return True
    return False


def _take_decoded(src, rows, cols, lut, out):
    """out[i, j] = lut[src[rows[i], cols[j]]]: a sub-matrix of fp16 patterns decoded to float32
    in one pass (the in-bounds products of a backward-weight tap), parallel over out's rows."""
    run_tasks(lambda t0, t1: _take_decoded_tasks(src, rows, cols, lut, out, t0, t1), rows.shape[0])


@jit
def _take_decoded_tasks(src, rows, cols, lut, out, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`_take_decoded`."""
    for i in range(t0, min(t1, rows.shape[0])):
        row = src[rows[i]]
        dst = out[i]
        for j in range(cols.shape[0]):
            dst[j] = lut[row[cols[j]]]


_TAKE_T = 64  # out rows per tile of the transposing gather


def _take_decoded_t(src, rows, cols, lut, out):
    """out[j, i] = lut[src[rows[i], cols[j]]]: the transpose of :func:`_take_decoded`, in tiles
    of 64 out rows so that each source row is read along a short run of ``cols``."""
    run_tasks(lambda t0, t1: _take_decoded_t_tasks(src, rows, cols, lut, out, t0, t1), -(-cols.shape[0] // _TAKE_T))


@jit
def _take_decoded_t_tasks(src, rows, cols, lut, out, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`_take_decoded_t`."""
    n_tiles = (cols.shape[0] + _TAKE_T - 1) // _TAKE_T
    for t in range(t0, min(t1, n_tiles)):
        j0 = t * _TAKE_T
        j1 = min(cols.shape[0], j0 + _TAKE_T)
        for i in range(rows.shape[0]):
            row = src[rows[i]]
            for j in range(j0, j1):
                out[j, i] = lut[row[cols[j]]]


def taken_decoded(src: np.ndarray, rows: np.ndarray, cols: np.ndarray, flush: bool, transpose: bool = False):
    """src[rows][:, cols] decoded to float32 (its transpose with ``transpose``)."""
    lut = FP16_TO_FP32_FTZ if flush else FP16_TO_FP32
    if transpose:
        out = np.empty((cols.size, rows.size), np.float32)
        if out.size:
            _take_decoded_t(src, rows, cols, lut, out)
        return out
    out = np.empty((rows.size, cols.size), np.float32)
    if out.size:
        _take_decoded(src, rows, cols, lut, out)
    return out


def _n_tiles(r, c) -> int:
    """The tiles of :func:`_gather_tasks` and :func:`_scatter_tasks`: every row by blocks of
    ``_BLOCK`` columns (``r``, ``c``: the rows' and columns' offset arrays first)."""
    return r[0].size * -(-c[0].size // _BLOCK)


def gather(src: np.ndarray, m, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
    """Rows and columns [start, stop) of the matrix an :class:`~emu.conv.indexing.IndexMap` ``m``
    lays over the flat patterns ``src`` (uint16 for fp16 and bf16, uint32 for fp32): of
    ``src``'s dtype, C-contiguous, padding +0 (the pattern 0 in every format)."""
    r, c = m.rows.at(*rows), m.cols.at(*cols)
    out = np.empty((r[0].size, c[0].size), dtype=src.dtype)
    if out.size:
        args = (src, *r, *c, m.bound_h, m.bound_w, m.stride_h, m.stride_w, out)
        run_tasks(lambda t0, t1: _gather_tasks(*args, t0, t1), _n_tiles(r, c), out.size >= _PARALLEL_MIN)
    return out


def scatter(dst: np.ndarray, values: np.ndarray, m, cols: tuple[int, int]) -> None:
    """``values`` (all rows; columns [start, stop) of the map ``m``) written into the flat ``dst``;
    elements that fall on padding are dropped."""
    r, c = m.rows.at(0, m.rows.length), m.cols.at(*cols)
    if values.size:
        args = (dst, values, *r, *c, m.bound_h, m.bound_w, m.stride_h, m.stride_w)
        run_tasks(lambda t0, t1: _scatter_tasks(*args, t0, t1), _n_tiles(r, c), values.size >= _PARALLEL_MIN)
