"""A capture as GEMMs, and one point of the schedule space run on them.

:class:`Variant` says how a convolution becomes GEMMs (gemmK order, channel blocks, a rotated
filter) and whether a tf32 kernel rounds its operands first; :class:`Candidate` is a unit, a
variant and an :class:`emu.schedule.Schedule`; :func:`jobs_of` cuts a capture into its GEMMs
(:class:`GemmJob`), whole or sampled; :func:`run_candidate` computes a capture's whole output with
a candidate through :func:`emu.gemm`; :func:`resolve_unit` names the unit a capture is searched
with.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

import emu
import models
from emu.dot import unit_params
from emu.gemm import finish, fma32
from emu.implicit_gemm import conv_pieces
from emu.lanes import lane_of_k
from emu.operands import TF32_ROUNDINGS, multiplied_values, tf32_operands, value_dtype
from emu.schedule import Schedule
from emu.simt import FMA32_PARAMS, fma_gemm
from models.libraries import unit_from_gpu

from .capture import PASS_OF, Capture, CaptureError, GemmJob

__all__ = [
    "TF32_ROUNDINGS",
    "TF32_ROUNDING_TEXT",
    "MAGNITUDE_WORK",
    "product_magnitudes",
    "Candidate",
    "GemmJob",
    "MERGES",
    "SearchResult",
    "Variant",
    "batch_operands",
    "batched",
    "bits",
    "block_order",
    "full_fp32",
    "gemm_dims",
    "image_tile",
    "jobs_of",
    "lane_layout",
    "model_unit",
    "n_jobs",
    "operand_values",
    "resolve_unit",
    "run_candidate",
    "search_unit_params",
    "serial_merge",
]


#: split-K merges a :class:`Candidate` can name beyond the schedule's reduction: ``"serial"`` is
#: CUTLASS's ``GemmSplitKSerial`` (include/cutlass/gemm/kernel/gemm.h, github.com/NVIDIA/cutlass):
#: split i's epilogue reads the output split i − 1 wrote (rounded to the output format) as its
#: source, D_i = RN_out(alpha·acc_i + D_{i−1}); the "serial fp16 chain" cuBLAS runs for most
#: unaligned split-K shapes (facebookexperimental/triton, bitequiv/cublas_match/kernels.py,
#: ``_splitk_combine_modes`` CMODE 3)
MERGES = ("", "serial")

#: how a kernel rounds fp32 operands to tf32 before its mma (:data:`emu.operands.TF32_ROUNDINGS`):
#: ``"rne"`` to nearest, ties to even (CUTLASS's ``NumericConverter<tfloat32_t, float>``, code
#: built for sm_90; the H200 tf32 GEMMs), ``"rna"`` ties away from zero (PTX ``cvt.rna.tf32.f32``,
#: code built for sm_80: cuDNN's sm80 tf32 convolutions on an H200), or ``""``: the raw fp32 bits
#: reach the unit, which drops the 13 low ones (RZ, the unit's model)
TF32_ROUNDING_TEXT = {
    "rne": "operands rounded to tf32 (RNE) before the unit",
    "rna": "operands rounded to tf32 (to nearest, ties away: cvt.rna of sm_80 code) before the unit",
}


#: the operands a capture's GEMMs multiply (C and a bias are added, never rounded to tf32)
MULTIPLIED = ("A", "B", "input", "weight", "grad_output")


_FPROP_4X4 = (
    "Winograd F(4x4, 3x3) at (0, ±1, ±1/2), the fractions in the output transform: data, filter and output "
    "transforms in fp32 in cuDNN's measured order, per position one fp32 FMA chain over c ascending"
)
_FPROP_9X9 = (
    "Winograd F(9x9, 5x5) on 13x13 tiles at (0, ±1, ±1/2, ±1/3, ±3/2, -3, ±2), the fractions in the output "
    "transform: data, filter and output transforms in fp32 in cuDNN's measured order, per position one fp32 FMA "
    "chain over c ascending"
)
#: what each cuDNN Winograd order (:data:`models.libraries.CUDNN_WINOGRAD`) computes, as a candidate describes it
WINOGRAD_TEXT = {
    "cudnn-fprop-4x4": f"{_FPROP_4X4} (cuDNN winogradForward*4x4)",
    "cudnn-fprop-9x9": f"{_FPROP_9X9} (cuDNN winogradForward*9x9_5x5)",
    "cudnn-dgrad-4x4": f"{_FPROP_4X4.replace('over c', 'over k')} of grad_output by the turned filter "
    "(cuDNN winogradForward*4x4)",
    "cudnn-dgrad-9x9": f"{_FPROP_9X9.replace('over c', 'over k')} of grad_output by the turned filter "
    "(cuDNN winogradForward*9x9_5x5)",
    "cudnn-wgrad-4x4": "Winograd F(3x3, 4x4) at (0, ±1, ±1/2): data, delta and output transforms in fp32 in "
    "cuDNN's measured order, per position one fp32 FMA chain over (image, tile row, tile column) "
    "(cuDNN winogradWgrad*4x4)",
    "cudnn-wgrad-9x9": "Winograd F(5x5, 9x9) on 13x13 tiles at (0, ±1, ±1/2, ±1/3, ±3/2, -3, ±2): data, delta "
    "and output transforms in fp32 in cuDNN's measured order, per position one fp32 FMA chain over (image, "
    "tile row, tile column) (cuDNN winogradWgrad*9x9_5x5)",
}


@dataclass(frozen=True)
class Variant:
    """How a convolution becomes GEMMs (see :func:`emu.implicit_gemm.conv_pieces`); the default
    for a plain GEMM. ``tf32_rounding``: the kernel's own rounding of fp32 operands to tf32
    before the unit (:data:`TF32_ROUNDINGS`). ``lanes``: (layout, lanes, grain), gemmK dealt to
    the lanes of a CUDA-core kernel (:func:`lane_layout`), each lane's k in a contiguous stretch
    of the GEMM's k, so that the schedule's ``split_bounds`` make one split per lane."""

    k_order: str | None = None
    channel_block: int = 0
    flip: bool = False
    tf32_rounding: str = ""
    lanes: tuple[str, int, int] | None = None
    #: channels of each filter tap padded with zero products to a multiple of this
    #: (:func:`emu.implicit_gemm.conv_pieces`' ``channel_tile``: the k tile of an NHWC kernel)
    channel_tile: int = 0
    #: (width, order): the GEMM's k taken in blocks of ``width`` (the last one shorter) in this
    #: order of block indices (:func:`block_order`): a rotated loop (Tensile's StaggerU) or pieces
    #: reduced last first (a Stream-K fixup owned by the tile's last piece)
    k_blocks: tuple[int, tuple[int, ...]] | None = None
    #: cuDNN ``dgrad2d_alg1_1`` (:mod:`.convs`): grad_output positions per chunk, each chunk's taps
    #: one partial added to the stored output (0: not that kernel)
    position_chunk: int = 0
    #: gemmK elements a quad of threads loads straight into its fragments (cuDNN's fprop kernel
    #: without shared memory, :func:`.convs.quad_load_order`; 0: none)
    quad_loads: int = 0
    #: a cuDNN Winograd order in place of GEMMs (a key of :data:`WINOGRAD_TEXT`, e.g.
    #: ``"cudnn-wgrad-9x9"``: :func:`.convs.winograd_output`; ``""``: none)
    winograd: str = ""
    #: cuDNN ``wgrad2d_shmem_tiling``: the output-pixel tile edge of :func:`.convs.shmem_tiling_layout`
    #: (gemmK in its threads' groups; 0: not that kernel)
    pixel_tile: int = 0

    def describe(self) -> str:
        text = self._order_text()
        if self.k_order is not None and self.tf32_rounding == "rna":  # rne, the tf32 default, goes unsaid
            text += "; " + TF32_ROUNDING_TEXT["rna"]
        return text

    def _order_text(self) -> str:
        if self.winograd:
            return WINOGRAD_TEXT[self.winograd]
        if self.pixel_tile:
            t = self.pixel_tile
            return (
                f"gemmK (n, p, q) in {t}×{t} pixel tiles: thread (ρ, κ) of 8 takes rows ρ, ρ + 2, … and columns "
                "2κ, 2κ + 1 of every tile, per image and row one fp32 chain over the tiles added to its sum "
                "(cuDNN wgrad2d_shmem_tiling)"
            )
        if self.quad_loads:
            return (
                f"gemmK ({', '.join(self.k_order or 'rsc')}) zero-padded to a multiple of {self.quad_loads}, "
                f"each {self.quad_loads} taken as {self.quad_loads // 4} consecutive per thread of a quad, "
                "4 of each per mma.m16n8k16 (cuDNN xmma fprop without shared memory)"
            )
        if self.position_chunk:
            return (
                f"gemmK ({', '.join(self.k_order or 'rsk')}), one chain per tap; grad_output positions (p·Q + q) "
                f"in chunks of {self.position_chunk}, each chunk's taps one partial added to the stored output "
                "and rounded (cuDNN dgrad2d_alg1_1)"
            )
        if self.k_blocks is not None:
            width, order = self.k_blocks
            shown = ", ".join(map(str, order[:16])) + (f", … ({len(order)} blocks)" if len(order) > 16 else "")
            text = f"k in blocks of {width} taken in the order [{shown}]"
            return (f"gemmK ({', '.join(self.k_order)}); " if self.k_order else "") + text
        if self.lanes is not None:
            layout, n, grain = self.lanes
            if layout == "tiled":
                text = f"k in tiles of {grain} dealt to {n // grain} blocks in turn, one lane per position in the tile"
            elif layout == "warp-strided":
                text = f"k dealt round-robin to {n} of a warp's {WARP} lanes in groups of {grain} consecutive k"
            else:
                how = "k dealt round-robin" if layout == "strided" else "k in contiguous chunks"
                text = f"{how} to {n} lanes" + (f" in groups of {grain} consecutive k" if grain > 1 else "")
            return (f"gemmK ({', '.join(self.k_order)}); " if self.k_order else "") + text
        if self.k_order is None:
            return TF32_ROUNDING_TEXT.get(self.tf32_rounding, "")
        if self.channel_block:
            axis = "c" if self.k_order in ("rsc", "crs") else "k"
            text = f"gemmK ({axis} // {self.channel_block}, r, s, {axis} % {self.channel_block})"
            if self.channel_tile:
                text += f", each tap's channels padded to a multiple of {self.channel_tile}"
        else:
            text = "gemmK (" + ", ".join(self.k_order) + ")"
        return text + (", filter rotated (taps descending)" if self.flip else "")


@dataclass(frozen=True)
class Candidate:
    unit: str
    variant: Variant
    schedule: Schedule
    family: str = "generic"
    #: how the splits' partials merge where :class:`emu.schedule.Schedule` has no reduction for
    #: it: ``""`` (the schedule's own ``reduction``) or ``"serial"`` (:data:`MERGES`)
    merge: str = ""

    def __post_init__(self):
        if self.merge not in MERGES:
            raise ValueError(f"merge: {self.merge!r} is not one of {', '.join(map(repr, MERGES))}")

    def describe(self) -> str:
        parts = [f"unit {self.unit}"]
        if self.variant.describe():
            parts.append(self.variant.describe())
        if self.variant.winograd:  # the transforms and GEMMs are the variant's: of the schedule only the output
            parts.append(f"one rounding to {self.schedule.output}")
        else:
            parts.append(self.schedule.describe())
        if self.merge == "serial":
            parts.append(
                "partials merged serially: split 0's result rounded to the output format, then each split's "
                "partial added to the previous result and rounded again (CUTLASS GemmSplitKSerial)"
            )
        return "; ".join(parts)

    def fields(self) -> dict:
        out = {"unit": self.unit, "family": self.family, **self.schedule.fields()}
        if self.merge:
            out["merge"] = self.merge
        if self.variant.k_order:
            out.update(k_order=self.variant.k_order, channel_block=self.variant.channel_block, flip=self.variant.flip)
            if self.variant.channel_tile:
                out["channel_tile"] = self.variant.channel_tile
            if self.variant.position_chunk:
                out["position_chunk"] = self.variant.position_chunk
            if self.variant.quad_loads:
                out["quad_loads"] = self.variant.quad_loads
            if self.variant.pixel_tile:
                out["pixel_tile"] = self.variant.pixel_tile
        if self.variant.winograd:
            out["winograd"] = self.variant.winograd
        if self.variant.tf32_rounding:
            out["tf32_rounding"] = self.variant.tf32_rounding
        if self.variant.k_blocks is not None:
            out["k_blocks"] = [self.variant.k_blocks[0], list(self.variant.k_blocks[1])]
        if self.variant.lanes is not None:
            out.update(lane_layout=self.variant.lanes[0], lanes=self.variant.lanes[1], grain=self.variant.lanes[2])
        return out


@dataclass
class SearchResult:
    """What the search found (see ``docs/library.md`` for the JSON fields).

    ``answer``: ``identical``, ``inside-ensemble``, ``differs``, or ``not-modelled`` (nothing
    reproduces and the kernels are of a family the search does not model: ``not_modelled`` names
    it, e.g. ``"Winograd"``; ``best`` is then the nearest order and ``nearest_distance`` how far
    it is: ``{"n_differ", "max_ulps", "median_ulps"}``, also set for ``differs``)."""

    answer: str
    n: int
    n_identical: int
    best: Candidate | None
    reproducing: list[Candidate]
    emulated: np.ndarray | None
    searched: int
    seconds: float
    stages: list[tuple[str, int, int]] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    unit: str = ""
    not_modelled: str | None = None
    nearest_distance: dict | None = None

    def __repr__(self) -> str:  # the dataclass's own would print the whole emulated array
        best = self.best.describe() if self.best is not None else "none"
        return (
            f"<SearchResult {self.answer}: {self.n_identical} of {self.n} outputs, unit {self.unit or '?'}, "
            f"{self.searched} schedules in {self.seconds:.1f} s; best: {best}>"
        )


#: the lanes of a warp (the tree of a ``"warp-strided"`` lane layout)
WARP = 32


def lane_layout(K: int, layout: str, lanes: int, grain: int = 1) -> tuple[np.ndarray, tuple[int, ...]]:
    """gemmK dealt to ``lanes`` lanes (:func:`emu.lanes.lane_of_k`: ``"strided"``, lane (k //
    grain) mod lanes; ``"chunked"``, contiguous blocks of ⌈K/lanes⌉ rounded up to ``grain``;
    ``"tiled"``, tiles of ``grain`` k to the blocks in turn, a lane per position in the tile;
    ``"warp-strided"``, strided over the first ``lanes`` of a warp's :data:`WARP` lanes, the
    others without k) as
    (sequence, bounds): the k indices lane by lane, each lane's ascending, −1 (a +0 product) as
    the one entry of a lane that gets no k (its +0 partial keeps its place in the lanes' tree);
    ``bounds`` the lanes' start positions and the end (a schedule's ``split_bounds`` with
    ``k_tile=1``)."""
    return _lane_layout(int(K), layout, int(lanes), int(grain))


@functools.lru_cache(maxsize=256)
def _lane_layout(K: int, layout: str, lanes: int, grain: int) -> tuple[np.ndarray, tuple[int, ...]]:
    if layout == "warp-strided":  # round-robin to the first ``lanes`` lanes of a warp, the rest +0
        lane = lane_of_k(K, lanes, grain, "strided")
        counts = np.bincount(lane, minlength=WARP)
    else:
        lane = lane_of_k(K, lanes, grain, layout)
        counts = np.bincount(lane, minlength=lanes)
    bounds = np.concatenate([[0], np.cumsum(np.maximum(counts, 1))])
    order = np.argsort(lane, kind="stable")  # k grouped by lane, ascending inside each
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])  # where each lane's k start in order
    owner = lane[order]
    seq = np.full(int(bounds[-1]), -1, np.int64)
    seq[bounds[owner] + np.arange(K) - first[owner]] = order
    seq.setflags(write=False)  # cached: shared by every caller
    return seq, tuple(int(b) for b in bounds)


def block_order(K: int, width: int, order) -> np.ndarray:
    """The k indices of ``range(K)`` cut into blocks of ``width`` (the last one shorter), taken
    block by block in ``order`` (a permutation of the block indices)."""
    blocks = -(-K // width)
    if sorted(order) != list(range(blocks)):
        raise ValueError(f"k_blocks: the order must be a permutation of range({blocks}), got {list(order)}")
    return np.concatenate([np.arange(b * width, min(K, (b + 1) * width)) for b in order]) if K else np.arange(0)


def _in_blocks(job: GemmJob, k_blocks) -> GemmJob:
    seq = block_order(job.A.shape[1], *k_blocks)
    return GemmJob(job.A[:, seq], job.B[seq], job.C, job.out_index)


def _in_lanes(job: GemmJob, lanes) -> GemmJob:
    seq, _ = lane_layout(job.A.shape[1], *lanes)
    idx = np.where(seq < 0, 0, seq)
    A, B = job.A[:, idx], job.B[idx]
    if (seq < 0).any():
        A[:, seq < 0] = 0
        B[seq < 0] = 0
    return GemmJob(A, B, job.C, job.out_index)


def jobs_of(cap: Capture, variant: Variant, rows=None, columns=None, pieces=None) -> list[GemmJob]:
    """The capture's GEMMs under ``variant``; ``rows``/``columns`` (per-GEMM index arrays) and
    ``pieces`` (which GEMMs) restrict them to a sample."""
    jobs = _jobs_of(cap, variant, rows, columns, pieces)
    if variant.k_blocks is not None:
        jobs = [_in_blocks(j, variant.k_blocks) for j in jobs]
    if variant.lanes is not None:
        jobs = [_in_lanes(j, variant.lanes) for j in jobs]
    if variant.quad_loads:
        jobs = [_in_quads(j, variant.quad_loads) for j in jobs]
    if variant.pixel_tile:
        jobs = [_in_pixel_tiles(j, cap, variant.pixel_tile) for j in jobs]
    return jobs


def _in_pixel_tiles(job: GemmJob, cap: Capture, tile: int) -> GemmJob:
    from .convs import shmem_tiling_layout  # convs does not import this module

    s = cap.conv
    seq, _, _ = shmem_tiling_layout(s.N, s.P, s.Q, tile)
    idx = np.where(seq < 0, 0, seq)
    A, B = job.A[:, idx], job.B[idx]
    A[:, seq < 0] = 0
    B[seq < 0] = 0
    return GemmJob(A, B, job.C, job.out_index)


def _in_quads(job: GemmJob, width: int) -> GemmJob:
    from .convs import quad_load_order  # convs does not import this module

    seq = quad_load_order(job.A.shape[1], width)
    idx = np.where(seq < 0, 0, seq)
    A, B = job.A[:, idx], job.B[idx]
    A[:, seq < 0] = 0
    B[seq < 0] = 0
    return GemmJob(A, B, job.C, job.out_index)


def _jobs_of(cap: Capture, variant: Variant, rows=None, columns=None, pieces=None) -> list[GemmJob]:
    o = cap.operands
    if variant.tf32_rounding:  # the kernel rounds the fp32 operands (not C or a bias) to tf32 first
        o = {
            k: tf32_operands(np.asarray(v, np.uint32), variant.tf32_rounding) if k in MULTIPLIED else v
            for k, v in o.items()
        }
    if cap.op in ("mm", "addmm"):
        M, N = cap.out.shape
        idx = np.arange(M * N).reshape(M, N)
        C = None
        if cap.op == "addmm":
            C = np.broadcast_to(c_values(cap, o["C"]), (M, N))
        return [restrict(GemmJob(o["A"], o["B"], C, idx), rows, columns)]
    if batched(cap):  # bmm, baddbmm, a matmul of batches: one GEMM per output matrix
        M, N = cap.out.shape[-2:]
        ia, ib = batch_operands(cap)
        C = None if "C" not in o else np.broadcast_to(c_values(cap, o["C"]), cap.out.shape).reshape(-1, M, N)
        A, B = o["A"].reshape(-1, *o["A"].shape[-2:]), o["B"].reshape(-1, *o["B"].shape[-2:])
        sel = range(ia.size) if pieces is None else pieces
        return [
            restrict(
                GemmJob(A[ia[i]], B[ib[i]], None if C is None else C[i], (i * M * N + np.arange(M * N)).reshape(M, N)),
                rows,
                columns,
            )
            for i in sel
        ]
    if cap.op == "matmul":  # (…, M, K) @ (K, N) folded into one GEMM, as torch.matmul does (mm of M·… rows)
        A = o["A"].reshape(-1, o["A"].shape[-1])
        idx = np.arange(A.shape[0] * cap.out.shape[-1]).reshape(A.shape[0], -1)
        return [restrict(GemmJob(A, o["B"], None, idx), rows, columns)]
    if cap.op == "linear":
        x, w = o["input"], o["weight"]
        A = x.reshape(-1, x.shape[-1])
        N = w.shape[0]
        idx = np.arange(A.shape[0] * N).reshape(A.shape[0], N)
        C = None
        if "bias" in o:
            C = np.broadcast_to(c_values(cap, o["bias"])[None], idx.shape)
        return [restrict(GemmJob(A, w.T, C, idx), rows, columns)]
    pass_ = PASS_OF[cap.op]
    first, second = {
        "fwd": (o.get("input"), o.get("weight")),
        "bwd_data": (o.get("grad_output"), o.get("weight")),
        "bwd_weight": (o.get("grad_output"), o.get("input")),
    }[pass_]
    groups = range(cap.conv.groups) if pieces is None else pieces
    out = []
    for g in groups:
        (piece,) = conv_pieces(
            pass_,
            cap.conv,
            first,
            second,
            variant.k_order,
            flip=variant.flip,
            channel_block=variant.channel_block,
            channel_tile=variant.channel_tile,
            rows=rows,
            columns=columns,
            groups=[g],
        )
        C = None
        if pass_ == "fwd" and "bias" in o:
            bias = c_values(cap, o["bias"])
            r = np.arange(cap.conv.Kg) if rows is None else np.asarray(rows)
            C = np.broadcast_to(bias[g * cap.conv.Kg + r][:, None], piece.out_index.shape)
        out.append(GemmJob(piece.A, piece.B, C, piece.out_index))
    return out


#: the most outputs × gemmK for which :func:`product_magnitudes` sums |a·b| (above it: None)
MAGNITUDE_WORK = 4 * 10**8


def product_magnitudes(cap: Capture) -> tuple[np.ndarray, int] | None:
    """Σ_k |a_k·b_k| (+ |C|) of every output (float64, the flattened output's order) and gemmK,
    the scale of what a change of summation order can move; None for ``scaled_mm`` (its own
    path), or where outputs × gemmK exceeds :data:`MAGNITUDE_WORK`."""
    if cap.op == "scaled_mm":
        return None
    K = gemm_dims(cap, Variant())[2]
    if cap.out.size * K > MAGNITUDE_WORK:  # before the GEMMs are gathered: a large convolution's are big
        return None
    total = np.zeros(cap.out.size, np.float64)
    for j in jobs_of(cap, Variant()):
        mag = np.abs(operand_values(cap, j.A)) @ np.abs(operand_values(cap, j.B))
        if j.C is not None:
            mag = mag + np.abs(np.broadcast_to(np.asarray(j.C, np.float64), mag.shape))
        total[j.out_index.reshape(-1)] = mag.reshape(-1)
    return total, K


def c_values(cap: Capture, bits: np.ndarray) -> np.ndarray:
    """C or a bias (bit patterns of the capture's operand format) as float32 values: fp32 adds
    them whole (a tf32 capture's C is float32, never cut to tf32)."""
    return bits.view(value_dtype(unit_input(cap.input))).astype(np.float32)


def operand_values(cap: Capture, bits: np.ndarray) -> np.ndarray:
    """Operand values (float64) as the unit multiplies them (:func:`emu.operands.multiplied_values`;
    fp32 operands whole)."""
    if cap.input == "fp32":
        return bits.view(np.float32).astype(np.float64)
    return multiplied_values(bits.view(value_dtype(cap.input)), cap.input)


def unit_input(fmt: str) -> str:
    """The input format a unit is built for from a capture's operand format: fp32 operands (32-bit
    patterns, multiplied whole by the fp32 FMA unit) travel as tf32-format patterns, the format
    ``models.unit`` builds 32-bit units for (``emu.simt.is_fp32_fma``: the FMA unit then takes
    them whole)."""
    return "tf32" if fmt == "fp32" else fmt


def full_fp32(cap: Capture, unit: str) -> bool:
    """Whether ``unit`` multiplies the capture's operands as whole fp32 values: the fp32 FMA unit
    (``"fma32"``) on float32 operands (``emu.simt``: a CUDA-core kernel's FFMA chain), fp32 or tf32
    captures alike (a CUDA-core kernel ignores TF32)."""
    return unit == "fma32" and cap.input in ("fp32", "tf32")


def restrict(job: GemmJob, rows, columns) -> GemmJob:
    if rows is None and columns is None:
        return job
    r = slice(None) if rows is None else np.asarray(rows)
    c = slice(None) if columns is None else np.asarray(columns)
    C = None if job.C is None else job.C[r][:, c]
    return GemmJob(job.A[r], job.B[:, c], C, job.out_index[r][:, c])


def batched(cap: Capture) -> bool:
    """Whether the capture's GEMMs are a batch, one per output matrix: ``bmm``, ``baddbmm``, and
    ``torch.matmul`` where B has batch dims (torch's ``_matmul_impl`` expands both operands'
    batch dims and calls bmm; (…, M, K) @ (K, N) it folds into one mm, ``should_fold`` in
    pytorch/pytorch ``aten/src/ATen/native/LinearAlgebra.cpp``)."""
    return cap.op in ("bmm", "baddbmm") or (cap.op == "matmul" and cap.operands["B"].ndim > 2)


def batch_operands(cap: Capture) -> tuple[np.ndarray, np.ndarray]:
    """For a batched capture (:func:`batched`), the matrix of A and of B (indices into their batch
    dims flattened) that each output matrix multiplies, batch dims broadcast as torch.matmul does."""
    batch = cap.out.shape[:-2]
    out = []
    for name in ("A", "B"):
        dims = cap.operands[name].shape[:-2]
        index = np.arange(int(np.prod(dims, dtype=np.int64))).reshape(dims) if dims else np.zeros((), np.int64)
        out.append(np.broadcast_to(index, batch).reshape(-1))
    return out[0], out[1]


def n_jobs(cap: Capture) -> int:
    if batched(cap):
        return int(np.prod(cap.out.shape[:-2]))
    return cap.conv.groups if cap.conv is not None else 1


def gemm_dims(cap: Capture, variant: Variant) -> tuple[int, int, int]:
    if cap.conv is not None:
        return cap.conv.gemm_size(PASS_OF[cap.op])
    if batched(cap):
        return cap.out.shape[-2], cap.out.shape[-1], cap.operands["A"].shape[-1]
    if cap.op in ("linear", "matmul"):
        K = cap.operands["weight" if cap.op == "linear" else "A"].shape[-1]
        return int(np.prod(cap.out.shape[:-1])), cap.out.shape[-1], K
    return cap.out.shape[0], cap.out.shape[1], cap.operands["A"].shape[1]


_UNITS: dict = {}


def search_unit_params(name: str, fmt: str = "fp16"):
    """:func:`emu.dot.unit_params` of a search unit name (:func:`model_unit`), cached."""
    if (name, fmt) not in _UNITS:
        _UNITS[name, fmt] = unit_params(model_unit(name, fmt))
    return _UNITS[name, fmt]


def model_unit(name: str, fmt: str = "fp16"):
    """``models.unit`` for a search unit name, ``NAME`` or ``NAME/fp16`` (the fp16-accumulator
    variant of an NVIDIA unit), with operands of ``fmt`` (the capture's input format)."""
    base, _, acc = name.partition("/")
    return models.unit(base, output=acc or "fp32", input=unit_input(fmt))


def bits(x: np.ndarray) -> np.ndarray:
    """The bit patterns of ``x`` (unsigned integers of its width), to compare bit for bit."""
    return np.ascontiguousarray(x).view(np.dtype(f"u{x.dtype.itemsize}"))


def serial_merge(unit, partials, C, schedule: Schedule) -> np.ndarray:
    """The output of a serial split-K merge (:data:`MERGES`) from the splits' fp32 partials:
    split 0 through the schedule's epilogue and output rounding (:func:`emu.gemm.finish`: C in
    its chain or epilogue, alpha, beta), then for each further split D ← RN_out(alpha·p + D) as
    one fp32 FMA (:func:`emu.gemm.fma32`) on D read back from the output format."""
    out = finish(unit, partials[0], C, schedule)
    plain = Schedule(output=schedule.output)
    alpha = np.float32(schedule.alpha)
    for p in partials[1:]:
        out = finish(unit, fma32(alpha, p, out.astype(np.float32)), None, plain)
    return out


def _serial_output(job, unit, whole: bool, s: Schedule) -> np.ndarray:
    """:func:`serial_merge` of one GEMM: each split's chain run on its own (residue tile and
    instruction K as the schedule says; split 0 from C where C enters the chain)."""
    parts = []
    one = Schedule(residue_tile=s.residue_tile, instruction_k=s.instruction_k, output="fp32")
    for i, r in enumerate(s.split_ranges(job.A.shape[1])):
        C = job.C if i == 0 and s.c_entry == "chain" else None
        a, b = job.A[:, r], job.B[r]
        parts.append(fma_gemm(a, b, C, one) if whole else emu.gemm(a, b, C, unit, one))
    return serial_merge(FMA32_PARAMS if whole else unit, parts, job.C, s)


def run_candidate(cap: Capture, cand: Candidate) -> np.ndarray:
    """The capture's whole output as the candidate computes it (through :func:`emu.gemm`; fp32
    operands through the fp32 FMA unit by :func:`emu.simt.fma_gemm`; a serial merge by
    :func:`serial_merge`)."""
    if cand.variant.position_chunk:
        from .convs import dgrad_alg1_output  # convs does not import this module

        return dgrad_alg1_output(cap, cand.variant.position_chunk)
    if cand.variant.winograd:
        from .convs import winograd_output

        return winograd_output(cap, cand.variant.winograd)
    unit = model_unit(cand.unit, cap.input)
    whole = full_fp32(cap, cand.unit)
    out = np.zeros(cap.out.size, cap.out.dtype)
    for job in jobs_of(cap, cand.variant):
        if cand.merge == "serial":
            res = _serial_output(job, unit, whole, cand.schedule)
        elif whole:
            res = fma_gemm(job.A, job.B, job.C, cand.schedule)
        else:
            res = emu.gemm(job.A, job.B, job.C, unit, cand.schedule)
        out[job.out_index.reshape(-1)] = res.reshape(-1)
    return out.reshape(cap.out.shape)


def resolve_unit(cap: Capture, hw: str | None) -> str:
    """The unit to search with: ``hw`` (a unit name or alias) or the one the capture's ``gpu``
    names; CaptureError when neither says. fp32 operands (no TF32, or a CUDA-core kernel): the
    fp32 FMA unit, every GPU's IEEE ``fma`` (``emu.simt``)."""
    if cap.input == "fp32":
        return "fma32"
    if hw:
        try:
            models.unit(hw, input=cap.input)
        except ValueError as exc:
            raise CaptureError(f"--hw: {exc}") from None
        return hw
    name = unit_from_gpu(cap.gpu)
    if name is None:
        raise CaptureError(
            f"gpu: {cap.gpu or 'not recorded'!r} is not a GPU fp16emu models; name the unit with --hw "
            f"(one of {', '.join(models.UNIT_NAMES)})"
        )
    try:
        models.unit(name, input=cap.input)
    except ValueError as exc:
        raise CaptureError(f"gpu: {cap.gpu!r} (unit {name}): {exc}") from None
    return name


def image_tile(cap: Capture) -> int:
    """The k tile of a convolution's splits at its natural bounds: backward weight's gemmK runs
    over (n, p, q), P·Q at image bounds (a batched GEMM per image, its partials reduced after, as
    cuDNN's reduce_wgrad kernels do); cuDNN's ``dgrad2d_alg1_1`` sums one filter tap at a time, a
    chain over the output channels from +0 added to the output's sum in (r, s) order (H200
    captures, fp32 and fp16), so its tile is the group's K at tap bounds of the (r, s, k) gemmK."""
    if cap.conv is None:
        return 0
    if PASS_OF[cap.op] == "bwd_data":
        taps = cap.conv.R * cap.conv.S > 1
        return cap.conv.Kg if taps and any("dgrad2d_alg1" in str(k) for k in cap.kernels) else 0
    if PASS_OF[cap.op] != "bwd_weight" or cap.conv.N < 2:
        return 0
    return cap.conv.P * cap.conv.Q
