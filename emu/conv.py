"""Convolution problems and their mapping to GEMM (implicit GEMM), for every direction and layout.

The mapping is rocMLIR's ``ConvToGemm`` of mid-2022 (github.com/ROCm/rocMLIR, Rock version
@3df931f1, ``ConvToGemm.cpp`` and ``GridwiseGemmParams.cpp``). Each GEMM computes, per group g,
``C[m, n] = Σ_k A[m, k]·B[k, n]`` with k running in the kernel's *gemmK order*:

* fwd:        A = filter k × (c,y,x);      B = input (c,y,x) × (n,ho,wo);   C → output (k; n,ho,wo)
* bwd_weight: A = dy k × (n,ho,wo);        B = input (n,ho,wo) × (c,y,x);   C → filter (k; c,y,x)
* bwd_data:   A = filter c × (k,ydot,xdot); B = dy (k,ydot,xdot) × (n,ht,wt); C → dx (c; n,hi,wi)

where (c,y,x) stands for the filter layout's own order of its c, y, x letters (c,y,x for kcyx,
y,x,c for kyxc and yxck), on both operands. M = K/G, K/G, C/G: the channel counts of one group.
(ConvToGemm.cpp merges the input side's c, y, x in the *input* layout's order; for a filter and an
input layout that disagree, e.g. kyxc with nchw, the real kernel would then pair mismatched
elements: inferred from the code, not observed. This module computes the true convolution in the
filter's order; compare :attr:`ConvProblem.input_cyx_order` to spot such problems.)
Split-K for backward weight (KBlocks) cuts gemmK = (n, ho, wo) into KBlocks contiguous ranges of
(N/KBlocks)·Ho·Wo; that, like the accumulation order, is the ``gemm`` callable's business.

**Backward data** runs yTilda·xTilda sub-GEMMs, yTilda = strideH / gcd(strideH, dilationH) (same
for x), indexed by gemmId = iYTilda·xTilda + iXTilda; a sub-GEMM with yDotSlice·xDotSlice = 0 is
not run. With yDot = ⌈Y/yTilda⌉, hTilda = Ho + ⌈dilationH·(Y−1)/strideH⌉,
iHTildaLeft = ⌊max(0, padH_left − dilationH·(yTilda−1)) / strideH⌋,
iHTildaRight = min(hTilda, ⌈(padH_left + Hi − 1)/strideH⌉ + 1) and
yDotSlice = ⌈(Y − iYTilda)/yTilda⌉, sub-GEMM (iYTilda, iXTilda) has gemmK = (K/G)·yDotSlice·xDotSlice
in (k, ydot, xdot) order and gemmN = N·hTildaSlice·wTildaSlice in (n, htilda, wtilda) order, and
multiplies

* the filter at y = ydot·yTilda + iYTilda,
* dy at ho = htilda − ydot·(dilationH / gcd) (zero outside [0, Ho)),

into dx at hi = iYTilda·dilationH + htilda·strideH − padH_left (dropped outside [0, Hi)).
Pixels of dx that no sub-GEMM writes are +0 (the zero-init kernel).

**Zero padding**: an input position outside the tensor reads +0.0 (fp16 0x0000); the product
stays in the gemmK sequence, as the kernel multiplies it.

**Layouts and tensor shapes.** A layout is a string of dimension letters in memory order,
outermost first: input over {n, g, c, h, w}, filter over {g, k, c, y, x}, output over
{n, g, k, h, w}. A 5-letter layout gives letter sizes g = G, c = C/G, k = K/G (input and output
h, w are H, W and Ho, Wo; filter y, x are Y, X). A 4-letter layout gets its g as miopen-gen
did in 2022 (``correctParameters``): nchw → ngchw, nhwc → nhwgc, nkhw → ngkhw, nhwk → nhwgk, and
any other layout L → gL (kcyx → gkcyx, kyxc → gkyxc, yxck → gyxck, chwn → gchwn). An array for a
4-letter layout has the shape of its letters with the g folded into the channel letter it
precedes (input c = C, output k = K, filter k = K; the filter's c is always C/G), e.g.
kcyx → (K, C/G, Y, X), nhwc → (N, H, W, C), chwn → (C, H, W, N). Where the rule puts g outermost
but not next to a channel letter (yxck, hwcn, … with G > 1) no 4-D shape describes the memory, and
the tensor's shape is the 5-D one of the normalised layout (:meth:`ConvProblem.tensor_shape`).
Every function also takes the normalised layout's 5-D shape, or flat 1-D arrays of the right size
in memory order. Results come back in :meth:`ConvProblem.tensor_shape` of the written tensor.

Public API: :class:`ConvProblem`, :func:`normalize_layout`, :func:`sub_gemms`, :func:`gemm_sizes`,
:class:`ConvGemm` (gathered operands per group, sub-GEMM and gemmN chunk, for reuse; its
:meth:`ConvGemm.compute` runs many kernel models in one pass over them), :class:`ConvArithmetic`
(what one model needs), :func:`bwd_weight_taps` (the in-bounds products of each filter tap),
:func:`gemm_operands`, :func:`conv`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .atomics import SplitPartials
from .dot import unit_params
from .formats import FP16_TO_FP32, FP16_TO_FP32_FTZ
from .gemm import GemmOrder, gemm_decoded, operand_in_order
from .gemm import gemm as _unit_gemm
from .jit import jit, prange

__all__ = [
    "DIRECTIONS",
    "ConvProblem",
    "SubGemm",
    "ConvGemm",
    "ConvArithmetic",
    "bwd_weight_taps",
    "normalize_layout",
    "sub_gemms",
    "gemm_sizes",
    "gemm_operands",
    "conv",
]

DIRECTIONS = ("fwd", "bwd_data", "bwd_weight")

#: The three tensors and the letters of their normalised (5-letter) layouts.
_LETTERS = {"input": "ngchw", "filter": "gkcyx", "output": "ngkhw"}
#: The layout fields of ConvProblem, per tensor.
_FIELD = {"input": "in_layout", "filter": "fil_layout", "output": "out_layout"}
#: miopen-gen 2022 ``correctParameters``: the 4-letter layouts whose g goes next to the channel.
_G_INSERTED = {"nchw": "ngchw", "nhwc": "nhwgc", "nkhw": "ngkhw", "nhwk": "nhwgk"}
#: The tensor each direction writes, and the two it reads (A's source first).
_RESULT = {"fwd": "output", "bwd_data": "input", "bwd_weight": "filter"}
_OPERANDS = {"fwd": ("filter", "input"), "bwd_data": ("filter", "output"), "bwd_weight": ("output", "input")}

#: Default bytes of one gemmN chunk's B (fp16) plus C (fp32) in :func:`conv`.
CHUNK_BYTES = 64 * 2**20
#: decoded A operands kept across a group's gemmN chunks (one per gemmK order and flush setting)
#: while they take no more than this; beyond it A is decoded again for each chunk
DECODED_A_BYTES = 256 * 2**20


def normalize_layout(layout: str, role: str) -> str:
    """The 5-letter layout (with g) of a tensor's layout string, as miopen-gen (2022) made it.

    ``role`` is "input", "filter" or "output". A layout with g is returned unchanged; see the module
    docstring for the rule that inserts a missing g.
    """
    letters = _LETTERS[role]
    if len(layout) == 5:
        if sorted(layout) != sorted(letters):
            raise ValueError(f"{role} layout {layout!r}: expected a permutation of {letters!r}")
        return layout
    if len(layout) != 4 or sorted(layout) != sorted(letters.replace("g", "")):
        raise ValueError(f"{role} layout {layout!r}: expected a permutation of {letters!r}, with or without g")
    return _G_INSERTED.get(layout, "g" + layout)


@dataclass(frozen=True)
class ConvProblem:
    """A 2-D convolution. ``c`` and ``k`` are the total channel counts (each group has c/groups and
    k/groups). Layouts are strings of dimension letters in memory order, outermost first:
    input over {n, g, c, h, w}, filter over {g, k, c, y, x}, output over {n, g, k, h, w}; a layout
    without ``g`` gets one as miopen-gen (2022) inserted it (:func:`normalize_layout`): next to the
    channel letter for nchw, nhwc, nkhw, nhwk, outermost otherwise (which for kcyx, kyxc, chwn …
    is g folded outermost into the channel letter). ``pad_h``/``pad_w`` are (before, after).

    For every direction, "input" is x (or dx), "output" is y (or dy) and ``h``, ``w`` are the
    input's sizes; the output's are :attr:`out_h`, :attr:`out_w`."""

    direction: str
    n: int
    c: int
    h: int
    w: int
    k: int
    y: int
    x: int
    groups: int = 1
    pad_h: tuple[int, int] = (0, 0)
    pad_w: tuple[int, int] = (0, 0)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    in_layout: str = "nchw"
    fil_layout: str = "kcyx"
    out_layout: str = "nkhw"

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction: expected one of {DIRECTIONS}, got {self.direction!r}")
        for name in ("n", "c", "h", "w", "k", "y", "x", "groups"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be ≥ 1, got {getattr(self, name)}")
        if self.c % self.groups or self.k % self.groups:
            raise ValueError(f"groups {self.groups} must divide c {self.c} and k {self.k}")
        for name in ("pad_h", "pad_w", "stride", "dilation"):
            pair = getattr(self, name)
            low = 1 if name in ("stride", "dilation") else 0
            if len(pair) != 2 or min(pair) < low:
                raise ValueError(f"{name}: expected two integers ≥ {low}, got {pair!r}")
        for role in _LETTERS:
            normalize_layout(getattr(self, _FIELD[role]), role)
        if self.out_h < 1 or self.out_w < 1:
            raise ValueError(f"empty output: {self.out_h}×{self.out_w}")

    @property
    def out_h(self) -> int:
        return (self.h + self.pad_h[0] + self.pad_h[1] - self.dilation[0] * (self.y - 1) - 1) // self.stride[0] + 1

    @property
    def out_w(self) -> int:
        return (self.w + self.pad_w[0] + self.pad_w[1] - self.dilation[1] * (self.x - 1) - 1) // self.stride[1] + 1

    # --- layouts and shapes -------------------------------------------------------------------

    def layout(self, role: str) -> str:
        """The layout string of "input", "filter" or "output", as given."""
        return getattr(self, _FIELD[role])

    def layout5(self, role: str) -> str:
        """The normalised 5-letter layout of "input", "filter" or "output"."""
        return normalize_layout(self.layout(role), role)

    def letter_sizes(self, role: str) -> dict[str, int]:
        """Size of each letter of the normalised layout (g = G, channels per group)."""
        g = self.groups
        if role == "input":
            return {"n": self.n, "g": g, "c": self.c // g, "h": self.h, "w": self.w}
        if role == "filter":
            return {"g": g, "k": self.k // g, "c": self.c // g, "y": self.y, "x": self.x}
        return {"n": self.n, "g": g, "k": self.k // g, "h": self.out_h, "w": self.out_w}

    def strides(self, role: str) -> dict[str, int]:
        """Element stride of each letter of the normalised layout, in memory."""
        sizes, stride, out = self.letter_sizes(role), 1, {}
        for letter in reversed(self.layout5(role)):
            out[letter] = stride
            stride *= sizes[letter]
        return out

    def tensor_size(self, role: str) -> int:
        return math.prod(self.letter_sizes(role).values())

    def tensor_shape(self, role: str) -> tuple[int, ...]:
        """The array shape of a tensor: its layout's letters as given (module docstring)."""
        sizes, given, full = self.letter_sizes(role), self.layout(role), self.layout5(role)
        if len(given) == 5:
            return tuple(sizes[d] for d in given)
        channel = "c" if role == "input" else "k"
        if self.groups == 1 or full.replace("g" + channel, channel) == given:
            return tuple(sizes[d] * (self.groups if d == channel else 1) for d in given)
        return tuple(sizes[d] for d in full)

    @property
    def result_role(self) -> str:
        """The tensor this direction writes: "output" (fwd), "input" (bwd_data), "filter"."""
        return _RESULT[self.direction]

    # --- GEMM orders --------------------------------------------------------------------------

    @property
    def filter_cyx_order(self) -> tuple[str, ...]:
        """The filter layout's order of its c, y, x letters."""
        return tuple(d for d in self.fil_layout if d in "cyx")

    @property
    def gemm_k_order(self) -> tuple[str, ...]:
        """The digits of gemmK, outermost first: ("c","y","x") / ("y","x","c") for fwd (filter
        order), ("n","ho","wo") for bwd_weight, ("k","ydot","xdot") for bwd_data."""
        if self.direction == "fwd":
            return self.filter_cyx_order
        if self.direction == "bwd_weight":
            return ("n", "ho", "wo")
        return ("k", "ydot", "xdot")

    @property
    def gemm_n_order(self) -> tuple[str, ...]:
        """The digits of gemmN, outermost first."""
        if self.direction == "fwd":
            return ("n", "ho", "wo")
        if self.direction == "bwd_weight":
            return self.filter_cyx_order
        return ("n", "htilda", "wtilda")

    @property
    def input_cyx_order(self) -> tuple[str, ...]:
        """The order rocMLIR merges the input side's c, y, x in (by the input layout's c, h, w).
        The real kernel is only a convolution when this equals :attr:`filter_cyx_order`; this
        module always pairs them in the filter's order (the mathematically right convolution)."""
        return tuple({"c": "c", "h": "y", "w": "x"}[d] for d in self.in_layout if d in "chw")


