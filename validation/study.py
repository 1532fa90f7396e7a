"""Reproduce the 2022 AMD fp16 study's measured verifier lines, field for field.

``fp16emu study reproduce --measured DIR`` reads the study's raw results (DIR is its
``raw_results`` folder: ``verify_results_<run set>_<GPU>/verify_f16_<kernel>_<pv|pv-with-gpu>_rand<r>.txt``),
emulates every selected test (inputs, kernel, validation function, verifier) and prints the
emulated line next to the measured one with each printed field marked equal or not. It ends with
a tally per combination, the study's aggregated tables (emulated next to measured) and a
diagnosis of every line that still differs, and writes ``report.md`` and ``reproduce.csv`` to
``--out``.

The recipe (``../shared/reference/reproduction_findings.md`` §1; run sets and their quirks:
``../shared/reference/study_results_2022.md`` §2):

* inputs: ``-rand 1 -rand_type float -rand_min a -rand_max b`` (``batch_run.sh``'s
  ``processConfig``, ``rocmlir_kernels_2022.md`` §1.1): every tensor re-seeds glibc ``srand``,
  float generator, truncating fp16 conversion (:func:`models.harness.harness_inputs`);
* kernels: ``rocmlir-2022-xdlops`` on the GPU's unit (MI100 / MI200) and
  ``rocmlir-2022-nonxdlops`` (:func:`models.kernels.kernel`), output RNE to fp16;
* validation: ``-pv_with_gpu`` = the non-xdlops kernel in fp32; ``-pv`` = ``cpu-validation-2022``
  of the kernel validated (fp32 after every step for non-xdlops runs, fp64 for xdlops runs) in
  fair_1, fair_2 and fair_rand0; in fair_3 ``cpu-acc4`` for fwd and bwd_weight, with the fp16
  inputs below 2^-14 flushed on MI200 (bwd_data keeps the fair_1 validator);
* verifier: :func:`validation.metrics.compare` with the run set's
  :class:`~validation.metrics.StudyQuirks`, the line by :func:`validation.verifier.study_line`.

Backward-weight xdlops tests whose split-K atomics add three or more partial sums
(:func:`atomic_reorders`) cannot be pinned to one order: they are emulated as an ensemble of
add orders (random per output element by default; per output tile as an option), and a measured
line passes when every field lies inside the ensemble's range. The range spans the sampled
members plus two envelope members, each element at its closest (and at its farthest) outcome
over many more random orders (up to ENVELOPE_ORDERS) and four sorted ones, and the elements
farthest from the validation over DEEP_ORDERS more: any such combination is itself an order the
hardware can produce, and it reaches the tails of the maximum-type fields that a few hundred
samples miss. The report also counts the sampled members that reproduce the line exactly.
``fair_rand0`` was seeded by the clock: its lines are compared with the spread of the lines of a
few seeds (never a pass/fail).

Results are cached per line as JSON under ``<out>/.cache`` by a hash of the test's arguments,
the seed and range, GPU, kernel, validator, run-set quirks, the fp16emu version and the
models' units and accumulation orders, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import hashlib
import io
import json
import math
import os
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from emu._jit import jit as _jit
from emu._jit import prange as _prange
from emu.kernels._scalar import round_to_fp16_rne

__all__ = [
    "RANGES",
    "RUN_SETS",
    "GPUS",
    "KERNELS",
    "VALIDATORS",
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
    "register_cli",
    "main",
]

#: The study's input ranges (``batch_run.sh``: rand0, rand1, rand4, rand5).
RANGES: Mapping[str, tuple[int, int]] = {"r0": (-1, 1), "r1": (-10, 10), "r4": (1, 5), "r5": (5, 10)}
RUN_SETS = ("fair_1", "fair_2", "fair_3", "fair_rand0")
GPUS = ("mi100", "mi200")
KERNELS = ("xdlops", "nonxdlops")
VALIDATORS = ("cpu", "gpu")
#: ``-rand 1`` in fair_1, fair_2 and fair_3.
STUDY_SEED = 1
#: Seeds whose lines stand for fair_rand0's unknown clock seeds.
RAND0_SEEDS = (1, 2, 3)
ENSEMBLE_MEMBERS = 128
ENSEMBLE_SEED = 2022
GRANULARITIES = ("tile", "element")
#: Bump when the cached content or its meaning changes.
CACHE_VERSION = 2
#: Elements × models of one emulation pass above which kernels and validators are computed in
#: separate passes (each validator alone) to bound memory on the 205M-output tests.
_PASS_ELEMENTS = 300_000_000
#: Ensemble members × elements whose fp32 sums the envelope pass keeps (4 bytes each), so that the
#: members are not drawn a second time; above it they are drawn one at a time.
_MEMBER_ELEMENTS = 40_000_000
#: Bump when the ensemble's members or their meaning change (part of the atomic lines' cache key).
ENSEMBLE_VERSION = 7
#: The envelope's random orders: at most this many, and at most ENVELOPE_ADDS fp32 adds in all.
ENVELOPE_ORDERS = 4096
ENVELOPE_ADDS = 400_000_000
#: The deep search: the elements farthest from the validation (by absolute, relative and
#: ulp-scaled distance, this many by each) get DEEP_ORDERS more random orders each. The study's
#: maximum-type fields (maxEps, maxAbs, maxRel and the values at them) come from such elements,
#: and with 16 to 64 partial sums the orders that reach their extremes are rare.
DEEP_ELEMENTS = 64
DEEP_ORDERS = 1 << 16

_FILE_RE = re.compile(r"^verify_f16_(xdlops|nonxdlops)_(pv|pv-with-gpu)_rand(\d+)\.txt$")
_DIR_RE = re.compile(r"^verify_results_(.+)_(MI\d+)$")
_VALIDATOR_OF_FLAG = {"pv": "cpu", "pv-with-gpu": "gpu"}
#: the three combinations the study averaged (study_results_2022.md §0 finding 5)
_STUDY_COMBOS = (("xdlops", "cpu"), ("xdlops", "gpu"), ("nonxdlops", "cpu"))
_AGG_METRICS = ("max_epsilon_diff", "max_abs_diff", "ave_abs_diff", "max_rel_diff", "max_rel_diff_old",
                "ave_rel_diff", "rms")


# ------------------------------------------------------------------------------------------------
# Measured lines


@dataclass(frozen=True)
class MeasuredLine:
    """One measured line of the study: which run it belongs to and its parsed fields."""

    run_set: str
    gpu: str  # mi100 / mi200
    kernel: str  # xdlops / nonxdlops
    validator: str  # cpu (-pv) / gpu (-pv_with_gpu)
    range: str  # r0 / r1 / r4 / r5
    test_name: str
    line: Any  # validation.verifier.StudyLine
    test_index: int = 0
    source: str = ""

    @property
    def combo(self) -> tuple[str, str, str, str, str]:
        return (self.run_set, self.gpu, self.kernel, self.validator, self.range)


def read_measured(directory) -> list[MeasuredLine]:
    """Every line of the study's raw results folder ``directory`` (the folder holding
    ``verify_results_<run set>_<GPU>/``), keyed by run set, GPU, kernel, validator, range and
    test. Raises ``ValueError`` naming the folder or file that does not fit."""
    from .verifier import parse_study_line

    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"--measured: {str(root)!r} is not a folder")
    out: list[MeasuredLine] = []
    folders = sorted(p for p in root.iterdir() if p.is_dir() and _DIR_RE.match(p.name))
    if not folders:
        raise ValueError(f"--measured: {str(root)!r} holds no verify_results_<run set>_<GPU> folders "
                         f"(expected the study's raw_results folder)")
    for folder in folders:
        run_set, gpu = _DIR_RE.match(folder.name).groups()
        for path in sorted(folder.iterdir()):
            m = _FILE_RE.match(path.name)
            if m is None:
                continue
            kernel, flag, r = m.groups()
            rng = f"r{int(r)}"
            if rng not in RANGES:
                raise ValueError(f"--measured: {path}: range rand{r} is not one of "
                                 f"{', '.join('rand' + k[1:] for k in RANGES)}")
            with open(path, encoding="utf-8") as fh:
                for lineno, text in enumerate(fh, 1):
                    if not text.strip():
                        continue
                    try:
                        line = parse_study_line(text)
                    except ValueError as err:
                        raise ValueError(f"--measured: {path}:{lineno}: {err}") from None
                    if line.tail is None:
                        raise ValueError(f"--measured: {path}:{lineno}: no test name after the verifier line")
                    out.append(MeasuredLine(run_set=run_set, gpu=gpu.lower(), kernel=kernel,
                                            validator=_VALIDATOR_OF_FLAG[flag], range=rng,
                                            test_name=line.tail.test_name, line=line,
                                            test_index=line.tail.test_index, source=str(path)))
    return out


# ------------------------------------------------------------------------------------------------
# Selection


def _split(value, option: str, allowed: Sequence[str], *, lower: bool = True) -> tuple[str, ...]:
    if value is None:
        return tuple(allowed)
    items = value.split(",") if isinstance(value, str) else list(value)
    items = [str(i).strip() for i in items if str(i).strip()]
    if lower:
        items = [i.lower() for i in items]
    aliases = {"non-xdlops": "nonxdlops", "pv": "cpu", "pv-with-gpu": "gpu", "pv_with_gpu": "gpu"}
    items = [aliases.get(i, i) for i in items]
    items = [f"r{i[4:]}" if i.startswith("rand") else i for i in items]
    if not items:
        raise ValueError(f"{option}: empty; allowed values: {','.join(allowed)}")
    bad = [i for i in items if i not in allowed]
    if bad:
        raise ValueError(f"{option}: {bad[0]!r} is not one of {','.join(allowed)}")
    return tuple(dict.fromkeys(items))


def _macs(entry) -> int:
    n = entry.gemm_n or entry.n_out_elements // max(entry.gemm_m, 1)
    return entry.gemm_m * entry.gemm_k * n * max(entry.gemm_g, 1)


def smallest_tests(count: int) -> list[str]:
    """The ``count`` suite tests with the least work (multiply-adds), smallest first."""
    from .suites import suite_entries

    return [e.name for e in sorted(suite_entries(), key=_macs)[:count]]


@dataclass(frozen=True)
class Selection:
    """What to reproduce: run sets, GPUs, kernels, validators, ranges, tests (None = all), and
    how to model what cannot be pinned down (atomic ensembles, fair_rand0 seeds)."""

    run_sets: tuple[str, ...] = ("fair_1",)
    gpus: tuple[str, ...] = GPUS
    kernels: tuple[str, ...] = KERNELS
    validators: tuple[str, ...] = VALIDATORS
    ranges: tuple[str, ...] = tuple(RANGES)
    tests: tuple[str, ...] | None = None
    members: int = ENSEMBLE_MEMBERS
    granularity: str = "element"
    rand0_seeds: tuple[int, ...] = RAND0_SEEDS
    diagnose: bool = True

    def __post_init__(self):
        if self.members < 1:
            raise ValueError(f"--members: must be a positive integer, got {self.members}")
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"--granularity: {self.granularity!r} is not one of {','.join(GRANULARITIES)}")
        if not self.rand0_seeds or any(int(s) < 1 for s in self.rand0_seeds):
            raise ValueError("--rand0-seeds: need one or more positive seeds")

    @classmethod
    def from_options(cls, *, run_set=None, gpu=None, kernel=None, validator=None, range=None, tests=None,
                     smallest: int | None = None, **kw) -> Selection:
        """A selection from comma-separated option strings (the CLI's); ``ValueError`` with one
        line naming the option and its allowed values for anything unknown."""
        from validation.configs import ConfigError

        from .suites import suite_entry

        names = None
        if tests is not None:
            raw = [t.strip() for t in (tests.split(",") if isinstance(tests, str) else tests) if t.strip()]
            if not raw:
                raise ValueError("--tests: empty; give suite test names separated by commas")
            names = []
            for t in raw:
                try:
                    names.append(suite_entry(t).name)
                except ConfigError as err:
                    raise ValueError(f"--tests: {' '.join(str(err).split())}") from None
        if smallest is not None:
            if smallest < 1:
                raise ValueError(f"--smallest: must be a positive integer, got {smallest}")
            small = smallest_tests(smallest)
            names = small if names is None else [n for n in names if n in small]
        return cls(run_sets=_split(run_set if run_set is not None else "fair_1", "--run-set", RUN_SETS),
                   gpus=_split(gpu, "--gpu", GPUS), kernels=_split(kernel, "--kernel", KERNELS),
                   validators=_split(validator, "--validator", VALIDATORS), ranges=_split(range, "--range", tuple(RANGES)),
                   tests=None if names is None else tuple(dict.fromkeys(names)), **kw)

    def select(self, measured: Iterable[MeasuredLine]) -> list[MeasuredLine]:
        tests = None if self.tests is None else set(self.tests)
        return [m for m in measured
                if m.run_set in self.run_sets and m.gpu in self.gpus and m.kernel in self.kernels
                and m.validator in self.validators and m.range in self.ranges
                and (tests is None or m.test_name in tests)]


# ------------------------------------------------------------------------------------------------
# Model specs and recipes
#
# A spec names one emulated arithmetic, as a hashable tuple:
#   ("xdlops", hw, rules, kblocks, order)    the xdlops kernel on hw's unit; order "kernel" or "cpu-loop"
#   ("nonxdlops", order)                      the non-xdlops kernel (= -pv_with_gpu's arithmetic)
#   ("cpu", name, validating, flush)          a CPU validator of models.kernels, flush = inputs < 2^-14 → 0


def _xdl(hw: str, rules: str | None = None, kblocks: int | None = None, order: str = "kernel") -> tuple:
    from models.tuning import DEFAULT_RULES

    return ("xdlops", hw, rules or DEFAULT_RULES, kblocks, order)


_NONX = ("nonxdlops", "kernel")


def _cpu(name: str = "cpu-validation-2022", validating: str | None = None, flush: bool = False,
         count: str = "flat") -> tuple:
    """``count``: how a grouped validator ('acc 4') counts products into its groups of 4: "flat"
    (every position of the loop, out-of-bounds taps included: the gemmK index) or "inbounds"
    (only the products the CPU loop adds; it skips out-of-bounds taps)."""
    if name not in ("cpu-validation-2022", "cpu-ftz"):
        validating = None
    if name != "cpu-acc4":
        count = "flat"
    return ("cpu", name, validating, bool(flush), count)


def _spec_label(spec: tuple) -> str:
    if spec[0] == "xdlops":
        _, hw, rules, kb, order = spec
        extra = [f"rules {rules}"] if rules != _xdl("mi100")[2] else []
        if kb is not None:
            extra.append(f"KBlocks {kb}")
        if order != "kernel":
            extra.append("gemmK in the CPU loop order")
        return f"xdlops kernel on the {hw.upper()} unit" + (f" ({', '.join(extra)})" if extra else "")
    if spec[0] == "nonxdlops":
        return "non-xdlops fp32 FMA chain" + (" in the CPU loop order" if spec[1] != "kernel" else "")
    _, name, validating, flush, count = spec
    desc = {"cpu-validation-2022": f"CPU validation v1 ({'fp32 after every step' if validating == 'nonxdlops' else 'fp64'})",
            "cpu-acc4": "CPU validation 'acc 4' (fp64 over 4 products, fp32 per group)",
            "cpu-validation-mlir": "CPU validation fp32 multiply-then-add (Sep 2022)"}.get(name, name)
    if count == "inbounds":
        desc += " counting only in-bounds products into the groups"
    return desc + (" with inputs < 2^-14 flushed" if flush else "")


@dataclass(frozen=True)
class Recipe:
    """How one measured line is emulated: the kernel's and the validator's arithmetic, the verifier's
    run-set quirks and the input generation."""

    kernel: tuple
    validator: tuple
    quirks: str
    rand_type: str = "float"
    kblocks_note: str = ""

    def label(self) -> str:
        return f"{_spec_label(self.kernel)} vs {_spec_label(self.validator)}, verifier {self.quirks}, rand_type {self.rand_type}"


def default_recipe(run_set: str, gpu: str, kernel: str, validator: str, direction: str) -> Recipe:
    """The recipe that reproduces the study (module docstring): which kernel, validation function,
    verifier quirks and inputs stand for one measured line."""
    kspec = _xdl(gpu) if kernel == "xdlops" else _NONX
    if validator == "gpu":
        vspec = _NONX
    elif run_set == "fair_3" and direction != "bwd_data":
        # bwd_weight: the group counter advances only on the products the loop adds (data: every
        # padded bwd_weight test, e.g. padding_kernel_all_wrw CONFIG2/4, ISSUE_70_1, ISSUE_71_4)
        vspec = _cpu("cpu-acc4", flush=gpu == "mi200", count="inbounds" if direction == "bwd_weight" else "flat")
    else:
        vspec = _cpu("cpu-validation-2022", kernel)
    return Recipe(kspec, vspec, run_set if run_set in RUN_SETS else "fair_3")


def _kernel_model(spec: tuple):
    from models import kernels as km

    if spec[0] == "xdlops":
        _, hw, rules, kb, _order = spec
        return km.kernel("rocmlir-2022-xdlops", hw=hw, kblocks=kb, rules=rules)
    if spec[0] == "nonxdlops":
        return km.kernel("rocmlir-2022-nonxdlops", hw=None)
    _, name, validating, flush, _count = spec
    model = km.kernel(name, validating=validating)
    if flush and not model.unit.flush_inputs:
        unit = dataclasses.replace(model.unit, name=model.unit.name + "+flush", flush_inputs=True)
        model = dataclasses.replace(model, unit=unit, flush_inputs=True)
    return model


@functools.lru_cache(maxsize=256)
def _plan(spec: tuple, problem) -> list:
    """The spec's unit and GemmOrder per sub-GEMM (models.kernels plans; order overrides)."""
    from emu.gemm import GemmOrder
    from models.kernels import KernelGemm, cpu_loop_k_order

    plans = _kernel_model(spec).plan(problem)
    order = spec[-1] if spec[0] in ("xdlops", "nonxdlops") else "kernel"
    if order == "cpu-loop":
        plans = [KernelGemm(g.gemm_id, g.unit,
                            GemmOrder(k_order=cpu_loop_k_order(problem, g.gemm_id), pad_k=g.order.pad_k,
                                      split_k=g.order.split_k, notes="CPU loop order"), g.tuning_plan)
                 for g in plans]
    return plans


def _order_dependent(plans) -> bool:
    """Split-K with three or more partial sums: the fp32 atomic adds' order changes the result
    (with two, 0 + a is exact and a + b commutes)."""
    return any(g.order.split_k >= 3 for g in plans)


def atomic_reorders(test_name: str) -> bool:
    """Whether the xdlops kernel of ``test_name`` adds three or more split-K partial sums with fp32
    atomics (backward weight, no gemm padding): its result depends on the add order."""
    from .suites import suite_config

    return _order_dependent(_plan(_xdl("mi200"), suite_config(test_name).problem))


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("fp16emu")
    except Exception:  # pragma: no cover - not installed
        return "0+unknown"


def _spec_identity(spec: tuple, problem) -> list:
    """What of a spec changes its bits on ``problem``: units' parameters and orders."""
    ident = [spec[-1]] if spec[0] == "cpu" else []
    for g in _plan(spec, problem):
        k = g.order.k_order
        ident.append([repr(g.unit.params), None if k is None else _digest(list(k)), g.order.pad_k, g.order.split_k])
    return ident


# ------------------------------------------------------------------------------------------------
# Emulation


@dataclass(frozen=True)
class _Request:
    """One line to emulate: its cache key, recipe, line format and ensemble settings."""

    key: str
    recipe: Recipe
    seed: int
    members: int  # 0: deterministic kernel
    granularity: str


@dataclass(frozen=True)
class _Job:
    test: str
    range: str
    seed: int
    rand_type: str
    requests: tuple[_Request, ...]
    weight: float


class _Partials:
    """Split-K partial sums of an order-dependent kernel, in the result's memory order, and the id
    of the output tile each element belongs to."""

    def __init__(self, n_split: int, size: int):
        self.parts = np.zeros((n_split, size), np.float32)
        self.tiles = np.zeros(size, np.float32)
        self._sorted: list[np.ndarray] | None = None

    def _keys(self, granularity: str) -> np.ndarray:
        if granularity == "tile":
            return self.tiles.astype(np.int64)
        return np.arange(self.parts.shape[1], dtype=np.int64)

    def member(self, index: int, granularity: str) -> np.ndarray:
        """Ensemble member ``index``, fp16: for every element the partials added onto a zeroed
        fp32 workspace (RNE each add) in a random order of its own (or its output tile's), then
        RNE to fp16. The orders come from a counter-based generator keyed by (seed, index,
        element or tile): any member can be drawn alone, in parallel, the same on every run."""
        out = np.empty(self.parts.shape[1], np.float32)
        _atomic_member(self.parts, self._keys(granularity), np.uint64(ENSEMBLE_SEED), np.uint64(index), out)
        return _to_fp16(out)

    def envelope(self, validation16: np.ndarray, count: int, granularity: str) -> tuple[np.ndarray, np.ndarray]:
        """(closest, farthest) fp16 outcome per element over ``count`` random orders (members
        0 … count−1) and the four sorted orders."""
        (pair,), _ = self.envelopes([validation16], count, granularity)
        return pair[0], pair[1]

    def envelopes(self, validations16: Sequence[np.ndarray], count: int, granularity: str,
                  keep: int = 0, deep_elements: int = 0,
                  deep_orders: int = 0) -> tuple[list[tuple[np.ndarray, ...]], np.ndarray]:
        """:meth:`envelope` for several validations (fp16 values as float64) in one pass over the
        orders, which do not depend on the validation; also returns the fp32 sums of the first
        ``keep`` orders (row i: member i before its fp16 rounding, shape (keep, size)). With
        ``deep_orders``, each validation's pair becomes (closest, farthest, deep closest, deep
        farthest): the last two also give the ``deep_elements`` farthest elements (by each of
        three distances) orders ``count`` … ``count + deep_orders − 1``. The first two are kept
        as they are, so an ensemble's range only widens."""
        size = self.parts.shape[1]
        keys = self._keys(granularity)
        v16 = np.ascontiguousarray(np.stack([np.asarray(v, np.float64).reshape(-1) for v in validations16]))
        near = np.empty((len(v16), size), np.float32)
        far = np.empty((len(v16), size), np.float32)
        kept = np.empty((min(keep, count), size), np.float32)
        _atomic_envelope(self.parts, keys, np.uint64(ENSEMBLE_SEED), count, v16, near, far, kept)
        sorted16 = self.sorted_members()
        plain = []
        for v, n32, f32 in zip(v16, near, far):
            n16, f16 = _to_fp16(n32), _to_fp16(f32)
            dn, df = _distance(n16, v), _distance(f16, v)
            for k16 in sorted16:
                d = _distance(k16, v)
                closer, farther = d < dn, d > df
                n16[closer], dn = k16[closer], np.where(closer, d, dn)
                f16[farther], df = k16[farther], np.where(farther, d, df)
            plain.append((n16, f16))
        if deep_orders <= 0 or deep_elements <= 0:
            return plain, kept
        # the deep search: each validation's own extreme elements, but one pass over the orders
        # for all of them (an element's sums do not depend on the validation)
        picks = [_extreme_elements(v, f16, deep_elements) for v, (_, f16) in zip(v16, plain)]
        union = np.unique(np.concatenate(picks)).astype(np.int64)
        searched = np.stack([np.isin(union, at) for at in picks])
        n_at = np.stack([n16[union] for n16, _ in plain]).astype(np.float32)
        f_at = np.stack([f16[union] for _, f16 in plain]).astype(np.float32)
        _atomic_envelope_at(self.parts, keys[union], union, np.uint64(ENSEMBLE_SEED), count, count + deep_orders,
                            np.ascontiguousarray(v16[:, union]), searched, n_at, f_at)
        pairs = []
        for i, (n16, f16) in enumerate(plain):
            deep_n16, deep_f16 = n16.copy(), f16.copy()
            deep_n16[union], deep_f16[union] = _to_fp16(n_at[i]), _to_fp16(f_at[i])
            pairs.append((n16, f16, deep_n16, deep_f16))
        return pairs, kept

    def sorted_members(self) -> list[np.ndarray]:
        """Four more orders per element: partials by value ascending and descending, and by
        magnitude ascending and descending (stable; fp16, as :meth:`member`). Cancellation and
        absorption are largest at these orders, where random orders rarely go. Computed once."""
        if self._sorted is None:
            by_element = np.ascontiguousarray(self.parts.T)  # each element's partials contiguous
            out = []
            for key in (by_element, -by_element, np.abs(by_element), -np.abs(by_element)):
                order = np.argsort(key, axis=1, kind="stable")
                ws = np.empty(self.parts.shape[1], np.float32)
                _sum_in_order(self.parts, order, ws)
                out.append(_to_fp16(ws))
            self._sorted = out
        return self._sorted


def _to_fp16(x: np.ndarray) -> np.ndarray:
    """RNE to fp16 (the kernels' v_cvt_f16_f32); float32 through emu's converter, which keeps its
    speed where most results overflow or are subnormal (r5, backward weight)."""
    from emu.rounding import fp32_to_fp16

    if x.dtype == np.float32:
        return fp32_to_fp16(x)
    with np.errstate(over="ignore"):
        return x.astype(np.float16)


def _distance(k16: np.ndarray, v16: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # inf − inf: NaN, counted as the farthest
        d = np.abs(k16.astype(np.float64) - v16)
    return np.where(np.isnan(d), np.inf, d)


_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@_jit
def _splitmix(x):
    """splitmix64's finaliser: a well-mixed uint64 of a uint64."""
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


@_jit(inline="always")
def _order_sum(parts, i, key, seed, index, perm):
    """The fp32 sum of parts[:, i] added one by one onto +0 in the random order of member
    ``index`` (Fisher–Yates over the stream keyed by (seed, index, key)); ``perm`` is scratch."""
    s = parts.shape[0]
    state = _splitmix(seed * _GOLDEN + _splitmix(np.uint64(index) * _GOLDEN + _splitmix(np.uint64(key))))
    for j in range(s):
        perm[j] = j
    for j in range(s - 1, 0, -1):
        state = state + _GOLDEN
        r = _splitmix(state)
        pick = np.int64(((r >> np.uint64(11)) * np.uint64(j + 1)) >> np.uint64(53))  # < j + 1
        perm[j], perm[pick] = perm[pick], perm[j]
    ws = np.float32(0.0)
    for j in range(s):
        ws = ws + parts[perm[j], i]
    return ws


@_jit(inline="always")
def _outcome_distance(x, v):
    """|x − v| in float64 for an fp16 outcome ``x``; NaN (inf − inf, a NaN outcome) counts as
    infinitely far."""
    d = abs(np.float64(x) - v)
    if d != d:
        return np.inf
    return d


@_jit(parallel=True)
def _atomic_member(parts, keys, seed, index, out):
    """out[i] = the fp32 sum of parts[:, i] added one by one onto +0 in a random order drawn
    (Fisher–Yates) from the stream keyed by (seed, index, keys[i]). Parallel over elements only."""
    s, size = parts.shape
    block = 4096
    for b in _prange((size + block - 1) // block):
        perm = np.empty(s, np.int64)
        for i in range(b * block, min(size, (b + 1) * block)):
            ws = _order_sum(parts, i, keys[i], seed, index, perm)
            out[i] = ws


@_jit(parallel=True)
def _atomic_envelope(parts, keys, seed, count, v16, near, far, kept):
    """Per element i and validation row v, over the orders of members 0 … count−1 (the same
    orders as :func:`_atomic_member`): near[v, i] the fp16 outcome closest to ``v16[v, i]`` (the
    validation in fp16, as float64), far[v, i] the farthest (NaN distances count as infinite; ties
    keep the first). kept[j, i] = the fp32 sum of order j for j < kept.shape[0]. Parallel over
    elements only."""
    s, size = parts.shape
    nv = v16.shape[0]
    n_keep = kept.shape[0]
    block = 1024
    for b in _prange((size + block - 1) // block):
        perm = np.empty(s, np.int64)
        dn = np.empty(nv, np.float64)
        df = np.empty(nv, np.float64)
        for i in range(b * block, min(size, (b + 1) * block)):
            for index in range(count):
                ws = _order_sum(parts, i, keys[i], seed, index, perm)
                if index < n_keep:
                    kept[index, i] = ws
                x = round_to_fp16_rne(np.float64(ws))
                for v in range(nv):
                    d = _outcome_distance(x, v16[v, i])
                    if index == 0 or d < dn[v]:
                        near[v, i] = x
                        dn[v] = d
                    if index == 0 or d > df[v]:
                        far[v, i] = x
                        df[v] = d


@_jit(parallel=True)
def _atomic_envelope_at(parts, keys, at, seed, first, stop, v16, searched, near, far):
    """:func:`_atomic_envelope` continued on the elements ``at`` (keys[j] is element at[j]'s
    key) over orders ``first`` … ``stop − 1``, each order's sum computed once for every
    validation row v where searched[v, j]: near[v, j] and far[v, j] (the outcomes found so far)
    are replaced by any outcome strictly closer to / farther from v16[v, j]. Parallel over
    elements only."""
    s = parts.shape[0]
    nv = v16.shape[0]
    for j in _prange(at.size):
        perm = np.empty(s, np.int64)
        dn = np.empty(nv, np.float64)
        df = np.empty(nv, np.float64)
        for v in range(nv):
            dn[v] = _outcome_distance(near[v, j], v16[v, j])
            df[v] = _outcome_distance(far[v, j], v16[v, j])
        i = at[j]
        for index in range(first, stop):
            ws = _order_sum(parts, i, keys[j], seed, index, perm)
            x = round_to_fp16_rne(np.float64(ws))
            for v in range(nv):
                if searched[v, j]:
                    d = _outcome_distance(x, v16[v, j])
                    if d < dn[v]:
                        near[v, j] = x
                        dn[v] = d
                    if d > df[v]:
                        far[v, j] = x
                        df[v] = d


def _extreme_elements(v16: np.ndarray, far16: np.ndarray, count: int) -> np.ndarray:
    """The elements whose farthest outcome is farthest from the validation ``v16``: the top
    ``count`` by absolute distance, by relative distance and by distance in fp16 ulps of the
    smaller magnitude (the study's maxAbs, maxRel and maxEps), sorted, without repeats. Elements
    already at an infinite distance (an overflow or NaN on either side) are left out: no order
    takes them farther, and on r1/r5 they would fill every pick."""
    d = _distance(far16, v16)
    mag = np.minimum(np.abs(v16), np.abs(far16.astype(np.float64)))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ulp = np.exp2(np.floor(np.log2(np.maximum(mag, 2.0 ** -14))) - 10)
        scores = (d, d / np.maximum(np.abs(v16), 2.0 ** -24), d / ulp)
    finite = np.isfinite(d)
    picks = []
    for x in scores:
        x = np.where(finite & np.isfinite(x), x, -np.inf)
        order = np.argsort(-x, kind="stable")[:count]
        picks.append(order[finite[order]])
    return np.unique(np.concatenate(picks)).astype(np.int64)


@_jit(parallel=True)
def _sum_in_order(parts, order, out):
    """out[i] = the fp32 sum of parts[:, i] added one by one onto +0 in the order order[i, :]."""
    s, size = parts.shape
    for i in _prange(size):
        ws = np.float32(0.0)
        for j in range(s):
            ws = ws + parts[order[i, j], i]
        out[i] = ws


def _emulate(op, problem, specs: Sequence[tuple], atomic: set) -> dict:
    """One pass over the convolution's GEMMs computing every spec (flat fp32 in memory order, or
    :class:`_Partials` for the order-dependent ones in ``atomic``), sharing the gathered operands."""
    import emu
    from emu.gemm import GemmOrder

    plans = {s: _plan(s, problem) for s in specs}
    atomic = set(atomic) & set(specs)
    size = problem.tensor_size(problem.result_role)
    outs: dict = {}
    for s in specs:
        if s in atomic:
            outs[s] = _Partials(max(g.order.split_k for g in plans[s]), size)
        else:
            outs[s] = op.new_result()
    inbounds = [s for s in specs if s[0] == "cpu" and s[-1] == "inbounds"]
    if inbounds:
        _emulate_inbounds(op, problem, {s: plans[s] for s in inbounds}, outs)
    specs = [s for s in specs if s not in inbounds]
    if not specs:
        return outs
    chunk = op.default_n_chunk()
    tile_base = {s: 0 for s in atomic}
    for sub, sg in enumerate(op.subs):
        for group in range(problem.groups):
            a = op.a(sub, group)
            for start in range(0, sg.n, chunk):
                stop = min(start + chunk, sg.n)
                b = op.b(sub, group, start, stop)
                for s in specs:
                    g = plans[s][sub]
                    if s not in atomic or g.order.split_k < 2:
                        res = emu.gemm(a, b, g.unit, g.order)
                        op.scatter(outs[s].parts[0] if s in atomic else outs[s], res, sub, group, start)
                        continue
                    seq = g.order.sequence(a.shape[1])
                    if (seq < 0).any():
                        raise AssertionError("split-K with gemmK padding is not a path of the 2022 kernels")
                    for si, sl in enumerate(g.order.chunks(len(seq))):
                        idx = seq[sl]
                        part = emu.gemm(np.ascontiguousarray(a[:, idx]), np.ascontiguousarray(b[idx, :]), g.unit,
                                        GemmOrder())
                        op.scatter(outs[s].parts[si], part, sub, group, start)
                    t = g.tuning_plan.tuning
                    n_nt = -(-sg.n // t.n_per_block)
                    mt = np.arange(sg.m) // t.m_per_block
                    nt = np.arange(start, stop) // t.n_per_block
                    tid = tile_base[s] + (mt[:, None] * n_nt + nt[None, :])
                    op.scatter(outs[s].tiles, tid.astype(np.float32), sub, group, start)
            for s in atomic:
                t = plans[s][sub].tuning_plan
                if t is not None:
                    tile_base[s] += (-(-sg.m // t.tuning.m_per_block)) * (-(-sg.n // t.tuning.n_per_block))
    return outs


#: Bytes of B (fp16 gemmK × gemmN) gathered at once by the in-bounds pass: wider than the usual
#: chunks, so each filter tap's A columns are gathered once and not once per chunk it spans.
_INBOUNDS_B_BYTES = 1 << 30


def _emulate_inbounds(op, problem, plans: Mapping[tuple, list], outs: dict) -> None:
    """The backward-weight CPU loops that skip out-of-bounds taps (``count="inbounds"``): per
    filter tap, the products whose input pixel lies inside the image, in the loop's gemmK order.
    A tap's gathered operands are shared by the specs with the same loop order (e.g. the fair_3
    validators with and without input flush)."""
    import emu
    from emu.gemm import GemmOrder

    for sub, sg in enumerate(op.subs):
        chunk = max(op.default_n_chunk(), _INBOUNDS_B_BYTES // max(1, 2 * sg.k))
        for group in range(problem.groups):
            a = op.a(sub, group)
            by_order: list[tuple[np.ndarray, list[tuple]]] = []  # (loop order, the specs with it)
            for s, plan in plans.items():
                full = plan[sub].order.sequence(a.shape[1])
                full = full[full >= 0]  # gemmK padding zeros are no products of the loop
                same = next((specs for order, specs in by_order if np.array_equal(order, full)), None)
                if same is None:
                    by_order.append((full, [s]))
                else:
                    same.append(s)
            for start in range(0, sg.n, chunk):
                stop = min(start + chunk, sg.n)
                b = op.b(sub, group, start, stop)
                res = {s: np.zeros((sg.m, stop - start), np.float32) for s in plans}
                for cols, kin in _tap_groups(problem, sg, start, stop):
                    inside = np.zeros(a.shape[1], np.bool_)
                    inside[kin] = True
                    for full, specs in by_order:
                        seq = full[inside[full]]  # the loop's order, in-bounds products only
                        a_tap, b_tap = np.ascontiguousarray(a[:, seq]), b[seq[:, None], cols[None, :]]
                        for s in specs:
                            res[s][:, cols] = emu.gemm(a_tap, b_tap, plans[s][sub].unit, GemmOrder())
                for s in plans:
                    op.scatter(outs[s], res[s], sub, group, start)


def _tap_groups(problem, sg, start: int, stop: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Backward weight: the gemmN columns start…stop−1 grouped by filter tap (y, x), each with the
    gemmK indices (n, ho, wo) whose input pixel lies inside the image (the products a CPU loop
    that skips out-of-bounds taps adds)."""
    if problem.direction != "bwd_weight":
        raise ValueError(f"in-bounds counting is modelled for bwd_weight only, not {problem.direction}")
    order = tuple(problem.gemm_n_order)
    sizes = {"c": problem.c // problem.groups, "y": problem.y, "x": problem.x}
    digits = np.unravel_index(np.arange(start, stop), [sizes[d] for d in order])
    ys, xs = digits[order.index("y")], digits[order.index("x")]
    groups = []
    for y, x in sorted(set(zip(ys.tolist(), xs.tolist()))):
        cols = np.nonzero((ys == y) & (xs == x))[0]
        groups.append((cols, _tap_kin(problem, sg.k, y, x)))
    return groups


@functools.lru_cache(maxsize=64)
def _tap_kin(problem, k: int, y: int, x: int) -> np.ndarray:
    kd = tuple(problem.gemm_k_order)
    ksz = {"n": problem.n, "ho": problem.out_h, "wo": problem.out_w}
    kdig = np.unravel_index(np.arange(k), [ksz[d] for d in kd])
    ho, wo = kdig[kd.index("ho")], kdig[kd.index("wo")]
    hi = ho * problem.stride[0] + y * problem.dilation[0] - problem.pad_h[0]
    wi = wo * problem.stride[1] + x * problem.dilation[1] - problem.pad_w[0]
    return np.nonzero((hi >= 0) & (hi < problem.h) & (wi >= 0) & (wi < problem.w))[0]


def _zero_line(n: int, fmt: str):
    from .verifier import StudyLine

    pair = 0.0 if fmt == "B" else None
    return StudyLine(n=n, n_exact=n, n_eps1=0, n_eps_ge2=0, n_eps_other=0, max_epsilon_diff=0.0,
                     val_at_max_eps=0.0, kern_at_max_eps=0.0, max_abs_diff=0.0, ave_abs_diff=0.0,
                     max_rel_diff=0.0, max_rel_diff_old=0.0, val_at_max_rel_old=pair, kern_at_max_rel_old=pair,
                     ave_rel_diff=0.0, rms=0.0, line_format=fmt)


def _line_fields(validation: np.ndarray, kernel16: np.ndarray, quirks: str, differing=None) -> dict:
    """The study verifier's printed fields for one (validation fp32, kernel fp16) pair. All-equal
    outputs with a nonzero element take a shortcut whose line is all zeros (the C verifier skips
    exact elements and starts every maximum and sum at 0). ``differing``: the pair's
    ``metrics._study_differing``, when the caller compares the pair under several run sets."""
    from .metrics import _study_differing, resolve_study_quirks
    from .verifier import format_study_line, study_line_of

    q = resolve_study_quirks(quirks)
    if differing is None:
        differing = _study_differing(validation, kernel16)
    if differing[0].size == 0 and np.any(kernel16 != 0):
        line = _zero_line(int(validation.size), q.line_format)
    else:
        line = study_line_of(validation, kernel16, q, differing=differing)
    return {"fields": line.fields(), "line": format_study_line(line)}


def _inputs(problem, test: str, range_key: str, seed: int, rand_type: str):
    from models import harness

    lo, hi = RANGES[range_key]
    return harness.harness_inputs(problem, seed=seed, rand_min=lo, rand_max=hi, rand_type=rand_type,
                                  rand_side="both", dtype="f16")


def _run_job(job: _Job, cache_dir: str | None) -> dict[str, dict]:
    """Emulate the lines of one (test, range, seed, inputs) job; returns {cache key: result} and
    stores each result in the cache as it is finished."""
    from emu.conv import ConvGemm

    from .suites import suite_config

    problem = suite_config(job.test).problem
    inputs = _inputs(problem, job.test, job.range, job.seed, job.rand_type)
    op = ConvGemm(problem, x=inputs.get("input"), w=inputs.get("filter"), dy=inputs.get("output"))
    size = problem.tensor_size(problem.result_role)
    kspecs = list(dict.fromkeys(r.recipe.kernel for r in job.requests))
    vspecs = list(dict.fromkeys(r.recipe.validator for r in job.requests))
    atomic = {s for s in kspecs if _order_dependent(_plan(s, problem))}
    every = list(dict.fromkeys(kspecs + vspecs))
    results: dict[str, dict] = {}
    kernels16: dict = {}
    kernels32: dict = {}

    memo: dict[tuple, dict] = {}
    # (validator, kernel) → the pair's differing elements: shared by fair_1/2/3's lines
    differing: dict[tuple, tuple] = {}

    def store(req: _Request, res: dict) -> None:
        res["recipe"] = req.recipe.label()
        results[req.key] = res
        if cache_dir:
            _cache_put(cache_dir, req.key, res)

    def finish(req: _Request, validation: np.ndarray):
        from .metrics import _study_differing

        kspec = req.recipe.kernel
        same = (kspec, req.recipe.validator, req.recipe.quirks, req.members, req.granularity)
        if same not in memo:  # e.g. nonxdlops lines: the same arithmetic on MI100 and MI200
            pair = (req.recipe.validator, kspec)
            if pair not in differing:
                differing[pair] = _study_differing(validation, kernels16[kspec])
            memo[same] = {"mode": "exact",
                          **_line_fields(validation, kernels16[kspec], req.recipe.quirks, differing[pair])}
        store(req, dict(memo[same]))

    def finish_ensemble(kspec, reqs: Sequence[_Request], validation_of) -> None:
        """Every request on the order-dependent kernel ``kspec``: each member is drawn once and
        compared with every request's validation and run set (the differing set once per
        validator); the per-element envelope of all the validations comes from one pass over the
        orders, which also keeps the members' sums when they fit in memory."""
        from .metrics import _study_differing

        ens = kernels32[kspec]
        groups: dict[tuple, list[_Request]] = defaultdict(list)
        for r in reqs:
            groups[(r.members, r.granularity)].append(r)
        for (n_members, granularity), group in groups.items():
            lines = {}  # (validator, quirks) → the requests computing that line
            for r in group:
                lines.setdefault((r.recipe.validator, r.recipe.quirks), []).append(r)
            vs = list(dict.fromkeys(v for v, _ in lines))
            validations = {v: validation_of(v) for v in vs}
            # each element's closest and farthest outcome over many more random orders than the
            # members (as many as ENVELOPE_ADDS allows) and the sorted orders
            n_orders = max(n_members, min(ENVELOPE_ORDERS, ENVELOPE_ADDS // max(1, ens.parts.size)))
            keep = n_members if n_members * size <= _MEMBER_ELEMENTS else 0
            v16s = [_to_fp16(validations[v]).astype(np.float64) for v in vs]
            pairs, kept = ens.envelopes(v16s, n_orders, granularity, keep=keep, deep_elements=DEEP_ELEMENTS,
                                        deep_orders=DEEP_ORDERS)
            envelope = dict(zip(vs, pairs))
            member_fields: dict[tuple, list] = {line: [] for line in lines}
            for i in range(n_members):
                if keep:
                    k16 = _to_fp16(kept[i])
                else:
                    k16 = ens.member(i, granularity)
                for v in vs:
                    d = _study_differing(validations[v], k16)
                    for (lv, q) in lines:
                        if lv == v:
                            member_fields[(lv, q)].append(_line_fields(validations[v], k16, q, d))
            del kept
            names = ("closest", "farthest", "closest, deep", "farthest, deep")
            for (v, q), rs in lines.items():
                res = {"mode": "ensemble",
                       "members": member_fields[(v, q)] + [
                           dict(_line_fields(validations[v], k16, q), envelope=name)
                           for name, k16 in zip(names, envelope[v])],
                       "granularity": granularity, "n_split": int(ens.parts.shape[0])}
                for r in rs:
                    store(r, dict(res))

    def set_kernel(spec, out):
        kernels32[spec] = out
        if spec not in atomic:
            kernels16[spec] = _to_fp16(out)

    def finish_all(validation_of, validators) -> None:
        for req in job.requests:
            if req.recipe.validator in validators and req.recipe.kernel not in atomic:
                finish(req, validation_of(req.recipe.validator))
        for kspec in kspecs:
            if kspec in atomic:
                reqs = [r for r in job.requests if r.recipe.kernel == kspec and r.recipe.validator in validators]
                if reqs:
                    finish_ensemble(kspec, reqs, validation_of)

    if size * len(every) <= _PASS_ELEMENTS:
        outs = _emulate(op, problem, every, atomic)
        for s in kspecs:
            set_kernel(s, outs[s])
        finish_all(outs.__getitem__, set(vspecs))
        return results
    # big tests: kernels first (as many per pass as the budget allows; fp32 kept only where a
    # validator needs it), then one validator at a time
    per_pass = max(1, _PASS_ELEMENTS // max(size, 1))
    for i in range(0, len(kspecs), per_pass):
        group = kspecs[i:i + per_pass]
        outs = _emulate(op, problem, group, atomic)
        for s in group:
            set_kernel(s, outs[s])
            if s not in vspecs and s not in atomic:
                kernels32.pop(s)
        del outs
    for v in vspecs:
        if v in kernels32 and v not in atomic:
            validation = kernels32[v]
        else:
            validation = _emulate(op, problem, [v], set())[v]
        finish_all(lambda _v, validation=validation: validation, {v})
        del validation
        differing.clear()
        for s in list(kernels32):  # keep fp32 kernels only while a later validator needs them
            if s not in vspecs[vspecs.index(v) + 1:] and s not in atomic:
                kernels32.pop(s)
    return results


# ------------------------------------------------------------------------------------------------
# Cache


def _cache_path(cache_dir: str, key: str) -> Path:
    return Path(cache_dir) / key[:2] / f"{key}.json"


def _cache_get(cache_dir: str | None, key: str):
    if not cache_dir:
        return None
    p = _cache_path(cache_dir, key)
    try:
        with open(p, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _cache_put(cache_dir: str, key: str, value) -> None:
    p = _cache_path(cache_dir, key)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(f".{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(value, fh)
    os.replace(tmp, p)


def _request_key(test: str, range_key: str, seed: int, recipe: Recipe, members: int, granularity: str,
                 problem, entry, combo: tuple) -> str:
    from .metrics import resolve_study_quirks

    k_ident = _spec_identity(recipe.kernel, problem)
    atomic = _order_dependent(_plan(recipe.kernel, problem))
    return _digest({
        "v": CACHE_VERSION, "fp16emu": _version(), "test": test, "args": entry.args,
        "problem": repr(problem), "seed": seed, "range": RANGES[range_key], "combo": combo,
        "quirks": repr(resolve_study_quirks(recipe.quirks)), "rand_type": recipe.rand_type,
        "kernel": [recipe.kernel, k_ident], "validator": [recipe.validator, _spec_identity(recipe.validator, problem)],
        "ensemble": [members, granularity, ENSEMBLE_SEED, ENSEMBLE_VERSION, ENVELOPE_ORDERS, ENVELOPE_ADDS,
                     DEEP_ELEMENTS, DEEP_ORDERS] if atomic else None,
    })


# ------------------------------------------------------------------------------------------------
# Comparing emulated with measured


@dataclass
class LineResult:
    """One measured line against its emulation.

    ``mode``: "exact" (one emulated line), "ensemble" (atomic add orders) or "seeds"
    (fair_rand0). ``equal[field]``: exact mode: the printed strings are equal; otherwise the
    measured value lies within the members' range. ``status``: reproduced, in_ensemble,
    in_distribution, differs, outside_ensemble, outside_distribution."""

    measured: MeasuredLine
    mode: str
    fields: dict  # field -> measured string
    emulated: dict  # field -> emulated string (exact mode) or "lo..hi"
    equal: dict  # field -> bool
    exact_members: int = 0
    n_members: int = 0
    emulated_line: str = ""
    recipe: str = ""
    diagnosis: str = ""
    bounds: dict | None = None  # field -> (lo, hi) over the members (numeric; ensembles and seeds)

    @property
    def ok(self) -> bool:
        return all(self.equal.values())

    @property
    def status(self) -> str:
        if self.mode == "exact":
            return "reproduced" if self.ok else "differs"
        if self.mode == "ensemble":
            return "in_ensemble" if self.ok else "outside_ensemble"
        return "in_distribution" if self.ok else "outside_distribution"

    @property
    def counts_as_failure(self) -> bool:
        """fair_rand0 lines are a distribution comparison, never a failure."""
        return self.mode != "seeds" and not self.ok

    @property
    def differing(self) -> list[str]:
        return [f for f, ok in self.equal.items() if not ok]

    def bound(self, f: str) -> tuple[float, float]:
        """(lo, hi) of the emulated value of field ``f`` (lo = hi for an exact-mode line)."""
        if self.bounds is not None:
            return self.bounds.get(f, (math.nan, math.nan))
        x = _num(self.emulated.get(f, "nan"))
        return (x, x)


def _num(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        return math.nan


def _range_check(measured: str, values: list[str]) -> tuple[bool, str]:
    if all(v == values[0] for v in values):
        return measured == values[0], values[0]
    m = _num(measured)
    nums = [_num(v) for v in values]
    finite = [x for x in nums if not math.isnan(x)]
    if math.isnan(m):
        return any(math.isnan(x) for x in nums), f"{min(finite, default=math.nan):g}..{max(finite, default=math.nan):g}"
    if measured in values:
        ok = True
    else:
        ok = bool(finite) and min(finite) <= m <= max(finite)
    lo = values[nums.index(min(finite))] if finite else "nan"
    hi = values[nums.index(max(finite))] if finite else "nan"
    return ok, f"{lo}..{hi}"


def _judge(m: MeasuredLine, results: list[dict], mode: str) -> LineResult:
    fields = m.line.fields()
    if mode == "exact":
        em = results[0]["fields"]
        equal = {f: em.get(f) == v for f, v in fields.items()}
        return LineResult(m, "exact", fields, {f: em.get(f, "") for f in fields}, equal,
                          emulated_line=results[0]["line"], recipe=results[0].get("recipe", ""))
    members = [mem for r in results for mem in (r["members"] if r["mode"] == "ensemble" else [r])]
    equal, emulated = {}, {}
    for f, v in fields.items():
        values = [mem["fields"].get(f, "") for mem in members]
        if mode == "seeds" and f in _PAIR_FIELDS and len(set(values)) > 1:
            # where the maximum lies depends on the inputs: not comparable across seeds
            equal[f], emulated[f] = True, "(varies)"
            continue
        equal[f], emulated[f] = _range_check(v, values)
    exact = sum(all(mem["fields"].get(f) == v for f, v in fields.items()) for mem in members
                if "envelope" not in mem)
    n_sampled = sum("envelope" not in mem for mem in members)
    bounds = {}
    for f in fields:
        nums = [x for x in (_num(mem["fields"].get(f, "nan")) for mem in members) if not math.isnan(x)]
        bounds[f] = (min(nums), max(nums)) if nums else (math.nan, math.nan)
    return LineResult(m, mode, fields, emulated, equal, exact_members=exact, n_members=n_sampled,
                      emulated_line=members[0]["line"], recipe=results[0].get("recipe", ""), bounds=bounds)


# ------------------------------------------------------------------------------------------------
# Diagnosis of the lines that still differ

_PAIR_FIELDS = ("val_at_max_eps", "kern_at_max_eps", "val_at_max_rel_old", "kern_at_max_rel_old")


def _alternatives(recipe: Recipe, m: MeasuredLine, problem, atomic: bool) -> list[tuple[str, str, Recipe, str]]:
    """(category, description, recipe, granularity) alternatives the models offer, one assumption
    changed at a time."""
    alts: list[tuple[str, str, Recipe, str]] = []
    gran = None
    for q in RUN_SETS:
        if q != recipe.quirks and q != "fair_rand0":
            alts.append(("verifier quirk", f"the {q} verifier's quirks", dataclasses.replace(recipe, quirks=q), gran))
    vals = [_NONX, _cpu("cpu-validation-2022", "xdlops"), _cpu("cpu-validation-2022", "nonxdlops"),
            _cpu("cpu-validation-2022", "xdlops", True), _cpu("cpu-validation-2022", "nonxdlops", True),
            _cpu("cpu-acc4"), _cpu("cpu-acc4", flush=True), _cpu("cpu-validation-mlir")]
    if problem.direction == "bwd_weight":
        vals += [_cpu("cpu-acc4", count="inbounds"), _cpu("cpu-acc4", flush=True, count="inbounds")]
    for v in vals:
        if v != recipe.validator:
            alts.append(("validator", _spec_label(v), dataclasses.replace(recipe, validator=v), gran))
    k = recipe.kernel
    if k[0] == "xdlops":
        _, hw, rules, kb, order = k
        for other in ("mi100", "mi200", "mi300"):
            if other != hw:
                alts.append(("unit model", f"the {other.upper()} unit", dataclasses.replace(recipe, kernel=_xdl(other, rules, kb, order)), gran))
        alts.append(("gemmK order", "tuning rules 2022-09", dataclasses.replace(recipe, kernel=_xdl(hw, "2022-09", kb, order)), gran))
        if problem.direction == "fwd" and tuple(problem.gemm_k_order) != ("c", "y", "x"):
            alts.append(("gemmK order", "gemmK in the CPU loop order (c, y, x)",
                         dataclasses.replace(recipe, kernel=_xdl(hw, rules, kb, "cpu-loop")), gran))
        if atomic:
            for n in (2, 4, 8, 16, 32, 64):
                try:
                    _plan(_xdl(hw, rules, n, order), problem)
                except ValueError:
                    continue
                alts.append(("gemmK order", f"KBlocks {n}", dataclasses.replace(recipe, kernel=_xdl(hw, rules, n, order)), gran))
            alts.append(("gemmK order", "atomic add order random per output tile instead of per element", recipe, "tile"))
    else:
        if problem.direction == "fwd" and tuple(problem.gemm_k_order) != ("c", "y", "x"):
            alts.append(("gemmK order", "gemmK in the CPU loop order (c, y, x)",
                         dataclasses.replace(recipe, kernel=("nonxdlops", "cpu-loop")), gran))
        for hw in ("mi100", "mi200"):
            alts.append(("unit model", f"the xdlops kernel's {hw.upper()} unit instead of fp32 FMA",
                         dataclasses.replace(recipe, kernel=_xdl(hw)), gran))
    alts.append(("input generation", "integer random generator (-rand_type int)", dataclasses.replace(recipe, rand_type="int"), gran))
    return alts


# ------------------------------------------------------------------------------------------------
# The report


@dataclass
class Report:
    """Everything a reproduction found; :meth:`markdown` and :meth:`write` give the files."""

    selection: Selection
    lines: list[LineResult]
    wall_s: float = 0.0
    cache_hits: int = 0
    emulated: int = 0
    measured_dir: str = ""
    command: str = ""
    not_cached: int = 0  # selected lines left out by cached_only

    @property
    def ok(self) -> bool:
        return not any(r.counts_as_failure for r in self.lines)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    # --- tallies ----------------------------------------------------------------------------

    def tallies(self) -> list[dict]:
        groups: dict[tuple, list[LineResult]] = defaultdict(list)
        for r in self.lines:
            groups[r.measured.combo].append(r)
        order = {k: i for i, k in enumerate(RUN_SETS)}
        rows = []
        for combo in sorted(groups, key=lambda c: (order.get(c[0], 9), c[1], c[2], c[3], c[4])):
            rs = groups[combo]
            c = Counter(r.status for r in rs)
            fields = Counter(f for r in rs if not r.ok for f in r.differing)
            rows.append({"run_set": combo[0], "gpu": combo[1], "kernel": combo[2], "validator": combo[3],
                         "range": combo[4], "tests": len(rs), "reproduced": c["reproduced"],
                         "in_ensemble": c["in_ensemble"] + c["in_distribution"],
                         "differs": c["differs"], "outside": c["outside_ensemble"] + c["outside_distribution"],
                         "ensemble_tests": sum(r.mode == "ensemble" for r in rs),
                         "fields": dict(fields)})
        return rows

    def per_run_set(self) -> dict[str, Counter]:
        out: dict[str, Counter] = defaultdict(Counter)
        for r in self.lines:
            out[r.measured.run_set][r.status] += 1
        return out

    # --- the study's aggregated tables ------------------------------------------------------

    def aggregate(self) -> list[dict]:
        """The study's rule per (run set, GPU, range): per combination the mean and max over the
        tests of each metric (non-numeric values skipped), then the mean of the three
        combinations xdlops/cpu, xdlops/gpu, nonxdlops/cpu; pass rate = share of (combination,
        test) pairs with maxEpsilonDiff ≤ 2. The emulated value is an interval (``emulated_lo``,
        ``emulated_hi``): each ensemble or seed-set line enters with its members' lowest and
        highest value (the rule is monotone in every line), an exact-mode line with its value."""
        by: dict[tuple, dict[tuple, list[LineResult]]] = defaultdict(lambda: defaultdict(list))
        for r in self.lines:
            m = r.measured
            by[(m.run_set, m.gpu, m.range)][(m.kernel, m.validator)].append(r)
        rows = []
        for key in sorted(by, key=lambda k: (RUN_SETS.index(k[0]) if k[0] in RUN_SETS else 9, k[1], k[2])):
            combos = by[key]
            use = [c for c in _STUDY_COMBOS if c in combos]
            if not use:
                continue
            for metric in _AGG_METRICS:
                for stat in ("ave", "max"):
                    row = {"run_set": key[0], "gpu": key[1], "range": key[2], "metric": metric, "stat": stat}
                    row.update(_aggregate_cell([combos[c] for c in use], metric, stat))
                    rows.append(row)
            row = {"run_set": key[0], "gpu": key[1], "range": key[2], "metric": "pass_rate", "stat": "maxEps<=2"}
            pairs = [r for c in use for r in combos[c]]
            row["measured"] = sum(_num(r.fields["max_epsilon_diff"]) <= 2 for r in pairs) / len(pairs)
            row["emulated_lo"] = sum(r.bound("max_epsilon_diff")[1] <= 2 for r in pairs) / len(pairs)
            row["emulated_hi"] = sum(r.bound("max_epsilon_diff")[0] <= 2 for r in pairs) / len(pairs)
            rows.append(row)
        return rows

    def validation_methods(self) -> list[dict]:
        """Per (run set, GPU, kernel, validator): the mean over the ranges of the per-range mean
        or max over tests (the study's 'validation methods' table)."""
        by: dict[tuple, dict[str, list[LineResult]]] = defaultdict(lambda: defaultdict(list))
        for r in self.lines:
            m = r.measured
            by[(m.run_set, m.gpu, m.kernel, m.validator)][m.range].append(r)
        rows = []
        for key in sorted(by):
            for metric in ("max_epsilon_diff", "max_abs_diff", "max_rel_diff", "rms"):
                for stat in ("ave", "max"):
                    row = {"run_set": key[0], "gpu": key[1], "kernel": key[2], "validator": key[3],
                           "metric": metric, "stat": stat}
                    row.update(_aggregate_cell(list(by[key].values()), metric, stat))
                    rows.append(row)
        return rows

    # --- output ----------------------------------------------------------------------------

    def csv_rows(self) -> list[list]:
        rows = []
        for r in self.lines:
            m = r.measured
            for f, v in r.fields.items():
                rows.append([m.run_set, m.gpu, m.kernel, m.validator, m.range, m.test_name, f, v,
                             r.emulated.get(f, ""), int(r.equal.get(f, False)), r.mode,
                             r.exact_members if r.mode != "exact" else "", r.n_members if r.mode != "exact" else ""])
        return rows

    def write_csv(self, path) -> None:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["run_set", "gpu", "kernel", "validator", "range", "test_name", "field", "measured",
                        "emulated", "equal", "compare", "exact_members", "members"])
            w.writerows(self.csv_rows())

    def markdown(self) -> str:
        s = self.selection
        out = io.StringIO()
        p = lambda *a: print(*a, file=out)  # noqa: E731
        n_fail = sum(r.counts_as_failure for r in self.lines)
        p("# fp16emu study reproduce: the 2022 fp16 study's measured lines, emulated\n")
        p(f"* command: `{self.command}`" if self.command else "* command: (library call)")
        p(f"* measured: `{self.measured_dir}`; fp16emu {_version()}")
        p(f"* selection: run sets {','.join(s.run_sets)}; GPUs {','.join(s.gpus)}; kernels {','.join(s.kernels)}; "
          f"validators {','.join(s.validators)}; ranges {','.join(s.ranges)}; "
          f"tests {'all' if s.tests is None else len(s.tests)}")
        p(f"* atomic ensembles: {s.members} add orders per line, random per output {s.granularity}, plus the "
          f"per-element envelope (closest and farthest outcome of each element over up to {ENVELOPE_ORDERS} orders and "
          f"the 4 sorted ones), and its deep search ({DEEP_ORDERS} more orders for the {DEEP_ELEMENTS} farthest elements "
          f"by absolute, relative and ulp distance); "
          f"fair_rand0 stand-in seeds {','.join(map(str, s.rand0_seeds))}")
        p(f"* {len(self.lines)} lines, {len({r.measured.test_name for r in self.lines})} tests; "
          f"{self.emulated} lines emulated, {self.cache_hits} from the cache; wall time {self.wall_s:.1f} s")
        if self.not_cached:
            p(f"* **partial**: {self.not_cached} selected lines are not in the cache yet and are left out")
        p(f"* **verdict: {'every selected line reproduced or inside its ensemble' if self.ok else f'{n_fail} lines differ'}**\n")
        p("## Per run set\n")
        p("| run set | lines | reproduced exactly | inside ensemble / seed spread | differ | outside ensemble / seed spread |")
        p("|---|---|---|---|---|---|")
        for rs, c in sorted(self.per_run_set().items(), key=lambda kv: RUN_SETS.index(kv[0]) if kv[0] in RUN_SETS else 9):
            p(f"| {rs} | {sum(c.values())} | {c['reproduced']} | {c['in_ensemble'] + c['in_distribution']} | "
              f"{c['differs']} | {c['outside_ensemble'] + c['outside_distribution']} |")
        p("\n## Tally per combination\n")
        p("`exact`: every printed field equal; `ensemble`: atomic-order tests (or fair_rand0 lines) whose every "
          "field lies inside the emulated spread; `differ`/`outside`: the others, with the fields that differ.\n")
        p("| run set | gpu | kernel | validator | range | tests | exact | ensemble | differ | outside | fields that differ (lines) |")
        p("|---|---|---|---|---|---|---|---|---|---|---|")
        for t in self.tallies():
            fields = ", ".join(f"{k} ({v})" for k, v in sorted(t["fields"].items(), key=lambda kv: -kv[1])) or "–"
            p(f"| {t['run_set']} | {t['gpu']} | {t['kernel']} | {t['validator']} | {t['range']} | {t['tests']} | "
              f"{t['reproduced']} | {t['in_ensemble']} | {t['differs']} | {t['outside']} | {fields} |")
        bad = [r for r in self.lines if r.counts_as_failure]
        p("\n## Lines that differ\n")
        if not bad:
            p("None.\n")
        for r in bad:
            m = r.measured
            p(f"### {m.run_set} {m.gpu} {m.kernel}/{m.validator} {m.range} {m.test_name}\n")
            p(f"* {r.status}: fields {', '.join(r.differing)}" + (f"; {r.exact_members}/{r.n_members} members exact" if r.n_members else ""))
            p(f"* recipe: {r.recipe}")
            if r.diagnosis:
                p(f"* diagnosis: {r.diagnosis}")
            p("")
            p("```")
            p(_side_by_side(r))
            p("```\n")
        ens = [r for r in self.lines if r.mode == "ensemble"]
        if ens:
            p("## Atomic-order (split-K) ensembles\n")
            p("`inside range`: every field lies within the range of the sampled members and the two envelope "
              "members; `members exact`: sampled members whose line equals the measured one in every field.\n")
            p("| run set | gpu | kernel/validator | range | test | inside range | members exact | fields outside |")
            p("|---|---|---|---|---|---|---|---|")
            for r in ens:
                m = r.measured
                p(f"| {m.run_set} | {m.gpu} | {m.kernel}/{m.validator} | {m.range} | {m.test_name} | "
                  f"{'yes' if r.ok else 'no'} | {r.exact_members}/{r.n_members} | {', '.join(r.differing) or '–'} |")
            p("")
        seeds = [r for r in self.lines if r.mode == "seeds"]
        if seeds:
            p("## fair_rand0: distributions only\n")
            p("fair_rand0 ran with `-rand 0` (time seed, unrecorded): no line can be reproduced. Each measured line "
              f"is set against the lines of seeds {','.join(map(str, s.rand0_seeds))}; the seed-invariant fields "
              "(equal for every seed) must match exactly, the others are compared with the seeds' spread; the "
              "(val, kern) pairs at the maxima are compared only where every seed gives the same pair. "
              "These lines never count as failures.\n")
            c = Counter(r.status for r in seeds)
            inv = sum(all(("..") not in v for v in r.emulated.values()) for r in seeds)
            p(f"* {len(seeds)} lines: {c['in_distribution']} inside the seeds' spread in every field, "
              f"{c['outside_distribution']} outside in some field; {inv} lines are seed-invariant in every field; "
              f"{sum(r.exact_members > 0 for r in seeds)} equal a seed's line exactly.\n")
            fields = Counter(f for r in seeds for f in r.differing)
            if fields:
                p("* fields outside the spread (lines): " + ", ".join(f"{k} ({v})" for k, v in fields.most_common()) + "\n")
            inv_bad = [r for r in seeds if any(not r.equal[f] and ".." not in r.emulated[f] for f in r.fields)]
            p(f"* lines where a seed-invariant field differs: {len(inv_bad)}"
              + ("" if not inv_bad else " — " + "; ".join(
                  f"{r.measured.gpu} {r.measured.kernel}/{r.measured.validator} {r.measured.range} {r.measured.test_name}"
                  for r in inv_bad[:20]) + (" …" if len(inv_bad) > 20 else "")) + "\n")
        agg = self.aggregate()
        if agg:
            p("## The study's aggregated tables, emulated next to measured\n")
            p("Rule (study_results_2022.md §0 finding 5, §4): per combination the mean (`ave`) or max over the "
              "selected tests, non-numeric values skipped, then the mean of xdlops/cpu, xdlops/gpu and "
              "nonxdlops/cpu; pass rate = share of (combination, test) pairs with maxEpsilonDiff ≤ 2. Raw values "
              "(the study's r4/r5 'max 1' correction is not applied). Where atomic-order ensembles or fair_rand0 "
              "seeds enter, the emulated value is the interval their members span (`inside`: the measured "
              "value lies in it).\n")
            p("| run set | gpu | range | metric | stat | measured | emulated | equal |")
            p("|---|---|---|---|---|---|---|---|")
            for row in agg:
                em, eq = _cell(row)
                p(f"| {row['run_set']} | {row['gpu']} | {row['range']} | {row['metric']} | {row['stat']} | "
                  f"{_g(row['measured'])} | {em} | {eq} |")
            p("\n### Validation methods (mean over the selected ranges)\n")
            p("| run set | gpu | kernel | validator | metric | stat | measured | emulated | equal |")
            p("|---|---|---|---|---|---|---|---|---|")
            for row in self.validation_methods():
                em, eq = _cell(row)
                p(f"| {row['run_set']} | {row['gpu']} | {row['kernel']} | {row['validator']} | {row['metric']} | "
                  f"{row['stat']} | {_g(row['measured'])} | {em} | {eq} |")
        return out.getvalue()

    def write(self, out_dir) -> tuple[Path, Path]:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        md, cs = d / "report.md", d / "reproduce.csv"
        md.write_text(self.markdown(), encoding="utf-8")
        self.write_csv(cs)
        return md, cs


def _aggregate_cell(groups: list[list[LineResult]], metric: str, stat: str) -> dict:
    """Mean over ``groups`` of each group's mean (``ave``) or max over its lines, non-numeric values
    skipped: measured, and the emulated interval."""
    out = {}
    for side, pick in (("measured", lambda r: _num(r.fields.get(metric, "nan"))),
                       ("emulated_lo", lambda r: r.bound(metric)[0]),
                       ("emulated_hi", lambda r: r.bound(metric)[1])):
        per = []
        for rs in groups:
            vals = [v for v in (pick(r) for r in rs) if math.isfinite(v)]
            if vals:
                per.append(sum(vals) / len(vals) if stat == "ave" else max(vals))
        out[side] = sum(per) / len(per) if per else math.nan
    return out


def _cell(row: dict) -> tuple[str, str]:
    """(emulated text, equal text) of an aggregated row: yes, inside (the interval holds the
    measured value), no."""
    lo, hi, m = row["emulated_lo"], row["emulated_hi"], row["measured"]
    if _same(lo, hi) == "yes":
        return _g(lo), _same(m, lo)
    inside = math.isfinite(m) and lo - 1e-12 * abs(lo) <= m <= hi + 1e-12 * abs(hi)
    return f"{_g(lo)}..{_g(hi)}", ("inside" if inside else "no")


def _g(x: float) -> str:
    return "–" if isinstance(x, float) and math.isnan(x) else f"{x:.6g}"


def _same(a: float, b: float) -> str:
    if math.isnan(a) and math.isnan(b):
        return "yes"
    return "yes" if a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= 1e-12 * max(abs(a), abs(b))) else "no"


def _side_by_side(r: LineResult) -> str:
    """Measured and emulated fields in aligned columns, with a row marking each field:
    ``=`` equal (or inside the ensemble), ``X`` different."""
    names = list(r.fields)
    short = {"n": "N", "n_exact": "exact", "n_eps1": "eps1", "n_eps_ge2": "eps>=2", "n_eps_other": "other",
             "max_epsilon_diff": "maxEps", "val_at_max_eps": "val@eps", "kern_at_max_eps": "kern@eps",
             "max_abs_diff": "maxAbs", "ave_abs_diff": "aveAbs", "max_rel_diff": "maxRel",
             "max_rel_diff_old": "maxRelOld", "val_at_max_rel_old": "val@old", "kern_at_max_rel_old": "kern@old",
             "ave_rel_diff": "aveRel", "rms": "RMS"}
    em_label = "emulated" if r.mode == "exact" else ("ensemble" if r.mode == "ensemble" else "seeds")
    cols = []
    for f in names:
        vals = [short.get(f, f), r.fields[f], r.emulated.get(f, ""), "=" if r.equal[f] else "X"]
        w = max(len(v) for v in vals)
        cols.append([v.ljust(w) for v in vals])
    rows = ["field   ", "measured", em_label.ljust(8), "equal   "]
    return "\n".join(rows[i] + " " + " ".join(c[i] for c in cols) for i in range(4))


# ------------------------------------------------------------------------------------------------
# reproduce()


def _plan_jobs(selected: list[MeasuredLine], selection: Selection, cache_dir: str | None):
    """Group the selected lines into emulation jobs (test, range, seed, inputs) with one request per
    (GPU, kernel, validator, run set) line; returns (jobs, per-line request keys, cached results)."""
    from .suites import suite_config, suite_entry

    line_keys: dict[int, list[tuple[str, str]]] = {}
    todo: dict[tuple, dict[str, _Request]] = defaultdict(dict)
    cached: dict[str, dict] = {}
    problems: dict[str, Any] = {}
    for i, m in enumerate(selected):
        if m.test_name not in problems:
            problems[m.test_name] = (suite_config(m.test_name).problem, suite_entry(m.test_name))
        problem, entry = problems[m.test_name]
        recipe = default_recipe(m.run_set, m.gpu, m.kernel, m.validator, problem.direction)
        seeds = selection.rand0_seeds if m.run_set == "fair_rand0" else (STUDY_SEED,)
        atomic = _order_dependent(_plan(recipe.kernel, problem))
        members = selection.members if atomic else 0
        keys = []
        for seed in seeds:
            combo = (m.gpu, m.kernel, m.validator, m.run_set)
            key = _request_key(m.test_name, m.range, seed, recipe, members, selection.granularity, problem, entry, combo)
            keys.append((key, "ensemble" if atomic else "exact"))
            hit = _cache_get(cache_dir, key)
            if hit is not None:
                cached[key] = hit
            else:
                todo[(m.test_name, m.range, seed, recipe.rand_type)][key] = _Request(key, recipe, seed, members, selection.granularity)
        line_keys[i] = keys
    jobs = []
    for (test, rng, seed, rt), reqs in todo.items():
        problem = problems[test][0]
        entry = problems[test][1]
        specs = {r.recipe.kernel for r in reqs.values()} | {r.recipe.validator for r in reqs.values()}
        weight = _macs(entry) * len(specs) + problem.tensor_size(problem.result_role) * 40 * len(reqs)
        jobs.append(_Job(test, rng, seed, rt, tuple(reqs.values()), weight))
    jobs.sort(key=lambda j: j.weight)
    return jobs, line_keys, cached


def _worker_init():
    try:
        import numba

        numba.set_num_threads(1)
    except Exception:  # pragma: no cover
        pass


def _worker(args):
    job, cache_dir = args
    t0 = time.time()
    return job, _run_job(job, cache_dir), time.time() - t0


def _execute(jobs: list[_Job], jobs_n: int, cache_dir: str | None, progress: bool, on_done=None,
             log_path=None) -> dict[str, dict]:
    """Run the jobs (a process pool when ``jobs_n`` > 1, numba single-threaded in each worker);
    ``log_path``: append one line per finished job (test, range, seed, lines, seconds)."""
    results: dict[str, dict] = {}
    if not jobs:
        return results
    bar = None
    if progress:
        from tqdm import tqdm

        # the bar counts work (multiply-adds and compared elements, in G), so its rate and ETA hold
        # from the smallest tests to the largest
        bar = tqdm(total=round(sum(j.weight for j in jobs) / 1e9, 1), unit="Gw", unit_scale=True, desc="emulating",
                   dynamic_ncols=True, file=sys.stderr, smoothing=0.05,
                   mininterval=0.5 if sys.stderr.isatty() else 30.0)

    def done(job, res, seconds):
        results.update(res)
        if log_path is not None:
            with open(log_path, "a", encoding="utf-8") as fh:
                fh.write(f"{job.test}\t{job.range}\t{job.seed}\t{job.rand_type}\t{len(job.requests)}\t{seconds:.1f}\n")
        if bar is not None:
            bar.update(round(job.weight / 1e9, 1))
            bar.set_postfix_str(f"{job.test[-28:]} {job.range}", refresh=False)
        if on_done is not None:
            on_done(job, res)

    try:
        if jobs_n <= 1:
            for job in jobs:
                t0 = time.time()
                res = _run_job(job, cache_dir)
                done(job, res, time.time() - t0)
        else:
            import multiprocessing as mp

            saved = {k: os.environ.get(k) for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
            for k in saved:
                os.environ[k] = "1"
            try:
                ctx = mp.get_context("spawn")
                # workers live for the whole run: each compiles (or loads) the numba kernels once
                with ctx.Pool(jobs_n, initializer=_worker_init) as pool:
                    # smallest first: an interrupted run has finished (and cached) as many tests as it could
                    for job, res, seconds in pool.imap_unordered(_worker, [(j, cache_dir) for j in jobs], chunksize=1):
                        done(job, res, seconds)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
    finally:
        if bar is not None:
            bar.close()
    return results


def _print_line(r: LineResult, file) -> None:
    m = r.measured
    mark = {"reproduced": "OK", "in_ensemble": "OK (ensemble)", "in_distribution": "OK (seed spread)",
            "differs": "DIFFERS", "outside_ensemble": "OUTSIDE ENSEMBLE",
            "outside_distribution": "outside seed spread"}[r.status]
    n_eq = sum(r.equal.values())
    extra = f", {r.exact_members}/{r.n_members} members exact" if r.n_members else ""
    print(f"[{m.run_set} {m.gpu.upper()} {m.kernel}/{m.validator} {m.range}] {m.test_name}: {mark} "
          f"({n_eq}/{len(r.equal)} fields{extra})", file=file)
    print(_side_by_side(r), file=file)


def _diagnose(report_lines: list[LineResult], selection: Selection, jobs_n: int, cache_dir: str | None,
              progress: bool) -> None:
    """Try the alternatives the models offer (one assumption changed at a time) on every line that
    differs, and write down which reproduce it."""
    from .suites import suite_config, suite_entry

    bad = [r for r in report_lines if r.counts_as_failure]
    if not bad:
        return
    todo: dict[tuple, dict[str, _Request]] = defaultdict(dict)
    plans: list[tuple[LineResult, list[tuple[str, str, str, str]]]] = []
    cached: dict[str, dict] = {}
    for r in bad:
        m = r.measured
        problem, entry = suite_config(m.test_name).problem, suite_entry(m.test_name)
        base = default_recipe(m.run_set, m.gpu, m.kernel, m.validator, problem.direction)
        atomic = r.mode == "ensemble"
        alts = []
        for cat, desc, recipe, gran in _alternatives(base, m, problem, atomic):
            try:
                kplans = _plan(recipe.kernel, problem)
                _plan(recipe.validator, problem)
            except ValueError:
                continue
            members = selection.members if _order_dependent(kplans) else 0
            g = gran or selection.granularity
            key = _request_key(m.test_name, m.range, STUDY_SEED, recipe, members, g, problem, entry,
                               (m.gpu, m.kernel, m.validator, m.run_set))
            alts.append((cat, desc, key, "ensemble" if members else "exact"))
            hit = _cache_get(cache_dir, key)
            if hit is not None:
                cached[key] = hit
            else:
                todo[(m.test_name, m.range, STUDY_SEED, recipe.rand_type)][key] = _Request(key, recipe, STUDY_SEED, members, g)
        plans.append((r, alts))
    jobs = []
    for (test, rng, seed, rt), reqs in todo.items():
        entry = suite_entry(test)
        problem = suite_config(test).problem
        specs = {q.recipe.kernel for q in reqs.values()} | {q.recipe.validator for q in reqs.values()}
        jobs.append(_Job(test, rng, seed, rt, tuple(reqs.values()),
                         _macs(entry) * len(specs) + problem.tensor_size(problem.result_role) * 40 * len(reqs)))
    jobs.sort(key=lambda j: j.weight)
    cached.update(_execute(jobs, jobs_n, cache_dir, progress))
    for r, alts in plans:
        found, scored = [], []
        for cat, desc, key, mode in alts:
            res = cached.get(key)
            if res is None:
                continue
            alt = _judge(r.measured, [res], mode if res["mode"] == "exact" else "ensemble")
            n_eq = sum(alt.equal.values())
            if alt.ok:
                found.append(f"{cat}: {desc}" + (f" ({alt.exact_members}/{alt.n_members} members exact)" if alt.n_members else ""))
            scored.append((n_eq, cat, desc, alt.differing))
        if found:
            r.diagnosis = "reproduced when one assumption changes — " + "; ".join(found)
        else:
            scored.sort(key=lambda t: -t[0])
            best = scored[0] if scored else None
            tried = Counter(c for _, c, _, _ in scored)
            r.diagnosis = ("no single alternative the models offer reproduces it (tried " +
                           ", ".join(f"{n} {c}" for c, n in tried.items()) + ")" +
                           (f"; closest: {best[1]}: {best[2]} ({best[0]}/{len(r.equal)} fields; still differs in "
                            f"{', '.join(best[3])})" if best else "") +
                           f"; the recipe itself gets {sum(r.equal.values())}/{len(r.equal)}")


def reproduce(selection: Selection, measured, *, jobs: int = 1, out=None, cache_dir=None, progress: bool = False,
              show: str = "none", stream=None, command: str = "", cached_only: bool = False) -> Report:
    """Emulate every measured line ``selection`` picks and compare it field for field.

    ``measured``: the raw results folder or lines from :func:`read_measured`; ``jobs``: worker
    processes; ``out``: write ``report.md`` and ``reproduce.csv`` there (and cache under
    ``out/.cache`` unless ``cache_dir`` says otherwise; ``cache_dir=False`` disables the cache);
    ``show``: "all" prints every line side by side, "mismatches" only the lines that differ,
    "none" nothing (to ``stream``, default stdout); ``cached_only``: emulate nothing, report the
    lines whose emulation is in the cache (e.g. while another run is still filling it)."""
    t0 = time.time()
    if jobs < 1:
        raise ValueError(f"--jobs: must be a positive integer, got {jobs}")
    if show not in ("all", "mismatches", "none"):
        raise ValueError(f"--show: {show!r} is not one of all,mismatches,none")
    measured_dir = ""
    if isinstance(measured, (str, os.PathLike)):
        measured_dir = str(measured)
        measured = read_measured(measured)
    selected = selection.select(measured)
    if not selected:
        raise ValueError("selection: no measured line matches the chosen run sets, GPUs, kernels, validators, "
                         "ranges and tests")
    if cache_dir is None and out is not None:
        cache_dir = str(Path(out) / ".cache")
    cache_dir = str(cache_dir) if cache_dir else None
    jobs_list, line_keys, cached = _plan_jobs(selected, selection, cache_dir)
    not_cached = 0
    if cached_only:
        keep = [i for i in range(len(selected)) if all(k in cached for k, _ in line_keys[i])]
        not_cached = len(selected) - len(keep)
        selected = [selected[i] for i in keep]
        line_keys = {j: line_keys[i] for j, i in enumerate(keep)}
        jobs_list = []
        selection = dataclasses.replace(selection, diagnose=False)
        if not selected:
            raise ValueError("--cached-only: no selected line is in the cache yet")
    stream = stream or sys.stdout
    n_emulated = sum(len(j.requests) for j in jobs_list)

    # print each test's lines as soon as all of them are known
    remaining: dict[str, set] = defaultdict(set)
    for i, m in enumerate(selected):
        for key, _ in line_keys[i]:
            if key not in cached:
                remaining[m.test_name].add(key)
    results = dict(cached)
    printed: set[int] = set()
    by_test: dict[str, list[int]] = defaultdict(list)
    for i, m in enumerate(selected):
        by_test[m.test_name].append(i)

    def judge(i: int) -> LineResult:
        m = selected[i]
        keys = line_keys[i]
        res = [results[k] for k, _ in keys]
        mode = "seeds" if m.run_set == "fair_rand0" else keys[0][1]
        return _judge(m, res, mode)

    def emit(test: str):
        if show == "none":
            return
        out_lines = []
        for i in by_test[test]:
            if i in printed:
                continue
            printed.add(i)
            r = judge(i)
            if show == "all" or r.counts_as_failure:
                buf = io.StringIO()
                _print_line(r, buf)
                out_lines.append(buf.getvalue().rstrip("\n"))
        if out_lines:
            text = "\n".join(out_lines)
            try:
                from tqdm import tqdm

                tqdm.write(text, file=stream)
            except ImportError:  # pragma: no cover
                print(text, file=stream)
            stream.flush()

    for test in by_test:
        if not remaining[test]:
            emit(test)

    def on_done(job, res):
        results.update(res)
        remaining[job.test].difference_update(res)
        if not remaining[job.test]:
            emit(job.test)

    log_path = None
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        log_path = Path(out) / "jobs.tsv"
    _execute(jobs_list, jobs, cache_dir, progress, on_done, log_path)
    lines = [judge(i) for i in range(len(selected))]
    if selection.diagnose:
        _diagnose(lines, selection, jobs, cache_dir, progress)
    report = Report(selection=selection, lines=lines, wall_s=time.time() - t0,
                    cache_hits=sum(len(v) for v in line_keys.values()) - n_emulated, emulated=n_emulated,
                    measured_dir=measured_dir, command=command, not_cached=not_cached)
    if out is not None:
        report.write(out)
    return report


# ------------------------------------------------------------------------------------------------
# CLI


def _print_summary(report: Report, file) -> None:
    print("\nTally per combination (exact = every printed field equal; ensemble = inside the atomic-order or "
          "seed spread):", file=file)
    hdr = f"{'run set':<11}{'gpu':<6}{'kernel':<10}{'valid.':<7}{'range':<6}{'tests':>6}{'exact':>6}{'ens.':>6}{'differ':>7}{'outside':>8}  fields that differ"
    print(hdr, file=file)
    for t in report.tallies():
        fields = ", ".join(f"{k}({v})" for k, v in sorted(t["fields"].items(), key=lambda kv: -kv[1]))
        print(f"{t['run_set']:<11}{t['gpu']:<6}{t['kernel']:<10}{t['validator']:<7}{t['range']:<6}{t['tests']:>6}"
              f"{t['reproduced']:>6}{t['in_ensemble']:>6}{t['differs']:>7}{t['outside']:>8}  {fields}", file=file)
    bad = [r for r in report.lines if r.counts_as_failure]
    if bad:
        print(f"\n{len(bad)} lines differ:", file=file)
        for r in bad:
            m = r.measured
            print(f"  {m.run_set} {m.gpu} {m.kernel}/{m.validator} {m.range} {m.test_name}: {', '.join(r.differing)}"
                  + (f"\n    diagnosis: {r.diagnosis}" if r.diagnosis else ""), file=file)
    agg = report.aggregate()
    if agg:
        cells = [(row, *_cell(row)) for row in agg]
        bad_cells = [c for c in cells if c[2] == "no"]
        print(f"\nThe study's aggregated tables: {len(cells)} cells, {sum(c[2] == 'yes' for c in cells)} equal, "
              f"{sum(c[2] == 'inside' for c in cells)} inside the ensemble/seed interval, {len(bad_cells)} differ"
              + (" (measured | emulated):" if bad_cells else " (tables in the report)."), file=file)
        for row, em, _ in bad_cells:
            print(f"  {row['run_set']:<11}{row['gpu']:<6}{row['range']:<4}{row['metric']:<18}{row['stat']:<10}"
                  f"{_g(row['measured']):>14} | {em}", file=file)
    s = Counter(r.status for r in report.lines)
    print(f"\n{len(report.lines)} lines: {s['reproduced']} reproduced exactly, {s['in_ensemble']} inside their "
          f"atomic-order ensemble, {s['in_distribution']} fair_rand0 lines inside the seed spread; "
          f"{s['differs']} differ, {s['outside_ensemble']} outside the ensemble, {s['outside_distribution']} "
          f"fair_rand0 lines outside the seed spread. Wall time {report.wall_s:.1f} s."
          + (f" Partial: {report.not_cached} selected lines not in the cache yet." if report.not_cached else ""),
          file=file)


def add_reproduce_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--measured", required=True, metavar="DIR",
                   help="the study's raw_results folder (e.g. ../shared/reference/fp16_study_raw_results)")
    p.add_argument("--run-set", default="fair_1", help=f"comma-separated, of {','.join(RUN_SETS)} (default fair_1)")
    p.add_argument("--gpu", default="mi100,mi200", help="mi100,mi200 (default both)")
    p.add_argument("--kernel", default="xdlops,nonxdlops", help="xdlops,nonxdlops (default both)")
    p.add_argument("--validator", default="cpu,gpu", help="cpu (-pv), gpu (-pv_with_gpu) (default both)")
    p.add_argument("--range", default="r0,r1,r4,r5", help="r0 [-1,1], r1 [-10,10], r4 [1,5], r5 [5,10] (default all)")
    p.add_argument("--tests", default=None, metavar="NAME,...", help="suite test names (default all 107)")
    p.add_argument("--smallest", type=int, default=None, metavar="N", help="only the N smallest tests (by work)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="worker processes (default 1)")
    p.add_argument("--out", default="out/study", metavar="DIR", help="report.md, reproduce.csv and .cache/ (default out/study)")
    p.add_argument("--members", type=int, default=ENSEMBLE_MEMBERS, help=f"atomic add orders per ensemble (default {ENSEMBLE_MEMBERS})")
    p.add_argument("--granularity", default="element",
                   help="atomic add order random per 'element' (default) or per output 'tile'")
    p.add_argument("--rand0-seeds", default=",".join(map(str, RAND0_SEEDS)), metavar="S,...",
                   help="seeds standing in for fair_rand0's clock seeds")
    p.add_argument("--show", default="all", help="print lines side by side: all (default), mismatches, none")
    p.add_argument("--no-diagnose", action="store_true", help="skip the diagnosis of lines that differ")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument("--cached-only", action="store_true",
                   help="emulate nothing: report the lines already in the cache (a partial report of a running reproduction)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_reproduce(args) -> int:
    """The ``study reproduce`` handler: the exit code (0 every selected line reproduced or inside its
    ensemble, 1 otherwise)."""
    try:
        seeds = tuple(int(s) for s in str(args.rand0_seeds).split(",") if s.strip())
    except ValueError:
        raise ValueError(f"--rand0-seeds: {args.rand0_seeds!r} is not a comma-separated list of integers") from None
    selection = Selection.from_options(run_set=args.run_set, gpu=args.gpu, kernel=args.kernel,
                                       validator=args.validator, range=args.range, tests=args.tests,
                                       smallest=args.smallest, members=args.members,
                                       granularity=args.granularity, rand0_seeds=seeds,
                                       diagnose=not args.no_diagnose)
    command = "fp16emu study reproduce " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in (("measured", args.measured), ("run_set", args.run_set),
                                                    ("gpu", args.gpu), ("kernel", args.kernel),
                                                    ("validator", args.validator), ("range", args.range),
                                                    ("tests", args.tests), ("smallest", args.smallest),
                                                    ("jobs", args.jobs), ("out", args.out)) if v is not None)
    report = reproduce(selection, args.measured, jobs=args.jobs, out=args.out,
                       cache_dir=False if args.no_cache else None,
                       progress=not args.no_progress, show=args.show, command=command,
                       cached_only=args.cached_only)
    _print_summary(report, sys.stdout)
    print(f"report: {Path(args.out) / 'report.md'}, {Path(args.out) / 'reproduce.csv'}")
    return report.exit_code


def register_cli(subparsers) -> argparse.ArgumentParser:
    """Add ``study`` (subcommand ``reproduce``) to an argparse subparsers object; the handler is
    ``args.func(args)`` and returns the exit code."""
    p = subparsers.add_parser("study", help="the 2022 fp16 study: reproduce its measured lines",
                              description="The 2022 AMD fp16 study (MI100/MI200, rocMLIR).")
    sub = p.add_subparsers(dest="study_command", required=True)
    r = sub.add_parser("reproduce", help="emulate the study's tests and compare every printed field",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    add_reproduce_arguments(r)
    r.set_defaults(func=run_reproduce)
    return p


def main(argv=None) -> int:
    """``python -m validation.study reproduce …`` (the same as ``fp16emu study reproduce …``)."""

    class _P(argparse.ArgumentParser):
        def error(self, message):
            raise ValueError(message)

    parser = _P(prog="python -m validation.study")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_P)
    register_cli(sub)
    try:
        args = parser.parse_args(["study", *(sys.argv[1:] if argv is None else argv)])
        return args.func(args)
    except ValueError as err:
        print(f"fp16emu: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fp16emu: interrupted (finished tests are cached; run again to resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
