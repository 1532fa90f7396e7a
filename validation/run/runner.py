"""Run one convolution test through an emulated kernel and an emulated validation function.

config text → ``validation.configs`` → harness inputs (``models.harness``) → both models'
GEMMs in one pass (:meth:`emu.conv.ConvGemm.compute`: each operand chunk gathered once) → kernel
output rounded to fp16 (RNE) and the validation output (fp32). A kernel whose split-K adds three
or more partial sums with fp32 atomics has no single output: its result depends on the add order,
which varies from run to run on a GPU. Its partial sums are kept (:attr:`RunResult.ensemble`);
:attr:`RunResult.kernel_output` is then the ascending add order, one member among many.

Validators compose: ``cpu-acc4+flush+inbounds`` is the "accumulate 4" CPU validation with fp16
inputs below 2^-14 flushed, counting only in-bounds products into its groups (the 2022 study's
fair_3 MI200 backward-weight validator).
"""

from __future__ import annotations

import html
import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from emu.atomics import SplitPartials
from emu.conv import ConvGemm, ConvProblem
from models import harness
from models import kernels as kernel_models
from models.hardware import HW_NAMES, check_hardware
from models.kernels import ATOMIC_ORDERS

from ..configs import (
    Config,
    ConfigError,
    ConfigWarning,
    check_rand_bound,
    check_seed,
    check_work,
    data_format,
    parse_config,
)
from ..progress import auto_progress, progress_bar
from .arrays import LoadedArray, round_output
from .gpu import GpuComparison, compare_gpu_output, load_gpu_output
from .inputs import InputsInfo, resolve_inputs, save_run, user_tensors
from .reading import Judgement, check_judging, judge

__all__ = [
    "RunResult",
    "run",
    "check_overrides",
    "plan",
    "plan_gemms",
    "gemm_order_note",
    "choice",
    "parse_validator",
    "KERNEL_CHOICES",
    "VALIDATOR_CHOICES",
    "VALIDATOR_MODIFIERS",
    "HW_CHOICES",
    "RAND_TYPES",
    "shape_axes",
]

KERNEL_CHOICES = {"xdlops": "rocmlir-2022-xdlops", "nonxdlops": "rocmlir-2022-nonxdlops"}
VALIDATOR_CHOICES = {
    "cpu": "cpu-validation-2022",
    "gpu": "gpu-validation",
    "cpu-acc4": "cpu-acc4",
    "cpu-ftz": "cpu-ftz",
    "mlir": "cpu-validation-mlir",
}
#: how ``fp16emu run`` names run()'s judging arguments in its messages
OPTION_NAMES = {
    "verifier": "--verifier",
    "thresholds": "--threshold",
    "layout": "--layout",
    "members": "--members",
    "search_budget": "--search-budget",
}
#: ``VALIDATOR+MODIFIER…``: what each modifier changes.
VALIDATOR_MODIFIERS = {
    "flush": "fp16 inputs below 2^-14 flushed to +0 first",
    "inbounds": "only in-bounds products counted into the groups (bwd_weight CPU loops)",
}
#: the accepted hardware names (models.hardware; aliases such as mi250x are accepted too)
HW_CHOICES = HW_NAMES
RAND_TYPES = ("float", "int")


