"""Which kernel and validator models stand for a measured line, and the alternatives a diagnosis tries.

A :class:`Recipe` names the kernel's and the validator's :class:`models.kernels.KernelModel`
(frozen and hashable, so one job computes each distinct model once), the verifier's run-set
quirks and the input generator. Nothing here computes: :mod:`.emulate` runs the models.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from models import kernels as km
from models.kernels import KernelModel
from models.tuning import DEFAULT_RULES

from ..suites import suite_config
from .measured import RUN_SETS

__all__ = [
    "Recipe",
    "default_recipe",
    "alternatives",
    "atomic_reorders",
    "xdlops_kernel",
    "NONXDLOPS_KERNEL",
    "cpu_validator",
    "describe",
]

#: The non-xdlops kernel: fp32 FMA in ascending gemmK. It is also ``-pv_with_gpu``'s arithmetic
#: (the same kernel on exact fp32 copies of the inputs), so one model serves both roles.
NONXDLOPS_KERNEL = km.kernel("rocmlir-2022-nonxdlops", hw=None)


def xdlops_kernel(hw: str, rules: str | None = None, kblocks: int | None = None) -> KernelModel:
    """The 2022 xdlops kernel on ``hw``'s matrix unit (tuning rules and KBlocks overridable)."""
    return km.kernel("rocmlir-2022-xdlops", hw=hw, kblocks=kblocks, rules=rules or DEFAULT_RULES)


def cpu_validator(
    name: str = "cpu-validation-2022", validating: str | None = None, flush: bool = False, inbounds: bool = False
) -> KernelModel:
    """A CPU validation function of :mod:`models.kernels`; ``flush``: fp16 inputs below 2^-14 set
    to 0 first; ``inbounds``: a grouped validator ('acc 4') counts only the products the loop adds
    (it skips out-of-bounds taps) into its groups. ``validating`` matters to the validators whose
    rounding depends on the kernel validated (cpu-validation-2022, cpu-ftz) and is dropped
    elsewhere, so that equal arithmetic is one model."""
    if name not in ("cpu-validation-2022", "cpu-ftz"):
        validating = None
    model = km.kernel(name, validating=validating)
    if flush:
        model = model.with_input_flush()
    if inbounds and name == "cpu-acc4":
        model = model.counting_inbounds()
    return model


def describe(model: KernelModel) -> str:
    """One phrase naming a model's arithmetic, for reports and diagnoses."""
    if model.name == "rocmlir-2022-xdlops":
        extra = [f"rules {model.rules}"] if model.rules != DEFAULT_RULES else []
        if model.kblocks is not None:
            extra.append(f"KBlocks {model.kblocks}")
        if model.k_sequence != "kernel":
            extra.append("gemmK in the CPU loop order")
        return f"xdlops kernel on the {model.hw.upper()} unit" + (f" ({', '.join(extra)})" if extra else "")
    if model.name == "rocmlir-2022-nonxdlops":
        return "non-xdlops fp32 FMA chain" + (" in the CPU loop order" if model.k_sequence != "kernel" else "")
    desc = {
        "cpu-validation-2022": "CPU validation v1 ("
        + ("fp32 after every step" if model.validating == "rocmlir-2022-nonxdlops" else "fp64")
        + ")",
        "cpu-acc4": "CPU validation 'acc 4' (fp64 over 4 products, fp32 per group)",
        "cpu-validation-mlir": "CPU validation fp32 multiply-then-add (Sep 2022)",
    }.get(model.name, model.name)
    if model.count == "inbounds":
        desc += " counting only in-bounds products into the groups"
    return desc + (" with inputs < 2^-14 flushed" if model.unit.name.endswith("+flush") else "")


@dataclass(frozen=True)
class Recipe:
    """How one measured line is emulated: the kernel's and the validator's models, the verifier's
    run-set quirks and the input generation."""

    kernel: KernelModel
    validator: KernelModel
    quirks: str
    rand_type: str = "float"

    def label(self) -> str:
        return (
            f"{describe(self.kernel)} vs {describe(self.validator)}, verifier {self.quirks}, rand_type {self.rand_type}"
        )


