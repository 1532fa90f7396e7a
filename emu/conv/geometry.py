"""A convolution problem (sizes, padding, stride, dilation, layouts) and the GEMMs it runs: one
for fwd and bwd_weight, yTilda·xTilda sub-GEMMs for bwd_data (rocMLIR ConvToGemm.cpp, see
:mod:`emu.conv`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from .layout import LAYOUT_FIELD, LETTERS, normalize_layout

__all__ = ["DIRECTIONS", "ConvProblem", "SubGemm", "TildaAxis", "tilda_axes", "sub_gemms", "gemm_sizes"]

DIRECTIONS = ("fwd", "bwd_data", "bwd_weight")

#: The tensor each direction writes, and the two it reads (A's source first).
_RESULT = {"fwd": "output", "bwd_data": "input", "bwd_weight": "filter"}
_OPERANDS = {"fwd": ("filter", "input"), "bwd_data": ("filter", "output"), "bwd_weight": ("output", "input")}


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
        for role in LETTERS:
            normalize_layout(getattr(self, LAYOUT_FIELD[role]), role)
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
        return getattr(self, LAYOUT_FIELD[role])

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
        """The array shape of a tensor: its layout's letters as given (:mod:`emu.conv`)."""
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

    @property
    def operand_roles(self) -> tuple[str, str]:
        """The tensors A and B are gathered from (fwd: filter, input; bwd_data: filter, output;
        bwd_weight: output, input)."""
        return _OPERANDS[self.direction]

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


class TildaAxis(NamedTuple):
    """Backward data, one spatial axis (h or w): rocMLIR ConvToGemm.cpp ``backwardData`` (the
    index arithmetic of :mod:`emu.conv`'s docstring)."""

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


def _tilda_axis(stride: int, dilation: int, fil: int, out: int, inp: int, pad_left: int) -> TildaAxis:
    gcd = math.gcd(stride, dilation)
    tilda = stride // gcd
    size = out + _ceil_div(dilation * (fil - 1), stride)
    left = max(0, pad_left - dilation * (tilda - 1)) // stride
    right = min(size, _ceil_div(pad_left + inp - 1, stride) + 1)
    return TildaAxis(tilda, _ceil_div(fil, tilda), size, left, right, dilation // gcd)


def tilda_axes(problem: ConvProblem) -> tuple[TildaAxis, TildaAxis]:
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
    th, tw = tilda_axes(p)
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
