"""fp16emu's validation layer: what users run, one package per feature.

Each feature is a package, and its entry point is a function of the same name inside it (the
packages are never shadowed: ``import validation.run`` gives the package):

* :func:`validation.run.run`: one convolution test through the emulated kernel and validation
  function (:class:`RunResult`; its :attr:`~RunResult.judgement`, or ``result.judge(gpu_output)``,
  gives the verdict and the reading of a GPU's own output: :class:`Judgement`);
* :func:`validation.metrics.compare`: every metric of a kernel array against a validation array
  (:class:`ComparisonResult`; also here as :func:`compare`);
* :func:`validation.verify.verify`: a verifier preset's verdict (:class:`Verdict`);
* :func:`validation.explain.explain`: where a kernel's error comes from (:class:`Explanation`);
* :func:`validation.design.design`: a validation function and its thresholds, judged on bug
  mutants (:class:`DesignResult`);
* :func:`validation.identify.identify`: which matrix-unit arithmetic reproduces measured rows
  (:class:`Identification`);
* :func:`load_capture` and :func:`search_capture`: which library schedule (cuBLAS, cuDNN, CUTLASS,
  Triton) reproduces a PyTorch op's GPU output (:class:`Capture`, :class:`CaptureSearch`).

Packages: ``configs`` and ``suites`` (config texts, shipped suites), ``metrics`` (every metric),
``verify`` (thresholds, presets, the 2022 study's verifier), ``run``, ``explain``, ``study``,
``design``, ``identify``, ``captures`` (library captures and their schedule search; the capture
kit is ``python -m validation.capture_torch``), ``cli`` (the ``fp16emu`` command). Shared by the
features and exported by none: ``engine`` (every sweep's jobs), ``progress`` (bars and log lines),
``files`` (reading users' files) and ``plots`` (what the figures share).
"""

from importlib.metadata import PackageNotFoundError, version

from .captures import Capture, load_capture, search_capture
from .captures import SearchResult as CaptureSearch
from .design import DesignResult
from .explain import Explanation
from .identify import Identification
from .metrics import ComparisonResult, compare
from .run import GpuComparison, Judgement, RunResult
from .verify import Verdict

try:
    __version__ = version("fp16emu")
except PackageNotFoundError:  # pragma: no cover - a source tree that was not installed
    __version__ = "0+unknown"

__all__ = [
    "__version__",
    "RunResult",
    "Judgement",
    "GpuComparison",
    "compare",
    "ComparisonResult",
    "Verdict",
    "Explanation",
    "DesignResult",
    "Identification",
    "load_capture",
    "search_capture",
    "Capture",
    "CaptureSearch",
]
