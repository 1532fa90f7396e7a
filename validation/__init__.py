"""fp16emu's validation layer: what users run, one package per feature.

* :func:`run`: one convolution test through the emulated kernel and validation function
  (:class:`RunResult`; ``result.against(gpu_output)`` judges a GPU's own output, :class:`GpuComparison`);
* :func:`compare`: every metric of a kernel array against a validation array (:class:`ComparisonResult`);
* :func:`verify`: a verifier preset's verdict (:class:`Verdict`);
* :func:`explain`: where a kernel's error comes from (:class:`Explanation`);
* :func:`design`: a validation function and its thresholds, judged on bug mutants (:class:`DesignResult`);
* :func:`identify`: which matrix-unit arithmetic reproduces measured rows (:class:`Identification`);
* :func:`load_capture` and :func:`search_capture`: which library schedule (cuBLAS, cuDNN, CUTLASS,
  Triton) reproduces a PyTorch op's GPU output (:class:`Capture`, :class:`CaptureSearch`).

Packages: ``configs`` and ``suites`` (config texts, shipped suites), ``metrics`` (every metric),
``verify`` (thresholds, presets, the 2022 study's verifier), ``run``, ``explain``, ``study``,
``design``, ``identify``, ``captures`` (library captures and their schedule search; the capture
kit is ``python -m validation.capture_torch``), ``cli`` (the ``fp16emu`` command); ``engine`` runs every sweep's jobs and
``plots`` holds what the features' figures share.

The functions above share their packages' names: ``validation.run`` is the function, and
``from validation.run import …`` (or ``importlib.import_module("validation.run")``) reaches the package.
"""

from importlib.metadata import PackageNotFoundError, version

from .captures import Capture, load_capture
from .captures import SearchResult as CaptureSearch
from .captures import search as search_capture
from .design import DesignResult, design
from .explain import Explanation, explain
from .identify import Identification, identify
from .metrics import ComparisonResult, compare
from .run import GpuComparison, RunResult, run
from .verify import Verdict, verify

try:
    __version__ = version("fp16emu")
except PackageNotFoundError:  # pragma: no cover - a source tree that was not installed
    __version__ = "0+unknown"

__all__ = [
    "__version__",
    "run",
    "RunResult",
    "GpuComparison",
    "compare",
    "ComparisonResult",
    "verify",
    "Verdict",
    "explain",
    "Explanation",
    "design",
    "DesignResult",
    "identify",
    "Identification",
    "load_capture",
    "search_capture",
    "Capture",
    "CaptureSearch",
]
