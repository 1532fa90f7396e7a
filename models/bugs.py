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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import ml_dtypes
import numpy as np

from emu.atomics import SplitPartials
from emu.conv import ConvGemm, ConvProblem, sub_gemms
from emu.faults import add_partials, gemm_fp16_accumulator, member_sum, scale_fp32
from emu.gemm import GemmOrder
from emu.gemm import gemm as emu_gemm
from emu.rounding import cast_rne, fp32_to_fp16

from . import harness
from .kernels import ATOMIC_ORDERS, KernelModel

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

_CANONICAL = {"input": "ngchw", "filter": "gkcyx", "output": "ngkhw"}
_SWAP = {"nchw": "nhwc", "nhwc": "nchw", "ngchw": "nhwgc", "nhwgc": "ngchw"}
_TENSOR_ARG = {"input": "x", "filter": "w", "output": "dy"}


class NotApplicable(ValueError):
    """The mutant needs something this problem or kernel does not have."""


def canonical(problem: ConvProblem, role: str, flat: np.ndarray) -> np.ndarray:
    """A tensor's flat memory as a 5-D view in canonical letter order (input n g c h w, filter
    g k c y x, output n g k h w)."""
    sizes, lay = problem.letter_sizes(role), problem.layout5(role)
    arr = np.asarray(flat).reshape(-1).reshape([sizes[d] for d in lay])
    return np.transpose(arr, [lay.index(d) for d in _CANONICAL[role]])


def from_canonical(problem: ConvProblem, role: str, arr: np.ndarray) -> np.ndarray:
    """The inverse of :func:`canonical`: a flat array in the tensor's memory order."""
    lay = problem.layout5(role)
    return np.ascontiguousarray(np.transpose(arr, [_CANONICAL[role].index(d) for d in lay])).reshape(-1)


@dataclass
class KernelRun:
    """What a mutant step sees: the problem and inputs as given, the ones the buggy kernel
    computes with, the kernel model, and (once built) the operand gatherer ``op``."""

    problem: ConvProblem
    model: KernelModel
    inputs: Mapping[str, np.ndarray]
    problem_used: ConvProblem
    inputs_used: Mapping[str, np.ndarray]
    op: ConvGemm | None = None
    #: split-K atomic kernels: the ensemble member whose add order the partials are summed in
    #: (None: ascending order); ``granularity`` as in :class:`models.kernels.AtomicOrders`.
    member: int | None = None
    granularity: str = ATOMIC_ORDERS.granularity

    def plan(self):
        return self.model.plan(self.problem_used)


@dataclass(frozen=True)
class Emulated:
    """The kernel's fp32 output (flat, result memory order) and, for split-K atomic kernels,
    its partial sums (the run-to-run ensemble)."""

    kernel_fp32: np.ndarray
    partials: SplitPartials | None = None


@dataclass(frozen=True)
class Mutant:
    """Base class: every step is the identity; subclasses override what their bug changes."""

    name: ClassVar[str] = ""
    bug: ClassVar[str] = ""
    needs_partials: ClassVar[bool] = False

    def applies(self, problem: ConvProblem, model: KernelModel) -> str | None:
        """None, or why this mutant cannot be applied to ``model`` on ``problem``."""
        return None

    def geometry(self, problem: ConvProblem, inputs: Mapping[str, np.ndarray]):
        return problem, inputs

    def model(self, model: KernelModel) -> KernelModel:
        return model

    operands = None  # or a method (run, sub, group, n_start, a, b) -> (a, b)
    gemm = None  # or a method (run, sub, a, b) -> C float32: the kernel's GEMM replaced

    def combine(self, run: KernelRun, parts: SplitPartials) -> np.ndarray:
        return _sum_partials(run, parts)

    def output(self, run: KernelRun, out: np.ndarray) -> np.ndarray:
        return out

    def seen(self, kernel16: np.ndarray, validation32: np.ndarray, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """What the verifier compares with the validation (a correct verifier: the kernel's)."""
        return kernel16

    @property
    def label(self) -> str:
        """``name(field=value, …)``: the mutant and its parameters."""
        fields = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self))
        return f"{self.name}({fields})"


