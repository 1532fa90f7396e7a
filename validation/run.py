"""Run one convolution test through an emulated kernel and an emulated validation function.

config text → ``validation.configs`` → harness inputs (``models.harness``) → the kernel's and the
validator's GEMMs (``emu.conv`` gathers, ``emu.gemm`` with each model's unit and order) →
kernel output rounded to fp16 (RNE) and the validation output (fp32). The gathered operands are
shared by both models: each B chunk is gathered once.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

import emu
from emu.conv import ConvGemm, ConvProblem
from models import harness
from models import kernels as kernel_models

from .configs import Config, parse_config

__all__ = ["RunResult", "run", "plan", "KERNEL_CHOICES", "VALIDATOR_CHOICES", "HW_CHOICES"]

KERNEL_CHOICES = {"xdlops": "rocmlir-2022-xdlops", "nonxdlops": "rocmlir-2022-nonxdlops"}
VALIDATOR_CHOICES = {"cpu": "cpu-validation-2022", "gpu": "gpu-validation", "cpu-acc4": "cpu-acc4",
                     "cpu-ftz": "cpu-ftz", "mlir": "cpu-validation-mlir"}
HW_CHOICES = ("mi100", "mi200", "mi300")
PROGRESS_MIN_MACS = 2e9  # show a progress bar above this much work


@dataclass
class RunResult:
    """Outputs of one run, flat in the result tensor's memory order."""

    config: Config
    kernel: kernel_models.KernelModel
    validator: kernel_models.KernelModel
    kernel_fp32: np.ndarray
    kernel_output: np.ndarray  # fp16, what the GPU kernel writes
    validation_output: np.ndarray  # fp32, what the validation function returns
    inputs: dict = field(repr=False, default_factory=dict)

    @property
    def problem(self) -> ConvProblem:
        return self.config.problem

    @property
    def shape(self) -> tuple[int, ...]:
        return self.problem.tensor_shape(self.problem.result_role)


def _choice(value: str, choices, field_name: str) -> str:
    if value in choices:
        return choices[value] if isinstance(choices, dict) else value
    if isinstance(choices, dict) and value in choices.values():
        return value
    allowed = ", ".join(choices)
    raise ValueError(f"{field_name}: {value!r} is not one of {allowed}")


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc=desc, unit="col", unit_scale=True, leave=False, dynamic_ncols=True)


def plan(config, *, hw: str = "mi200", kernel: str | None = None, validator: str = "cpu",
         perf_config: str | None = None):
    """(Config, kernel model, validator model) for ``config``: everything but the arithmetic."""
    if not isinstance(config, Config):
        config = parse_config(config)
    hw = _choice(str(hw).lower(), HW_CHOICES, "hw")
    if kernel is None:
        kernel = "nonxdlops" if config.xdlops is False else "xdlops"
    kernel_name = _choice(kernel, KERNEL_CHOICES, "kernel")
    validator_name = _choice(validator, VALIDATOR_CHOICES, "validator")
    kmodel = kernel_models.kernel(kernel_name, hw=hw, tuning=perf_config or config.perf_config)
    vmodel = kernel_models.kernel(validator_name, hw=hw, validating=kernel_name)
    return config, kmodel, vmodel


def run(config, *, hw: str = "mi200", kernel: str | None = None, validator: str = "cpu",
        perf_config: str | None = None, rand_min: int | None = None, rand_max: int | None = None,
        seed: int | None = None, progress: bool | None = None, n_chunk: int | None = None) -> RunResult:
    """Emulate ``config`` (a Config or any text ``parse_config`` accepts) on ``hw``.

    ``kernel``: "xdlops" / "nonxdlops" (default: the config's own flag, else xdlops);
    ``validator``: cpu, gpu, cpu-acc4, cpu-ftz, mlir; ``rand_min``/``rand_max``/``seed`` override
    the config's random-data options; ``progress`` None = automatic for big tests.
    """
    config, kmodel, vmodel = plan(config, hw=hw, kernel=kernel, validator=validator, perf_config=perf_config)
    problem = config.problem

    kw = config.harness_kwargs()
    if seed is not None:
        kw["seed"] = seed
    if rand_min is not None:
        kw["rand_min"] = rand_min
    if rand_max is not None:
        kw["rand_max"] = rand_max
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        inputs = harness.harness_inputs(problem, **kw)
    op = ConvGemm(problem, x=inputs.get("input"), w=inputs.get("filter"), dy=inputs.get("output"))

    models_ = (kmodel, vmodel)
    plans = [m.plan(problem) for m in models_]
    outs = [op.new_result() for _ in models_]
    chunk = op.default_n_chunk() if n_chunk is None else n_chunk
    total_cols = sum(s.n for s in op.subs) * problem.groups
    macs = sum(s.m * s.n * s.k for s in op.subs) * problem.groups
    bar = _progress(total_cols, progress if progress is not None else macs > PROGRESS_MIN_MACS,
                    f"{kmodel.name} + {vmodel.name}")
    try:
        for sub, s in enumerate(op.subs):
            for group in range(problem.groups):
                a = op.a(sub, group)
                for start in range(0, s.n, chunk):
                    stop = min(start + chunk, s.n)
                    b = op.b(sub, group, start, stop)
                    for gemms, out in zip(plans, outs):
                        g = gemms[sub]
                        op.scatter(out, emu.gemm(a, b, g.unit, g.order), sub, group, start)
                    if bar is not None:
                        bar.update(stop - start)
    finally:
        if bar is not None:
            bar.close()
    kernel_fp32, validation = outs
    return RunResult(config=config, kernel=kmodel, validator=vmodel, kernel_fp32=kernel_fp32,
                     kernel_output=kernel_fp32.astype(np.float16), validation_output=validation, inputs=inputs)
