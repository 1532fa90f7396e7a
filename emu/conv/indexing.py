"""Index arithmetic: where each element of a sub-GEMM's A, B and C lives in the flat tensors
(padding and the bwd-data tilda offsets included), the in-bounds products of a backward-weight
filter tap, and the numbering of output tiles."""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from .geometry import ConvProblem, SubGemm, tilda_axes

__all__ = ["Axis", "IndexMap", "index_maps", "bwd_weight_taps", "tile_count", "tile_numbers"]


class Axis(NamedTuple):
    """A merged GEMM dimension. Its index runs over the digits ``sizes`` (outermost first); digit
    values d_i place an element at (offset, h, w) = const + Σ d_i·coef_i."""

    sizes: tuple[int, ...]
    coef: tuple[tuple[int, int, int], ...]
    const: tuple[int, int, int] = (0, 0, 0)

    @property
    def length(self) -> int:
        return math.prod(self.sizes)

    def at(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offset, h, w) of indices start … stop−1, as int64 arrays."""
        rest = np.arange(start, stop, dtype=np.int64)
        out = [np.full(rest.shape, c, dtype=np.int64) for c in self.const]
        for size, coef in zip(reversed(self.sizes), reversed(self.coef)):
            digit = rest % size
            rest //= size
            for arr, c in zip(out, coef):
                if c:
                    arr += digit * c
        return out[0], out[1], out[2]


class IndexMap(NamedTuple):
    """Where matrix element (i, j) lives in a flat tensor: at offset r_off[i] + c_off[j] +
    h·stride_h + w·stride_w with h = r_h[i] + c_h[j], w = r_w[i] + c_w[j]; when h ∉ [0, bound_h)
    or w ∉ [0, bound_w) it is padding (reads +0, writes are dropped)."""

    rows: Axis
    cols: Axis
    bound_h: int = 1
    bound_w: int = 1
    stride_h: int = 0
    stride_w: int = 0


def _channel_axis(size: int, stride: int, const: int) -> Axis:
    return Axis((size,), ((stride, 0, 0),), (const, 0, 0))


def index_maps(problem: ConvProblem, sub: SubGemm, group: int) -> tuple[IndexMap, IndexMap, IndexMap]:
    """The maps of A, B (onto the direction's operand tensors) and C (onto the result)."""
    p = problem
    fs, ins, outs = p.strides("filter"), p.strides("input"), p.strides("output")
    fsz = p.letter_sizes("filter")
    (dil_h, dil_w), (str_h, str_w) = p.dilation, p.stride
    pad_t, pad_l = p.pad_h[0], p.pad_w[0]
    cg, kg = p.c // p.groups, p.k // p.groups
    nhw_out = (p.n, p.out_h, p.out_w)
    cyx = p.filter_cyx_order
    cyx_sizes = tuple(fsz[d] for d in cyx)
    # (c, y, x) digits: offset in the filter; and offset/h/w in the input (y, x move h, w).
    cyx_fil = tuple((fs[d], 0, 0) for d in cyx)
    cyx_in = tuple({"c": (ins["c"], 0, 0), "y": (0, dil_h, 0), "x": (0, 0, dil_w)}[d] for d in cyx)
    # (n, ho, wo) digits: offset in the output; offset/h/w of the input window's corner.
    nhw_outoff = ((outs["n"], 0, 0), (outs["h"], 0, 0), (outs["w"], 0, 0))
    nhw_in = ((ins["n"], 0, 0), (0, str_h, 0), (0, 0, str_w))
    in_bounds = (p.h, p.w, ins["h"], ins["w"])
    g_f, g_i, g_o = group * fs["g"], group * ins["g"], group * outs["g"]

    if p.direction == "fwd":
        a = IndexMap(_channel_axis(kg, fs["k"], g_f), Axis(cyx_sizes, cyx_fil))
        b = IndexMap(Axis(cyx_sizes, cyx_in), Axis(nhw_out, nhw_in, (g_i, -pad_t, -pad_l)), *in_bounds)
        c = IndexMap(_channel_axis(kg, outs["k"], g_o), Axis(nhw_out, nhw_outoff))
        return a, b, c
    if p.direction == "bwd_weight":
        a = IndexMap(_channel_axis(kg, outs["k"], g_o), Axis(nhw_out, nhw_outoff))
        b = IndexMap(Axis(nhw_out, nhw_in, (g_i, -pad_t, -pad_l)), Axis(cyx_sizes, cyx_in), *in_bounds)
        c = IndexMap(_channel_axis(kg, fs["k"], g_f), Axis(cyx_sizes, cyx_fil))
        return a, b, c
    # bwd_data, sub-GEMM (iYTilda, iXTilda): see :mod:`emu.conv` for the index formulas.
    th, tw = tilda_axes(p)
    i_y, i_x = sub.i_ytilda, sub.i_xtilda
    kyx_sizes = (kg, sub.y_dot_slice, sub.x_dot_slice)
    nhw_tilda = (p.n, th.slice, tw.slice)
    a = IndexMap(
        _channel_axis(cg, fs["c"], g_f + i_y * fs["y"] + i_x * fs["x"]),
        Axis(kyx_sizes, ((fs["k"], 0, 0), (th.tilda * fs["y"], 0, 0), (tw.tilda * fs["x"], 0, 0))),
    )
    b = IndexMap(
        Axis(kyx_sizes, ((outs["k"], 0, 0), (0, -th.step, 0), (0, 0, -tw.step)), (g_o, 0, 0)),
        Axis(nhw_tilda, ((outs["n"], 0, 0), (0, 1, 0), (0, 0, 1)), (0, th.left, tw.left)),
        p.out_h,
        p.out_w,
        outs["h"],
        outs["w"],
    )
    c = IndexMap(
        _channel_axis(cg, ins["c"], g_i),
        Axis(
            nhw_tilda,
            ((ins["n"], 0, 0), (0, str_h, 0), (0, 0, str_w)),
            (0, i_y * dil_h + th.left * str_h - pad_t, i_x * dil_w + tw.left * str_w - pad_l),
        ),
        *in_bounds,
    )
    return a, b, c


def bwd_weight_taps(problem: ConvProblem, k: int, start: int, stop: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Backward weight: gemmN columns start … stop−1 grouped by filter tap (y, x), each with the
    gemmK indices (n, ho, wo) whose input pixel lies inside the image, i.e. the products a loop
    that skips out-of-bounds positions adds; ``k`` is the sub-GEMM's gemmK."""
    if problem.direction != "bwd_weight":
        raise ValueError(f"in-bounds taps are defined for bwd_weight only, not {problem.direction}")
    order = tuple(problem.gemm_n_order)
    sizes = {"c": problem.c // problem.groups, "y": problem.y, "x": problem.x}
    digits = np.unravel_index(np.arange(start, stop), [sizes[d] for d in order])
    ys, xs = digits[order.index("y")], digits[order.index("x")]
    groups = []
    for y, x in sorted(set(zip(ys.tolist(), xs.tolist()))):
        cols = np.nonzero((ys == y) & (xs == x))[0]
        groups.append((cols, _tap_inbounds_k(problem, k, y, x)))
    return groups


@functools.lru_cache(maxsize=64)
def _tap_inbounds_k(problem: ConvProblem, k: int, y: int, x: int) -> np.ndarray:
    kd = tuple(problem.gemm_k_order)
    ksz = {"n": problem.n, "ho": problem.out_h, "wo": problem.out_w}
    kdig = np.unravel_index(np.arange(k), [ksz[d] for d in kd])
    ho, wo = kdig[kd.index("ho")], kdig[kd.index("wo")]
    hi = ho * problem.stride[0] + y * problem.dilation[0] - problem.pad_h[0]
    wi = wo * problem.stride[1] + x * problem.dilation[1] - problem.pad_w[0]
    return np.nonzero((hi >= 0) & (hi < problem.h) & (wi >= 0) & (wi < problem.w))[0]


def tile_count(m: int, n: int, tile: tuple[int, int]) -> int:
    """Tiles of (m_tile, n_tile) ``tile`` over an m × n GEMM (edge tiles partial)."""
    m_tile, n_tile = tile
    return -(-m // m_tile) * -(-n // n_tile)


def tile_numbers(m: int, n: int, tile: tuple[int, int], base: int = 0) -> np.ndarray:
    """Per element of an m × n GEMM (int64, m × n), its (m_tile, n_tile) tile: ``base`` plus the
    tile's row-major place in the tile grid."""
    m_tile, n_tile = tile
    n_tiles = -(-n // n_tile)
    return base + (np.arange(m) // m_tile)[:, None] * n_tiles + (np.arange(n) // n_tile)[None, :]