@dataclass
class RunResult:
    """Outputs of one run, flat in the result tensor's memory order.

    ``ensemble``: for a kernel with order-dependent split-K atomics, its partial sums
    (:class:`emu.atomics.SplitPartials`, generator seeded as :data:`models.kernels.ATOMIC_ORDERS`);
    :meth:`members` draws the kernel outputs of other add orders. None otherwise."""

    config: Config
    kernel: kernel_models.KernelModel
    validator: kernel_models.KernelModel
    kernel_fp32: np.ndarray
    kernel_output: np.ndarray  # fp16 (bf16 for a bf16 config), what the GPU kernel writes
    validation_output: np.ndarray  # fp32, what the validation function returns
    inputs: dict = field(repr=False, default_factory=dict)
    inputs_used: dict = field(default_factory=dict)
    ensemble: SplitPartials | None = field(repr=False, default=None)
    #: what the inputs were (distribution, range, seed and their sources, or the user's files)
    inputs_info: InputsInfo | None = field(repr=False, default=None)
    #: the verdict and, with a GPU output, the reading (:meth:`judge`; computed on first use
    #: with the defaults when :func:`run` was not asked for one)
    _judgement: Judgement | None = field(init=False, repr=False, compare=False, default=None)

    def judge(self, gpu=None, **options) -> Judgement:
        """The verifier's verdict on this run, and with ``gpu`` (the GPU's own output) its reading:
        rounding, mix-up or bug-suspect (:func:`validation.run.judge`, its options); what
        ``fp16emu run`` prints."""
        return judge(self, gpu, **options)

    @property
    def judgement(self) -> Judgement:
        """The run judged as :func:`run` was asked (default: the config's harness verifier, no GPU output)."""
        if self._judgement is None:
            self._judgement = self.judge()
        return self._judgement

    @property
    def verdict(self):
        """The verifier's verdict (:attr:`judgement`)."""
        return self.judgement.verdict

    @property
    def reading(self) -> str | None:
        """The reading of the GPU's output (:attr:`judgement`; None without one)."""
        return self.judgement.reading

    @property
    def format(self) -> str:
        """The tensors' element format, "fp16" or "bf16": what the kernel multiplies and writes."""
        return self.kernel.input

    @property
    def axes(self) -> tuple[str, ...]:
        """The letters of :attr:`shape`'s axes (the result tensor's layout: n, h, w, k …)."""
        return shape_axes(self.problem, self.problem.result_role)

    @property
    def kernel_array(self) -> np.ndarray:
        """The kernel's fp16 output in the result tensor's shape (axes :attr:`axes`)."""
        return np.asarray(self.kernel_output).reshape(self.shape)

    @property
    def validation_array(self) -> np.ndarray:
        """The validation's fp32 output in the result tensor's shape (axes :attr:`axes`)."""
        return np.asarray(self.validation_output).reshape(self.shape)

    def save(self, directory, *, command: str | None = None) -> dict[str, str]:
        """Write kernel.npy, validation.npy, the input tensors and run.json under ``directory``
        (:func:`validation.run.inputs.save_run`); returns ``{file: what}``."""
        return save_run(self, directory, command=command)

    def __repr__(self) -> str:
        name = self.config.label
        ens = f", split-K atomics ({self.ensemble.n_split} partials: order-dependent)" if self.ensemble else ""
        return (
            f"<RunResult {name}: {self.problem.direction} {self.kernel.key} vs {self.validator.key}, "
            f"{self.problem.result_role} {'x'.join(map(str, self.shape))} ({''.join(self.axes)}){ens}>"
        )

    def _repr_html_(self) -> str:
        rows = [
            ("config", self.config.label),
            ("direction", self.problem.direction),
            ("kernel", self.kernel.key),
            ("validator", self.validator.key),
            ("result", f"{self.problem.result_role} {'x'.join(map(str, self.shape))} ({''.join(self.axes)})"),
            ("inputs", self.inputs_info.text() if self.inputs_info is not None else ""),
        ]
        if self.ensemble is not None:
            rows.append(
                ("atomics", f"split-K with {self.ensemble.n_split} partials: the result depends on the add order")
            )
        body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
        return f"<table>{body}</table>"

    @property
    def problem(self) -> ConvProblem:
        return self.config.problem

    @property
    def shape(self) -> tuple[int, ...]:
        return self.problem.tensor_shape(self.problem.result_role)

    def against(self, gpu) -> GpuComparison:
        """The GPU's own output (fp16 values or patterns, or their fp32 copy; the result tensor's
        shape or flat) against the emulated kernel, bit for bit: "identical", "inside-ensemble"
        (split-K atomics: every element some add order's outcome) or "differs", with the
        suspects' coordinates and clusters (:mod:`validation.run.gpu`)."""
        return compare_gpu_output(self, gpu)

    def members(self, count: int = ATOMIC_ORDERS.members, granularity: str = ATOMIC_ORDERS.granularity):
        """Kernel outputs (fp16, flat) of ``count`` random atomic add orders (members 0 …
        count−1 of the ensemble); empty for a kernel whose result does not depend on the order."""
        if self.ensemble is None:
            return
        for i in range(count):
            yield self.ensemble.member(i, granularity)