def _split_k(problem: ConvProblem, model: KernelModel) -> int:
    return max((g.order.split_k for g in model.plan(problem)), default=1)


def _tuning(run_or_model, problem, sub: int):
    plan = run_or_model.plan(problem)[sub].tuning_plan
    if plan is None:
        raise NotApplicable(f"{run_or_model.name} has no tiles (a CPU validator)")
    return plan.tuning


def emulate(
    problem: ConvProblem,
    model: KernelModel,
    inputs: Mapping[str, np.ndarray],
    mutant: Mutant | None = None,
    *,
    seed: int = ATOMIC_ORDERS.seed,
    n_chunk: int | None = None,
    member: int | None = None,
) -> Emulated:
    """``model`` (a GPU kernel) on ``problem`` with the harness ``inputs`` ({"input", "filter",
    "output"} → arrays in memory order), changed by ``mutant``. Unmutated, this is the kernel
    side of :func:`validation.run.run` bit for bit (split-K atomic kernels: partials kept, the
    output in ascending add order, or with ``member`` in the add order of that member of the
    :data:`models.kernels.ATOMIC_ORDERS` ensemble, as are the split-K mutants' sums). Raises
    :class:`NotApplicable` where the mutant cannot apply."""
    if mutant is not None:
        why = mutant.applies(problem, model)
        if why:
            raise NotApplicable(f"{mutant.name}: {why}")
    ctx, out, keep, atomic = _compute(problem, model, inputs, mutant, seed, n_chunk, member)
    return _finish(ctx, mutant, out if keep else None, out, atomic)


def _compute(problem, model, inputs, mutant, seed, n_chunk, member):
    """The (mutated) kernel's GEMMs: (context, result or partials, partials kept, atomic)."""
    p_used, in_used = (problem, inputs) if mutant is None else mutant.geometry(problem, inputs)
    m_used = model if mutant is None else mutant.model(model)
    ctx = KernelRun(problem, m_used, inputs, p_used, in_used)
    ctx.op = ConvGemm(p_used, **{_TENSOR_ARG[r]: in_used.get(r) for r in _TENSOR_ARG})
    atomic = m_used.atomic_split(p_used) > 0
    ctx.member = member if atomic else None
    keep = atomic or (mutant is not None and mutant.needs_partials and _split_k(p_used, m_used) >= 2)
    if mutant is not None and mutant.gemm is not None:
        keep = False  # the replaced GEMM is the whole GEMM: no partial sums
    arith = m_used.arithmetic(p_used, keep_partials=keep, seed=seed)
    if mutant is not None and mutant.operands is not None:
        arith = arith._replace(operands=lambda sub, group, start, a, b: mutant.operands(ctx, sub, group, start, a, b))
    if mutant is not None and mutant.gemm is not None:
        arith = arith._replace(gemm=lambda sub, a, b: mutant.gemm(ctx, sub, a, b))
    (out,) = ctx.op.compute([arith], n_chunk=n_chunk)
    return ctx, out, keep, atomic


def _finish(ctx: KernelRun, mutant: Mutant | None, partials, out, atomic: bool) -> Emulated:
    """The combine and output steps on computed GEMMs (``partials`` None: ``out`` is the fp32
    result)."""
    if partials is not None:
        fp32 = _sum_partials(ctx, partials) if mutant is None else mutant.combine(ctx, partials)
    else:
        fp32 = out
    if mutant is not None:
        fp32 = mutant.output(ctx, fp32)
    return Emulated(np.ascontiguousarray(fp32, dtype=np.float32), partials if atomic else None)


def _sum_partials(ctx: KernelRun, parts: SplitPartials) -> np.ndarray:
    """The correct sum of split-K partials: ascending, or in the add order of ``ctx.member``."""
    return parts.ascending() if ctx.member is None else parts.member_fp32(ctx.member, ctx.granularity)


def _overrides(mutant: Mutant, step: str) -> bool:
    return getattr(type(mutant), step) is not getattr(Mutant, step)


