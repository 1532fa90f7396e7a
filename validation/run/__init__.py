"""Running a test and judging a GPU output: one convolution test or op through an emulated kernel
and an emulated validation function, its inputs (generated or the user's), and the GPU's own array
compared with the emulated kernel bit for bit.

Modules: :mod:`.runner` (``run``, ``plan``, the result), :mod:`.inputs` (what fills the tensors,
``save_run``), :mod:`.arrays` (reading ``.npy``/``.npz``/raw dumps), :mod:`.gpu` (the GPU's array
against the emulated kernel: identical, inside the ensemble, or differs), :mod:`.matches` (when it
differs: what it matches, a bounded search over layouts, GPUs, kernels, tunings, seeds and input
ranges, and the differences' character), :mod:`.reading` (the run judged: the verdict, and a GPU output's reading — rounding, mix-up,
not-modelled, bug-suspect — decided here and only printed by ``fp16emu run``), :mod:`.plots` (figures).
"""

from .arrays import (
    ArrayFileError,
    ArrayPair,
    LoadedArray,
    convert_exactly,
    kernel_format,
    load_array,
    load_pair,
    parse_shape,
)
from .ensemble import ensemble_summary
from .gpu import ANSWERS, GpuComparison, compare_gpu_output, from_layout, load_gpu_output
from .inputs import InputsInfo, resolve_inputs, save_run, user_tensors
from .matches import MatchSearch, describe_differences, reproduce_command, search_matches
from .reading import READINGS, Judgement, harness_verifier, judge
from .runner import (
    HW_CHOICES,
    KERNEL_CHOICES,
    RAND_TYPES,
    VALIDATOR_CHOICES,
    VALIDATOR_MODIFIERS,
    RunResult,
    check_overrides,
    choice,
    gemm_order_note,
    parse_validator,
    plan,
    plan_gemms,
    run,
    shape_axes,
)

__all__ = [
    "RunResult",
    "run",
    "Judgement",
    "judge",
    "READINGS",
    "harness_verifier",
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
    "InputsInfo",
    "resolve_inputs",
    "user_tensors",
    "save_run",
    "ArrayFileError",
    "LoadedArray",
    "load_array",
    "parse_shape",
    "convert_exactly",
    "GpuComparison",
    "compare_gpu_output",
    "from_layout",
    "ANSWERS",
    "load_gpu_output",
    "ensemble_summary",
    "MatchSearch",
    "search_matches",
    "describe_differences",
    "reproduce_command",
    "ArrayPair",
    "load_pair",
    "kernel_format",
]