def choice(value, choices, option: str) -> str:
    """``value`` (case-insensitive) as one of ``choices`` (a tuple, or a dict of short → long
    names, either accepted); ValueError naming ``option`` and the accepted values otherwise."""
    key = str(value).strip().lower() if value is not None else value
    if isinstance(choices, dict):
        if key in choices:
            return choices[key]
        if key in choices.values():
            return key
    elif key in choices:
        return key
    raise ValueError(f"{option}: {value!r} is not one of {', '.join(choices)}")


def parse_validator(text: str, *, hw: str, validating: str, input: str = "fp16") -> kernel_models.KernelModel:
    """A validator model from ``NAME[+MODIFIER…]``: NAME one of :data:`VALIDATOR_CHOICES`,
    modifiers from :data:`VALIDATOR_MODIFIERS` (e.g. ``cpu-acc4+flush+inbounds``), for tensors
    of ``input`` ("fp16" or "bf16")."""
    name, *mods = [p.strip() for p in str(text).split("+")]
    model = kernel_models.kernel(
        choice(name, VALIDATOR_CHOICES, "validator"), hw=hw, validating=validating, input=input
    )
    seen = set()
    for mod in mods:
        mod = mod.lower()
        if mod in seen:
            raise ValueError(f"validator: the modifier +{mod} is given twice in {str(text)[:60]!r}; give each once")
        seen.add(mod)
        if mod == "flush":
            model = model.with_input_flush()
        elif mod == "inbounds":
            if model.order != "cpu-loop":
                raise ValueError(f"validator: +inbounds applies to a CPU validation function, not {model.name}")
            model = model.counting_inbounds()
        else:
            raise ValueError(
                f"validator: modifier {mod!r} is not one of {', '.join('+' + m for m in VALIDATOR_MODIFIERS)}"
            )
    return model


def plan(
    config, *, hw: str = "mi200", kernel: str | None = None, validator: str = "cpu", perf_config: str | None = None
):
    """(Config, kernel model, validator model) for ``config``: everything but the arithmetic.

    Refuses (ConfigError, before anything is allocated) a config whose data type is not fp16 or
    bf16 and a problem whose work estimate is past the limits of :mod:`validation.configs.limits`.
    Both models take the config's format (:func:`validation.configs.data_format`)."""
    if not isinstance(config, Config):
        with warnings.catch_warnings():
            # an unknown -t warns while parsing; here it is refused next, in one line
            warnings.simplefilter("ignore", ConfigWarning)
            config = parse_config(config)
    fmt = data_format(config)
    check_work(config.problem)
    hw = check_hardware(hw)
    if kernel is None:
        kernel = "nonxdlops" if config.xdlops is False else "xdlops"
    kernel_name = choice(kernel, KERNEL_CHOICES, "kernel")
    kmodel = kernel_models.kernel(kernel_name, hw=hw, tuning=perf_config or config.perf_config, input=fmt)
    vmodel = parse_validator(validator, hw=hw, validating=kernel_name, input=fmt)
    if vmodel.count == "inbounds" and config.problem.direction != "bwd_weight":
        raise ValueError(f"validator: +inbounds models backward-weight loops; this test is {config.problem.direction}")
    return config, kmodel, vmodel


