"""Mutants of what the kernel reads: a K block dropped, a padding border off by one, the wrong
stride or dilation, the input read in the other layout, an edge tile wrapped onto the first."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from emu.conv import sub_gemms

from .base import Mutant, canonical, check_choice, from_canonical, kernel_tuning

_SWAP = {"nchw": "nhwc", "nhwc": "nchw", "ngchw": "nhwgc", "nhwgc": "ngchw"}


@dataclass(frozen=True)
class DropLastKBlock(Mutant):
    """``block``: gemmK values in the dropped block (None: the tuning's KPerBlock)."""

    block: int | None = None
    name: ClassVar[str] = "drop-last-k-block"
    bug: ClassVar[str] = (
        "A loop bound computed as K / KPerBlock rounded down (or an off-by-one in the main loop's "
        "trip count) skips the last K block, so its products never reach the accumulator."
    )

    def _block(self, ctx, sub):
        return self.block or kernel_tuning(ctx.model, ctx.problem_used, sub).k_per_block

    def operands(self, ctx, sub, group, start, a, b):
        k = a.shape[1]
        first = max(0, ((k - 1) // self._block(ctx, sub)) * self._block(ctx, sub))
        a, b = a.copy(), b.copy()
        a[:, first:] = 0
        b[first:, :] = 0
        return a, b


@dataclass(frozen=True)
class PaddingBorder(Mutant):
    """``side``: top, bottom, left, right; ``mode``: "lost" (the image's edge row/column read
    as padding) or "duplicated" (a padding row/column reads the edge row/column instead)."""

    side: str = "top"
    mode: str = "lost"
    name: ClassVar[str] = "padding-border"
    bug: ClassVar[str] = (
        "An off-by-one in the padding bounds check (hi > 0 for hi >= 0, or a clamp instead of a "
        "zero) loses the taps of the image's edge row or column, or makes padding taps read it again."
    )

    def __post_init__(self):
        check_choice("side", self.side, ("top", "bottom", "left", "right"))
        check_choice("mode", self.mode, ("lost", "duplicated"))

    def applies(self, problem, model):
        if problem.direction == "bwd_data":
            return "the input image is the result of bwd_data, not an operand"
        pad = problem.pad_h if self.side in ("top", "bottom") else problem.pad_w
        if self.mode == "duplicated" and pad[0 if self.side in ("top", "left") else 1] < 1:
            return f"no padding on the {self.side} side to read the edge again"
        return None

    def geometry(self, problem, inputs):
        x = canonical(problem, "input", inputs["input"])
        axis = 3 if self.side in ("top", "bottom") else 4
        edge = 0 if self.side in ("top", "left") else x.shape[axis] - 1
        if self.mode == "lost":
            x = x.copy()
            idx = [slice(None)] * 5
            idx[axis] = edge
            x[tuple(idx)] = 0
            return problem, {**inputs, "input": from_canonical(problem, "input", x)}
        row = np.take(x, [edge], axis=axis)
        x = np.concatenate([row, x] if edge == 0 else [x, row], axis=axis)
        name = "pad_h" if axis == 3 else "pad_w"
        pad = list(getattr(problem, name))
        pad[0 if edge == 0 else 1] -= 1
        dim = "h" if axis == 3 else "w"
        p2 = dataclasses.replace(problem, **{name: tuple(pad), dim: getattr(problem, dim) + 1})
        return p2, {**inputs, "input": from_canonical(p2, "input", x)}


@dataclass(frozen=True)
class WrongGeometry(Mutant):
    """``param``: "stride" or "dilation"; ``dim``: "h" or "w"; ``value``: what the buggy kernel
    uses (None: the right one + 1)."""

    param: str = "stride"
    dim: str = "w"
    value: int | None = None
    name: ClassVar[str] = "wrong-geometry"
    bug: ClassVar[str] = (
        "The input index uses the wrong stride or dilation in one dimension (e.g. strideH passed "
        "for strideW), so the output has the right shape but reads the wrong input pixels."
    )

    def __post_init__(self):
        if self.param not in ("stride", "dilation") or self.dim not in ("h", "w"):
            raise ValueError(f"param/dim: {self.param!r}/{self.dim!r}: need stride|dilation and h|w")

    def applies(self, problem, model):
        return None if problem.direction == "fwd" else "modelled for forward convolutions only"

    def geometry(self, problem, inputs):
        i = 0 if self.dim == "h" else 1
        pair = list(getattr(problem, self.param))
        right = pair[i]
        pair[i] = self.value if self.value is not None else right + 1
        p2 = dataclasses.replace(problem, **{self.param: tuple(pair)})
        stride, dil = p2.stride[i], p2.dilation[i]
        size, fil = (problem.h, problem.y) if i == 0 else (problem.w, problem.x)
        pad = list(problem.pad_h if i == 0 else problem.pad_w)
        want = problem.out_h if i == 0 else problem.out_w
        pad[1] = max(pad[1], (want - 1) * stride + dil * (fil - 1) + 1 - size - pad[0])
        p2 = dataclasses.replace(p2, **{"pad_h" if i == 0 else "pad_w": tuple(pad)})
        return p2, inputs

    def output(self, ctx, out):
        y = canonical(ctx.problem_used, "output", out)[:, :, :, : ctx.problem.out_h, : ctx.problem.out_w]
        return from_canonical(ctx.problem, "output", y)


@dataclass(frozen=True)
class SwappedLayout(Mutant):
    """The input tensor (memory as given) read in the other of nchw / nhwc."""

    name: ClassVar[str] = "swapped-layout"
    bug: ClassVar[str] = (
        "The kernel is built for NCHW while the buffer holds NHWC (or the reverse): the same memory "
        "is read with channel and pixel strides swapped."
    )

    def applies(self, problem, model):
        if problem.direction == "bwd_data":
            return "the input image is the result of bwd_data, not an operand"
        if problem.in_layout not in _SWAP:
            return f"input layout {problem.in_layout} is not one of {', '.join(_SWAP)}"
        return None

    def geometry(self, problem, inputs):
        flat = np.asarray(inputs["input"]).reshape(-1)  # the same memory, read the other way
        return dataclasses.replace(problem, in_layout=_SWAP[problem.in_layout]), {**inputs, "input": flat}


@dataclass(frozen=True)
class EdgeTileWrap(Mutant):
    """``axis``: "n" (the last, edge gemmN tile computes with tile 0's columns) or "k" (the last
    K block reads the first K block's operands again)."""

    axis: str = "n"
    name: ClassVar[str] = "edge-tile-wrap"
    bug: ClassVar[str] = (
        "The index of the last, partial tile wraps modulo the tile count (or a missing bounds "
        "check reuses tile 0's offset), so the edge tile reads the first tile's data again."
    )

    def __post_init__(self):
        check_choice("axis", self.axis, ("n", "k"))

    def _first(self, ctx, sub, length):
        t = kernel_tuning(ctx.model, ctx.problem_used, sub)
        size = t.n_per_block if self.axis == "n" else t.k_per_block
        return ((length - 1) // size) * size

    def applies(self, problem, model):
        for g, s in zip(model.plan(problem), sub_gemms(problem)):
            if g.tuning_plan is None:
                return "a CPU validator has no tiles"
            t = g.tuning_plan.tuning
            length, size = (s.n, t.n_per_block) if self.axis == "n" else (s.k, t.k_per_block)
            if length > size:
                return None
        return f"only one {self.axis} tile: nothing to wrap"

    def operands(self, ctx, sub, group, start, a, b):
        if self.axis == "k":
            k = a.shape[1]
            first = self._first(ctx, sub, k)
            if first == 0:
                return a, b
            a, b = a.copy(), b.copy()
            a[:, first:] = a[:, : k - first]
            b[first:, :] = b[: k - first, :]
            return a, b
        n = ctx.op.subs[sub].n
        first = self._first(ctx, sub, n)
        stop = start + b.shape[1]
        if first == 0 or stop <= first:
            return a, b
        lo = max(start, first)
        b = b.copy()
        b[:, lo - start :] = ctx.op.b(sub, group, lo - first, stop - first)
        return a, b
