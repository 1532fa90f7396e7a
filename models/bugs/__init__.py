"""Kernel bug mutants: each a small, parameterised change to an emulated kernel, with the real bug
it stands for.

A mutant is a frozen dataclass (its fields say which block, border, channel, tile or partial it
hits) with up to six steps that :func:`emulate` applies around :meth:`emu.conv.ConvGemm.compute`:
``geometry`` (the problem and input tensors the buggy kernel really computes with), ``model``
(its kernel model), ``gemm`` (its GEMM replaced) and ``operands`` (the GEMM operands it reads),
both passed to the executor as the hooks of :class:`emu.conv.ConvArithmetic`, ``combine`` (how
its split-K partial sums are added) and ``output`` (what it leaves in the result tensor).
``seen`` is what a buggy *verifier* compares. The arithmetic and the convolution's loop stay in
:mod:`emu` (:mod:`emu.conv`'s executor; :mod:`emu.faults` for scales and partial sums); a mutant
only selects and moves values.

>>> from models.bugs import mutant
>>> m = mutant("padding-border", side="left", mode="duplicated")
>>> m.label
"padding-border(side='left', mode='duplicated')"

:func:`emulate` with ``mutant=None`` is bit for bit what :func:`validation.run.run` computes for
the kernel. Split-K atomic kernels add their partials in ascending order, or, with ``member=m``,
in the add order of member m of the :data:`models.kernels.ATOMIC_ORDERS` ensemble; the split-K
mutants (``split-k-count``, ``split-k-scale``, ``stale-partial-race``) then use that same order,
so that they are compared with the correct kernel they stand next to (the design sweep uses
member seed mod 128 for both). :func:`emulate_mutants` runs the correct kernel and many mutants
with their GEMMs shared. Mutants that need something the problem does not have (a split-K
partial on a kernel without split-K, a padding row on an unpadded side) raise
:class:`NotApplicable`.

**Formats.** A kernel model multiplies fp16 or bf16 tensors (``KernelModel.input``); the mutants
act on either, in the kernel's format (the stale values a tile keeps, what a verifier handed the
wrong buffers sees). Those that cannot stand for a bug of one format say so
(:data:`UNSUPPORTED`, :func:`unsupported`) and :func:`default_mutants` leaves them out of that
format's set: an fp16 kernel's narrow accumulator is ``fp16-accumulator``, a bf16 kernel's is
``bf16-accumulator`` (each refuses the other format), and the split-K mutants have nothing to act
on in bf16 (the 2022 bf16 kernels have no split-K: the atomic path was f16-only).

**Modules.** ``base`` (the :class:`Mutant` base class, :func:`emulate`, :func:`emulate_mutants`,
:data:`UNSUPPORTED` and the helpers the mutants share), ``operands`` (what the kernel reads: K
blocks, padding, geometry, layout, edge tiles), ``accumulation`` (narrow accumulators, split-K
partials), ``outputs`` (the result tensor, what the verifier compares); this package names them
all (:data:`MUTANTS`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from .accumulation import (
    Bf16Accumulator,
    Fp16Accumulator,
    SplitKPartialCount,
    SplitKPartialScale,
    StalePartialRace,
)
from .base import (
    UNSUPPORTED,
    Emulated,
    KernelRun,
    Mutant,
    NotApplicable,
    canonical,
    emulate,
    emulate_mutants,
    from_canonical,
    tile_ids,
    unsupported,
)
from .operands import DropLastKBlock, EdgeTileWrap, PaddingBorder, SwappedLayout, WrongGeometry
from .outputs import ChannelSignFlip, ScaledElement, UninitialisedTile, WrongTensorsCompared

__all__ = [
    "Mutant",
    "NotApplicable",
    "KernelRun",
    "Emulated",
    "emulate",
    "emulate_mutants",
    "tile_ids",
    "canonical",
    "from_canonical",
    "MUTANTS",
    "mutant",
    "default_mutants",
    "DropLastKBlock",
    "PaddingBorder",
    "WrongGeometry",
    "SwappedLayout",
    "SplitKPartialCount",
    "SplitKPartialScale",
    "Fp16Accumulator",
    "Bf16Accumulator",
    "UNSUPPORTED",
    "unsupported",
    "ChannelSignFlip",
    "UninitialisedTile",
    "StalePartialRace",
    "ScaledElement",
    "EdgeTileWrap",
    "WrongTensorsCompared",
]

MUTANTS: Mapping[str, type[Mutant]] = {
    cls.name: cls
    for cls in (
        DropLastKBlock,
        PaddingBorder,
        WrongGeometry,
        SwappedLayout,
        SplitKPartialCount,
        SplitKPartialScale,
        Fp16Accumulator,
        Bf16Accumulator,
        ChannelSignFlip,
        UninitialisedTile,
        StalePartialRace,
        ScaledElement,
        EdgeTileWrap,
        WrongTensorsCompared,
    )
}


def mutant(name: str, **params) -> Mutant:
    """The mutant called ``name`` (:data:`MUTANTS`) with ``params``; ValueError naming the
    accepted names or fields otherwise."""
    if name not in MUTANTS:
        raise ValueError(f"mutant: {name!r} is not one of {', '.join(MUTANTS)}")
    cls = MUTANTS[name]
    known = {f.name for f in dataclasses.fields(cls)}
    bad = set(params) - known
    if bad:
        raise ValueError(f"mutant {name}: unknown parameter(s) {sorted(bad)}; its parameters: {sorted(known)}")
    return cls(**params)


def default_mutants(input: str = "fp16") -> tuple[Mutant, ...]:
    """One instance of every bug that a kernel on ``input`` ("fp16", the default, or "bf16")
    tensors can have (:data:`UNSUPPORTED` names the others), and the variants of the multi-mode
    ones, as the design sweeps run them."""
    return tuple(m for m in _every_mutant() if unsupported(m.name, input) is None)


def _every_mutant() -> tuple[Mutant, ...]:
    return (
        DropLastKBlock(),
        PaddingBorder("top", "lost"),
        PaddingBorder("left", "duplicated"),
        WrongGeometry("stride", "w"),
        WrongGeometry("dilation", "h"),
        SwappedLayout(),
        SplitKPartialCount(-1, 0),
        SplitKPartialCount(-1, 2),
        SplitKPartialScale(-1, -1.0),
        Fp16Accumulator(),
        Bf16Accumulator(),
        ChannelSignFlip(0),
        UninitialisedTile(-1, "stale"),
        UninitialisedTile(-1, "zeros"),
        UninitialisedTile(-1, "nan"),
        StalePartialRace(0, 0),
        ScaledElement(None, 2.0),
        ScaledElement(None, 1.125),
        EdgeTileWrap("n"),
        EdgeTileWrap("k"),
        WrongTensorsCompared("input"),
        WrongTensorsCompared("reference"),
    )
