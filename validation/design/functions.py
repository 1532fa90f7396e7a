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

**Data types.** Functions are built for the sweep's tensor format (``dtype``, "fp16" by default,
or "bf16"): the presets take their limits for it (:func:`validation.verify.preset`: ``rocmlir``'s
relDiff 1e-6 and ``rocmlir-2022``'s 1e-6 for types other than fp16, ``torch``'s bf16 rtol 1.6e-2,
``miopen``'s 8 × 8.2e-3), the validation is rounded to it, and epsilonDiff is in its ulps.
``study-2022`` is the 2022 study's fp16 line and has no bf16 form; ``study-proposal``'s limits
were fitted for fp16 and are scaled by 2^3 = 8 for bf16 (bf16 keeps 3 fraction bits fewer than
fp16: the factor MIOpen's ``GetTolerance`` applies to its fp16 tolerance for bf16). A file's
``round_validation`` defaults to the sweep's format.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import tomllib

from ..files import MAX_JSON_DEPTH, json_depth, read_json, read_text
from ..metrics import METRIC_NAMES
from ..verify.presets import PRESET_NAMES, Thresholds, preset
from .generators import InputGenerator, parse_generator

__all__ = [
    "ValidationFunction",
    "FUNCTION_NAMES",
    "DTYPES",
    "NOT_FOR",
    "function",
    "function_names",
    "load_functions",
    "parse_functions",
]

#: The largest validators file read (a few functions take a few hundred bytes).
MAX_FILE_BYTES = 1 << 20
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
#: The data types a sweep's functions are built for.
DTYPES = ("fp16", "bf16")
#: Per data type, the named functions that have no form for it, and why.
NOT_FOR: dict[str, dict[str, str]] = {
    "fp16": {},
    "bf16": {
        "study-2022": "the 2022 study's instrumented verifier line is fp16 only (maxEpsilonDiff in fp16 ulps, the "
        "validation rounded to fp16)",
    },
}
#: study-proposal's fp16 limits, and the factor for bf16 (3 fraction bits fewer: MIOpen's rule).
STUDY_PROPOSAL = {"rms": 3e-5, "max_rel_diff": 1e-3}
BF16_FACTOR = 8.0


def function_names(dtype: str = "fp16") -> tuple[str, ...]:
    """The named functions (:data:`FUNCTION_NAMES`) that have a form for ``dtype``."""
    return tuple(n for n in FUNCTION_NAMES if n not in NOT_FOR[_dtype(dtype)])


def _dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ValueError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    return dtype


@dataclass(frozen=True)
class ValidationFunction:
    """A named verifier and the generator of the inputs it is run on."""

    name: str
    thresholds: Thresholds | None
    generator: InputGenerator
    kind: str = "verifier"  # or "predicted-bound", "emulated"
    #: the tensors' format the function is for ("fp16" or "bf16")
    dtype: str = "fp16"

    @property
    def label(self) -> str:
        return f"{self.name}@{self.generator.name}"

    def describe(self) -> str:
        inputs = self.generator.describe(self.dtype)
        if self.kind != "verifier":
            what = KIND_DESCRIPTIONS[self.kind]
            if self.dtype != "fp16":  # the output rounding's unit roundoff is the format's
                what = what.replace("u16", f"u_{self.dtype}")
            return f"{self.label}: {what}; inputs {inputs}"
        checks = ", ".join(f"{c.metric} ≤ {c.limit:g}" for c in self.thresholds.checks)
        return f"{self.label}: {checks}; inputs {inputs}"


def function(text: str, dtype: str = "fp16") -> ValidationFunction:
    """``NAME`` or ``NAME@RANGE`` (module docstring) for tensors of ``dtype`` (fp16 or bf16);
    ValueError naming the accepted presets, or why a preset has no form for ``dtype``."""
    dtype = _dtype(dtype)
    name, _, rng = str(text).strip().partition("@")
    name = name.lower()
    if name not in _DEFAULT_INPUTS:
        raise ValueError(
            f"validators: {text!r} is not a preset ({', '.join(function_names(dtype))}) or a .json/.toml file"
        )
    if name in NOT_FOR[dtype]:
        raise ValueError(
            f"validators: {name} has no {dtype} form: {NOT_FOR[dtype][name]}; the {dtype} presets: "
            f"{', '.join(function_names(dtype))}"
        )
    gen = parse_generator(rng or _DEFAULT_INPUTS[name])
    if name in KIND_DESCRIPTIONS:
        return ValidationFunction(name, None, gen, kind=name, dtype=dtype)
    if name in PRESET_NAMES:
        th = preset(name, dtype)
    elif name == "study-proposal":
        factor = BF16_FACTOR if dtype == "bf16" else 1.0
        limits = {m: v * factor for m, v in STUDY_PROPOSAL.items()}
        th = Thresholds.from_mapping(limits, name=name, round_validation=dtype, dtype=dtype)
    else:  # exact, cudnn-sparse: exact equality
        th = Thresholds.from_mapping({"max_abs_diff": 0.0}, name=name, round_validation=dtype, dtype=dtype)
    return ValidationFunction(name, th, gen, dtype=dtype)


def _from_record(rec: dict, where: str, dtype: str = "fp16") -> ValidationFunction:
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
    limits = {}
    for m, v in metrics.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= float(v) < math.inf:
            raise ValueError(f"{where}: metric {m}: the limit {str(v)[:40]!r} is not a finite number ≥ 0")
        limits[m] = float(v)
    name = str(rec.get("name") or Path(where).stem)
    rv = rec.get("round_validation", dtype)
    th = Thresholds.from_mapping(limits, name=name, round_validation=rv, dtype=dtype)
    gen = parse_generator(rec.get("generator", rec.get("range", "float:-1:1")))
    return ValidationFunction(name, th, gen, dtype=dtype)


def load_functions(path, dtype: str = "fp16") -> list[ValidationFunction]:
    """The validation functions of a .json or .toml FILE (module docstring), for tensors of
    ``dtype``."""
    dtype = _dtype(dtype)
    p = Path(path)

    def fail(why):
        return ValueError(f"validators: {str(path)[:200]!r} {why}")

    # the checked loader: one descriptor, no FIFO or device (a link to /dev/zero), at most 1 MiB,
    # nested at most MAX_JSON_DEPTH deep, no NaN/Infinity in JSON
    if p.suffix.lower() != ".toml":
        data = read_json(path, "validators", max_bytes=MAX_FILE_BYTES, fail=fail)
    else:
        text = read_text(path, "validators", max_bytes=MAX_FILE_BYTES, fail=fail)
        depth = json_depth(text)  # TOML's arrays and inline tables nest with the same brackets
        if depth > MAX_JSON_DEPTH:
            raise fail(f"is nested {depth} levels deep, over the limit of {MAX_JSON_DEPTH}")
        try:
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError) as err:
            raise fail(f"is not valid TOML ({' '.join(str(err).split())[:120]})") from None
    recs = data.get("functions", [data]) if isinstance(data, dict) else data
    if not isinstance(recs, list):
        raise ValueError(f"validators: {path}: expected a table or a list of tables")
    return [_from_record(r, str(path), dtype) for r in recs]


def parse_functions(items, dtype: str = "fp16") -> list[ValidationFunction]:
    """Presets (``NAME[@RANGE]``) and FILEs, in order, for tensors of ``dtype`` (fp16 or bf16);
    ``ranges`` are applied by the caller."""
    out: list[ValidationFunction] = []
    for item in items:
        s = str(item)
        if s.lower().endswith((".json", ".toml")):
            out.extend(load_functions(s, dtype))
        else:
            out.append(function(s, dtype))
    return out
