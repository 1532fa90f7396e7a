"""The mutant base class and the emulation around it: :class:`Mutant` (every step the identity),
:func:`emulate` (the kernel model on a problem, a mutant's steps applied),
:func:`emulate_mutants` (many mutants, GEMMs shared), the helpers the mutants share, and which
mutants stand for a bug of which tensor format (:data:`UNSUPPORTED`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from emu.atomics import SplitPartials
from emu.conv import ConvGemm, ConvProblem

from ..kernels import ATOMIC_ORDERS, KernelModel

_CANONICAL = {"input": "ngchw", "filter": "gkcyx", "output": "ngkhw"}
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
        return sum_partials(run, parts)

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


def kernel_tuning(run_or_model, problem, sub: int):
    """The tuning (tile sizes) of sub-GEMM ``sub`` of a kernel model or run on ``problem``;
    :class:`NotApplicable` for a CPU validator, which has no tiles."""
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
        fp32 = sum_partials(ctx, partials) if mutant is None else mutant.combine(ctx, partials)
    else:
        fp32 = out
    if mutant is not None:
        fp32 = mutant.output(ctx, fp32)
    return Emulated(np.ascontiguousarray(fp32, dtype=np.float32), partials if atomic else None)


def sum_partials(ctx: KernelRun, parts: SplitPartials) -> np.ndarray:
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


def check_choice(field_name: str, value, choices: tuple) -> None:
    """ValueError naming the field and its accepted values unless ``value`` is one of them."""
    if value not in choices:
        raise ValueError(f"{field_name}: {value!r} is not one of {', '.join(choices)}")


@dataclass(frozen=True)
class SplitKMutant(Mutant):
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
        t = kernel_tuning(run.model, prob, sub)
        tiles.append((t.m_per_block, t.n_per_block))
    return run.op.tile_ids(tiles, groups_apart=True).astype(np.int64)


def pick(index: int, count: int, what: str) -> int:
    """``index`` (negative: from the end) as one of 0 … count − 1; :class:`NotApplicable` naming
    ``what`` when there is no such one."""
    i = index + count if index < 0 else index
    if not 0 <= i < count:
        raise NotApplicable(f"{what} {index} outside 0..{count - 1}")
    return i


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