def emulate_mutants(
    problem: ConvProblem,
    model: KernelModel,
    inputs: Mapping[str, np.ndarray],
    mutants,
    *,
    seed: int = ATOMIC_ORDERS.seed,
    n_chunk: int | None = None,
    member: int | None = None,
) -> tuple[Emulated, dict[str, Emulated | NotApplicable]]:
    """The correct kernel and every mutant (by label; a :class:`NotApplicable` where it cannot
    apply), each ``kernel_fp32`` bit for bit what :func:`emulate` gives, with the GEMMs shared: mutants that
    change only the output (or only what the verifier sees) post-process the correct kernel's
    result, and mutants that change only how split-K partials are added reuse one set of
    partials; the others run their own GEMMs."""
    ctx, out, keep, atomic = _compute(problem, model, inputs, None, seed, n_chunk, member)
    good = _finish(ctx, None, out if keep else None, out, atomic)
    shared_parts = out if keep else None
    results: dict[str, Emulated | NotApplicable] = {}
    for m in mutants:
        why = m.applies(problem, model)
        if why:
            results[m.label] = NotApplicable(f"{m.name}: {why}")
            continue
        if any(_overrides(m, s) for s in ("geometry", "model")) or m.operands is not None or m.gemm is not None:
            results[m.label] = emulate(problem, model, inputs, m, seed=seed, n_chunk=n_chunk, member=member)
            continue
        if not _overrides(m, "combine") and not m.needs_partials:
            results[m.label] = _finish(ctx, m, None, good.kernel_fp32, atomic)
            continue
        if keep or not (m.needs_partials and _split_k(problem, model) >= 2):
            results[m.label] = _finish(ctx, m, shared_parts, out, atomic)
            continue
        if shared_parts is None:  # a non-atomic split-K kernel: its partials, once
            _, shared_parts, _, _ = _compute(problem, model, inputs, _PartialsOnly(), seed, n_chunk, member)
        results[m.label] = _finish(ctx, m, shared_parts, None, atomic)
    return good, results


@dataclass(frozen=True)
class _PartialsOnly(Mutant):
    """No bug: the unmutated kernel with its split-K partials kept."""

    needs_partials: ClassVar[bool] = True


def _check_choice(field_name: str, value, choices: tuple) -> None:
    """ValueError naming the field and its accepted values unless ``value`` is one of them."""
    if value not in choices:
        raise ValueError(f"{field_name}: {value!r} is not one of {', '.join(choices)}")


@dataclass(frozen=True)
class _SplitKMutant(Mutant):
    """A bug of the split-K path: it needs the kernel's partials and applies only where there are
    at least two."""

    needs_partials: ClassVar[bool] = True

    def applies(self, problem, model):
        why = unsupported(self.name, model.input)
        if why:
            return why
        return None if _split_k(problem, model) >= 2 else "the kernel has no split-K partials"


def tile_ids(run: KernelRun) -> np.ndarray:
    """Per result element, the kernel's output tile it belongs to (tiles numbered over sub-GEMMs,
    groups, then row-major over the gemmM × gemmN tile grid: :meth:`emu.conv.ConvGemm.tile_ids`),
    −1 where no GEMM writes."""
    prob = run.problem_used
    tiles = []
    for sub in range(len(run.op.subs)):
        t = _tuning(run.model, prob, sub)
        tiles.append((t.m_per_block, t.n_per_block))
    return run.op.tile_ids(tiles, groups_apart=True).astype(np.int64)


def _pick(index: int, count: int, what: str) -> int:
    i = index + count if index < 0 else index
    if not 0 <= i < count:
        raise NotApplicable(f"{what} {index} outside 0..{count - 1}")
    return i


# --- operand and geometry mutants ---------------------------------------------------------------


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
        return self.block or _tuning(ctx.model, ctx.problem_used, sub).k_per_block

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
        _check_choice("side", self.side, ("top", "bottom", "left", "right"))
        _check_choice("mode", self.mode, ("lost", "duplicated"))

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
        _check_choice("axis", self.axis, ("n", "k"))

    def _first(self, ctx, sub, length):
        t = _tuning(ctx.model, ctx.problem_used, sub)
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


