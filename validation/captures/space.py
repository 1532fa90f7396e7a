"""The schedule space: every candidate the capture search judges, in one place, with one set of bounds.

A candidate (:class:`validation.captures.gemms.Candidate`) is a unit, a :class:`Variant` (how a
convolution becomes GEMMs) and an :class:`emu.schedule.Schedule`. The space is a list of
families (:data:`FAMILIES`), each a function from a capture and its unit to candidates, tried in
order where the family applies to the capture:

* ``matrix-unit`` (fp16, bf16 and tf32 operands; GEMMs and convolutions): the units (the GPU's
  matrix unit, its fp16-accumulator variant where NVIDIA has one, fp32 FMA); for convolutions
  the gemmK orders (``rsc``/``crs``, channel blocks, a rotated filter for backward data); the
  accumulations of :func:`split_schedules` (one chain; strided lanes; k tiles cut into 2 …
  ``max_splits`` splits, ⌈tiles/splits⌉ each or as even as possible); the reduction of the
  partials (in split order, a pairwise or halving tree, a tree of halves where a kernel-name
  family says so), each partial rounded to the output format or not; residue-first tiles; 8
  products per instruction where the unit's group is 16; where C enters (chain, workspace,
  epilogue) — :func:`matrix_unit_candidates`;
* ``simt-fp32`` (fp32 operands multiplied whole: fp32 captures, and the CUDA-core kernels of
  tf32 ones): the fp32 FMA unit (``emu.simt``), few candidates — one k-ascending chain; 32 lanes
  of a warp, lane j over k ≡ j (mod 32), reduced by the warp's halving tree (cuBLAS gemv,
  cuDNN's grouped-direct wgrad), and the other lane counts; split-K over k tiles of 8 and its
  multiples, ⌈tiles/splits⌉ per split, the partials added onto +0 in split order (CUTLASS
  ``ReduceSplitK``, cuBLAS ``splitKreduce``); C and alpha/beta in the epilogue —
  :func:`simt_candidates`;
* ``cublas-orders`` (NVIDIA GEMMs) and ``amd`` (a capture whose ``gpu`` is an MI100, MI200 or
  MI300): the named library orders of :mod:`.orders` — cuBLAS's CUTLASS split-K with its merges,
  ``gemmSN`` and ``gemv2`` as facebookexperimental/triton's ``bitequiv/`` documents them; Tensile
  GlobalSplitU, StaggerU, Stream-K and composable_kernel split-K from their source — listed first,
  each candidate carrying its family's name;
* ``fp8`` (``scaled_mm``): one chain of the unit (fast accumulation) or two-level accumulation at
  each promotion interval, times the scale orders and the bias's FMA or add —
  :func:`scaled_candidates`; when none reproduces, the fp8 search (:mod:`.scaled`) also runs
  the accumulations of :func:`scaled_split_schedules` (split-K over whole CTA k tiles) with every
  epilogue of :func:`epilogues`.

Every bound (k-tile widths, lanes, the most splits, residue tiles, channel blocks, promotion
intervals, the most candidates) is a field of :data:`BOUNDS`, shared by every family.

**Adding a family** (an fp32 SIMT GEMM, convolutions of other formats, Winograd): write a
function ``(cap, unit_name) -> iterable of Candidate`` that draws its widths and counts from
:data:`BOUNDS`, and append ``Family(name, applies, function)`` to :data:`FAMILIES`
(``applies(cap)`` says which captures it is for). :func:`candidates` lists the families' candidates
in order, each once; the sampled search (:mod:`.search`) groups them into tiers by unit and by
the kernel-name families of :mod:`models.libraries`. A family whose GEMMs are not the capture's
plain or implicit GEMMs also needs a :class:`Variant` field that :func:`.gemms.jobs_of` honours.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import emu
from emu.implicit_gemm import K_ORDERS
from emu.schedule import SCALE_ORDERS, Schedule
from models.libraries import channel_tile_from_name, is_amd, k_tile_from_name, matching, tf32_roundings

from .capture import PASS_OF, Capture
from .convs import SHMEM_TILING, SHMEM_TILING_TREE, quad_load_width, shmem_tiling_layout
from .gemms import Candidate, Variant, gemm_dims, image_tile, lane_layout, search_unit_params
from .orders import (
    GEMM_OPS,
    XMMA_MAX_SPLITS,
    amd_candidates,
    cublas_candidates,
    round_robin_splits,
    split_k_in_place_tile,
)

__all__ = [
    "BOUNDS",
    "FAMILIES",
    "Family",
    "SpaceBounds",
    "candidates",
    "epilogue_orders",
    "epilogues",
    "matrix_unit_candidates",
    "scaled_candidates",
    "scaled_split_schedules",
    "shmem_tiling_candidates",
    "wgrad_splitk_candidates",
    "simt_candidates",
    "simt_schedules",
    "split_schedules",
    "variants",
    "with_epilogue",
]


@dataclass(frozen=True)
class SpaceBounds:
    """The bounds of the schedule space, one set for every family and format."""

    #: k-tile widths splits are made of, in the order they are tried (a family's own widths first)
    k_tiles: tuple[int, ...] = (64, 128, 32, 16, 8, 256)
    #: lanes of strided splits (threads that each take every n-th k, then reduce)
    lanes: tuple[int, ...] = (32, 64, 128, 256, 16, 8)
    #: the most splits tried per k-tile width (fp16, bf16, tf32 and fp8 alike)
    max_splits: int = 128
    #: the most splits of a family whose splits are segments reduced as a tree of halves (cuDNN's
    #: sm90 segment-K wgrad: 7 segments measured for 18 output tiles on a 132-SM H200; a small
    #: output over a long gemmK may take one per SM)
    segments: int = 264
    #: residue-first tile widths (CUTLASS 2.x), after a capture's own k tiles
    residue_tiles: tuple[int, ...] = (64, 32, 128, 16)
    #: channel blocks of a convolution's gemmK (0: none)
    channel_blocks: tuple[int, ...] = (0, 64, 32, 16, 8, 128, 256)
    #: the k of one fp8 wgmma (m64nNk32): the k tile promotion intervals and fp8 split bounds count
    fp8_k_tile: int = 32
    #: promotion intervals tried, in wgmma k-blocks (CUTLASS's default mma_promotion_interval is 4)
    promotion_intervals: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    #: k-tile widths a split-K fp8 kernel cuts K into (whole CTA k tiles of 4, 2 or 8 wgmma k-blocks)
    fp8_split_tiles: tuple[int, ...] = (128, 64, 256)
    #: the most candidates judged in all
    max_candidates: int = 60000
    #: the most candidates (fp8: accumulations) run on every output after the samples
    max_full: int = 6
    #: beyond ``max_full``, more candidates of the kernel names' families that pass both samples
    #: run on every output while the outputs so run stay under this many (a small capture whose
    #: output format cannot tell several orders apart in the samples: a 1,152-output fp16 weight
    #: gradient with 16)
    full_outputs: int = 1 << 17
    #: k-tile widths of fp32 SIMT split-K (cuBLAS's simt sgemm splits in tiles of 4 on an H200;
    #: CUTLASS's threadblock k tile of 8 and its multiples)
    simt_k_tiles: tuple[int, ...] = (4, 8, 16, 32, 64, 128, 256)
    #: CUDA-core lane layouts: lane counts, grains (consecutive k per lane and turn)
    simt_lanes: tuple[int, ...] = (32, 16, 8, 4, 2, 64)
    simt_grains: tuple[int, ...] = (1, 4, 8)
    #: the most splits of fp32 SIMT split-K (cuBLAS's SIMT sgemm goes to one k tile per split, as its
    #: CUTLASS tensor-op split-K does: an H200 linear of K = 7361 ran 132 splits of 56 k); only the
    #: distinct split ranges are kept, about 2·√tiles of them
    simt_max_splits: int = 4096
    #: the most splits of 8-wide k tiles dealt round-robin (the xmma ffma GEMM's split_k kernel; an H200
    #: linear of K = 3838 ran 33)
    simt_round_robin: int = 128


#: the bounds of the space (see :class:`SpaceBounds`)
BOUNDS = SpaceBounds()


def variants(cap: Capture, named) -> list[Variant]:
    """How the capture becomes GEMMs: the kernel-name families' gemmK orders and channel blocks
    first, then every order, block and flip. tf32 operands: a GEMM with each of the kernel's own
    roundings to tf32 (:func:`models.libraries.tf32_roundings`, the one the kernel names say
    first: ties away for sm_80 code, ties to even otherwise; then the raw bits); a convolution
    every variant with each rounding in that order (the fp32 FMA unit of :func:`simt_candidates`
    takes the operands whole)."""
    if cap.input != "tf32":
        return [Variant()] if cap.conv is None else conv_variants(cap, named)
    roundings = tf32_roundings(cap.kernels)
    if cap.conv is None:
        return [Variant(tf32_rounding=r) for r in roundings]
    base = conv_variants(cap, named)
    return [replace(v, tf32_rounding=r) for r in roundings for v in base]


def conv_variants(cap: Capture, named) -> list[Variant]:
    """A convolution's gemmK orders, channel blocks and flips (see :func:`variants`)."""
    pass_ = PASS_OF[cap.op]
    if cap.conv.R * cap.conv.S == 1 and pass_ != "bwd_weight":  # a 1×1 filter: every order is the channel order
        return [Variant(K_ORDERS[pass_][0])]
    channels = cap.conv.Cg if pass_ == "fwd" else cap.conv.Kg
    flips = (False, True) if pass_ == "bwd_data" else (False,)
    seen, out = set(), []

    def add(order, block, flip):
        block = block if 1 < block < channels and channels % block == 0 else 0
        key = ("blk", block, flip) if block else (order, 0, flip)
        if key not in seen:
            seen.add(key)
            out.append(Variant(order, block, flip))

    quads = quad_load_width(cap.kernels) if pass_ == "fwd" else 0
    if quads:  # cuDNN's fprop without shared memory, 8-aligned: (r, s, c) as a quad's loads reach the unit, first
        out.append(Variant(K_ORDERS[pass_][0], quad_loads=quads))
    tiled = channel_tile_from_name(cap.kernels) if pass_ != "bwd_weight" else None
    if tiled:  # the k-tile rule of cuDNN's NHWC tensor-core kernels, first: (c // T, r, s, c % T), padded to T
        T, rotated = tiled
        out.append(Variant(K_ORDERS[pass_][0], T, rotated, channel_tile=T))
        seen.add(("tile", T, rotated))
    for fam in named:
        for order in fam.k_orders or K_ORDERS[pass_]:
            if order in K_ORDERS[pass_]:
                for block in fam.channel_blocks:
                    for flip in fam.flip:
                        add(order, block, flip)
    for order in K_ORDERS[pass_]:
        for block in BOUNDS.channel_blocks:
            for flip in flips:
                add(order, block, flip)
    return out