class _TildaAxis(NamedTuple):
    """Backward data, one spatial axis (h or w): rocMLIR ConvToGemm.cpp ``backwardData``."""

    tilda: int  #: yTilda = stride / gcd(stride, dilation)
    dot: int  #: yDot = ⌈Y / yTilda⌉
    size: int  #: hTilda = Ho + ⌈dilation·(Y−1) / stride⌉
    left: int  #: iHTildaLeft
    right: int  #: iHTildaRight
    step: int  #: dilation / gcd: ho = htilda − ydot·step

    @property
    def slice(self) -> int:
        return max(0, self.right - self.left)

    def dot_slice(self, i_tilda: int, fil: int) -> int:
        """yDotSlice = ⌈(Y − iYTilda) / yTilda⌉ (0 when iYTilda ≥ Y)."""
        return max(0, -(-(fil - i_tilda) // self.tilda))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _tilda_axis(stride: int, dilation: int, fil: int, out: int, inp: int, pad_left: int) -> _TildaAxis:
    gcd = math.gcd(stride, dilation)
    tilda = stride // gcd
    size = out + _ceil_div(dilation * (fil - 1), stride)
    left = max(0, pad_left - dilation * (tilda - 1)) // stride
    right = min(size, _ceil_div(pad_left + inp - 1, stride) + 1)
    return _TildaAxis(tilda, _ceil_div(fil, tilda), size, left, right, dilation // gcd)


def _tilda(problem: ConvProblem) -> tuple[_TildaAxis, _TildaAxis]:
    p = problem
    th = _tilda_axis(p.stride[0], p.dilation[0], p.y, p.out_h, p.h, p.pad_h[0])
    tw = _tilda_axis(p.stride[1], p.dilation[1], p.x, p.out_w, p.w, p.pad_w[0])
    return th, tw


class SubGemm(NamedTuple):
    """One GEMM of a convolution (per group; G of them run side by side as gemmG)."""

    gemm_id: int  #: rocMLIR's gemm_id (bwd_data: iYTilda·xTilda + iXTilda; else 0)
    g: int  #: gemmG = groups
    m: int
    n: int
    k: int
    i_ytilda: int = 0
    i_xtilda: int = 0
    y_dot_slice: int = 0  #: bwd_data only
    x_dot_slice: int = 0  #: bwd_data only


def sub_gemms(problem: ConvProblem) -> list[SubGemm]:
    """The GEMMs a direction runs: one for fwd and bwd_weight; for bwd_data the sub-GEMMs with
    yDotSlice·xDotSlice > 0, in ascending gemm_id."""
    p, gr = problem, problem.groups
    if p.direction == "fwd":
        return [SubGemm(0, gr, p.k // gr, p.n * p.out_h * p.out_w, (p.c // gr) * p.y * p.x)]
    if p.direction == "bwd_weight":
        return [SubGemm(0, gr, p.k // gr, (p.c // gr) * p.y * p.x, p.n * p.out_h * p.out_w)]
    th, tw = _tilda(p)
    subs = []
    # yDotSlice = 0 for iYTilda ≥ Y: only min(yTilda, Y)·min(xTilda, X) sub-GEMMs can run, so the
    # loop never grows with a stride that selects nothing (ascending gemm_id all the same)
    for i_y in range(min(th.tilda, p.y)):
        for i_x in range(min(tw.tilda, p.x)):
            y_dot, x_dot = th.dot_slice(i_y, p.y), tw.dot_slice(i_x, p.x)
            if y_dot * x_dot > 0:
                n = p.n * th.slice * tw.slice
                gemm_id = i_y * tw.tilda + i_x
                subs.append(SubGemm(gemm_id, gr, p.c // gr, n, (p.k // gr) * y_dot * x_dot, i_y, i_x, y_dot, x_dot))
    return subs


def gemm_sizes(problem: ConvProblem) -> list[tuple[int, int, int, int]]:
    """(gemmG, gemmM, gemmN, gemmK) of each GEMM the direction runs (:func:`sub_gemms`)."""
    return [(s.g, s.m, s.n, s.k) for s in sub_gemms(problem)]


# --- index maps ---------------------------------------------------------------------------------


class _Axis(NamedTuple):
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


class _Map(NamedTuple):
    """Where matrix element (i, j) lives in a flat tensor: at offset r_off[i] + c_off[j] +
    h·stride_h + w·stride_w with h = r_h[i] + c_h[j], w = r_w[i] + c_w[j]; when h ∉ [0, bound_h)
    or w ∉ [0, bound_w) it is padding (reads +0, writes are dropped)."""

    rows: _Axis
    cols: _Axis
    bound_h: int = 1
    bound_w: int = 1
    stride_h: int = 0
    stride_w: int = 0


def _channel_axis(size: int, stride: int, const: int) -> _Axis:
    return _Axis((size,), ((stride, 0, 0),), (const, 0, 0))


def _maps(problem: ConvProblem, sub: SubGemm, group: int) -> tuple[_Map, _Map, _Map]:
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
        a = _Map(_channel_axis(kg, fs["k"], g_f), _Axis(cyx_sizes, cyx_fil))
        b = _Map(_Axis(cyx_sizes, cyx_in), _Axis(nhw_out, nhw_in, (g_i, -pad_t, -pad_l)), *in_bounds)
        c = _Map(_channel_axis(kg, outs["k"], g_o), _Axis(nhw_out, nhw_outoff))
        return a, b, c
    if p.direction == "bwd_weight":
        a = _Map(_channel_axis(kg, outs["k"], g_o), _Axis(nhw_out, nhw_outoff))
        b = _Map(_Axis(nhw_out, nhw_in, (g_i, -pad_t, -pad_l)), _Axis(cyx_sizes, cyx_in), *in_bounds)
        c = _Map(_channel_axis(kg, fs["k"], g_f), _Axis(cyx_sizes, cyx_fil))
        return a, b, c
    # bwd_data, sub-GEMM (iYTilda, iXTilda): see the module docstring for the index formulas.
    th, tw = _tilda(p)
    i_y, i_x = sub.i_ytilda, sub.i_xtilda
    kyx_sizes = (kg, sub.y_dot_slice, sub.x_dot_slice)
    nhw_tilda = (p.n, th.slice, tw.slice)
    a = _Map(
        _channel_axis(cg, fs["c"], g_f + i_y * fs["y"] + i_x * fs["x"]),
        _Axis(kyx_sizes, ((fs["k"], 0, 0), (th.tilda * fs["y"], 0, 0), (tw.tilda * fs["x"], 0, 0))),
    )
    b = _Map(
        _Axis(kyx_sizes, ((outs["k"], 0, 0), (0, -th.step, 0), (0, 0, -tw.step)), (g_o, 0, 0)),
        _Axis(nhw_tilda, ((outs["n"], 0, 0), (0, 1, 0), (0, 0, 1)), (0, th.left, tw.left)),
        p.out_h,
        p.out_w,
        outs["h"],
        outs["w"],
    )
    c = _Map(
        _channel_axis(cg, ins["c"], g_i),
        _Axis(
            nhw_tilda,
            ((ins["n"], 0, 0), (0, str_h, 0), (0, 0, str_w)),
            (0, i_y * dil_h + th.left * str_h - pad_t, i_x * dil_w + tw.left * str_w - pad_l),
        ),
        *in_bounds,
    )
    return a, b, c


# --- kernels -------------------------------------------------------------------------------------

_BLOCK = 2048  # columns per tile
_PARALLEL_MIN = 1 << 16  # elements below which a serial loop beats starting the thread pool


@jit
def _gather_tile(src, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, out, t):
    """Tile t (column block t // n_rows, row t % n_rows; block-major so a block's column indices
    stay in cache across the rows): out[i, j] =
    src[r_off[i] + c_off[j] + h·stride_h + w·stride_w], or 0 where (h, w) is outside the bounds
    (padding). ``src`` and ``out`` hold fp16 bit patterns (uint16)."""
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


@jit(parallel=True)
def _gather_parallel(src, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, out):
    n_blocks = (c_off.shape[0] + _BLOCK - 1) // _BLOCK
    for t in prange(r_off.shape[0] * n_blocks):
        _gather_tile(src, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, out, t)


@jit
def _gather_serial(src, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, out):
    n_blocks = (c_off.shape[0] + _BLOCK - 1) // _BLOCK
    for t in range(r_off.shape[0] * n_blocks):
        _gather_tile(src, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, out, t)


@jit(parallel=True)
def _scatter_parallel(dst, values, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w):
    n_blocks = (c_off.shape[0] + _BLOCK - 1) // _BLOCK
    for t in prange(r_off.shape[0] * n_blocks):
        _scatter_tile(dst, values, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, t)


@jit
def _scatter_serial(dst, values, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w):
    n_blocks = (c_off.shape[0] + _BLOCK - 1) // _BLOCK
    for t in range(r_off.shape[0] * n_blocks):
        _scatter_tile(dst, values, r_off, r_h, r_w, c_off, c_h, c_w, bound_h, bound_w, stride_h, stride_w, t)


@jit
def _has_flushable(src):
    """Whether the fp16 patterns ``src`` hold a subnormal or −0 (what an input flush changes);
    one pass, stopping at the first."""
    flat = src.reshape(-1)
    for i in range(flat.size):
        x = flat[i]
        if (x & 0x7C00) == 0 and x != 0:
            return True
    return False


@jit(parallel=True)
def _take_decoded(src, rows, cols, lut, out):
    """out[i, j] = lut[src[rows[i], cols[j]]]: a sub-matrix of fp16 patterns decoded to float32
    in one pass (the in-bounds products of a backward-weight tap), parallel over out's rows."""
    for i in prange(rows.shape[0]):
        row = src[rows[i]]
        dst = out[i]
        for j in range(cols.shape[0]):
            dst[j] = lut[row[cols[j]]]


_TAKE_T = 64  # out rows per tile of the transposing gather


@jit(parallel=True)
def _take_decoded_t(src, rows, cols, lut, out):
    """out[j, i] = lut[src[rows[i], cols[j]]]: the transpose of :func:`_take_decoded`, in tiles
    of 64 out rows so that each source row is read along a short run of ``cols``."""
    n_tiles = (cols.shape[0] + _TAKE_T - 1) // _TAKE_T
    for t in prange(n_tiles):
        j0 = t * _TAKE_T
        j1 = min(cols.shape[0], j0 + _TAKE_T)
        for i in range(rows.shape[0]):
            row = src[rows[i]]
            for j in range(j0, j1):
                out[j, i] = lut[row[cols[j]]]


def _taken_decoded(src: np.ndarray, rows: np.ndarray, cols: np.ndarray, flush: bool, transpose: bool = False):
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


def _gather(src: np.ndarray, m: _Map, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
    r, c = m.rows.at(*rows), m.cols.at(*cols)
    out = np.empty((r[0].size, c[0].size), dtype=np.uint16)
    if out.size:
        kernel = _gather_parallel if out.size >= _PARALLEL_MIN else _gather_serial
        kernel(src, *r, *c, m.bound_h, m.bound_w, m.stride_h, m.stride_w, out)
    return out.view(np.float16)


def _scatter(dst: np.ndarray, values: np.ndarray, m: _Map, cols: tuple[int, int]) -> None:
    r, c = m.rows.at(0, m.rows.length), m.cols.at(*cols)
    if values.size:
        kernel = _scatter_parallel if values.size >= _PARALLEL_MIN else _scatter_serial
        kernel(dst, values, *r, *c, m.bound_h, m.bound_w, m.stride_h, m.stride_w)


# --- public API ------------------------------------------------------------------------------------


def _tensor_bits(problem: ConvProblem, role: str, arr, name: str) -> np.ndarray:
    """Flat uint16 bits of a tensor given as float16 values or uint16 patterns (module docstring
    for the accepted shapes)."""
    if arr is None:
        raise ValueError(f"{name}: the {problem.direction} convolution needs the {role} tensor")
    arr = np.asarray(arr)
    if arr.dtype == np.float16:
        arr = arr.view(np.uint16)
    elif arr.dtype != np.uint16:
        raise TypeError(f"{name}: expected float16 values or uint16 bit patterns, got dtype {arr.dtype}")
    shapes = {(problem.tensor_size(role),), problem.tensor_shape(role)}
    shapes.add(tuple(problem.letter_sizes(role)[d] for d in problem.layout5(role)))
    if arr.shape not in shapes:
        raise ValueError(
            f"{name}: shape {arr.shape} does not fit the {role} layout {problem.layout(role)!r}; "
            f"expected {problem.tensor_shape(role)} or flat ({problem.tensor_size(role)},)"
        )
    return np.ascontiguousarray(arr).reshape(-1)


#: Bytes of B (fp16 gemmK × gemmN) gathered at once by the in-bounds pass: wider than the usual
#: chunks, so each filter tap's A columns are gathered once and not once per chunk it spans.
INBOUNDS_B_BYTES = 1 << 30


class ConvArithmetic(NamedTuple):
    """What :meth:`ConvGemm.compute` needs of one kernel model, per sub-GEMM of
    :func:`sub_gemms`: the unit (an ``emu.UnitParams`` or anything with ``params``) and the
    :class:`emu.gemm.GemmOrder`.

    ``inbounds_only``: add only the products whose input pixel lies inside the image, in the
    order's sequence (backward weight's CPU loops skip out-of-bounds taps; a grouped unit then
    counts only those products into its groups). ``keep_partials``: keep split-K partial sums
    apart (:class:`emu.atomics.SplitPartials`, for atomic add orders), with ``tiles`` giving each
    sub-GEMM's output tile (m_per_block, n_per_block) for orders keyed per tile, and ``seed``
    the order generator's seed. ``operands``: None, or ``operands(sub, group, n_start, a, b)``
    returning the (A, B) this model's GEMM uses in place of the gathered chunk (fault injection:
    a kernel that reads the wrong operands; shared passes only, A and B not modified in place)."""

    units: tuple
    orders: tuple
    inbounds_only: bool = False
    keep_partials: bool = False
    tiles: tuple | None = None
    seed: int = 0
    operands: Callable | None = None


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


class ConvGemm:
    """A convolution's GEMMs over given tensors: gathers A and chunks of B, scatters C.

    ``x`` (input), ``w`` (filter), ``dy`` (output) as float16 or uint16 arrays; only the two the
    direction reads are needed (fwd: x, w; bwd_data: w, dy; bwd_weight: x, dy). Gathered
    operands are float16, C-contiguous, with k along A's rows and down B's columns in the gemmK
    order of :attr:`ConvProblem.gemm_k_order`; gemmN columns run in
    :attr:`ConvProblem.gemm_n_order`.
    """

    def __init__(self, problem: ConvProblem, x=None, w=None, dy=None):
        self.problem = problem
        self.subs = sub_gemms(problem)
        given = {"input": (x, "x"), "filter": (w, "w"), "output": (dy, "dy")}
        a_role, b_role = _OPERANDS[problem.direction]
        self._a_src = _tensor_bits(problem, a_role, *given[a_role])
        self._b_src = _tensor_bits(problem, b_role, *given[b_role])
        self._maps_cache: dict[tuple[int, int], tuple[_Map, _Map, _Map]] = {}
        self._flush_inert: bool | None = None

    @property
    def flush_inert(self) -> bool:
        """True when flushing fp16 inputs below 2^-14 to +0 changes no operand: neither source
        tensor holds a subnormal or −0 (gathered padding is +0). Then a unit with
        ``flush_inputs`` computes the same bits as the unit without it."""
        if self._flush_inert is None:
            self._flush_inert = not (_has_flushable(self._a_src) or _has_flushable(self._b_src))
        return self._flush_inert

    def same_arithmetic(self, first: ConvArithmetic, second: ConvArithmetic) -> bool:
        """Whether two models compute the same bits on these operands: equal unit parameters per
        sub-GEMM (input flushing ignored where :attr:`flush_inert`), equal orders and counting
        rule, no custom operands."""
        if first.operands is not None or second.operands is not None:
            return False
        if first == second:
            return True
        if (first.orders, first.inbounds_only, first.keep_partials, first.tiles, first.seed) != (
            second.orders,
            second.inbounds_only,
            second.keep_partials,
            second.tiles,
            second.seed,
        ):
            return False
        if len(first.units) != len(second.units):
            return False
        pairs = [(unit_params(u), unit_params(v)) for u, v in zip(first.units, second.units)]
        if all(p == q for p, q in pairs):
            return True
        # the scan of the sources only when the units differ, and only in input flushing
        unflushed = all(p._replace(flush_inputs=False) == q._replace(flush_inputs=False) for p, q in pairs)
        return unflushed and self.flush_inert

    def _maps(self, sub: int, group: int) -> tuple[_Map, _Map, _Map]:
        key = (sub, group)
        if key not in self._maps_cache:
            if not 0 <= group < self.problem.groups:
                raise IndexError(f"group {group} out of range 0..{self.problem.groups - 1}")
            self._maps_cache[key] = _maps(self.problem, self.subs[sub], group)
        return self._maps_cache[key]

    def a(self, sub: int = 0, group: int = 0) -> np.ndarray:
        """A (gemmM × gemmK) of one group and sub-GEMM."""
        m = self._maps(sub, group)[0]
        return _gather(self._a_src, m, (0, m.rows.length), (0, m.cols.length))

    def b(self, sub: int = 0, group: int = 0, n_start: int = 0, n_stop: int | None = None) -> np.ndarray:
        """Columns n_start … n_stop−1 of B (gemmK × gemmN) of one group and sub-GEMM."""
        m = self._maps(sub, group)[1]
        n_stop = m.cols.length if n_stop is None else n_stop
        if not 0 <= n_start <= n_stop <= m.cols.length:
            raise IndexError(f"gemmN range {n_start}:{n_stop} outside 0:{m.cols.length}")
        return _gather(self._b_src, m, (0, m.rows.length), (n_start, n_stop))

    def new_result(self) -> np.ndarray:
        """A flat float32 result tensor of +0.0 (what the zero-init kernel leaves)."""
        return np.zeros(self.problem.tensor_size(self.problem.result_role), dtype=np.float32)

    def scatter(self, out: np.ndarray, c: np.ndarray, sub: int = 0, group: int = 0, n_start: int = 0) -> None:
        """Write C's columns n_start … n_start + c.shape[1] − 1 into the flat result ``out``."""
        m = self._maps(sub, group)[2]
        c = np.ascontiguousarray(c, dtype=np.float32)
        if c.shape[0] != m.rows.length or not 0 <= n_start <= n_start + c.shape[1] <= m.cols.length:
            raise ValueError(f"C chunk of shape {c.shape} at column {n_start} does not fit the GEMM")
        _scatter(out, c, m, (n_start, n_start + c.shape[1]))

    def default_n_chunk(self) -> int:
        """gemmN columns per chunk so a chunk's B and C take about :data:`CHUNK_BYTES`."""
        per_column = max(2 * s.k + 4 * s.m for s in self.subs) if self.subs else 1
        return max(1, CHUNK_BYTES // per_column)

    def run(self, gemm: Callable[[np.ndarray, np.ndarray], np.ndarray], n_chunk: int | None = None) -> np.ndarray:
        """The convolution with ``gemm``; float32, flat, in the result tensor's memory order."""
        n_chunk = self.default_n_chunk() if n_chunk is None else n_chunk
        if n_chunk < 1:
            raise ValueError(f"n_chunk: must be ≥ 1, got {n_chunk}")
        out = self.new_result()
        for sub, s in enumerate(self.subs):
            for group in range(self.problem.groups):
                a = self.a(sub, group)
                for start in range(0, s.n, n_chunk):
                    stop = min(start + n_chunk, s.n)
                    c = gemm(a, self.b(sub, group, start, stop))
                    if not isinstance(c, np.ndarray) or c.dtype != np.float32 or c.shape != (s.m, stop - start):
                        raise TypeError(
                            f"gemm must return a float32 array of shape {(s.m, stop - start)}, got "
                            f"{getattr(c, 'dtype', type(c))} {getattr(c, 'shape', '')}"
                        )
                    self.scatter(out, c, sub, group, start)
        return out

    def compute(
        self,
        models: Sequence[ConvArithmetic],
        n_chunk: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> list:
        """Every model over the convolution in one pass: each operand chunk is gathered once and
        fed to every model's GEMMs.

        Returns, per model, the flat float32 result in the result tensor's memory order, or, for a
        model with ``keep_partials``, its :class:`emu.atomics.SplitPartials` (partial sums kept
        apart, each split-K chunk accumulated from +0 with its gemmK padding as zero products;
        tile ids filled where ``model.tiles`` gives the tiles; generator seeded with
        ``model.seed``). Models with
        ``inbounds_only`` run in a pass of their own (:meth:`_compute_inbounds`). ``progress`` is
        called with the number of gemmN columns each chunk finished (shared passes only)."""
        problem = self.problem
        for m in models:
            if len(m.units) != len(self.subs) or len(m.orders) != len(self.subs):
                raise ValueError(
                    f"ConvArithmetic: {len(m.units)} units and {len(m.orders)} orders for {len(self.subs)} sub-GEMMs"
                )
        size = problem.tensor_size(problem.result_role)
        outs: list = []
        for m in models:
            if m.keep_partials:
                outs.append(SplitPartials(max(o.split_k for o in m.orders), size, m.seed))
            else:
                outs.append(self.new_result())
        inbounds = [i for i, m in enumerate(models) if m.inbounds_only]
        if inbounds:
            self._compute_inbounds([models[i] for i in inbounds], [outs[i] for i in inbounds])
        shared = [i for i, m in enumerate(models) if not m.inbounds_only]
        if not shared:
            return outs
        chunk = self.default_n_chunk() if n_chunk is None else int(n_chunk)
        if chunk < 1:
            raise ValueError(f"n_chunk: must be ≥ 1, got {n_chunk}")
        tile_base = {i: 0 for i in shared if models[i].keep_partials}
        # the scan of the sources only where some model flushes its inputs
        inert = any(unit_params(u).flush_inputs for i in shared for u in models[i].units) and self.flush_inert
        for sub, sg in enumerate(self.subs):
            for group in range(problem.groups):
                a0 = self.a(sub, group)
                # Models that run the whole gemmK through one GEMM on the gathered operands,
                # grouped by what their decode depends on (gemmK order, flush): each group decodes
                # B once per chunk and A once for all chunks (while small), one group at a time.
                by_decode: dict[tuple, tuple[np.ndarray, list[int]]] = {}
                own: list[int] = []  # split-K partials kept apart, or custom operands
                for i in shared:
                    m = models[i]
                    if m.operands is None and (not m.keep_partials or m.orders[sub].split_k < 2):
                        seq = m.orders[sub].sequence(a0.shape[1])
                        flush = bool(unit_params(m.units[sub]).flush_inputs) and not inert
                        by_decode.setdefault((seq.tobytes(), flush), (seq, []))[1].append(i)
                    else:
                        own.append(i)
                a_decoded: dict[tuple, np.ndarray] = {}
                a_bytes = 0
                for start in range(0, sg.n, chunk):
                    stop = min(start + chunk, sg.n)
                    b0 = self.b(sub, group, start, stop)
                    a_bits, b_bits = a0.view(np.uint16), b0.view(np.uint16)
                    for key, (seq, idx) in by_decode.items():
                        flush = key[1]
                        a_seq = a_decoded.get(key)
                        if a_seq is None:
                            a_seq = operand_in_order(a_bits, seq, 1, flush)
                            if a_bytes + a_seq.nbytes <= DECODED_A_BYTES:
                                a_decoded[key] = a_seq
                                a_bytes += a_seq.nbytes
                        b_seq = operand_in_order(b_bits, seq, 0, flush)
                        for i in idx:
                            m, out = models[i], outs[i]
                            res = gemm_decoded(a_seq, b_seq, None, m.units[sub], m.orders[sub])
                            self.scatter(out.parts[0] if m.keep_partials else out, res, sub, group, start)
                        del a_seq, b_seq
                    for i in own:
                        m, out = models[i], outs[i]
                        unit, order = m.units[sub], m.orders[sub]
                        a, b = (a0, b0) if m.operands is None else m.operands(sub, group, start, a0, b0)
                        if not m.keep_partials or order.split_k < 2:
                            res = _unit_gemm(a, b, None, unit, order)
                            self.scatter(out.parts[0] if m.keep_partials else out, res, sub, group, start)
                            continue
                        seq = order.sequence(a.shape[1])
                        for si, sl in enumerate(order.chunks(len(seq))):
                            idx = seq[sl]
                            a_chunk, b_chunk = np.ascontiguousarray(a[:, idx]), np.ascontiguousarray(b[idx, :])
                            if (idx < 0).any():  # gemmK padding: zero products in the chunk
                                a_chunk[:, idx < 0] = 0
                                b_chunk[idx < 0, :] = 0
                            part = _unit_gemm(a_chunk, b_chunk, None, unit, GemmOrder())
                            self.scatter(out.parts[si], part, sub, group, start)
                        if m.tiles is not None and m.tiles[sub] is not None:
                            m_tile, n_tile = m.tiles[sub]
                            n_tiles = -(-sg.n // n_tile)
                            mt = np.arange(sg.m) // m_tile
                            nt = np.arange(start, stop) // n_tile
                            tid = tile_base[i] + (mt[:, None] * n_tiles + nt[None, :])
                            self.scatter(out.tiles, tid.astype(np.float32), sub, group, start)
                    if progress is not None:
                        progress(stop - start)
            for i in tile_base:
                tiles = models[i].tiles
                if tiles is not None and tiles[sub] is not None:
                    m_tile, n_tile = tiles[sub]
                    tile_base[i] += (-(-sg.m // m_tile)) * (-(-sg.n // n_tile))
        return outs

    def _compute_inbounds(self, models: Sequence[ConvArithmetic], outs: list) -> None:
        """The models that count only in-bounds products (backward weight's CPU loops that skip
        out-of-bounds taps): per filter tap, the products whose input pixel lies inside the image,
        in each model's gemmK order. A tap's gathered operands are shared by the models with the
        same order (e.g. one validator with and without input flush)."""
        problem = self.problem
        inert = any(unit_params(u).flush_inputs for m in models for u in m.units) and self.flush_inert
        for sub, sg in enumerate(self.subs):
            chunk = max(self.default_n_chunk(), INBOUNDS_B_BYTES // max(1, 2 * sg.k))
            for group in range(problem.groups):
                a = self.a(sub, group)
                by_order: list[tuple[np.ndarray, list[int]]] = []  # (gemmK order, the models with it)
                for i, m in enumerate(models):
                    full = m.orders[sub].sequence(a.shape[1])
                    full = full[full >= 0]  # gemmK padding zeros are no products of a loop
                    same = next((idx for order, idx in by_order if np.array_equal(order, full)), None)
                    if same is None:
                        by_order.append((full, [i]))
                    else:
                        same.append(i)
                a_bits = a.view(np.uint16)
                all_rows = np.arange(a.shape[0], dtype=np.int64)
                for start in range(0, sg.n, chunk):
                    stop = min(start + chunk, sg.n)
                    b_bits = self.b(sub, group, start, stop).view(np.uint16)
                    res = [np.zeros((sg.m, stop - start), np.float32) for _ in models]
                    for cols, kin in bwd_weight_taps(problem, sg.k, start, stop):
                        inside = np.zeros(a.shape[1], np.bool_)
                        inside[kin] = True
                        cols = cols.astype(np.int64)
                        # A tap has few columns (the channels of one filter tap): computed as
                        # (B^T A^T)^T, the tap's outputs run along the kernels' lanes. The same
                        # bits: every unit forms each exact product a_k·b_k (commutative) and adds
                        # an output's products in the same k order.
                        flip = cols.size < sg.m
                        for full, idx in by_order:
                            seq = full[inside[full]].astype(np.int64)  # the model's order, in-bounds products only
                            decoded: dict[bool, tuple[np.ndarray, np.ndarray]] = {}  # flush → (A, B) of the tap
                            for i in idx:
                                flush = bool(unit_params(models[i].units[sub]).flush_inputs) and not inert
                                if flush not in decoded:
                                    decoded[flush] = (
                                        _taken_decoded(a_bits, all_rows, seq, flush, transpose=flip),
                                        _taken_decoded(b_bits, seq, cols, flush, transpose=flip),
                                    )
                                a_tap, b_tap = decoded[flush]
                                unit = models[i].units[sub]
                                if flip:
                                    res[i][:, cols] = gemm_decoded(b_tap, a_tap, None, unit, GemmOrder()).T
                                else:
                                    res[i][:, cols] = gemm_decoded(a_tap, b_tap, None, unit, GemmOrder())
                            del decoded
                    for i in range(len(models)):
                        self.scatter(outs[i], res[i], sub, group, start)


def gemm_operands(
    problem: ConvProblem,
    x=None,
    w=None,
    dy=None,
    *,
    sub: int = 0,
    group: int = 0,
    n_start: int = 0,
    n_stop: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) of one group and sub-GEMM: A (gemmM × gemmK) and B's gemmN columns
    n_start … n_stop−1, float16, in the kernel's gemmK order. For many chunks, build one
    :class:`ConvGemm` instead."""
    op = ConvGemm(problem, x, w, dy)
    return op.a(sub, group), op.b(sub, group, n_start, n_stop)


def conv(
    problem: ConvProblem,
    x=None,
    w=None,
    dy=None,
    *,
    gemm: Callable[[np.ndarray, np.ndarray], np.ndarray],
    n_chunk: int | None = None,
) -> np.ndarray:
    """A convolution as the kernel's GEMMs: fwd x, w → y; bwd_data w, dy → dx; bwd_weight
    x, dy → dw.

    ``gemm(A, B)`` takes A (M × K) and B (K × N) float16, C-contiguous, k in the kernel's gemmK
    order, and returns C (M × N) float32; it supplies the arithmetic and the accumulation order.
    It is called once per group, sub-GEMM and chunk of ``n_chunk`` gemmN columns (default: about
    64 MiB of B and C per chunk). Returns float32 of shape ``problem.tensor_shape(result)`` in the
    result layout; pixels no GEMM writes (bwd_data) are +0.0.
    """
    out = ConvGemm(problem, x, w, dy).run(gemm, n_chunk)
    return out.reshape(problem.tensor_shape(problem.result_role))
