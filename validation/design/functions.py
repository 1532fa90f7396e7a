"""Validation functions: a verifier (metrics and limits, :class:`validation.verify.Thresholds`)
plus the input generator it is used with.

By name (:data:`FUNCTION_NAMES`): the verifier presets of :mod:`validation.verify` with the
inputs their users ran (``rocmlir-2022``: the old rocMLIR verifier, relDiff_old ≤ 0.25, inputs
[-1, 1]; ``rocmlir``: RMS ≤ 3e-5, absDiff, relDiff ≤ 100 (rocMLIR PR #736); ``study-2022``:
maxEpsilonDiff ≤ 2 of the 2022 study's instrumented line; ``mlu-ops``: the convolution class
diff1, diff2 ≤ 3e-3; ``torch``: rtol 1e-3, atol 1e-5; ``miopen``: RMS ≤ 8.2e-3), plus
``study-proposal`` (the 2022 study's proposal as rocMLIR adopted it: RMS ≤ 3e-5 and
maxRelDiff ≤ 1e-3, inputs ±[1, 3]), ``exact`` (benchdnn: exact equality with integer-exact
inputs) and ``cudnn-sparse`` (exact equality with cuDNN-frontend-style sparse integers,
:mod:`validation.design.generators`), and two functions no verifier preset has: ``predicted-bound`` (a per-element bound
from the emulated unit's accumulation chain, :mod:`validation.design.bounds`) and ``emulated``
(the output against the bit-exact emulated kernel). ``PRESET@RANGE`` uses another input
generator (``torch@away:1:3``).

A FILE (``.json`` or ``.toml``) describes one function, or a list under ``functions``::

    name = "my-rule"
    generator = "away:1:3"          # see validation.design.generators
    round_validation = "fp16"       # optional: the validation rounded to fp16 first (default)
    [metrics]                       # metric = limit, every one must hold
    rms = 1e-4
    max_rel_diff = 0.01
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import tomllib

from ..metrics import METRIC_NAMES
from ..verify.presets import PRESET_NAMES, Thresholds, preset
from .generators import InputGenerator, parse_generator

__all__ = ["ValidationFunction", "FUNCTION_NAMES", "function", "load_functions", "parse_functions"]

#: Each preset's default inputs: what its users ran.
_DEFAULT_INPUTS = {
    "rocmlir-2022": "float:-1:1",
    "rocmlir": "float:-1:1",
    "study-2022": "float:-1:1",
    "mlu-ops": "float:-1:1",
    "torch": "float:-1:1",
    "miopen": "float:-1:1",
    "study-proposal": "away:1:3",
    "exact": "exact",
    "cudnn-sparse": "sparse",
    "predicted-bound": "float:-1:1",
    "emulated": "float:-1:1",
}
#: What the two functions without a verifier preset check.
KIND_DESCRIPTIONS = {
    "predicted-bound": "every element |k − v| ≤ u16·|v| + the emulated unit's accumulation bound γ·Σ|a||b| "
    "(kernel and validation chains, one extra GEMM)",
    "emulated": "the output equals the bit-exact emulated kernel (split-K atomics: every element inside the "
    "range of 32 add orders)",
}
FUNCTION_NAMES = tuple(_DEFAULT_INPUTS)


@dataclass(frozen=True)
class ValidationFunction:
    """A named verifier and the generator of the inputs it is run on."""

    name: str
    thresholds: Thresholds | None
    generator: InputGenerator
    kind: str = "verifier"  # or "predicted-bound", "emulated"

    @property
    def label(self) -> str:
        return f"{self.name}@{self.generator.name}"

    def describe(self) -> str:
        if self.kind != "verifier":
            return f"{self.label}: {KIND_DESCRIPTIONS[self.kind]}; inputs {self.generator.describe()}"
        checks = ", ".join(f"{c.metric} ≤ {c.limit:g}" for c in self.thresholds.checks)
        return f"{self.label}: {checks}; inputs {self.generator.describe()}"


def function(text: str) -> ValidationFunction:
    """``NAME`` or ``NAME@RANGE`` (module docstring)."""
    name, _, rng = str(text).strip().partition("@")
    name = name.lower()
    if name not in _DEFAULT_INPUTS:
        raise ValueError(f"validators: {text!r} is not a preset ({', '.join(FUNCTION_NAMES)}) or a .json/.toml file")
    gen = parse_generator(rng or _DEFAULT_INPUTS[name])
    if name in KIND_DESCRIPTIONS:
        return ValidationFunction(name, None, gen, kind=name)
    if name in PRESET_NAMES:
        th = preset(name, "fp16")
    elif name == "study-proposal":
        th = Thresholds.from_mapping(
            {"rms": 3e-5, "max_rel_diff": 1e-3}, name=name, round_validation="fp16", dtype="fp16"
        )
    else:  # exact, cudnn-sparse: exact equality
        th = Thresholds.from_mapping({"max_abs_diff": 0.0}, name=name, round_validation="fp16", dtype="fp16")
    return ValidationFunction(name, th, gen)


def _from_record(rec: dict, where: str) -> ValidationFunction:
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: each function is a table with name, metrics, generator")
    unknown = set(rec) - {"name", "metrics", "generator", "range", "round_validation"}
    if unknown:
        raise ValueError(
            f"{where}: unknown field(s) {sorted(unknown)}; fields: name, metrics, generator, round_validation"
        )
    metrics = rec.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        raise ValueError(f"{where}: 'metrics' must be a table of metric = limit")
    bad = [m for m in metrics if m not in METRIC_NAMES]
    if bad:
        raise ValueError(f"{where}: metric {bad[0]!r} is not one of {', '.join(METRIC_NAMES)}")
    try:
        limits = {m: float(v) for m, v in metrics.items()}
    except (TypeError, ValueError):
        raise ValueError(f"{where}: metric limits must be numbers") from None
    name = str(rec.get("name") or Path(where).stem)
    rv = rec.get("round_validation", "fp16")
    th = Thresholds.from_mapping(limits, name=name, round_validation=rv, dtype="fp16")
    return ValidationFunction(name, th, parse_generator(rec.get("generator", rec.get("range", "float:-1:1"))))


def load_functions(path) -> list[ValidationFunction]:
    """The validation functions of a .json or .toml FILE (module docstring)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise ValueError(f"validators: cannot read {path}: {err.strerror}") from None
    try:
        data = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"validators: {path} is not valid {p.suffix.lstrip('.') or 'JSON'}: {err}") from None
    recs = data.get("functions", [data]) if isinstance(data, dict) else data
    if not isinstance(recs, list):
        raise ValueError(f"validators: {path}: expected a table or a list of tables")
    return [_from_record(r, str(path)) for r in recs]


def parse_functions(items) -> list[ValidationFunction]:
    """Presets (``NAME[@RANGE]``) and FILEs, in order; ``ranges`` are applied by the caller."""
    out: list[ValidationFunction] = []
    for item in items:
        s = str(item)
        if s.lower().endswith((".json", ".toml")):
            out.extend(load_functions(s))
        else:
            out.append(function(s))
    return out