# --- unit ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fp16Accumulator(Mutant):
    """The kernel's unit with an fp16 accumulator (each step's result rounded to fp16, RNE)."""

    name: ClassVar[str] = "fp16-accumulator"
    bug: ClassVar[str] = (
        "The accumulator is declared half (or the fp16-output MFMA/HMMA variant is selected), so "
        "every partial sum is rounded to fp16 instead of fp32."
    )

    def applies(self, problem, model):
        return unsupported(self.name, model.input)

    def gemm(self, ctx, sub, a, b):
        g = ctx.plan()[sub]
        return gemm_fp16_accumulator(a, b, g.unit, g.order)


@dataclass(frozen=True)
class Bf16Accumulator(Mutant):
    """A bf16 kernel's unit with a bf16 accumulator: after every step of the unit (its group of
    k values, one product for an FMA) the running sum is rounded to bf16 (RNE, overflow to ±inf)
    and fed back as C. The bf16 form of :class:`Fp16Accumulator`."""

    name: ClassVar[str] = "bf16-accumulator"
    bug: ClassVar[str] = (
        "The accumulator is declared in the tensors' type, bf16 (a templated kernel instantiated with "
        "AccT = T), so every partial sum is rounded to bf16's 8 significant bits instead of fp32's 24."
    )

    def applies(self, problem, model):
        return unsupported(self.name, model.input)

    def gemm(self, ctx, sub, a, b):
        g = ctx.plan()[sub]
        return _element_accumulator_gemm(a, b, g.unit, g.order, "bf16")


def _element_accumulator_gemm(a, b, unit, order: GemmOrder, fmt: str) -> np.ndarray:
    """C = A·B through ``unit`` in ``order`` with the running sum rounded to ``fmt`` after every
    step of the unit: each step is :func:`emu.gemm` over one group of the order's gemmK sequence
    (padding positions as +0) from the rounded C, then :func:`emu.rounding.cast_rne`. Split-K
    chunks are accumulated apart from +0 and added in fp32, ascending (as
    :func:`emu.faults.gemm_fp16_accumulator`). Returns (M, N) float32."""
    seq = order.sequence(a.shape[1])
    take = np.maximum(seq, 0)
    a_seq, b_seq = np.take(a, take, axis=1), np.take(b, take, axis=0)
    a_seq[:, seq < 0] = 0  # gemmK padding: zero products
    b_seq[seq < 0, :] = 0
    step = max(1, int(unit.group_size or 1))
    total = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for chunk in order.chunks(len(seq)):
        c = np.zeros_like(total)
        for s0 in range(chunk.start, chunk.stop, step):
            s1 = min(s0 + step, chunk.stop)
            c = emu_gemm(np.ascontiguousarray(a_seq[:, s0:s1]), np.ascontiguousarray(b_seq[s0:s1]), c, unit)
            c = cast_rne(np.asarray(c, np.float32).astype(np.float64), fmt).astype(np.float32)
        total = total + c
    return total


# --- split-K partials ---------------------------------------------------------------------------


_LOST = -0.0  # a partial replaced by −0.0 is removed exactly from any add order (emu.faults.member_sum)


@dataclass(frozen=True)
class SplitKPartialCount(_SplitKMutant):
    """Partial ``index`` (negative: from the end) added ``times`` times (0: lost, 2: twice).

    Add order: the correct kernel's. In ascending order the partial is skipped or repeated in
    place; for an atomic kernel emulated as ensemble member m (``KernelRun.member``, as the design
    sweep compares it with member seed mod 128), the other partials are added in member m's
    order and each repeat of the partial comes after the last one (a retried launch)."""

    index: int = -1
    times: int = 0
    name: ClassVar[str] = "split-k-count"
    bug: ClassVar[str] = (
        "One split-K workgroup's atomic add is lost (its block never launched, or the workspace was "
        "zeroed after it) or done twice (a retried or duplicated launch)."
    )

    def combine(self, ctx, parts):
        i = _pick(self.index, parts.n_split, "partial")
        if ctx.member is not None:
            lost = {i: np.full(parts.size, _LOST, np.float32)} if self.times == 0 else None
            return member_sum(parts, ctx.member, ctx.granularity, lost, [i] * max(0, self.times - 1))
        order = [j for j in range(parts.n_split) for _ in range(self.times if j == i else 1)]
        return add_partials(parts.parts, order)