def plan_gemms(config: Config, model: kernel_models.KernelModel) -> list[dict]:
    """What ``model`` runs for ``config``, GEMM by GEMM (``run --check``): sizes G, M, N, K, the unit
    and its group size, the k order, padding, split-K and the order's notes."""
    return [
        {
            "G": sub.g,
            "M": sub.m,
            "N": sub.n,
            "K": sub.k,
            "unit": g.unit.name,
            "group_size": g.unit.group_size,
            "k_order": "custom" if g.order.k_order else "ascending",
            "pad_k": g.order.pad_k,
            "split_k": g.order.split_k,
            "notes": g.order.notes,
        }
        for sub, g in zip(config.gemms, model.plan(config.problem))
    ]


def gemm_order_note(model: kernel_models.KernelModel) -> str:
    """Which gemmK order ``model`` assumes for a rocmlir-gen GEMM config, and why (``run --check``,
    the run's header): rocmlir-gen had no GEMM before 2023 and the 2022 tuning tables have no GEMM
    entries, so the xdlops kernel takes the default tuning of the 1×1 forward convolution of the
    same gemm sizes."""
    if model.order == "rocmlir-nonxdlops":
        return "ascending k, one fp32 FMA per term (the non-xdlops kernel)"
    if model.order != "rocmlir-xdlops":
        return f"the validation's loop, ascending k ({model.key})"
    if model.tuning is not None:
        return f"the perf config {model.tuning.to_perf_config()} (given), as for a convolution"
    return (
        "assumed: the 2022 default xdlops tuning of the 1x1 forward convolution with the same G, M, N, K "
        "(the 2022 tuning tables have no GEMM entries; rocmlir-gen's -operation gemm dates from 2023); "
        "--perf-config picks another"
    )


def shape_axes(problem: ConvProblem, role: str) -> tuple[str, ...]:
    """The letters of ``problem.tensor_shape(role)``'s axes, outermost first."""
    given, full = problem.layout(role), problem.layout5(role)
    if len(given) == 5:
        return tuple(given)
    channel = "c" if role == "input" else "k"
    if problem.groups == 1 or full.replace("g" + channel, channel) == given:
        return tuple(given)
    return tuple(full)


def check_overrides(seed, rand_min, rand_max, n_chunk=None, *, names=("seed", "rand_min", "rand_max")):
    """``seed``, ``rand_min``, ``rand_max`` checked as the config's ``-rand``, ``-rand_min``,
    ``-rand_max`` accept them, the range not inverted, ``n_chunk`` a whole number ≥ 1 (or None);
    ConfigError in the caller's terms (``names``: run()'s arguments, or the command line's options)."""
    seed = check_seed(seed, names[0])
    lo, hi = check_rand_bound(rand_min, names[1]), check_rand_bound(rand_max, names[2])
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"{names[1]}/{names[2]}: the range [{lo}, {hi}] is inverted; give the lower bound first")
    if n_chunk is not None and (isinstance(n_chunk, bool) or not isinstance(n_chunk, (int, np.integer)) or n_chunk < 1):
        raise ConfigError(f"n_chunk: a whole number of columns ≥ 1, got {n_chunk!r}")
    return seed, lo, hi


