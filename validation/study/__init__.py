"""Reproduce the 2022 AMD fp16 study's measured verifier lines, field for field.

``fp16emu study reproduce --measured DIR`` reads the study's raw results (DIR is its
``raw_results`` folder: ``verify_results_<run set>_<GPU>/verify_f16_<kernel>_<pv|pv-with-gpu>_rand<r>.txt``),
emulates every selected test (inputs, kernel, validation function, verifier) and prints the
emulated line next to the measured one with each printed field marked equal or not. It ends with
a tally per combination, the study's aggregated tables (emulated next to measured) and a
diagnosis of every line that still differs, and writes ``report.md`` and ``reproduce.csv`` to
``--out``.

The recipe (the study's scripts, github.com/zhanglx13/llvm-project-mlir-dev-utils
``fp16_experiment`` @3b042e7, and rocMLIR's test harness of Aug 2022):

* inputs: ``-rand 1 -rand_type float -rand_min a -rand_max b`` (``batch_run.sh``'s
  ``processConfig``): every tensor re-seeds glibc ``srand``,
  float generator, truncating fp16 conversion (:func:`models.harness.harness_inputs`);
* kernels: ``rocmlir-2022-xdlops`` on the GPU's unit (MI100 / MI200) and
  ``rocmlir-2022-nonxdlops`` (:func:`models.kernels.kernel`), output RNE to fp16;
* validation: ``-pv_with_gpu`` = the non-xdlops kernel in fp32; ``-pv`` = ``cpu-validation-2022``
  of the kernel validated (fp32 after every step for non-xdlops runs, fp64 for xdlops runs) in
  fair_1, fair_2 and fair_rand0; in fair_3 ``cpu-acc4`` for fwd and bwd_weight, with the fp16
  inputs below 2^-14 flushed on MI200 (bwd_data keeps the fair_1 validator);
* verifier: :func:`validation.metrics.compare` with the run set's
  :class:`~validation.verify.StudyQuirks`, the line by :func:`validation.verify.study_line`.

Backward-weight xdlops tests whose split-K atomics add three or more partial sums
(:meth:`models.kernels.KernelModel.atomic_split`) cannot be pinned to one order: they are emulated as an ensemble of
add orders (random per output element by default; per output tile as an option), and a measured
line passes when every field lies inside the ensemble's range. The range spans the sampled
members plus two envelope members, each element at its closest (and at its farthest) outcome
over many more random orders (:data:`models.kernels.ATOMIC_ORDERS`) and four sorted ones, and the elements
farthest from the validation over many more: any such combination is itself an order the
hardware can produce, and it reaches the tails of the maximum-type fields that a few hundred
samples miss. The report also counts the sampled members that reproduce the line exactly.
``fair_rand0`` was seeded by the clock: its lines are compared with the spread of the lines of a
few seeds (never a pass/fail).

Results are cached per line as JSON under ``<out>/.cache`` by a hash of the test's arguments,
the seed and range, GPU, kernel, validator, run-set quirks, the fp16emu version and the
models' units and accumulation orders, so an interrupted run resumes where it stopped.

The stages, one module each: :mod:`.measured` (the measured lines), :mod:`.selection` (what to
reproduce), :mod:`.recipes` (which kernel and validator models stand for a line, and the
alternatives a diagnosis tries), :mod:`.emulate` (one job: inputs, one pass over the
convolution's GEMMs for every model, the verifier's lines), :mod:`.envelope` (split-K atomic
ensembles), :mod:`.cache`, :mod:`.judge` (emulated against measured), :mod:`.diagnose`,
:mod:`.report`, :mod:`.execution` (the process pool) and :mod:`.reproduction` (all of it in order: :func:`reproduce`),
:mod:`.cli`.
"""

from .judge import LineResult
from .measured import GPUS, KERNELS, RAND0_SEEDS, RANGES, RUN_SETS, STUDY_SEED, VALIDATORS, MeasuredLine, read_measured
from .recipes import Recipe, atomic_reorders, default_recipe
from .report import Report
from .reproduction import reproduce
from .selection import Selection, smallest_tests

__all__ = [
    "RANGES",
    "RUN_SETS",
    "GPUS",
    "KERNELS",
    "VALIDATORS",
    "STUDY_SEED",
    "RAND0_SEEDS",
    "MeasuredLine",
    "Selection",
    "Recipe",
    "LineResult",
    "Report",
    "read_measured",
    "default_recipe",
    "atomic_reorders",
    "smallest_tests",
    "reproduce",
]