@dataclass(frozen=True)
class SplitKPartialScale(_SplitKMutant):
    """Partial ``index`` multiplied by ``factor`` (−1: wrong sign) before its atomic add, in the
    correct kernel's add order (ascending, or ensemble member ``KernelRun.member``'s)."""

    index: int = -1
    factor: float = -1.0
    name: ClassVar[str] = "split-k-scale"
    bug: ClassVar[str] = (
        "One split-K partial gets the wrong epilogue scale or sign (alpha applied per partial, or "
        "a subtract where an add belongs) before it is added to the workspace."
    )

    def combine(self, ctx, parts):
        i = _pick(self.index, parts.n_split, "partial")
        if ctx.member is not None:
            return member_sum(parts, ctx.member, ctx.granularity, {i: scale_fp32(parts.parts[i], self.factor)})
        return add_partials(
            parts.parts, range(parts.n_split), [self.factor if j == i else 1.0 for j in range(parts.n_split)]
        )


@dataclass(frozen=True)
class StalePartialRace(_SplitKMutant):
    """In output tile ``tile`` (negative: from the end), partial ``index`` is lost to a race; the
    other partials are added in the correct kernel's order (ascending, or ensemble member
    ``KernelRun.member``'s)."""

    tile: int = 0
    index: int = 0
    name: ClassVar[str] = "stale-partial-race"
    bug: ClassVar[str] = (
        "A non-atomic read-modify-write of the split-K workspace races: one workgroup reads a stale "
        "value and overwrites another's contribution in one output tile."
    )

    def combine(self, ctx, parts):
        i = _pick(self.index, parts.n_split, "partial")
        tiles = tile_ids(ctx)
        t = _pick(self.tile, int(tiles.max()) + 1, "tile")
        full = _sum_partials(ctx, parts)
        if ctx.member is not None:
            lost = member_sum(parts, ctx.member, ctx.granularity, {i: np.full(parts.size, _LOST, np.float32)})
        else:
            lost = add_partials(parts.parts, [j for j in range(parts.n_split) if j != i])
        return np.where(tiles == t, lost, full)


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
        g, c = divmod(_pick(self.channel, per * t.shape[1], "channel"), per)
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
        _check_choice("fill", self.fill, ("zeros", "nan", "stale"))

    def output(self, ctx, out):
        tiles = tile_ids(ctx)
        t = _pick(self.tile, int(tiles.max()) + 1, "tile")
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
        e = out.size // 2 if self.element is None else _pick(self.element, out.size, "element")
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
        _check_choice("which", self.which, ("reference", "input"))

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

_NO_SPLIT_K_BF16 = (
    "the 2022 bf16 kernels have no split-K (the Aug-2022 backward-weight atomic path was f16-only, "
    "github.com/ROCm/rocMLIR PR #536): no partial sums to lose, scale or race"
)
#: Per tensor format, the mutants that cannot stand for a bug of a kernel on it, and why.
UNSUPPORTED: Mapping[str, Mapping[str, str]] = {
    "fp16": {
        "bf16-accumulator": "an fp16 kernel's accumulator declared in its element type is fp16: fp16-accumulator",
    },
    "bf16": {
        "fp16-accumulator": "a bf16 kernel's accumulator declared in its element type is bf16: bf16-accumulator",
        "split-k-count": _NO_SPLIT_K_BF16,
        "split-k-scale": _NO_SPLIT_K_BF16,
        "stale-partial-race": _NO_SPLIT_K_BF16,
    },
}


def unsupported(name: str, input: str) -> str | None:
    """Why the mutant ``name`` cannot stand for a bug of a kernel on ``input`` ("fp16" or "bf16")
    tensors, or None when it can."""
    if input not in UNSUPPORTED:
        raise ValueError(f"input: {input!r} is not one of {', '.join(UNSUPPORTED)}")
    return UNSUPPORTED[input].get(name)


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
