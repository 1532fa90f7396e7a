"""Running a test and judging a GPU output: one convolution test or op through an emulated kernel
and an emulated validation function, its inputs (generated or the user's), and the GPU's own array
compared with the emulated kernel bit for bit.

The package's public names are its ``__all__``; helpers shared with the CLI and the other
features (option choices, input resolution, array conversion) are imported from their modules.

Modules: :mod:`.runner` (``run``, ``plan``, the result), :mod:`.inputs` (what fills the tensors,
``save_run``), :mod:`.arrays` (reading ``.npy``/``.npz``/raw dumps), :mod:`.gpu` (the GPU's array
against the emulated kernel: identical, inside the ensemble, or differs), :mod:`.matches` (when it
differs: what it matches, a bounded search over layouts, GPUs, kernels, tunings, seeds and input
ranges, and the differences' character), :mod:`.reading` (the run judged: the verdict, and a GPU output's reading — rounding, mix-up,
not-modelled, bug-suspect — decided here and only printed by ``fp16emu run``), :mod:`.plots` (figures).
"""

from .arrays import ArrayFileError, ArrayPair, LoadedArray, load_array, load_pair
from .gpu import ANSWERS, GpuComparison, load_gpu_output
from .inputs import InputsInfo, save_run
from .matches import MatchSearch, describe_differences, reproduce_command, search_matches
from .reading import READINGS, Judgement, harness_verifier, judge
from .runner import RunResult, plan, run

__all__ = [
    "ANSWERS",
    "READINGS",
    "ArrayFileError",
    "ArrayPair",
    "GpuComparison",
    "InputsInfo",
    "Judgement",
    "LoadedArray",
    "MatchSearch",
    "RunResult",
    "describe_differences",
    "harness_verifier",
    "judge",
    "load_array",
    "load_gpu_output",
    "load_pair",
    "plan",
    "reproduce_command",
    "run",
    "save_run",
    "search_matches",
]
