"""Named kernels and validation functions of the 2022 rocMLIR fp16 study, with their sources.

``kernel(name, hw, tuning)`` returns a frozen :class:`KernelModel`: the unit that does the
arithmetic, how the gemmK accumulation order is derived, input flushing, whether it is a
validator and how it accumulates. ``model.plan(problem)`` gives, per sub-GEMM of
:func:`emu.conv.sub_gemms`, the unit and the :class:`emu.gemm.GemmOrder` to pass to
:func:`emu.gemm`; ``gemm_orders`` / ``gemm_units`` give the two lists alone.

Orders are permutations of the *kernel's* gemmK index order as :mod:`emu.conv` gathers it (fwd:
the filter layout's c, y, x letters; bwd_weight: n, ho, wo; bwd_data: k, ydot, xdot). A CPU
validator that loops (c, y, x) over a kyxc filter therefore gets the permutation that visits the
kernel's (y, x, c) indices in (c, y, x) order.

Names: ``rocmlir-2022-xdlops``, ``rocmlir-2022-nonxdlops``, ``gpu-validation``,
``cpu-validation-2022``, ``cpu-validation-mlir``, ``cpu-acc4``, ``cpu-ftz``.
Variants compose: ``kernel("cpu-acc4").with_input_flush().counting_inbounds()`` is the 2022
study's fair_3 MI200 backward-weight validator. ``model.arithmetic(problem)`` is what
:meth:`emu.conv.ConvGemm.compute` runs.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from emu.conv import ConvArithmetic, ConvProblem, sub_gemms
from emu.gemm import GemmOrder
from emu.units import Family

from . import tuning as _tuning
from .hardware import HW_NAMES, check_hardware
from .tuning import DEFAULT_RULES, GemmPlan, Instruction, Tuning
from .units import Unit
from .units import unit as _unit

__all__ = [
    "KernelModel",
    "KernelGemm",
    "kernel",
    "KERNEL_NAMES",
    "VALIDATOR_NAMES",
    "NAMES",
    "HW_NAMES",
    "cpu_loop_k_order",
    "AtomicOrders",
    "ATOMIC_ORDERS",
    "COUNTS",
    "K_SEQUENCES",
    "INPUTS",
]

DOC = (
    "rocMLIR @3df931f1 (github.com/ROCm/rocMLIR: Rock ConvToGemm.cpp, GridwiseGemmParams.cpp, "
    "miopen-gen's host harness)"
)
STUDY = "the 2022 fp16 study (github.com/zhanglx13/llvm-project-mlir-dev-utils, fp16_experiment @3b042e7)"
FINDINGS = "fp16emu's reproduction of the study's measured lines (`fp16emu study reproduce`)"
MU = "MMA-Sim (arXiv 2511.10909) and Khattak & Mikaitis (arXiv 2512.07004)"
#: How a CPU validator counts products: every gemmK position ("all"), or only the in-bounds ones.
COUNTS = ("all", "inbounds")
#: The gemmK sequence of a GPU kernel: its own ("kernel") or the CPU loop's (a hypothesis).
K_SEQUENCES = ("kernel", "cpu-loop")
FLUSH_SOURCE = f"{STUDY}: CPU validation variant 'flush subnormals' (fp16 inputs below 2^-14 set to 0)"
INBOUNDS_SOURCE = (
    f"{DOC}: the C++ CPU convolution skips input positions outside the image; {FINDINGS}: "
    f"every padded bwd_weight test of fair_3 (e.g. padding_kernel_all_wrw CONFIG2/4, ISSUE_70_1, "
    f"ISSUE_71_4) needs the 'accumulate 4' groups to count only those products"
)

KERNEL_NAMES = ("rocmlir-2022-xdlops", "rocmlir-2022-nonxdlops")
VALIDATOR_NAMES = ("gpu-validation", "cpu-validation-2022", "cpu-validation-mlir", "cpu-acc4", "cpu-ftz")
NAMES = KERNEL_NAMES + VALIDATOR_NAMES
_VALIDATING = {
    "rocmlir-2022-xdlops": "rocmlir-2022-xdlops",
    "xdlops": "rocmlir-2022-xdlops",
    "rocmlir-2022-nonxdlops": "rocmlir-2022-nonxdlops",
    "nonxdlops": "rocmlir-2022-nonxdlops",
    "non-xdlops": "rocmlir-2022-nonxdlops",
}
_CPU_LOOP = {"fwd": ("c", "y", "x"), "bwd_weight": ("n", "ho", "wo"), "bwd_data": ("k", "ydot", "xdot")}


class KernelGemm(NamedTuple):
    """What to run for one sub-GEMM: ``emu.gemm(A, B, unit, order)``. ``tuning_plan`` is the
    rocMLIR partition for the GPU kernels (None for CPU validators)."""

    gemm_id: int
    unit: Unit
    order: GemmOrder
    tuning_plan: GemmPlan | None = None


@dataclass(frozen=True)
class AtomicOrders:
    """How the run-to-run order of split-K fp32 atomic adds is modelled: an ensemble of
    ``members`` counter-based add orders (:mod:`emu.atomics`, generator ``seed``, one order per
    ``granularity``: element or output tile), and an envelope, per element, over
    ``min(envelope_orders, envelope_adds / partial sums)`` orders plus ``deep_orders`` more for
    the ``deep_elements`` elements farthest from the validation (by each distance). ``version``
    changes whenever any of this changes the members or the envelope."""

    members: int = 128
    seed: int = 2022
    granularity: str = "element"
    envelope_orders: int = 4096
    envelope_adds: int = 400_000_000
    deep_elements: int = 64
    deep_orders: int = 1 << 16
    version: int = 7

    def __post_init__(self):
        if self.granularity not in ("element", "tile"):
            raise ValueError(f"granularity: {self.granularity!r} is not one of element, tile")
        for name in ("members", "envelope_orders", "envelope_adds", "deep_elements", "deep_orders"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name}: must be ≥ 0, got {getattr(self, name)}")

    def envelope_order_count(self, n_members: int, n_partials: int) -> int:
        """Random orders in the plain envelope of a kernel with ``n_partials`` partial sums in all."""
        return max(n_members, min(self.envelope_orders, self.envelope_adds // max(1, n_partials)))


#: The ensemble the study reproduction and ``fp16emu run`` use (version 7: every atomic line of
#: the 2022 study's fair_1/2/3 lies inside it).
ATOMIC_ORDERS = AtomicOrders()


@dataclass(frozen=True)
class KernelModel:
    """A kernel or a validation function; ``sources`` cites every other field.

    ``order``: how gemmK orders are derived: "rocmlir-xdlops" (the xdlops partition:
    :func:`models.tuning.plan`), "rocmlir-nonxdlops" (ascending gemmK, zero padding of the padding
    kernels) or "cpu-loop" (the validator's loop order, :func:`cpu_loop_k_order`).
    ``fp32_round_every``: the fp64 accumulator is rounded to fp32 after every this many products
    (0: only at the end; FMA units round every product anyway)."""

    name: str
    description: str
    unit: Unit
    order: str
    xdlops: bool  # the xdlops tuning list / perf-config kind applies
    validator: bool
    flush_inputs: bool
    accumulator: str
    fp64_accumulate: bool
    fp32_round_every: int
    output: str
    hw: str | None = None
    validating: str | None = None
    tuning: Tuning | None = None
    kblocks: int | None = None
    rules: str = DEFAULT_RULES
    combine: str = "ascending"
    combine_seed: int = 0
    count: str = "all"
    k_sequence: str = "kernel"
    #: the element format of the tensors ("fp16" or "bf16"): what every unit multiplies and what
    #: a GPU kernel's output is rounded to
    input: str = "fp16"
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        if self.count not in COUNTS:
            raise ValueError(f"count: {self.count!r} is not one of {', '.join(COUNTS)}")
        if self.k_sequence not in K_SEQUENCES:
            raise ValueError(f"k_sequence: {self.k_sequence!r} is not one of {', '.join(K_SEQUENCES)}")
        if self.count == "inbounds" and self.order != "cpu-loop":
            raise ValueError(
                f"count: 'inbounds' models a CPU loop that skips out-of-bounds taps; {self.name} "
                f"is a GPU kernel, whose padding products are in its GEMM"
            )

    def source(self, field_name: str) -> str:
        return self.sources[field_name]

    def __reduce__(self):
        # ``sources`` is read-only (a mappingproxy, which pickle refuses) and jobs carry kernel
        # models to worker processes: a model pickles as its fields, ``sources`` as a plain dict
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields["sources"] = dict(self.sources)
        return _kernel_model_from_fields, (fields,)

    # --- variants ---------------------------------------------------------------------------------

    def _variant(self, suffix: str, why: Mapping[str, str], **changes) -> KernelModel:
        sources = dict(self.sources)
        for f, text in why.items():
            sources[f] = f"{sources.get(f, '')}; {suffix}: {text}".lstrip("; ")
        return dataclasses.replace(self, **changes, sources=MappingProxyType(sources))

    def with_input_flush(self) -> KernelModel:
        """The same model with fp16 inputs below 2^-14 flushed to +0 before the arithmetic (the
        study's "flush subnormals" variant; MI200's matrix unit does it in hardware)."""
        if self.unit.flush_inputs:
            return self if self.flush_inputs else dataclasses.replace(self, flush_inputs=True)
        u_sources = dict(self.unit.sources)
        u_sources["flush_inputs"] = FLUSH_SOURCE
        unit = dataclasses.replace(
            self.unit, name=self.unit.name + "+flush", flush_inputs=True, sources=MappingProxyType(u_sources)
        )
        return self._variant(
            "+flush", {"flush_inputs": FLUSH_SOURCE, "unit": FLUSH_SOURCE}, unit=unit, flush_inputs=True
        )

    def counting_inbounds(self) -> KernelModel:
        """A CPU validator that adds (and counts into its groups of ``unit.group_size``) only the
        products whose input pixel lies inside the image: a backward-weight loop that skips
        out-of-bounds positions rather than multiplying padding zeros."""
        return self._variant("+inbounds", {"count": INBOUNDS_SOURCE}, count="inbounds")

    def in_cpu_loop_order(self) -> KernelModel:
        """A GPU kernel whose gemmK sequence is the CPU validators' loop order (fwd: c, y, x)
        instead of the filter layout's, its partition (padding, split-K) unchanged: a hypothesis
        to test against data, not a kernel rocMLIR is known to run."""
        return self._variant(
            "+cpu-loop-order", {"k_sequence": "hypothesis: gemmK in the CPU loop order"}, k_sequence="cpu-loop"
        )

    @property
    def key(self) -> str:
        """A short name of the model and its variants, e.g. ``cpu-acc4+flush+inbounds``."""
        parts = [self.name]
        if self.hw:
            parts[0] += f"@{self.hw}"
        if self.unit.name.endswith("+flush"):
            parts.append("flush")
        if self.count == "inbounds":
            parts.append("inbounds")
        if self.k_sequence != "kernel":
            parts.append(self.k_sequence)
        return "+".join(parts)

    # --- per problem ----------------------------------------------------------------------------

    def tuning_plans(self, problem: ConvProblem) -> list[GemmPlan] | None:
        """The rocMLIR partition of each sub-GEMM (GPU kernels), None for CPU validators."""
        if self.order == "cpu-loop":
            return None
        kind = "xdlops" if self.order == "rocmlir-xdlops" else "nonxdlops"
        return _tuning.plan(
            problem,
            kind,
            self.tuning,
            self.hw,
            kblocks_override=self.kblocks,
            rules=self.rules,
            combine=self.combine,
            combine_seed=self.combine_seed,
        )

    def plan(self, problem: ConvProblem) -> list[KernelGemm]:
        """Unit and order of every sub-GEMM of ``problem``, in :func:`emu.conv.sub_gemms` order
        (cached per model and problem: both are frozen)."""
        return list(_cached_plan(self, problem))

    def _plan(self, problem: ConvProblem) -> list[KernelGemm]:
        plans = self.tuning_plans(problem)
        if plans is None:
            return [
                KernelGemm(
                    s.gemm_id,
                    self.unit,
                    GemmOrder(k_order=cpu_loop_k_order(problem, s.gemm_id), notes=f"{self.name}: CPU loop order"),
                )
                for s in sub_gemms(problem)
            ]
        gemms = [KernelGemm(p.gemm_id, self._instruction_unit(p.instruction), self._order(p.order), p) for p in plans]
        if self.k_sequence == "cpu-loop":
            gemms = [
                KernelGemm(
                    g.gemm_id,
                    g.unit,
                    GemmOrder(
                        k_order=cpu_loop_k_order(problem, g.gemm_id),
                        pad_k=g.order.pad_k,
                        split_k=g.order.split_k,
                        notes="CPU loop order",
                    ),
                    g.tuning_plan,
                )
                for g in gemms
            ]
        return gemms

    def _order(self, order: GemmOrder) -> GemmOrder:
        """The tuning's order, without split-K for bf16: the Aug-2022 backward-weight atomic path
        was f16-only (github.com/ROCm/rocMLIR PR #536), so a bf16 kernel runs
        one chain per output."""
        if self.input == "fp16" or order.split_k == 1:
            return order
        return GemmOrder(
            k_order=order.k_order,
            pad_k=order.pad_k,
            notes=f"{order.notes}; bf16: no split-K atomics (the Aug-2022 atomic path was f16-only, PR #536)",
        )

    def atomic_split(self, problem: ConvProblem) -> int:
        """The most split-K partial sums any sub-GEMM adds with fp32 atomics, if three or more
        (then the add order, which varies run to run on a GPU, changes the result: with two,
        0 + a is exact and a + b commutes); else 0."""
        most = max((g.order.split_k for g in self.plan(problem)), default=1)
        return most if most >= 3 else 0

    def arithmetic(self, problem: ConvProblem, *, keep_partials: bool = False, seed: int = 0) -> ConvArithmetic:
        """What :meth:`emu.conv.ConvGemm.compute` needs to run this model on ``problem``;
        ``keep_partials``: keep split-K partials apart for atomic add orders drawn with ``seed``."""
        gemms = self.plan(problem)
        tiles = None
        if keep_partials:
            tiles = tuple(
                None if g.tuning_plan is None else (g.tuning_plan.tuning.m_per_block, g.tuning_plan.tuning.n_per_block)
                for g in gemms
            )
        return ConvArithmetic(
            units=tuple(g.unit for g in gemms),
            orders=tuple(g.order for g in gemms),
            inbounds_only=self.count == "inbounds",
            keep_partials=keep_partials,
            tiles=tiles,
            seed=seed,
        )

    def identity(self, problem: ConvProblem) -> list:
        """What of this model changes its bits on ``problem`` (JSON-able, for cache keys): the
        counting rule, and each sub-GEMM's unit parameters and order."""
        ident: list = [self.count]
        for g in self.plan(problem):
            k = g.order.k_order
            digest = None if k is None else hashlib.sha256(json.dumps(list(k)).encode()).hexdigest()
            ident.append([repr(g.unit.params), digest, g.order.pad_k, g.order.split_k])
        return ident

    def gemm_orders(self, problem: ConvProblem) -> list[GemmOrder]:
        """One :class:`emu.gemm.GemmOrder` per sub-GEMM."""
        return [g.order for g in self.plan(problem)]

    def gemm_units(self, problem: ConvProblem) -> list[Unit]:
        """The unit of each sub-GEMM: :attr:`unit`, except that a matrix unit's group never spans
        more k values than the selected instruction reduces (MI300: group min(8, k), so 4 for the
        k=4 instructions 32x32x4 / 16x16x4 / 4x4x4; MI100/MI200 groups are 4 already)."""
        return [g.unit for g in self.plan(problem)]

    def _instruction_unit(self, instr: Instruction) -> Unit:
        u = self.unit
        matrix = u.family in (Family.FUSED_EXACT, Family.PAIRWISE, Family.TWO_STAGE, Family.TRUNCATED_FUSED)
        if not matrix or u.group_size <= instr.k:
            return u
        sources = dict(u.sources)
        sources["group_size"] = (
            f"min({u.group_size}, k of {instr.name} = {instr.k}): {MU} (MMA-Sim CDNA3: "
            f"group = min(8, K); Khattak: instruction K split into consecutive groups)"
        )
        return dataclasses.replace(
            u, name=f"{u.name}/{instr.name}", group_size=instr.k, sources=MappingProxyType(sources)
        )


def _kernel_model_from_fields(fields: dict) -> KernelModel:
    """The unpickler of :meth:`KernelModel.__reduce__`: the model again, ``sources`` read-only."""
    return KernelModel(**(fields | {"sources": MappingProxyType(fields["sources"])}))


@functools.lru_cache(maxsize=512)
def _cached_plan(model: KernelModel, problem: ConvProblem) -> tuple[KernelGemm, ...]:
    return tuple(model._plan(problem))


def cpu_loop_k_order(problem: ConvProblem, gemm_id: int = 0) -> tuple[int, ...] | None:
    """The 2022 CPU validators' reduction loop order as a permutation of the kernel's gemmK
    indices (None when they agree). fwd: c (outermost), y, x whatever the filter layout, against
    the kernel's filter-layout order; bwd_weight: n, ho, wo = the kernel's order; bwd_data: k, y, x
    (y ascending is ydot ascending within a sub-GEMM) = the kernel's (k, ydot, xdot). Positions the
    CPU skips (out of bounds, stride-divisibility) are the kernel's zero products: adding them
    cannot change an accumulator that starts at +0 (rocMLIR's CPU convolution)."""
    if problem.direction != "fwd":
        return None
    kernel_digits = problem.gemm_k_order
    cpu = _CPU_LOOP["fwd"]
    if tuple(kernel_digits) == cpu:
        return None
    sizes = problem.letter_sizes("filter")
    idx = np.arange(int(np.prod([sizes[d] for d in kernel_digits]))).reshape([sizes[d] for d in kernel_digits])
    return tuple(int(i) for i in idx.transpose([kernel_digits.index(d) for d in cpu]).ravel())


# --- the registry ----------------------------------------------------------------------------------


def _hw_unit(hw: str, input: str = "fp16") -> tuple[str, Unit]:
    name = check_hardware(hw)  # models.hardware: the one list of accepted names
    return name, _unit(name, input=input)


def _fp64_variant(name: str, group_size: int, round_each: bool, flush: bool, why: str, input: str) -> Unit:
    base = _unit("fp64", input=input)
    sources = dict(base.sources)
    sources.update(group_size=why, round_each_group=why, name="fp16emu naming", description=why)
    if flush:
        sources["flush_inputs"] = (
            f"{STUDY} (study variant 'flush subnormals': fp16 inputs below 2^-14 set to 0); {STUDY}"
        )
    desc = (
        "fp64 accumulator"
        + (
            f", rounded to fp32 (RNE) after every {group_size} product(s)"
            if round_each
            else ", rounded to fp32 once at the end"
        )
        + (f", {input} inputs below its smallest normal flushed to +0" if flush else "")
    )
    return dataclasses.replace(
        base,
        name=name,
        description=desc,
        group_size=group_size,
        round_each_group=round_each,
        flush_inputs=flush,
        sources=MappingProxyType(sources),
    )


def _cite(**specific: str) -> Mapping[str, str]:
    fields = [f.name for f in dataclasses.fields(KernelModel) if f.name != "sources"]
    missing = [f for f in fields if f not in specific]
    if missing:  # every field must be cited explicitly
        raise AssertionError(f"uncited KernelModel fields: {missing}")
    return MappingProxyType(dict(specific))


#: the element formats a model's tensors may have (the config's ``-t f16`` / ``-t bf16``)
INPUTS = ("fp16", "bf16")
_OUTPUT_KERNEL = "fp32 accumulator → fp16 by RNE, overflow to ±inf"
_OUTPUT_VALIDATOR = "fp32 result; the verifier rounds it to fp16 by RNE before comparing"
_SRC_OUTPUT_KERNEL = f"{DOC} (arith.truncf → v_cvt_f16_f32, RNE); {STUDY} 'Output'"
_SRC_OUTPUT_VALIDATOR = f"{DOC} 'Comparison path' (validation value truncf'd to f16, RNE); {FINDINGS} verifier row"
#: bf16 tensors in the 2022 harness (the same wrapper library that makes fp16 by truncation)
HARNESS_BF16 = (
    "github.com/ROCm/rocMLIR mlir/lib/ExecutionEngine/conv-validation-wrappers.cpp as of mid-2022 (the file "
    "whose float_to_fp16 makes the fp16 tensors): mcpuMemset5DBF16Rand* store float_to_bfloat16(x), "
    "the float's top 16 bits; mcpuMem5DBF16ConvertFloat widens bf16 exactly for the float CPU validation"
)


def _output_kernel(fmt: str) -> str:
    return _OUTPUT_KERNEL if fmt == "fp16" else "fp32 accumulator → bf16 by RNE, overflow to ±inf"


def _src_output_kernel(fmt: str) -> str:
    if fmt == "fp16":
        return _SRC_OUTPUT_KERNEL
    return (
        f"{DOC} (the kernel's f32 result stored through arith.truncf to the bf16 output, whose semantics are "
        f"round to nearest even; inferred, not observed on a bf16 kernel)"
    )


def _input_source(fmt: str, *, kernel: bool) -> str:
    if fmt == "fp16":
        return f"{DOC} (-t f16)"
    what = "the kernel multiplies the bf16 tensors" if kernel else "the validation reads exact copies of them"
    return f"{DOC} (-t bf16): {what}; {HARNESS_BF16}"


def kernel(
    name: str,
    hw: str = "mi200",
    tuning=None,
    *,
    validating=None,
    kblocks: int | None = None,
    rules: str = DEFAULT_RULES,
    combine: str = "ascending",
    combine_seed: int = 0,
    input: str = "fp16",
) -> KernelModel:
    """The named kernel or validator.

    ``hw``: mi100 / mi200 / mi300 (the xdlops kernel's matrix unit; ignored by the others).
    ``tuning``: None (the 2022 default per sub-GEMM), a perf-config string or a tuning record, for
    the two GPU kernels and gpu-validation (non-xdlops kind); CPU validators take none.
    ``validating``: the kernel a CPU validation validates ("rocmlir-2022-xdlops" or
    "rocmlir-2022-nonxdlops", or "xdlops"/"nonxdlops"): required by cpu-validation-2022 and cpu-ftz,
    whose fp32 rounding depends on it; ignored by the others. ``kblocks``: override the split-K
    count of the xdlops backward-weight atomic path (the 2022 study's data contradict the Sep-2022 formula for some tests: a parameter to identify);
    ``rules``: tuning rule set (:data:`models.tuning.RULES`); ``combine``/``combine_seed``: the
    atomic-add order of split-K chunks (:class:`emu.gemm.GemmOrder`); ``input``: the tensors' element
    format, "fp16" (default) or "bf16" (every unit then multiplies bf16: :data:`INPUTS`)."""
    key = str(name).strip().lower()
    if key not in NAMES:
        raise ValueError(f"kernel: {name!r} is not a known kernel or validator; valid names: {', '.join(NAMES)}")
    if isinstance(validating, KernelModel):
        validating = validating.name
    if validating is not None:
        v = _VALIDATING.get(str(validating).strip().lower())
        if v is None and key in ("cpu-validation-2022", "cpu-ftz"):
            raise ValueError(
                f"validating: {validating!r} is not one of {', '.join(KERNEL_NAMES)} (or xdlops, nonxdlops)"
            )
        validating = v
    if input not in INPUTS:
        raise ValueError(f"input: {input!r} is not one of {', '.join(INPUTS)}")
    common = dict(rules=rules, combine=combine, combine_seed=combine_seed, input=input)
    if key in ("rocmlir-2022-xdlops", "rocmlir-2022-nonxdlops", "gpu-validation"):
        xdlops = key == "rocmlir-2022-xdlops"
        t = _tuning.as_tuning(tuning, xdlops)
        if kblocks is not None and not xdlops:
            raise ValueError(f"kblocks: only rocmlir-2022-xdlops runs the split-K atomic path, not {key}")
        if xdlops:
            hw_name, u = _hw_unit(hw, input)
            return _xdlops(hw_name, u, t, kblocks, common)
        hw_name = _hw_unit(hw)[0] if hw is not None else None
        return _nonxdlops(key, hw_name, t, common)
    if tuning is not None:
        raise ValueError(f"tuning: {key} is a CPU validation function and takes no tuning")
    if kblocks is not None:
        raise ValueError(f"kblocks: {key} is a CPU validation function and has no split-K")
    return _cpu(key, validating, common)


def _xdlops(hw_name: str, u: Unit, t, kblocks, common) -> KernelModel:
    fmt = common["input"]
    tuning_src = (
        f"{_tuning.SOURCES['xdlops_list']}; default = first valid entry ({DOC}); "
        f"perf-config format {_tuning.SOURCES['perf_config']}"
    )
    return KernelModel(
        name="rocmlir-2022-xdlops",
        description=(
            f"rocMLIR (Aug 2022) xdlops implicit-GEMM kernel on {hw_name.upper()} matrix cores: "
            f"mfma groups along gemmK per the tuning, {fmt} operands, fp32 accumulator, RNE to {fmt}"
        ),
        unit=u,
        order="rocmlir-xdlops",
        xdlops=True,
        validator=False,
        flush_inputs=u.flush_inputs,
        accumulator="fp32 (mfma accumulator registers), one unit step per k group; split-K partials added with fp32 atomics",
        fp64_accumulate=False,
        fp32_round_every=0,
        output=_output_kernel(fmt),
        hw=hw_name,
        validating=None,
        tuning=t,
        kblocks=kblocks,
        **common,
        sources=_cite(
            name="fp16emu naming",
            description=f"{DOC}; {STUDY} 'Xdlops kernel'",
            unit=f"models.units.unit({hw_name!r}, input={fmt!r}): {u.source('family')}; {STUDY}",
            order=f"{_tuning.SOURCES['k_order']}; {_tuning.SOURCES['instruction']}",
            xdlops=f"{DOC}: -x2 selects the xdlops kernel",
            validator="a GPU kernel, not a validation function",
            flush_inputs=f"the unit's flush_inputs: {u.source('flush_inputs')}; {DOC}",
            accumulator=f"{DOC} (f32 accumulator vectors; bwd_weight split-K with StoreMethod::AtomicAdd)",
            fp64_accumulate=f"{DOC} (f32 accumulators only)",
            fp32_round_every="unused: the unit rounds to fp32 every group",
            output=_src_output_kernel(fmt),
            hw=f"{STUDY} (MI100, MI200, MI300); {DOC} (the kernel is the same on every GPU under -x2)",
            validating="unused by GPU kernels",
            tuning=tuning_src,
            kblocks=f"{_tuning.SOURCES['kblocks']}; override: {_tuning.SOURCES['kblocks_data']}",
            rules=f"{_tuning.SOURCES['validity_2022-08']} (default); {_tuning.SOURCES['validity_2022-09']}",
            combine=f"{DOC} (atomic add order varies run to run); {STUDY} (model as an ensemble of orders)",
            combine_seed=f"{STUDY} (ensemble of orders)",
            count="unused: a GPU kernel multiplies every gemmK position, padding zeros included",
            k_sequence=f"{DOC}: the filter layout's gemmK order",
            input=_input_source(fmt, kernel=True),
        ),
    )


def _nonxdlops(key: str, hw_name, t, common) -> KernelModel:
    gpu = key == "gpu-validation"
    fmt = common["input"]
    fma = _unit("fma32", input=fmt)
    tuning_src = (
        f"{_tuning.SOURCES['nonxdlops_list']}; default = first valid entry ({DOC}); only the "
        f"padding kernels' zero padding of gemmK reaches the arithmetic"
    )
    if gpu:
        desc = (
            "GPU validation (-pv_with_gpu): the non-xdlops kernel run in fp32 on fp32 copies of the fp16 inputs; "
            "the copies are exact, so the arithmetic is the fp16 non-xdlops kernel's (fp32 FMA, ascending gemmK)"
        )
        desc_src = f"{DOC} 'GPU validation' (PR #286; miopen-gen populateHostHarnessLogic); {STUDY}"
    else:
        desc = "rocMLIR (Aug 2022) non-xdlops kernel: one fp32 FMA per gemmK value in ascending order, RNE to fp16"
        desc_src = f"{DOC}; {STUDY} 'Non-xdlops kernel'"
    return KernelModel(
        name=key,
        description=desc,
        unit=fma,
        order="rocmlir-nonxdlops",
        xdlops=False,
        validator=gpu,
        flush_inputs=False,
        accumulator="fp32, one FMA (one RNE) per product",
        fp64_accumulate=False,
        fp32_round_every=1,
        output=_OUTPUT_VALIDATOR if gpu else _output_kernel(fmt),
        hw=hw_name,
        validating=None,
        tuning=t,
        kblocks=None,
        **common,
        sources=_cite(
            name="fp16emu naming",
            description=desc_src,
            unit=f"models.units.unit('fma32', input={fmt!r}): {fma.source('family')}; {DOC} (vector::FMAOp, "
            f"f16/bf16→f32 fpext exact; the FMA keeps the exact product, which for bf16 can lie below fp32's range)",
            order=f"{DOC} 'Net effect per output': strictly ascending gemmK; padding: {_tuning.SOURCES['padding']}",
            xdlops=f"{DOC} (no -x2); {DOC} (-pv_with_gpu flips xdlops off)",
            validator=desc_src,
            flush_inputs=(
                f"{DOC}: f16 products and sums cannot be f32-subnormal, FTZ settings do not matter"
                if fmt == "fp16"
                else f"{DOC}: plain f32 FMAs; bf16 products can be f32-subnormal, kept (assumed: f32 denormals on, "
                "the AMDGPU default; not observed on a bf16 kernel)"
            ),
            accumulator=f"{DOC} (f32 accumulator, 'f16: f32 … to prevent overflow')",
            fp64_accumulate=f"{DOC}",
            fp32_round_every=f"{DOC} (one rounding per step)",
            output=_SRC_OUTPUT_VALIDATOR if gpu else _src_output_kernel(fmt),
            hw=f"{DOC}: non-xdlops results identical on MI100 and MI200",
            validating="unused: the GPU validation is always the non-xdlops kernel",
            tuning=tuning_src + (f"; {DOC} (same tuning choice as the f16 non-xdlops kernel)" if gpu else ""),
            kblocks=f"{DOC}: no split-K for non-xdlops",
            rules=_tuning.SOURCES["validity_2022-08"],
            combine="unused: no split-K",
            combine_seed="unused: no split-K",
            count="unused: a GPU kernel multiplies every gemmK position, padding zeros included",
            k_sequence=f"{DOC}: ascending gemmK",
            input=_input_source(fmt, kernel=not gpu),
        ),
    )


def _cpu(key: str, validating, common) -> KernelModel:
    loop_src = (
        f"{DOC}: the C++ conv loops c (outermost), y, x for fwd, n, ho, wo for bwd_weight, "
        f"k, y, x for bwd_data; the MLIR CPU conv the same (createCPUConvWithMLIR)"
    )
    if key in ("cpu-validation-2022", "cpu-ftz"):
        if validating is None:
            raise ValueError(
                f"validating: {key} rounds differently for the kernel it validates; pass "
                f"validating='rocmlir-2022-xdlops' or 'rocmlir-2022-nonxdlops'"
            )
        nonx = validating == "rocmlir-2022-nonxdlops"
        ftz = key == "cpu-ftz"
        why = (
            f"{DOC} mcpuConv2dFloat: double acc; `if (!xdlops) acc = (float)acc;` after every step; "
            f"{FINDINGS} (both modes needed)"
        )
        u = _fp64_variant(
            f"fp64{'-ftz' if ftz else ''}-{'fp32-each-step' if nonx else 'end'}", 1, nonx, ftz, why, common["input"]
        )
        desc = (
            f"CPU validation (-pv, Aug 2022) of a {'non-xdlops' if nonx else 'xdlops'} run: "
            f"{u.description}; loops c, y, x (fwd)"
        )
        if ftz:
            desc = "study variant 'flush subnormals' of the " + desc
        return _cpu_model(
            key,
            desc,
            u,
            validating,
            ftz,
            1 if nonx else 0,
            "fp64" + (", rounded to fp32 after every product" if nonx else ", rounded to fp32 at the end"),
            why,
            loop_src,
            common,
        )
    if key == "cpu-acc4":
        why = f"{STUDY} study variant 'accumulate 4': sum 4 products in fp64, round to fp32, go on; {STUDY}"
        u = _fp64_variant("fp64-acc4", 4, True, False, why, common["input"])
        return _cpu_model(
            key,
            "study variant of the CPU validation: " + u.description + "; loops c, y, x (fwd)",
            u,
            validating,
            False,
            4,
            "fp64 over each group of 4 products, rounded to fp32 per group",
            why,
            loop_src,
            common,
        )
    # cpu-validation-mlir
    fma = _unit("fma32", input=common["input"])
    why = (
        f"{DOC}: by 3df931f1 -pv is the MLIR CPU conv, arith.mulf then arith.addf into an f32 buffer: "
        f"one f32 rounding per term; the fp16 product is exact in fp32, so this is fp32 FMA ({fma.source('family')})"
    )
    return _cpu_model(
        key,
        "CPU validation (-pv, from Sep 2022): fp32 multiply then add per term, loops c, y, x (fwd)",
        fma,
        validating,
        False,
        1,
        "fp32, one rounding per product",
        why,
        loop_src,
        common,
    )


def _cpu_model(key, desc, u, validating, ftz, every, acc, why, loop_src, common) -> KernelModel:
    fp64 = u.family == Family.FP64
    return KernelModel(
        name=key,
        description=desc,
        unit=u,
        order="cpu-loop",
        xdlops=False,
        validator=True,
        flush_inputs=ftz,
        accumulator=acc,
        fp64_accumulate=fp64,
        fp32_round_every=every,
        output=_OUTPUT_VALIDATOR,
        hw=None,
        validating=validating,
        tuning=None,
        kblocks=None,
        **common,
        sources=_cite(
            name="fp16emu naming",
            description=why,
            unit=why,
            order=loop_src,
            xdlops="unused: a CPU validation function has no GPU partition",
            validator=f"{DOC}",
            flush_inputs=(
                f"{STUDY} study variant 'flush subnormals'"
                if ftz
                else f"{DOC}: f16 inputs copied to f32 exactly (extf), nothing flushed"
            ),
            accumulator=why,
            fp64_accumulate=why,
            fp32_round_every=why,
            output=_SRC_OUTPUT_VALIDATOR,
            hw="unused: runs on the CPU",
            validating=(
                f"{DOC}: miopen-gen passes xdlopsConstantOp ('reduce precision if !xdlops')"
                if key in ("cpu-validation-2022", "cpu-ftz")
                else "unused by this validator"
            ),
            tuning="unused: a CPU validation function has no tuning",
            kblocks="unused: no split-K",
            rules="unused: no tuning",
            combine="unused: no split-K",
            combine_seed="unused: no split-K",
            count=f"{DOC}: padding products are zeros and cannot change a sum; they only count into groups",
            k_sequence="unused: the loop order is the order",
            input=_input_source(common["input"], kernel=False),
        ),
    )
