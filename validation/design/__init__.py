"""Design validation functions: thresholds that catch bugs and not rounding.

:mod:`.generators` (input generators), :mod:`.functions` (validation functions: presets and
files), :mod:`.bounds` (analytic bounds), :mod:`.stats` (rates and Clopper–Pearson intervals),
:mod:`.sweep` (noise model and evaluation over seeds and bug mutants), :mod:`.rule` (the harness
rule: rocMLIR flags, assert_close, MIOpen tolerance, per test and of K; runs needed), :mod:`.report` (text and
JSON), :mod:`.cli` (``fp16emu design``). Library ops (a capture or an op description):
:mod:`.library` (the legal schedules and their outputs), :mod:`.mutants` (library bug mutants),
:mod:`.tolerance` (the pasted rules, their rates, the recommended tolerance),
:mod:`.library_report`. The method is described in docs/design.md.
"""

from .functions import FUNCTION_NAMES, ValidationFunction, function, load_functions, parse_functions
from .generators import DEFAULT_GENERATORS, InputGenerator, parse_generator
from .library import LibraryProblem, problem_from_capture, problem_from_op
from .library_report import design_json, design_text
from .mutants import LIBRARY_MUTANTS
from .rule import format_rule, harness_rule, runs_needed
from .stats import Rate, clopper_pearson, threshold_at
from .sweep import DesignResult, SeedTask, Target, design, resolve_targets, run_jobs, seed_job
from .tolerance import LibraryDesign, design_library

__all__ = [
    "FUNCTION_NAMES",
    "ValidationFunction",
    "function",
    "load_functions",
    "parse_functions",
    "DEFAULT_GENERATORS",
    "InputGenerator",
    "parse_generator",
    "harness_rule",
    "format_rule",
    "runs_needed",
    "Rate",
    "clopper_pearson",
    "threshold_at",
    "DesignResult",
    "SeedTask",
    "Target",
    "design",
    "resolve_targets",
    "run_jobs",
    "seed_job",
    "LIBRARY_MUTANTS",
    "LibraryDesign",
    "LibraryProblem",
    "design_json",
    "design_library",
    "design_text",
    "problem_from_capture",
    "problem_from_op",
]