def default_recipe(run_set: str, gpu: str, kernel: str, validator: str, direction: str) -> Recipe:
    """The recipe that reproduces the study (package docstring): which kernel, validation function,
    verifier quirks and inputs stand for one measured line."""
    kmodel = xdlops_kernel(gpu) if kernel == "xdlops" else NONXDLOPS_KERNEL
    if validator == "gpu":
        vmodel = NONXDLOPS_KERNEL
    elif run_set == "fair_3" and direction != "bwd_data":
        # bwd_weight: the group counter advances only on the products the loop adds (data: every
        # padded bwd_weight test, e.g. padding_kernel_all_wrw CONFIG2/4, ISSUE_70_1, ISSUE_71_4)
        vmodel = cpu_validator("cpu-acc4", flush=gpu == "mi200", inbounds=direction == "bwd_weight")
    else:
        vmodel = cpu_validator("cpu-validation-2022", kernel)
    return Recipe(kmodel, vmodel, run_set if run_set in RUN_SETS else "fair_3")


def atomic_reorders(test_name: str) -> bool:
    """Whether the xdlops kernel of ``test_name`` adds three or more split-K partial sums with fp32
    atomics (backward weight, no gemm padding): its result depends on the add order."""
    return xdlops_kernel("mi200").atomic_split(suite_config(test_name).problem) > 0


def alternatives(recipe: Recipe, problem, atomic: bool) -> list[tuple[str, str, Recipe, str | None]]:
    """(category, description, recipe, granularity or None) alternatives the models offer for a
    line that ``recipe`` does not reproduce, one assumption changed at a time."""
    alts: list[tuple[str, str, Recipe, str | None]] = []
    for q in RUN_SETS:
        if q != recipe.quirks and q != "fair_rand0":
            alts.append(("verifier quirk", f"the {q} verifier's quirks", dataclasses.replace(recipe, quirks=q), None))
    validators = [
        NONXDLOPS_KERNEL,
        cpu_validator("cpu-validation-2022", "xdlops"),
        cpu_validator("cpu-validation-2022", "nonxdlops"),
        cpu_validator("cpu-validation-2022", "xdlops", True),
        cpu_validator("cpu-validation-2022", "nonxdlops", True),
        cpu_validator("cpu-acc4"),
        cpu_validator("cpu-acc4", flush=True),
        cpu_validator("cpu-validation-mlir"),
    ]
    if problem.direction == "bwd_weight":
        validators += [cpu_validator("cpu-acc4", inbounds=True), cpu_validator("cpu-acc4", flush=True, inbounds=True)]
    for v in validators:
        if v != recipe.validator:
            alts.append(("validator", describe(v), dataclasses.replace(recipe, validator=v), None))
    k = recipe.kernel
    cpu_order_differs = problem.direction == "fwd" and tuple(problem.gemm_k_order) != ("c", "y", "x")
    if k.name == "rocmlir-2022-xdlops":

        def xdl(hw=k.hw, rules=k.rules, kblocks=k.kblocks):
            model = xdlops_kernel(hw, rules, kblocks)
            return model.in_cpu_loop_order() if k.k_sequence == "cpu-loop" else model

        for other in ("mi100", "mi200", "mi300"):
            if other != k.hw:
                alts.append(
                    ("unit model", f"the {other.upper()} unit", dataclasses.replace(recipe, kernel=xdl(other)), None)
                )
        alts.append(
            ("gemmK order", "tuning rules 2022-09", dataclasses.replace(recipe, kernel=xdl(rules="2022-09")), None)
        )
        if cpu_order_differs:
            alts.append(
                (
                    "gemmK order",
                    "gemmK in the CPU loop order (c, y, x)",
                    dataclasses.replace(recipe, kernel=xdl().in_cpu_loop_order()),
                    None,
                )
            )
        if atomic:
            for n in (2, 4, 8, 16, 32, 64):
                try:
                    xdl(kblocks=n).plan(problem)
                except ValueError:
                    continue
                alts.append(("gemmK order", f"KBlocks {n}", dataclasses.replace(recipe, kernel=xdl(kblocks=n)), None))
            alts.append(
                ("gemmK order", "atomic add order random per output tile instead of per element", recipe, "tile")
            )
    else:
        if cpu_order_differs:
            alts.append(
                (
                    "gemmK order",
                    "gemmK in the CPU loop order (c, y, x)",
                    dataclasses.replace(recipe, kernel=NONXDLOPS_KERNEL.in_cpu_loop_order()),
                    None,
                )
            )
        for hw in ("mi100", "mi200"):
            alts.append(
                (
                    "unit model",
                    f"the xdlops kernel's {hw.upper()} unit instead of fp32 FMA",
                    dataclasses.replace(recipe, kernel=xdlops_kernel(hw)),
                    None,
                )
            )
    alts.append(
        (
            "input generation",
            "integer random generator (-rand_type int)",
            dataclasses.replace(recipe, rand_type="int"),
            None,
        )
    )
    return alts
