"""Convolution problems and their mapping to GEMM (implicit GEMM), for every direction and layout.

(Being written: the record below is the agreed interface.)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConvProblem"]

DIRECTIONS = ("fwd", "bwd_data", "bwd_weight")


@dataclass(frozen=True)
class ConvProblem:
    """A 2-D convolution. ``c`` and ``k`` are the total channel counts (each group has c/groups and
    k/groups). Layouts are strings of dimension letters in memory order, outermost first:
    input over {n, g, c, h, w}, filter over {g, k, c, y, x}, output over {n, g, k, h, w}; a layout
    without ``g`` stands for groups == 1 or for g folded outermost into its channel letter."""

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

    @property
    def out_h(self) -> int:
        return (self.h + self.pad_h[0] + self.pad_h[1] - self.dilation[0] * (self.y - 1) - 1) // self.stride[0] + 1

    @property
    def out_w(self) -> int:
        return (self.w + self.pad_w[0] + self.pad_w[1] - self.dilation[1] * (self.x - 1) - 1) // self.stride[1] + 1
