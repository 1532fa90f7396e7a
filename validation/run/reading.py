"""A run judged: the verifier's verdict on the array judged (the GPU's own output when given, else
the emulated kernel's), the split-K ensemble's ranges, and — for a GPU's output — its reading.

The reading is one word, decided here so that ``fp16emu run`` prints what ``run(...)`` returns:

* ``rounding``: the GPU's output is what the emulated kernel computes, bit for bit (or, for a
  split-K kernel with fp32 atomics, every element is the outcome of some add order): any
  difference from the validation is the kernel's arithmetic;
* ``mix-up``: it differs, and a change of the run's description reproduces it (another layout,
  GPU, kernel, tuning, seed or input range: :func:`validation.run.search_matches`), so the array
  or its description is not what the file holds, not a kernel bug;
* ``not-modelled``: the kernel is one the search does not cover (not given by a run: every run's
  kernel is a modelled one; kept for the other features' readings);
* ``bug-suspect``: it differs and nothing searched explains it.

Exit codes: 0 for ``rounding`` with a passing verdict (or no GPU output and a passing verdict), 1
otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..configs import Config
from ..configs.limits import MAX_SEARCH_SECONDS, check_count, check_seconds
from ..metrics import ComparisonResult
from ..verify import Verdict, measure, preset
from ..verify.presets import resolve_metric
from .arrays import LoadedArray
from .ensemble import ensemble_summary
from .gpu import GpuComparison, check_layout, compare_gpu_output, from_layout, gpu_values
from .matches import STAGES, MatchSearch, search_matches

__all__ = ["READINGS", "Judgement", "judge", "harness_verifier", "check_judging"]

#: Every reading, in the order of the module docstring.
READINGS = ("rounding", "mix-up", "not-modelled", "bug-suspect")


def harness_verifier(config: Config) -> tuple[str, str]:
    """(verifier preset, why) of the harness ``config`` comes from: the 2022 rules
    (``rocmlir-2022``) for the 2022 suite's tests, MIOpen's check for an MIOpenDriver command,
    today's rocMLIR verifier (``rocmlir``) for any other miopen-gen/rocmlir-gen config."""
    tool = str(config.tool)
    if tool.startswith("suite:rocmlir_2022"):
        return "rocmlir-2022", "default: the 2022 suite's harness verifier, rocMLIR Aug 2022"
    if tool == "MIOpenDriver":
        return "miopen", "default: MIOpenDriver's own check"
    return "rocmlir", "default: the rocMLIR harness verifier of a miopen-gen/rocmlir-gen config"