def run(
    config,
    *,
    hw: str = "mi200",
    kernel: str | None = None,
    validator: str = "cpu",
    perf_config: str | None = None,
    rand_min: int | None = None,
    rand_max: int | None = None,
    seed: int | None = None,
    rand_type: str | None = None,
    progress: bool | None = None,
    n_chunk: int | None = None,
    inputs=None,
    gpu_output=None,
    gpu_output_format: str | None = None,
    layout: str | None = None,
    verifier: str | None = None,
    thresholds=None,
    members: int | None = None,
    search_budget: float = 60.0,
    command: dict | None = None,
) -> RunResult:
    """Emulate ``config`` (a Config or any text ``parse_config`` accepts) on ``hw``.

    ``kernel``: "xdlops" / "nonxdlops" (default: the config's own flag, else xdlops);
    ``validator``: cpu, gpu, cpu-acc4, cpu-ftz, mlir, each optionally with ``+flush`` and
    ``+inbounds``; ``rand_min``/``rand_max``/``seed``/``rand_type`` override the config's
    random-data options (:attr:`RunResult.inputs_info` says what was used, where each value
    came from, and which options had no effect); ``inputs``: the user's own tensors instead
    (``{"x": …, "w": …, "dy": …}`` arrays or files, or a folder / "x.npy,w.npy" text, see
    :func:`validation.run.inputs.user_tensors`); ``progress`` None = a bar for long runs when stderr
    is a terminal.

    The result is judged (:attr:`RunResult.judgement`, the verdict and reading ``fp16emu run``
    prints) by ``verifier`` (default: the config's harness verifier) with ``thresholds``;
    ``gpu_output``: the GPU's own output (a file as ``--gpu-output`` reads it, in the raw
    ``gpu_output_format`` for a binary dump; or an array), stored in ``layout``, read before
    anything is computed and judged against the emulated kernel: its reading is rounding, mix-up
    or bug-suspect (:mod:`validation.run.reading`; ``search_budget`` seconds to search what a
    differing output matches, ``command`` the run's flags for each match's command); ``members``:
    add orders of a split-K atomic ensemble.
    """
    seed, rand_min, rand_max = check_overrides(seed, rand_min, rand_max, n_chunk)
    config, kmodel, vmodel = plan(config, hw=hw, kernel=kernel, validator=validator, perf_config=perf_config)
    problem = config.problem
    check_judging(  # what judging would refuse after the run is refused before it
        config,
        kmodel.input,
        verifier=verifier,
        thresholds=thresholds,
        layout=layout,
        members=members,
        search_budget=search_budget,
        names=OPTION_NAMES if command is not None else None,
    )
    if isinstance(gpu_output, (str, os.PathLike)):  # a bad file: refused before the emulation spends its compute
        gpu_output = load_gpu_output(os.fspath(gpu_output), problem, "gpu_output", raw_format=gpu_output_format)
    elif gpu_output_format is not None and not isinstance(gpu_output, LoadedArray):
        raise ValueError("gpu_output_format: only for a gpu_output file (a raw dump)")

    if rand_type is not None:
        rand_type = choice(rand_type, RAND_TYPES, "rand_type")
    files = None
    if inputs is not None:
        inputs, files = user_tensors(inputs, problem, kmodel.input)
    kw, info = resolve_inputs(
        config,
        rand_min=rand_min,
        rand_max=rand_max,
        seed=seed,
        rand_type=rand_type,
        files=files,
        range_name="rand_min/rand_max",
    )
    if inputs is None:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            inputs = harness.harness_inputs(problem, **kw)
    op = ConvGemm(problem, x=inputs.get("input"), w=inputs.get("filter"), dy=inputs.get("output"), fmt=kmodel.input)

    atomic = kmodel.atomic_split(problem) > 0
    bar = progress_bar(
        sum(s.n for s in op.subs) * problem.groups,
        progress if progress is not None else auto_progress(),
        f"{kmodel.key} + {vmodel.key}",
    )
    try:
        kout, validation = op.compute(
            [kmodel.arithmetic(problem, keep_partials=atomic, seed=ATOMIC_ORDERS.seed), vmodel.arithmetic(problem)],
            n_chunk=n_chunk,
            progress=None if bar is None else bar.update,
        )
    finally:
        if bar is not None:
            bar.close()
    ensemble = kout if atomic else None
    kernel_fp32 = kout.ascending() if atomic else kout
    result = RunResult(
        config=config,
        kernel=kmodel,
        validator=vmodel,
        kernel_fp32=kernel_fp32,
        kernel_output=round_output(kernel_fp32, kmodel.input),
        validation_output=validation,
        inputs=inputs,
        inputs_used=kw or {},
        ensemble=ensemble,
        inputs_info=info,
    )
    asked = gpu_output is not None or verifier is not None or thresholds or layout is not None or members is not None
    if asked:
        result._judgement = result.judge(
            gpu_output,
            verifier=verifier,
            thresholds=thresholds,
            layout=layout,
            members=members,
            search_budget=search_budget,
            progress=bool(progress if progress is not None else auto_progress()),
            command=command,
            layout_name="--layout" if command is not None else "layout",
        )
    return result
