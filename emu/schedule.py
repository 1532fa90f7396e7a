"""The accumulation schedule of a GEMM: how a kernel walks gemmK and combines what it sums.

A :class:`Schedule` says everything about a kernel's order that changes the arithmetic of one
output element:

* **the k sequence**: ``k_order`` (a permutation of range(K), or None for ascending) and
  ``pad_k`` (zero padding of gemmK up to a multiple; −1 entries in :meth:`Schedule.sequence`);
* **splits as ranges of k tiles**: the sequence is cut into ``k_tile``-wide tiles and the tiles
  into ``splits`` contiguous ranges, either as even as possible (``split_rule="even"``: the
  bounds ``round(linspace(0, tiles, splits + 1))``) or ``⌈tiles/splits⌉`` tiles per split, the
  last one shorter (``"ceil"``), or at given tile bounds (``split_bounds``); or *strided*
  (``"strided"``: split t takes sequence entries t, t + splits, t + 2·splits, …, as the lanes of a
  warp that each accumulate every 32nd position);
* **per split a chain of the unit**: each split is accumulated by the unit in its sequence
  order, from +0, or, for split 0 when ``c_entry="chain"``, from C; with ``residue_tile`` t a
  split whose length is not a multiple of t takes its short tile first, zero-filled to t
  entries (CUTLASS 2.x's predicated iterators load the k residue in the first mainloop
  iteration), which moves the unit's group boundaries;
* **the reduction of the partials** in fp32 (RNE), each partial first rounded to
  ``partial_format`` where the workspace holds a narrower type (``"fp16"``: cuBLAS's
  ``splitKreduce_kernel`` over ``__half`` partials); ``"sequential"`` adds them one by one in split
  order starting from partial 0 (cuBLAS's ``splitKreduce``); ``"workspace"`` adds them in split
  order onto a workspace holding C (or +0), as fp32 atomic adds in a fixed order do;
  ``"random"`` the same in the order :func:`emu.atomics.add_order` draws for ``reduction_seed``;
  ``"tree"`` a pairwise tree (p0+p1, p2+p3, …, then pairs of those); ``"halving"`` the tree of a
  warp's shuffle reduction (p_i + p_{i+n/2} for the first half, then again: lane 0 of an xor
  butterfly); ``"bisection"`` the recursive split, the first ⌊n/2⌋ partials reduced, the rest
  reduced, the two added (7 partials: (p0 + (p1+p2)) + ((p3+p4) + (p5+p6)); for a power of two
  the pairwise tree); ``"program"`` the steps of ``reduction_program`` in turn, each turning the
  list of partials into a shorter one (:data:`REDUCTION_STEPS`) — the nested reductions of
  thread blocks (each thread's chains, then the block's shuffle tree, then the blocks' partials
  in a second kernel);
* **two-level accumulation** (``promotion_interval`` n > 0): inside each split the unit's chain
  restarts from +0 every n k tiles, and each such interval's result is added, in order, into an
  fp32 register accumulator (RNE; the first interval's result is that accumulator's value):
  CUTLASS's ``GmmaFP8Accumulation`` (``include/cutlass/gemm/collective/fp8_accumulation.hpp``:
  ``mma_promotion_interval`` wgmma k-blocks in the tensor core's accumulator, then
  ``promote_core``'s ``accum += accum_temp``), the fp8 GEMMs without fast accumulation. It is a
  split into consecutive intervals reduced ``"sequential"``-ly, nested inside each split;
* **an instruction K** smaller than the unit's group (``instruction_k``): the unit fuses that
  many products per step instead of its own group (an ``m16n8k8`` instruction on a unit whose
  widest instruction takes 16);
* **the epilogue** in fp32: C enters the chain (``c_entry="chain"``), the workspace
  (``"workspace"``) or the epilogue (``"epilogue"``: D = RNE(alpha·acc + beta·C) as one fused
  multiply-add on beta·C, CUTLASS's ``LinearCombination``); a ``bias`` (one value per column)
  is added the same way; then one rounding to ``output`` (``"fp16"``, ``"bf16"``, ``"fp32"``, or
  None for the unit's own output format). With ``"output"`` the sum is stored in the output
  format first and C added to the stored value by a second epilogue, rounded again:
  D = RN_out(RN_out(alpha·acc) + beta·C) (cuBLASLt's split-K with output-format partials and a
  bias: ``splitKreduce_kernel`` writes the reduced sum, the bias comes after; NVIDIA H200
  captures of ``F.linear``).

:class:`emu.GemmOrder` is one case: :meth:`emu.GemmOrder.schedule` gives the schedule that
reproduces it bit for bit (k tiles of width 1, an even split, C in the chain for one split and
in the workspace for several).

Sources: CUTLASS's split-K (``GemmSplitKParallel``, ``ReduceSplitK``) and its
``epilogue/thread/linear_combination.h`` (github.com/NVIDIA/cutlass, v3.5); cuBLASLt's
``CUBLASLT_MATMUL_DESC_EPILOGUE`` bias epilogue and split-K reduction (docs.nvidia.com/cuda/
cublas, "cublasLtMatmul"); the split counts and tile widths themselves are found from outputs
(``models.libraries``), since the same call can take another split count on another GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

__all__ = [
    "Schedule",
    "Chain",
    "chain_positions",
    "check_k_order",
    "C_ENTRIES",
    "REDUCTIONS",
    "REDUCTION_STEPS",
    "SPLIT_RULES",
    "OUTPUTS",
    "SCALE_ORDERS",
    "MAX_PAD_K",
    "MAX_SPLITS",
]

#: Bounds of the integer fields: beyond them no kernel runs, and padding alone would exhaust memory.
MAX_PAD_K = 1 << 16
MAX_SPLITS = 1 << 13
SCALE_ORDERS = ("product", "a_then_b", "b_then_a")
SPLIT_RULES = ("even", "ceil", "strided")
REDUCTIONS = ("sequential", "workspace", "random", "tree", "halving", "bisection", "program")
#: the steps of a reduction program, each (name, width) on the list x of n partials (every add
#: fp32, RNE): ``"chunks"`` the consecutive groups of ``width`` each added in order onto +0;
#: ``"chunks-first"`` the same from each group's first entry; ``"fold"`` in each consecutive
#: group of ``width`` (even), entry i + entry i + width/2 (a count-down butterfly's step: n → n/2);
#: ``"strided"`` x padded with +0 to a multiple of ``width``, then y[t] = x[t] + x[t+width] + …
#: in order (n → width); ``"merge"`` (its width an index i ≥ 0) entry i + entry i + 1 in place
#: of the two (n → n − 1: a sequence of merges is any binary tree over the list's order).
#: "chunks" and "fold" need n to be a multiple of the width.
REDUCTION_STEPS = ("chunks", "chunks-first", "fold", "strided", "merge")
C_ENTRIES = ("chain", "workspace", "epilogue", "output")
OUTPUTS = (None, "fp32", "fp16", "bf16")


def chain_positions(start: int, stop: int, step: int = 1, residue_tile: int = 0) -> np.ndarray:
    """The accumulation-sequence positions one split's chain reads, in order, −1 for a +0
    product: ``range(start, stop, step)``, with ``residue_tile`` t > 0 its residue (length modulo
    t) first and zero-filled to t entries (see :attr:`Schedule.residue_tile`)."""
    seq = np.arange(start, stop, step)
    rem = seq.size % residue_tile if residue_tile else 0
    if not rem:
        return seq
    return np.concatenate([seq[:rem], np.full(residue_tile - rem, -1, seq.dtype), seq[rem:]])


class Chain(NamedTuple):
    """One chain of the unit that a schedule runs (:meth:`Schedule.chains`): the accumulation
    sequence's ``range(start, stop, step)``, its residue first when ``residue_tile`` is set (0
    when the range's length is a multiple of the tile, where the fill would change nothing), from C
    when ``from_c`` (split 0's first chain with ``c_entry="chain"``), else from +0; its result adds
    into the partial of split ``split``."""

    split: int
    start: int
    stop: int
    step: int = 1
    residue_tile: int = 0
    from_c: bool = False

    def positions(self) -> np.ndarray:
        """The sequence positions the chain reads, in order, −1 for a +0 product (:func:`chain_positions`)."""
        return chain_positions(self.start, self.stop, self.step, self.residue_tile)

    @property
    def length(self) -> int:
        """How many products the chain takes, zero fill included."""
        n = len(range(self.start, self.stop, self.step))
        return n + ((self.residue_tile - n % self.residue_tile) if self.residue_tile else 0)


def check_k_order(k_order) -> None:
    """ValueError unless ``k_order`` is None or a permutation of range(len(k_order)) of whole numbers."""
    if k_order is None:
        return
    bad = [k for k in k_order if isinstance(k, bool) or not isinstance(k, (int, np.integer))]
    if bad:
        raise ValueError(f"k_order: gemmK indices must be whole numbers, got {bad[0]!r}")
    seq = np.sort(np.asarray(k_order, dtype=np.int64))
    if not np.array_equal(seq, np.arange(len(seq))):
        raise ValueError(f"k_order: must be a permutation of range({len(k_order)}), each index once")


def _whole(name, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: must be a whole number, got {value!r}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name}: must be in {low}..{high if high is not None else '∞'}, got {value}")


@dataclass(frozen=True)
class Schedule:
    """An accumulation schedule (see the module docstring for each field's meaning)."""

    k_order: tuple[int, ...] | None = None
    pad_k: int = 1
    k_tile: int = 1
    splits: int = 1
    split_rule: str = "even"
    split_bounds: tuple[int, ...] | None = None
    reduction: str = "sequential"
    reduction_seed: int = 0
    reduction_program: tuple[tuple[str, int], ...] = ()
    instruction_k: int = 0
    residue_tile: int = 0
    partial_format: str | None = None
    c_entry: str = "chain"
    alpha: float = 1.0
    beta: float = 1.0
    output: str | None = None
    promotion_interval: int = 0
    scale_order: str = "product"
    epilogue_fma: bool = True
    notes: str = field(default="", compare=False)

    def __post_init__(self):
        _whole("pad_k", self.pad_k, 1, MAX_PAD_K)
        _whole("k_tile", self.k_tile, 1, MAX_PAD_K)
        _whole("splits", self.splits, 1, MAX_SPLITS)
        _whole("reduction_seed", self.reduction_seed, 0)
        _whole("instruction_k", self.instruction_k, 0, 256)
        _whole("promotion_interval", self.promotion_interval, 0, MAX_PAD_K)
        if not isinstance(self.epilogue_fma, bool):
            raise ValueError(f"epilogue_fma: must be True or False, got {self.epilogue_fma!r}")
        for name, value, accepted in (
            ("scale_order", self.scale_order, SCALE_ORDERS),
            ("split_rule", self.split_rule, SPLIT_RULES),
            ("reduction", self.reduction, REDUCTIONS),
            ("c_entry", self.c_entry, C_ENTRIES),
            ("output", self.output, OUTPUTS),
            ("partial_format", self.partial_format, (None, "fp16", "bf16")),
        ):
            if value not in accepted:
                raise ValueError(f"{name}: {value!r} is not one of {', '.join(map(repr, accepted))}")
        check_k_order(self.k_order)
        if self.split_bounds is not None:
            b = [int(x) for x in self.split_bounds]
            if len(b) < 2 or b[0] != 0 or any(b1 <= b0 for b0, b1 in zip(b[:-1], b[1:])):
                raise ValueError(f"split_bounds: must rise strictly from 0 (tile indices), got {self.split_bounds!r}")
            if len(b) - 1 != self.splits:
                raise ValueError(f"split_bounds: {len(b) - 1} ranges for splits={self.splits}")
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not np.isfinite(value):
                raise ValueError(f"{name}: must be a finite number, got {value!r}")
            if float(np.float32(value)) != float(value):
                raise ValueError(f"{name}: must be an fp32 value (the epilogue computes in fp32), got {value!r}")
        if self.beta != 1 and self.c_entry not in ("epilogue", "output"):
            raise ValueError(
                f"beta: scales C in an epilogue only (c_entry='epilogue' or 'output'), got c_entry={self.c_entry!r}"
            )
        _whole("residue_tile", self.residue_tile, 0, MAX_PAD_K)
        if self.residue_tile and self.split_rule == "strided":
            raise ValueError("residue_tile: needs contiguous splits, not split_rule='strided'")
        if self.promotion_interval and (self.split_rule == "strided" or self.residue_tile):
            raise ValueError("promotion_interval: needs contiguous splits without residue tiles")
        if (self.reduction == "program") != bool(self.reduction_program):
            raise ValueError("reduction_program: given exactly when reduction='program'")
        for step in self.reduction_program:
            if not (isinstance(step, tuple) and len(step) == 2 and step[0] in REDUCTION_STEPS):
                raise ValueError(
                    f"reduction_program: each step is (name, width) with name one of "
                    f"{', '.join(map(repr, REDUCTION_STEPS))}, got {step!r}"
                )
            _whole("reduction_program width", step[1], {"fold": 2, "merge": 0}.get(step[0], 1))
        if self.c_entry == "workspace" and self.reduction not in ("workspace", "random"):
            raise ValueError(f"c_entry: 'workspace' needs reduction 'workspace' or 'random', got {self.reduction!r}")

    def sequence(self, K: int) -> np.ndarray:
        """The gemmK indices in accumulation order, −1 marking padding zeros."""
        if self.k_order is None:
            seq = np.arange(K)
        else:
            seq = np.asarray(self.k_order, dtype=np.int64)
            if seq.shape != (K,):
                raise ValueError(f"k_order: must be a permutation of range({K}), got {len(seq)} indices")
        padded = -(-K // self.pad_k) * self.pad_k
        return np.concatenate([seq, np.full(padded - K, -1, np.int64)])

    def split_ranges(self, length: int) -> list[slice]:
        """The splits as slices of an accumulation sequence of ``length`` entries (contiguous, or
        with a step for ``split_rule="strided"``)."""
        if self.split_rule == "strided" and self.split_bounds is None:
            return [slice(t, length, self.splits) for t in range(min(self.splits, max(length, 1)))]
        tiles = -(-length // self.k_tile)
        if self.split_bounds is not None:
            bounds = [int(b) for b in self.split_bounds]
            if bounds[-1] != tiles:
                raise ValueError(
                    f"split_bounds: must end at the {tiles} k tiles of width {self.k_tile}, got {bounds[-1]}"
                )
        elif self.split_rule == "ceil":
            per = -(-tiles // self.splits)
            bounds = sorted({min(tiles, i * per) for i in range(self.splits + 1)})
            if len(bounds) - 1 != self.splits and tiles:
                raise ValueError(
                    f"splits: {self.splits} splits of ⌈{tiles}/{self.splits}⌉ = {per} tiles leave "
                    f"{self.splits - len(bounds) + 1} empty (use split_rule='even')"
                )
        else:
            bounds = np.linspace(0, tiles, self.splits + 1).round().astype(int).tolist()
        return [
            slice(min(length, b0 * self.k_tile), min(length, b1 * self.k_tile))
            for b0, b1 in zip(bounds[:-1], bounds[1:])
        ]

    def promotion_ranges(self, r: slice) -> list[slice]:
        """The intervals of split ``r`` (a contiguous slice of the accumulation sequence) that
        the unit accumulates from +0 before each promotion into fp32: ``promotion_interval`` k
        tiles each, counted from the split's start; ``[r]`` without promotion."""
        if not self.promotion_interval:
            return [r]
        width = self.promotion_interval * self.k_tile
        return [slice(k, min(k + width, r.stop)) for k in range(r.start, r.stop, width)] or [r]

    def chains(self, length: int) -> list[Chain]:
        """Every chain of the unit the schedule runs over an accumulation sequence of ``length``
        entries, split by split and, inside a split, promotion interval by interval: what
        :func:`emu.gemm` runs, and what a caller running the chains itself (in batches, shared
        between schedules) needs to run; :func:`emu.gemm.split_results` adds the chains' results
        into the splits' partials."""
        out = []
        for i, s in enumerate(self.split_ranges(length)):
            for j, r in enumerate(self.promotion_ranges(s)):
                step = r.step or 1
                n = len(range(r.start, r.stop, step))
                tile = self.residue_tile if self.residue_tile and n % self.residue_tile else 0
                out.append(Chain(i, r.start, r.stop, step, tile, self.c_entry == "chain" and i == 0 and j == 0))
        return out

    def describe(self) -> str:
        """The schedule in words, for reports."""
        parts = ["k ascending" if self.k_order is None else "k in a given order"]
        if self.pad_k > 1:
            parts.append(f"gemmK padded to a multiple of {self.pad_k}")
        if self.splits == 1:
            parts.append("one chain")
        else:
            if self.split_rule == "strided":
                how = "strided (split t takes every entry t mod splits)"
            elif self.split_bounds is not None and len(self.split_bounds) > 17:
                how = f"at {len(self.split_bounds)} given tile bounds"
            elif self.split_bounds is not None:
                how = f"at tile bounds {list(self.split_bounds)}"
            elif self.split_rule == "ceil":
                how = "ceil(tiles/splits) tiles each"
            else:
                how = "as even as possible"
            red = {
                "sequential": "partials added in fp32 in split order",
                "workspace": "partials added onto the workspace in split order",
                "random": f"partials added in the order of seed {self.reduction_seed}",
                "tree": "partials added in a pairwise fp32 tree",
                "halving": "partials added in a halving fp32 tree (a warp shuffle's)",
                "bisection": "partials added in an fp32 tree of halves (the first ⌊n/2⌋, the rest)",
                "program": "partials reduced in fp32 by the steps "
                + ", ".join(f"{name} {width}" for name, width in self.reduction_program),
            }[self.reduction]
            width = "" if self.split_rule == "strided" else f" of {self.k_tile}-wide k tiles"
            parts.append(f"{self.splits} splits{width}, {how}, each from +0; {red}")
        if self.promotion_interval:
            parts.append(
                f"two-level accumulation: the unit from +0 over {self.promotion_interval} k tile(s) of "
                f"{self.k_tile}, each interval's result added into fp32 in order"
            )
        if self.partial_format:
            parts.append(f"each partial rounded to {self.partial_format} before the reduction")
        if self.residue_tile:
            parts.append(f"each split's k residue first, zero-filled to a {self.residue_tile}-wide tile")
        if self.instruction_k:
            parts.append(f"{self.instruction_k} products fused per instruction")
        if self.c_entry in ("epilogue", "output") and (self.alpha != 1 or self.beta != 1):
            parts.append(f"epilogue alpha={self.alpha:g}, beta={self.beta:g}")
        if self.c_entry == "output":
            parts.append("the sum stored in the output format, then C added to it and rounded again")
        else:
            parts.append(f"C enters the {self.c_entry}")
        if self.scale_order != "product" or not self.epilogue_fma:
            how = {
                "product": "scale_a·scale_b first",
                "a_then_b": "scale_a, then scale_b",
                "b_then_a": "scale_b, then scale_a",
            }
            fma = "C added in one FMA" if self.epilogue_fma else "C added after, rounded"
            parts.append(f"scales (when given) {how[self.scale_order]}; {fma}")
        if self.output:
            parts.append(f"one rounding to {self.output}")
        return "; ".join(parts)

    def fields(self) -> dict:
        """The schedule as plain JSON-able fields (``k_order`` summarised by its length)."""
        out = {
            "k_tile": self.k_tile,
            "splits": self.splits,
            "split_rule": self.split_rule,
            "split_bounds": None if self.split_bounds is None else list(self.split_bounds),
            "reduction": self.reduction,
            "instruction_k": self.instruction_k,
            "residue_tile": self.residue_tile,
            "partial_format": self.partial_format,
            "c_entry": self.c_entry,
            "output": self.output,
            "pad_k": self.pad_k,
            "k_order": None if self.k_order is None else "custom",
        }
        if self.reduction == "random":
            out["reduction_seed"] = self.reduction_seed
        if self.reduction == "program":
            out["reduction_program"] = [list(step) for step in self.reduction_program]
        if self.alpha != 1 or self.beta != 1:
            out.update(alpha=self.alpha, beta=self.beta)
        if self.promotion_interval:
            out["promotion_interval"] = self.promotion_interval
        if self.scale_order != "product" or not self.epilogue_fma:
            out.update(scale_order=self.scale_order, epilogue_fma=self.epilogue_fma)
        return out