@dataclass
class Judgement:
    """What :func:`judge` decided about a run (module docstring)."""

    verifier: str
    verifier_source: str
    comparison: ComparisonResult
    verdict: Verdict | None
    #: the axis names of the judged arrays (a GEMM: the matrix C's g, m, n)
    axes: tuple[str, ...]
    thresholds: dict = field(default_factory=dict)
    #: :func:`validation.run.ensemble_summary` for a split-K kernel with fp32 atomics
    ensemble: dict | None = None
    #: the GPU's output against the emulated kernel, when one was given
    gpu: GpuComparison | None = field(default=None)
    #: the GPU's output (the result tensor's shape, the kernel's format) and where it came from
    gpu_array: np.ndarray | None = field(default=None, repr=False)
    gpu_source: str | None = None
    #: with a GPU output: the emulated kernel's own comparison and verdict
    emulated_comparison: ComparisonResult | None = field(default=None, repr=False)
    emulated_verdict: Verdict | None = field(default=None, repr=False)
    #: with a differing GPU output: what it matches
    search: MatchSearch | None = field(default=None, repr=False)

    @property
    def reading(self) -> str | None:
        """One of :data:`READINGS` for a GPU's output; None when only the emulation was judged."""
        if self.gpu is None:
            return None
        if self.gpu.answer != "differs":
            return "rounding"
        if self.search is not None and self.search.matches:
            return "mix-up"
        return "bug-suspect"

    @property
    def passed(self) -> bool | None:
        """The verifier's verdict on the judged array (None: no verdict)."""
        return None if self.verdict is None else self.verdict.exit_code == 0

    @property
    def exit_code(self) -> int:
        """0: pass (a GPU output read as ``rounding``); 1: fail, or any other reading."""
        if self.reading not in (None, "rounding"):
            return 1
        return 0 if self.verdict is None else self.verdict.exit_code

    def reading_text(self) -> str:
        """The line that states the reading of a GPU's output ("" without one)."""
        reading = self.reading
        if reading == "mix-up":
            return (
                "the GPU's output is what the kernel computes under the options it matches (above), not under "
                "the run's: MIX-UP, a description or file that is not the GPU's run, not a kernel bug (exit 1)"
            )
        if reading == "bug-suspect":
            if self.passed:
                return (
                    "the GPU's output passes the verifier's thresholds but is not what the kernel computes: "
                    "BUG SUSPECT (exit 1)"
                )
            return "the GPU's output is not what the kernel computes, and nothing searched reproduces it: BUG SUSPECT (exit 1)"
        if reading == "rounding":
            return "the GPU's output is the kernel's arithmetic: ROUNDING"
        return ""

    def to_dict(self) -> dict:
        """The reading, the verdict document (:meth:`Verdict.to_dict`, else the comparison's), and
        the GPU and ensemble parts."""
        doc: dict = {"reading": self.reading}
        doc.update(self.verdict.to_dict() if self.verdict is not None else self.comparison.to_dict())
        if self.ensemble is not None:
            doc["ensemble"] = self.ensemble
        if self.gpu is not None:
            doc["gpu"] = {**self.gpu.to_dict(), "file": self.gpu_source}
            if self.search is not None:
                doc["gpu"]["matches"] = self.search.matches
                doc["gpu"]["search"] = {k: v for k, v in self.search.to_dict().items() if k != "matches"}
            doc["emulated_kernel"] = {
                "verdict": self.emulated_verdict.to_dict().get("verdict")
                if self.emulated_verdict is not None
                else None,
                "metrics": {
                    k: v for k, v in self.emulated_comparison.to_dict().items() if not isinstance(v, (list, dict))
                },
            }
        return doc

    def __repr__(self) -> str:
        verdict = "no verdict" if self.verdict is None else ("PASS" if self.passed else "FAIL")
        reading = f", reading {self.reading}" if self.reading else ""
        return f"<Judgement {verdict} by {self.verifier}{reading}>"


def _norm(name) -> str:
    return str(name).lower().replace("_", "").replace("-", "").strip()


def check_judging(
    config: Config,
    fmt: str,
    *,
    verifier: str | None = None,
    thresholds: Mapping[str, float] | None = None,
    layout: str | None = None,
    members: int | None = None,
    search_budget: float = 60.0,
    names: Mapping[str, str] | None = None,
) -> None:
    """Refuse, before anything is computed, what :func:`judge` would refuse after the run (the
    same checks for ``run --check`` and the run itself): ``verifier`` not a preset, a threshold
    on a metric that does not exist or not a finite number ≥ 0, ``layout`` not the result
    tensor's letters, ``members`` not a whole number in 1..``FP16EMU_MAX_MEMBERS`` (default
    :data:`validation.configs.limits.MAX_MEMBERS`), ``search_budget`` not a number of seconds in
    0..:data:`~validation.configs.limits.MAX_SEARCH_SECONDS`. ValueError naming the option
    (``names``: the option each argument is called by, e.g. ``{"members": "--members"}``)."""
    names = {
        "verifier": "verifier",
        "thresholds": "thresholds",
        "layout": "layout",
        "members": "members",
        "search_budget": "search_budget",
        **(names or {}),
    }
    name = verifier or harness_verifier(config)[0]
    try:
        th = preset(name, fmt)
    except ValueError as err:
        raise ValueError(f"{names['verifier']}: {' '.join(str(err).split())}") from None
    labels = {_norm(c.label): c.metric for c in th.checks}
    for metric, limit in (thresholds or {}).items():
        try:
            resolve_metric(labels.get(_norm(metric), metric))
        except ValueError as err:
            raise ValueError(f"{names['thresholds']} {str(metric)[:40]}: {' '.join(str(err).split())}") from None
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 <= float(limit) < float("inf"):
            raise ValueError(f"{names['thresholds']} {metric}: {limit!r} is not a finite number ≥ 0")
    if layout is not None:
        check_layout(config.problem, layout, names["layout"])
    if members is not None:
        check_count(members, names["members"], env="members")
    check_seconds(search_budget, names["search_budget"], high=MAX_SEARCH_SECONDS)


