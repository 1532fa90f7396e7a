"""Mutants of the result and of what the verifier compares: a channel's sign flipped, a tile
never written, one element scaled, the wrong buffers handed to the verifier."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import ml_dtypes
import numpy as np

from emu.faults import scale_fp32
from emu.rounding import cast_rne, fp32_to_fp16

from .. import harness
from .base import Mutant, canonical, check_choice, from_canonical, pick, tile_ids

# --- output -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChannelSignFlip(Mutant):
    """Result channel ``channel`` (k for fwd / bwd_weight, c for bwd_data; over all groups)
    negated."""

    channel: int = 0
    name: ClassVar[str] = "channel-sign-flip"
    bug: ClassVar[str] = (
        "One output channel comes out negated (a per-channel scale or bias read with the wrong sign, "
        "or a sign bit set by a bad bitwise epilogue)."
    )

    def output(self, ctx, out):
        p = ctx.problem
        role = p.result_role
        t = canonical(p, role, out).copy()
        per = t.shape[2]
        g, c = divmod(pick(self.channel, per * t.shape[1], "channel"), per)
        if role == "filter":
            t[g, c] = scale_fp32(t[g, c], -1.0)
        else:
            t[:, g, c] = scale_fp32(t[:, g, c], -1.0)
        return from_canonical(p, role, t)


@dataclass(frozen=True)
class UninitialisedTile(Mutant):
    """Output tile ``tile`` (negative: from the end) never written; it holds ``fill``: "zeros",
    "nan" or "stale" (harness float values in [-``stale_range``, ``stale_range``], seed
    ``stale_seed``, as left by an earlier kernel)."""

    tile: int = -1
    fill: str = "stale"
    stale_seed: int = 7
    stale_range: int = 4
    name: ClassVar[str] = "uninitialised-tile"
    bug: ClassVar[str] = (
        "A workgroup exits early (a wrong grid size or an early return on a bounds check), so one "
        "output tile keeps whatever the buffer held: zeros, NaN, or a previous kernel's values."
    )

    def __post_init__(self):
        check_choice("fill", self.fill, ("zeros", "nan", "stale"))

    def output(self, ctx, out):
        tiles = tile_ids(ctx)
        t = pick(self.tile, int(tiles.max()) + 1, "tile")
        mask = tiles == t
        if self.fill == "zeros":
            fill = np.zeros(out.size, np.float32)
        elif self.fill == "nan":
            fill = np.full(out.size, np.nan, np.float32)
        elif ctx.model.input == "bf16":  # an earlier bf16 kernel's values, as the harness truncates them
            fill = harness.harness_float_tensor(
                out.size, self.stale_seed, -self.stale_range, self.stale_range, dtype="bf16"
            ).astype(np.float32)
        else:
            fill = harness.to_fp16_truncate(
                harness.harness_float_values(out.size, self.stale_seed, -self.stale_range, self.stale_range)
            )
            fill = fill.view(np.float16).astype(np.float32)
        return np.where(mask, fill, out)


@dataclass(frozen=True)
class ScaledElement(Mutant):
    """Result element ``element`` (flat memory index; None: the middle one) times ``factor``."""

    element: int | None = None
    factor: float = 2.0
    name: ClassVar[str] = "scaled-element"
    bug: ClassVar[str] = (
        "One output element is written with the wrong scale (an epilogue applying alpha twice to "
        "the element two threads share, or a lane writing its value into a neighbour's slot)."
    )

    def output(self, ctx, out):
        out = out.copy()
        e = out.size // 2 if self.element is None else pick(self.element, out.size, "element")
        out[e : e + 1] = scale_fp32(out[e : e + 1], self.factor)
        return out


# --- verifier -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WrongTensorsCompared(Mutant):
    """``which``: "reference" (the verifier compares the validation with itself) or "input"
    (it is handed the kernel's first input buffer instead of its output)."""

    which: str = "input"
    name: ClassVar[str] = "wrong-tensors-compared"
    bug: ClassVar[str] = (
        "The test harness passes the wrong buffers to the verifier (the reference twice, or an input "
        "instead of the output), so the comparison says nothing about the kernel."
    )

    def __post_init__(self):
        check_choice("which", self.which, ("reference", "input"))

    def seen(self, kernel16, validation32, inputs):
        # the kernel's output format: fp16, or bf16 (``ml_dtypes.bfloat16`` output)
        bf16 = np.asarray(kernel16).dtype == np.dtype(ml_dtypes.bfloat16)
        if self.which == "reference":
            if bf16:
                return cast_rne(np.asarray(validation32, np.float32).astype(np.float64), "bf16")
            return fp32_to_fp16(np.asarray(validation32, np.float32))
        src = np.asarray(next(iter(inputs.values()))).reshape(-1)
        src = src.astype(ml_dtypes.bfloat16) if bf16 else src.astype(np.float16)
        return np.resize(src, np.asarray(kernel16).size)