def split_schedules(K: int, tiles_first: tuple[int, ...] = (), output: str | None = None) -> list[Schedule]:
    """One chain, then splits of k tiles: ⌈tiles/splits⌉ tiles each (CUTLASS's and cuBLAS's
    ``gemm_k_size``: ⌈K/splits⌉ rounded up to the k tile) for tiles of 8 … 256, then single k
    values as even as possible (``emu.GemmOrder``'s split); each distinct set of bounds once."""
    out = [Schedule(output=output)]
    seen = set()
    for lanes in BOUNDS.lanes:
        if lanes < K:
            out.append(Schedule(splits=lanes, split_rule="strided", output=output))
    widths = tiles_first + tuple(t for t in BOUNDS.k_tiles if t not in tiles_first)
    for rule, tile_widths in (("ceil", widths), ("even", (1,))):
        for kt in tile_widths:
            tiles = -(-K // kt)
            for s in range(2, min(tiles, BOUNDS.max_splits) + 1):
                try:
                    sch = Schedule(k_tile=kt, splits=s, split_rule=rule, output=output)
                    ranges = tuple((r.start, r.stop) for r in sch.split_ranges(K))
                except ValueError:
                    continue
                if ranges in seen:
                    continue
                seen.add(ranges)
                out.append(sch)
    return out


def split_shapes(base: Schedule, reductions, c_entries, K: int, residue_tiles, group: int, partials=(None,)):
    """(reduction, C entry, residue tile) per split schedule: the residue-first variants
    (CUTLASS 2.x) only where they move the unit's group boundaries (a zero fill of whole groups
    in front of a chain from +0 changes nothing)."""
    lengths = [r.stop - r.start for r in base.split_ranges(K)]
    if base.split_rule == "strided":
        residue_tiles = ()
    tiles = [t for t in residue_tiles if any(n % t and (t - n % t) % group for n in lengths)]
    formats = partials if base.splits > 1 else (None,)
    for red in reductions:
        for ce in c_entries:
            for pf in formats:
                yield red, ce, 0, pf
                for tile in tiles:
                    yield red, ce, tile, pf


def matrix_unit_candidates(cap: Capture, unit_name: str) -> list[Candidate]:
    """The ``matrix-unit`` family (see the module docstring): every unit, variant, instruction K,
    accumulation, reduction, partial format, residue tile and C entry, the kernel names'
    families' variants and k tiles first."""
    named = matching(cap.kernels, cap.op)
    hinted_tile = k_tile_from_name(cap.kernels)
    kinds = variants(cap, named)
    _, _, K = gemm_dims(cap, kinds[0])
    # fp32 FMA on 32-bit operands multiplies them whole: the simt-fp32 family's
    units = [unit_name] if cap.input in ("tf32", "fp32") else [unit_name, "fma32"]
    fp16_acc = cap.input == "fp16" and cap.out_format == "fp16"
    if fp16_acc and search_unit_params(unit_name, cap.input).family == emu.Family.TRUNCATED_FUSED:
        units.insert(1, f"{unit_name}/fp16")  # NVIDIA units also accumulate in fp16 (…_f16_s161616gemm_f16)
    if any(f.unit == "fma32" for f in named):
        units = ["fma32"] + [u for u in units if u != "fma32"]
    image = image_tile(cap)
    tiles_first = tuple(
        dict.fromkeys(
            ([image] if image else [])
            + ([hinted_tile] if hinted_tile else [])
            + [t for f in named for t in f.k_tiles if t > 1]
        )
    )
    splits = split_schedules(K, tiles_first, cap.out_format)
    residue_tiles = tuple(dict.fromkeys(tiles_first + BOUNDS.residue_tiles))
    partials = (None, cap.out_format) if cap.out_format != "fp32" else (None,)
    has_c = "C" in cap.operands or "bias" in cap.operands
    c_entries = ("epilogue", "chain") if has_c else ("chain",)
    if cap.alpha != 1 or cap.beta != 1:
        c_entries = ("epilogue",)
    # a tree of halves only where a kernel-name family says so (cuDNN's sm90 segment-K wgrad), on its tiles,
    # up to BOUNDS.segments (a segment per SM of a 132-SM GPU and more: more than max_splits)
    bisection = {t for f in named if f.reduction == "bisection" for t in f.k_tiles}
    for t in sorted(bisection):
        tiles = -(-K // t)
        for count in range(BOUNDS.max_splits + 1, min(tiles, BOUNDS.segments) + 1):
            sch = Schedule(k_tile=t, splits=count, split_rule="ceil", output=cap.out_format)
            try:
                sch.split_ranges(K)
            except ValueError:
                continue  # ⌈tiles/count⌉ tiles each leave a split empty
            splits.append(sch)
    out: list[Candidate] = []
    seen = set()
    for u in units:
        group = search_unit_params(u, cap.input).group_size
        iks = (0, group // 2) if u != "fma32" and group >= 8 else (0,)
        for variant in kinds:
            for ik in iks:
                for base in splits:
                    reductions = (
                        ("sequential", "tree") if base.splits > 3 else ("sequential",)
                    )  # 3: (p0+p1)+p2 either way
                    if base.k_tile in bisection and base.splits > 2 and base.splits & (base.splits - 1):
                        reductions += ("bisection",)  # a power of two: the pairwise tree
                    if base.splits > BOUNDS.max_splits:  # the segment counts beyond: the family's tree only
                        reductions = reductions[-1:]
                    if base.split_rule == "strided":
                        reductions = ("halving", "tree", "sequential")
                    for red, ce, tile, pf in split_shapes(
                        base, reductions, c_entries, K, residue_tiles, ik or group, partials
                    ):
                        sch = Schedule(
                            k_tile=base.k_tile,
                            splits=base.splits,
                            split_rule=base.split_rule,
                            reduction=red,
                            instruction_k=ik,
                            residue_tile=tile,
                            partial_format=pf,
                            c_entry=ce,
                            alpha=cap.alpha,
                            beta=cap.beta,
                            output=cap.out_format,
                        )
                        key = (u, variant, sch)
                        if key not in seen:
                            seen.add(key)
                            out.append(Candidate(u, variant, sch))
    return epilogue_orders(out, cap.alpha)


def epilogue_orders(cands: list[Candidate], alpha: float) -> list[Candidate]:
    """``cands`` with, after each whose C enters the epilogue, the same with the epilogue's other
    order: CUTLASS's ``LinearCombination`` (``include/cutlass/epilogue/thread/
    linear_combination.h``: beta·C rounded, then alpha·acc added in one FMA, the schedule's
    default) or alpha·acc rounded first and beta·C added after (``epilogue_fma=False``). Only
    where alpha is not a power of two: otherwise alpha·acc is exact and both give the same bits."""
    if math.frexp(abs(alpha))[0] == 0.5:
        return cands
    out = []
    for c in cands:
        out.append(c)
        if c.schedule.c_entry == "epilogue":
            out.append(replace(c, schedule=replace(c.schedule, epilogue_fma=False)))
    return out


def scaled_candidates(cap: Capture, unit_name: str) -> list[Candidate]:
    """Every schedule of a ``scaled_mm`` capture: one chain of the unit (fast accumulation) or
    two-level accumulation at each promotion interval that leaves more than one interval, times
    the scale orders (``emu.schedule.SCALE_ORDERS``) and, with a bias, its FMA or separate add.
    ``use_fast_accum`` only decides which come first: the output decides."""
    K = cap.operands["A"].shape[1]
    intervals = [0] + [n for n in BOUNDS.promotion_intervals if n * BOUNDS.fp8_k_tile < K]
    if not cap.extra.get("use_fast_accum"):
        intervals = intervals[1:] + intervals[:1]
    has_bias = "bias" in cap.extra
    out = []
    for n in intervals:
        for order in SCALE_ORDERS:
            for fma in (True, False) if has_bias else (True,):
                sch = Schedule(
                    k_tile=BOUNDS.fp8_k_tile if n else 1,
                    promotion_interval=n,
                    scale_order=order,
                    epilogue_fma=fma,
                    c_entry="epilogue" if has_bias else "chain",
                    output=cap.out_format,
                )
                out.append(Candidate(unit_name, Variant(), sch, "fp8-promotion" if n else "fp8-fast-accum"))
    return out


def scaled_split_schedules(K: int) -> list[Schedule]:
    """The accumulation schedules of split-K fp8 kernels (no epilogue, fp32 output): K cut into
    k tiles of ``BOUNDS.fp8_split_tiles``, ⌈tiles/splits⌉ per split (cuBLAS's rule, as for its
    fp16 nvjet split-K), 2 … ``BOUNDS.max_splits`` splits, each distinct set of bounds once;
    in each split one chain of the unit (fast accumulation) or two-level accumulation at each
    promotion interval shorter than the longest split (intervals counted from the split's
    start); the partials added in fp32 in split order, as ``splitKreduce`` does. The bounds are
    given in 32-wide k-blocks (``split_bounds``) so the promotion interval counts wgmma k-blocks."""
    blocks = -(-K // BOUNDS.fp8_k_tile)
    seen, out = set(), []
    for width in BOUNDS.fp8_split_tiles:
        step = width // BOUNDS.fp8_k_tile
        tiles = -(-K // width)
        for splits in range(2, min(tiles, BOUNDS.max_splits) + 1):
            per = -(-tiles // splits)
            bounds = tuple(sorted({min(blocks, i * per * step) for i in range(splits + 1)}))
            if len(bounds) != splits + 1 or bounds in seen:
                continue
            seen.add(bounds)
            longest = max(b1 - b0 for b0, b1 in zip(bounds[:-1], bounds[1:]))
            for n in (0,) + tuple(n for n in BOUNDS.promotion_intervals if n < longest):
                out.append(
                    Schedule(
                        k_tile=BOUNDS.fp8_k_tile,
                        splits=splits,
                        split_bounds=bounds,
                        promotion_interval=n,
                        output="fp32",
                    )
                )
    return out


def epilogues(cap: Capture) -> list[tuple[str, bool]]:
    """(scale order, bias in one FMA) pairs :func:`scaled_candidates` tries."""
    return [(order, fma) for order in SCALE_ORDERS for fma in ((True, False) if "bias" in cap.extra else (True,))]


def with_epilogue(cap: Capture, acc: Schedule, order: str, fma: bool) -> Schedule:
    return replace(
        acc,
        scale_order=order,
        epilogue_fma=fma,
        c_entry="epilogue" if "bias" in cap.extra else "chain",
        output=cap.out_format,
    )


def simt_schedules(K: int, c_entries=("chain",), alpha: float = 1.0, beta: float = 1.0, splits: bool = True):
    """The accumulations of the ``simt-fp32`` family, cheapest first: one chain; 32 lanes over
    k ≡ j (mod 32) reduced by a halving tree (then a pairwise tree, then in order), the other
    lane counts of ``BOUNDS.lanes`` halving; with ``splits``, ⌈tiles/splits⌉ k tiles of
    ``BOUNDS.simt_k_tiles`` per split, 2 … ``BOUNDS.simt_max_splits`` splits, partials added onto +0
    in split order; each with every C entry (alpha, beta in the epilogue)."""
    shapes: list[dict] = [{}]
    for lanes in BOUNDS.lanes:
        if 1 < lanes < K:
            for red in ("halving", "tree", "sequential") if lanes == 32 else ("halving",):
                shapes.append(dict(splits=lanes, split_rule="strided", reduction=red))
    if splits:
        seen = set()
        for kt in BOUNDS.simt_k_tiles:
            tiles = -(-K // kt)
            for n in range(2, min(tiles, BOUNDS.simt_max_splits) + 1):  # every count: ~2·√tiles distinct
                try:
                    sch = Schedule(k_tile=kt, splits=n, split_rule="ceil", reduction="workspace")
                    ranges = tuple((r.start, r.stop) for r in sch.split_ranges(K))
                except ValueError:
                    continue
                if ranges not in seen:
                    seen.add(ranges)
                    shapes.append(dict(k_tile=kt, splits=n, split_rule="ceil", reduction="workspace"))
    out = []
    for shape in shapes:
        for ce in c_entries:
            ab = dict(alpha=alpha, beta=beta) if ce == "epilogue" else {}
            out.append(Schedule(**shape, c_entry=ce, output="fp32", **ab))
    return out


def simt_candidates(cap: Capture, unit_name: str) -> list[Candidate]:
    """The ``simt-fp32`` family (see the module docstring): the fp32 FMA unit on whole fp32
    operands, every gemmK variant (without tf32 rounding) times :func:`simt_schedules`; splits of
    K for GEMMs and weight gradients (a forward or backward-data convolution's cuDNN CUDA-core
    kernels run one chain or lanes per output)."""
    named = matching(cap.kernels, cap.op)
    kinds = [Variant()] if cap.conv is None else conv_variants(cap, named)  # fp32 whole: no tf32 rounding
    _, _, K = gemm_dims(cap, kinds[0])
    has_c = "C" in cap.operands or "bias" in cap.operands
    c_entries = ("epilogue", "chain") if has_c else ("chain",)
    if cap.alpha != 1 or cap.beta != 1:
        c_entries = ("epilogue",)
    splits = cap.conv is None or PASS_OF[cap.op] == "bwd_weight"
    schedules = simt_schedules(K, c_entries, cap.alpha, cap.beta, splits)
    out = [Candidate("fma32", v, sch) for v in kinds for sch in schedules]
    taps = image_tile(cap) if cap.conv is not None and PASS_OF[cap.op] == "bwd_data" else 0
    if taps:  # cuDNN dgrad2d_alg1_1: a chain per filter tap over the channels, added onto +0 in tap order
        tap_kinds = [v for v in kinds if v.k_order == "rsk"]
        out[:0] = [Candidate("fma32", v, sch) for v in tap_kinds for sch in _tap_schedules(cap, taps, c_entries)]
    if cap.conv is None:
        out.extend(lane_candidates(K, c_entries, cap.alpha, cap.beta))
    elif PASS_OF[cap.op] == "bwd_weight" and K < 32:  # grouped-direct wgrad: 32 lanes even when fewer have k
        out.extend(lane_candidates(K, c_entries, cap.alpha, cap.beta, kinds[0]))
    return epilogue_orders(out, cap.alpha)


def _tap_schedules(cap: Capture, tile: int, c_entries) -> list[Schedule]:
    """One split per filter tap of ``tile`` gemmK entries (a tap's channels), each an FMA chain
    from +0, the partials added onto +0 in tap order (cuDNN's ``dgrad2d_alg1_1``, see
    :func:`.gemms.image_tile`)."""
    taps = cap.conv.R * cap.conv.S
    return [
        Schedule(k_tile=tile, splits=taps, split_rule="ceil", reduction="workspace", c_entry=ce, output="fp32")
        for ce in c_entries
        if ce != "epilogue"
    ]


#: the lanes that load k in cuBLAS's ``gemvNSP_kernel<…, 1, 16, 4, 1024, …>``: 96 k (24 lanes of 4)
#: per turn, the warp's 32 lanes then added by the halving tree (order probes on an H200, mm
#: 1×K×1148 for K of 129 … 163, tests/data/captures/h200_probes)
GEMVNSP_LANES = 24


def lane_candidates(K: int, c_entries, alpha: float, beta: float, base: Variant | None = None) -> list[Candidate]:
    """cuBLAS's CUDA-core GEMV and small-GEMM kernels (H200 captures, see
    :mod:`emu.lanes`): gemmK dealt to lanes, strided (round-robin, ``grain`` consecutive k per
    turn) or in contiguous chunks, each lane an fp32 FMA chain from +0, the lanes added by a
    halving (shuffle-down) tree, in lane order or pairwise — ``gemvx`` (32 lanes, chunked for the
    contiguous operand, strided for the other; fewer for short K), ``gemmSN`` (16 strided or 2
    chunks, in order), ``gemvNSP`` (16 or 32 lanes of 4), ``gemv2T`` (16 strided, in order); and
    the xmma ffma GEMM's ``split_k`` (8-wide k tiles dealt round-robin to 2 …
    ``BOUNDS.simt_round_robin`` splits, added in order). Lanes without k keep a +0 partial."""
    shapes = []
    for layout in ("chunked", "strided"):
        for n in BOUNDS.simt_lanes:
            if n > max(K, 2) and n != 32:  # a warp's 32 lanes, some without k
                continue
            for grain in BOUNDS.simt_grains:
                if grain > 1 and grain * n > K + grain * n // 2:
                    continue
                for red in ("halving", "sequential", "tree"):
                    shapes.append((layout, n, grain, red))
    for n in range(2, BOUNDS.simt_round_robin + 1):
        if 8 * (n - 1) < K:
            shapes.append(("strided", n, 8, "sequential"))
    if K > 4 * GEMVNSP_LANES:  # below, the same order as a warp's 32 lanes of 4
        shapes.append(("warp-strided", GEMVNSP_LANES, 4, "halving"))
    out, seen = [], set()
    for layout, n, grain, red in shapes:
        seq, bounds = lane_layout(K, layout, n, grain)
        key = (bounds, tuple(seq.tolist()), red)
        if key in seen:
            continue
        seen.add(key)
        for ce in c_entries:
            ab = dict(alpha=alpha, beta=beta) if ce == "epilogue" else {}
            sch = Schedule(
                k_tile=1,
                splits=len(bounds) - 1,
                split_rule="strided" if layout == "strided" else "ceil",
                split_bounds=bounds,
                reduction=red,
                c_entry=ce,
                output="fp32",
                **ab,
            )
            out.append(Candidate("fma32", replace(base or Variant(), lanes=(layout, n, grain)), sch))
    return out


def shmem_tiling_candidates(cap: Capture, unit_name: str) -> list[Candidate]:
    """cuDNN's ``wgrad2d_shmem_tiling`` (:func:`.convs.shmem_tiling_layout`) for a weight gradient
    that names it or names no kernel: on the fp32 FMA unit, one split per group (an FMA chain from
    +0), each thread's groups added in order from its first, the 8 threads by
    :data:`.convs.SHMEM_TILING_TREE`, one rounding to the output format."""
    if cap.input not in ("fp16", "bf16") or (
        cap.kernels and not any(re.search(SHMEM_TILING, str(k)) for k in cap.kernels)
    ):
        return []
    s = cap.conv
    _, groups, width = shmem_tiling_layout(s.N, s.P, s.Q)
    if 8 * groups > emu.schedule.MAX_SPLITS:
        return []
    sch = Schedule(
        k_tile=width,
        splits=8 * groups,
        split_rule="ceil",
        reduction="program",
        reduction_program=(("chunks-first", groups),) + SHMEM_TILING_TREE,
        output=cap.out_format,
    )
    return [Candidate("fma32", Variant("npq", pixel_tile=8), sch, "cudnn-wgrad2d-shmem")]


#: cuDNN's sm80 xmma weight gradient, the k tile in its name (``…_tilesize32x32x64_…``)
XMMA_WGRAD = r"sm80_xmma_wgrad_implicit_gemm\w*_tilesize\d+x\d+x(\d+)_"


def wgrad_splitk_candidates(cap: Capture, unit_name: str) -> list[Candidate]:
    """cuDNN's sm80 xmma weight gradient with split-K in place (a ``Memset`` before it): gemmK
    (n, p, q) in k tiles of the name's width dealt round-robin to 2 … 32 splits, each split a
    chain of the unit from +0, the partials added one after the other in the order 0, S − 1, 1,
    2, …, S − 2 (order probes on an H200, fp16: every pair of k tiles for 8 and 9 splits, and
    (p0 + p2) + p1 for three), or in split order, by the halving tree or pairwise (a random
    six-split capture); fp16 data on the kernel named ``…tf32f32_tf32f32…`` with the m16n8k8's 8
    products per mma."""
    tile = split_k_in_place_tile(cap, XMMA_WGRAD)
    if tile is None:
        return []
    # fp16 data on the kernel named tf32 (cuDNN converts it): the m16n8k8's 8 products per mma
    named_tf32 = any(re.search(XMMA_WGRAD, str(k)) and "tf32f32_tf32f32" in str(k) for k in cap.kernels)
    ik = 8 if cap.input == "fp16" and named_tf32 else 0

    def reductions(n):
        last_second = (0, n - 1) + tuple(range(1, n - 1))  # the partials in the order 0, S − 1, 1, 2, …
        return [(None, "sequential"), (last_second, "sequential"), (None, "halving"), (None, "tree")]

    return _round_robin_wgrad(cap, unit_name, tile, ik, reductions, "cudnn-wgrad-splitk")


def _round_robin_wgrad(cap: Capture, unit_name: str, tile: int, ik: int, reductions, family: str) -> list[Candidate]:
    """A weight gradient's split-K candidates: gemmK (n, p, q) in k tiles of ``tile`` dealt
    round-robin to 2 … 32 splits, each a chain of the unit from +0 with ``ik`` products per
    instruction, the partials reduced as each (split order, reduction) of ``reductions(S)`` says;
    a TF32 capture in the rounding its kernel names say."""
    K = cap.conv.N * cap.conv.P * cap.conv.Q
    roundings = tf32_roundings(cap.kernels)[:1] if cap.input == "tf32" else ("",)
    out = []
    for n in range(2, min(-(-K // tile), XMMA_MAX_SPLITS) + 1):
        for split_order, red in reductions(n):
            order, bounds = round_robin_splits(K, tile, n, split_order)
            sch = Schedule(
                k_tile=1, splits=n, split_bounds=bounds, split_rule="ceil", reduction=red, instruction_k=ik,
                output=cap.out_format,
            )  # fmt: skip
            for r in roundings:
                variant = Variant("npq", tf32_rounding=r, k_blocks=(tile, order))
                out.append(Candidate(unit_name, variant, sch, family))
    return out


#: cuDNN's CUTLASS weight gradient (a mangled ``ImplicitGemmConvolution`` of
#: ``Conv2dWgrad…`` iterators): its threadblock shape, the k tile the third number
CUTLASS_WGRAD = r"ImplicitGemmConvolution\w*?GemmShapeILi\d+ELi\d+ELi(\d+)EEENS\w*Conv2dWgrad"


def cutlass_wgrad_splitk_candidates(cap: Capture, unit_name: str) -> list[Candidate]:
    """cuDNN's CUTLASS weight gradient with a parallel split-K (``Memset``, the
    ``ImplicitGemmConvolution`` kernel, then CUTLASS's ``ReduceSplitK`` adding the fp32 workspace
    slices in order): gemmK (n, p, q) in k tiles of the threadblock's K (32 for
    ``GemmShape<64, 64, 32>``) dealt round-robin to 2 … 32 splits, each a chain of the unit from +0
    (the TF32 ``m16n8k8``, named by ``tfloat32_t``: 8 products per mma), the partials added in
    split order (order probes on an H200 under ``cudnn.benchmark``: every pair of k tiles of a
    128-channel 28×28 TF32 weight gradient, 7 splits)."""
    tile = split_k_in_place_tile(cap, CUTLASS_WGRAD)
    if tile is None or not any("ReduceSplitK" in str(k) for k in cap.kernels):
        return []
    # the TF32 m16n8k8 adds 8 products per mma (fp16 data converted for it too); else the unit's own
    ik = 8 if any(re.search(CUTLASS_WGRAD, str(k)) and "tfloat32_t" in str(k) for k in cap.kernels) else 0
    in_order = lambda n: [(None, "sequential")]  # noqa: E731 - the slices in order
    return _round_robin_wgrad(cap, unit_name, tile, ik, in_order, "cudnn-cutlass-wgrad-splitk")


def _wgrad_orders(cap: Capture, unit_name: str) -> list[Candidate]:
    return (
        shmem_tiling_candidates(cap, unit_name)
        + wgrad_splitk_candidates(cap, unit_name)
        + cutlass_wgrad_splitk_candidates(cap, unit_name)
    )


@dataclass(frozen=True)
class Family:
    """A family of the space: ``candidates(cap, unit_name)`` lists its candidates for a capture
    that ``applies(cap)``."""

    name: str
    applies: Callable[[Capture], bool]
    candidates: Callable[[Capture, str], Iterable[Candidate]]


#: the families of the space, in the order they are listed (see the module docstring); the named
#: library orders first, so that a schedule they share with a generic family keeps its name
FAMILIES: list[Family] = [
    Family("cudnn-wgrad-orders", lambda cap: cap.conv is not None and PASS_OF[cap.op] == "bwd_weight", _wgrad_orders),
    Family(
        "cublas-orders",
        lambda cap: cap.op in GEMM_OPS and cap.conv is None and not is_amd(cap.gpu),
        cublas_candidates,
    ),
    Family("amd", lambda cap: cap.op in GEMM_OPS and cap.conv is None and is_amd(cap.gpu), amd_candidates),
    Family("simt-fp32", lambda cap: cap.input in ("fp32", "tf32") and cap.op != "scaled_mm", simt_candidates),
    Family("matrix-unit", lambda cap: cap.op != "scaled_mm" and cap.input != "fp32", matrix_unit_candidates),
    Family("fp8", lambda cap: cap.op == "scaled_mm", scaled_candidates),
]


def candidates(cap: Capture, unit_name: str) -> tuple[list[Candidate], list[str]]:
    """Every candidate for the capture: the candidates of each family of :data:`FAMILIES` that
    applies, in order, each once, at most ``BOUNDS.max_candidates``; and the hints (the
    kernel-name families :mod:`models.libraries` matched, and a note when the space was cut)."""
    out: list[Candidate] = []
    seen = set()
    for fam in FAMILIES:
        if not fam.applies(cap):
            continue
        for c in fam.candidates(cap, unit_name):
            key = (c.unit, c.variant, c.schedule, c.merge)
            if key not in seen:
                seen.add(key)
                out.append(c)
    hints = [f.name for f in matching(cap.kernels, cap.op)]
    if len(out) > BOUNDS.max_candidates:
        hints.append(f"space cut to its first {BOUNDS.max_candidates} of {len(out)} candidates")
    return out[: BOUNDS.max_candidates], hints