def judge(
    result,
    gpu=None,
    *,
    verifier: str | None = None,
    thresholds: Mapping[str, float] | None = None,
    layout: str | None = None,
    members: int | None = None,
    search_budget: float = 60.0,
    progress: bool = False,
    command: dict | None = None,
    layout_name: str = "layout",
) -> Judgement:
    """Judge ``result`` (a :class:`validation.run.RunResult`) as ``fp16emu run`` does.

    ``gpu``: the GPU's own output (values of the kernel's format, their uint16 patterns or an exact
    fp32 copy; the result tensor's shape or flat; or a :class:`~validation.run.LoadedArray`), stored
    in ``layout`` (default: the config's result layout); ``verifier``: a preset (default: the
    config's harness verifier, :func:`validation.run.harness_verifier`); ``thresholds``: limits by
    metric replacing the preset's; ``members``: add orders of a split-K atomic ensemble (default
    128); ``search_budget``: seconds to search what a differing GPU output matches (0: no search);
    ``command``: the run's options as ``fp16emu run`` flags, to write each match's command;
    ``layout_name``: how messages name ``layout``."""
    if verifier:
        vsource = "given"
    else:
        verifier, vsource = harness_verifier(result.config)
    thresholds = dict(thresholds or {})
    if command is not None and not command.get("kernel"):  # a match's command names the kernel that ran
        command = {**command, "kernel": "xdlops" if result.kernel.xdlops else "nonxdlops"}
    gemm = result.config.gemm
    source = raw = gpu_array = None
    if gpu is not None:
        if isinstance(gpu, LoadedArray):
            source, gpu = gpu.source, gpu.array
        raw = gpu
        arr = gpu
        if layout is not None:
            arr = from_layout(arr, result.problem, layout, layout_name)
        elif gemm is not None and np.asarray(arr).size == result.kernel_output.size:
            arr = np.asarray(arr).reshape(-1)  # C as (G,) M×N (N×M with -transC) in memory order
        gpu_array = gpu_values(arr, result.kernel_output.size, result.shape, result.format).reshape(result.shape)
    judged = result.kernel_array if gpu_array is None else gpu_array
    validation_array, axes = result.validation_array, result.axes
    if gemm is not None:  # judged as the matrix C, its indices (g, m, n)
        judged, validation_array, axes = (
            judged.reshape(gemm.c_shape),
            validation_array.reshape(gemm.c_shape),
            gemm.c_axes,
        )
    comparison, verdict = measure(validation_array, judged, verifier, result.format, thresholds)
    out = Judgement(
        verifier=verifier,
        verifier_source=vsource,
        comparison=comparison,
        verdict=verdict,
        axes=tuple(axes),
        thresholds=thresholds,
        gpu_array=gpu_array,
        gpu_source=source,
    )
    if result.ensemble is not None:
        out.ensemble = ensemble_summary(result, verifier, members, thresholds)
    if gpu_array is not None:
        out.gpu = compare_gpu_output(result, gpu_array)
        out.emulated_comparison, out.emulated_verdict = measure(
            result.validation_array, result.kernel_array, verifier, result.format, thresholds
        )
        if out.gpu.answer == "differs":
            budget = float(search_budget) if search_budget and search_budget > 0 else 0.0  # 0 (or nan): no search
            out.search = search_matches(
                result,
                gpu_array,
                raw=raw,
                layout=layout,
                stages=STAGES if budget > 0 else (),
                budget_s=budget,
                progress=progress,
                command=command,
            )
    return out
