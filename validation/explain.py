"""Explain a failure: attribute the kernel's error to its sources (SPEC §7, issue 6).

Five error sources, each a *switch* of the kernel model that can be turned on alone:

==========================  =====================================================================
``subnormal_flush``         fp16 inputs with |x| < 2^-14 set to +0: the ``flush_inputs`` field of
                            the unit (MI200 matrix cores; the cpu-ftz validator)
``order``                   the accumulation order: the kernel's gemmK order, zero padding and
                            split-K (with its fp32 atomic adds) vs the reference's loop order
``accumulation_rounding``   rounding inside the accumulation: the kernel's unit (fused exact,
                            pairwise, truncated, per-step fp32 FMA) vs an fp64 accumulator
``output_rounding``         the final fp32 → fp16 rounding (RNE) of the outputs that stay finite
``overflow``                outputs beyond the fp16 range becoming ±inf
==========================  =====================================================================

**The two ends.** With every switch off the model is the *reference*: ``reference="exact"``
(default) is the convolution accumulated in fp64 in the validator's loop order, nothing flushed,
rounded once to fp32 at the end and left there. It is not the exact real sum: it differs from it
by at most one fp32 rounding (2^-24 relative, 1/8192 of an fp16 ulp) plus K fp64 roundings —
exact enough to measure fp16 errors against, and it is what ``models.unit("fp64")`` computes.
``reference="validator"`` puts the chosen validation function at that end instead (its flush,
unit, order, and the fp16 RNE rounding that the 2022 verifier applied to the validation value,
``reference/study_results_2022.md`` finding 2): that explains the failing comparison itself.
With every switch on the model is the emulated kernel, bit for bit what ``validation.run.run``
gives. A variant S (the set of switches on) is computed by ``emu``: a unit from
``dataclasses.replace`` of the kernel's or the reference's :class:`models.units.Unit` with
``flush_inputs`` set by the flush switch, the kernel's or the reference's
:class:`emu.gemm.GemmOrder`, then an elementwise post-pass (the kernel's own fp32 → fp16 cast, on
the elements that stay finite and/or on those that overflow). ``validation`` implements no
arithmetic: the fp16 cast is numpy's (RNE, overflow to ±inf: the kernel's output conversion, as in
``validation.run``).

**Shared work.** Only flush, order and accumulation rounding change the GEMMs, so at most
2^3 = 8 GEMM variants run, in one pass over the convolution that gathers every operand chunk once;
a switch that cannot change anything is not computed twice (no subnormal or −0 input: flush is a
no-op; the kernel's order equals the reference's: order is a no-op; equal GEMM outputs are shared).
The 2^5 = 32 variants are then post-passes, and every distinct array is measured once with
:func:`validation.metrics.compare` against the reference.

**Shares.** v(S) = metric(reference, variant S). The Shapley share of source i is
Σ_{S∌i} |S|!(n−|S|−1)!/n! · (v(S∪{i}) − v(S)); the shares sum to v(all) − v(∅), and the
*interaction* reported is total − Σ shares = v(∅), which is 0 when the all-off variant is the
reference itself (always so here; reported so a non-zero value would show). ``main_effects``
gives v({i}) − v(∅) as well: total − Σ main effects is how far the sources are from additive.
Metrics that skip non-finite elements (maxima, RMS) lose an element that overflows, so overflow's
share there can be negative; its count is the metric ``n_nonfinite``.

**Elements.** For the ``top`` elements by epsilonDiff (non-finite mismatches first), the smallest
set of sources whose variant reproduces the kernel's value bit for bit (by size, then by the
sources' Shapley rank), and each source's Shapley share of that element's epsilonDiff.

Public API: :func:`explain` (a config), :func:`explain_problem` (a problem and tensors),
:class:`Explanation` (``.to_dict()``, ``.format_text()``, ``.plot()``), :func:`shapley`,
:func:`register_cli`.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from emu.conv import ConvArithmetic, ConvGemm, ConvProblem
from emu.gemm import GemmOrder
from emu.units import Family
from models import harness
from models.units import Unit
from models.units import unit as named_unit

from . import metrics as metrics_mod
from .run import HW_CHOICES, VALIDATOR_CHOICES, choice, plan, progress_bar

__all__ = [
    "SOURCES",
    "SOURCE_TITLES",
    "DEFAULT_METRICS",
    "REFERENCES",
    "FORMATS",
    "MetricShares",
    "ElementExplanation",
    "Explanation",
    "shapley",
    "explain",
    "explain_problem",
    "register_cli",
]

#: The error sources, in switch order (bit i of a subset mask is SOURCES[i]).
SOURCES = ("subnormal_flush", "order", "accumulation_rounding", "output_rounding", "overflow")
SOURCE_TITLES: Mapping[str, str] = {
    "subnormal_flush": "subnormal inputs flushed",
    "order": "accumulation order",
    "accumulation_rounding": "rounding inside the accumulation",
    "output_rounding": "final rounding to fp16",
    "overflow": "overflow to infinity",
}
_FLUSH, _ORDER, _ROUND, _OUT, _OVF = (1 << i for i in range(len(SOURCES)))
_N = len(SOURCES)
_ALL = (1 << _N) - 1
DEFAULT_METRICS = ("rms", "max_abs_diff", "max_epsilon_diff")
REFERENCES = ("exact", "validator")
FORMATS = ("text", "json")
_METRIC_TITLES = {"rms": "RMS", "max_abs_diff": "maxAbsDiff", "max_epsilon_diff": "maxEpsilonDiff",
                  "max_rel_diff": "maxRelDiff", "max_rel_diff_old": "maxRelDiff_old",
                  "ave_abs_diff": "aveAbsDiff", "ave_rel_diff": "aveRelDiff", "n_nonfinite": "non-finite count"}
_FP16_EXP_MASK = 0x7C00
#: metrics that count agreement (their reference value is N, not 0): never the verdict's subject
_AGREEMENT = ("n", "n_exact")


def _subset_label(mask: int) -> str:
    return "+".join(s for i, s in enumerate(SOURCES) if mask >> i & 1) or "none"


_jf = metrics_mod._json_float  # JSON-safe float: non-finite as "inf" / "-inf" / "nan"


# ------------------------------------------------------------------------------------------------
# Shapley values


def shapley(values: Sequence[float], n: int = _N) -> list[float]:
    """Shapley value of each of ``n`` players from ``values[mask]``, the worth of every coalition
    (bit i of ``mask`` = player i). Σ result = values[all] − values[0] (efficiency)."""
    if len(values) != 1 << n:
        raise ValueError(f"values: need {1 << n} coalition worths, got {len(values)}")
    weight = [math.factorial(s) * math.factorial(n - s - 1) / math.factorial(n) for s in range(n)]
    out = []
    for i in range(n):
        bit, total = 1 << i, 0.0
        for mask in range(1 << n):
            if not mask & bit:
                with np.errstate(invalid="ignore"):
                    total += weight[bin(mask).count("1")] * (float(values[mask | bit]) - float(values[mask]))
        out.append(total)
    return out


# ------------------------------------------------------------------------------------------------
# Result records


@dataclass(frozen=True)
class MetricShares:
    """One metric's attribution: ``total`` = metric(reference, kernel), ``shares`` the Shapley
    share of each source, ``interaction`` = total − Σ shares; ``values`` the metric of every
    variant (keys: the sources on, joined by "+", or "none")."""

    name: str
    total: float
    shares: Mapping[str, float]
    interaction: float
    main_effects: Mapping[str, float]
    values: Mapping[str, float]

    def fraction(self, source: str) -> float:
        """The share of ``source`` as a fraction of the total (nan when the total is 0)."""
        return self.shares[source] / self.total if self.total else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {"total": _jf(self.total), "shares": {s: _jf(v) for s, v in self.shares.items()},
                "interaction": _jf(self.interaction),
                "main_effects": {s: _jf(v) for s, v in self.main_effects.items()},
                "variants": {k: _jf(v) for k, v in self.values.items()}}


@dataclass(frozen=True)
class ElementExplanation:
    """One of the worst elements: where, the reference and kernel values, and the smallest set of
    sources (``sources``, ``size`` of it) whose variant gives the kernel's value bit for bit."""

    index: int
    coords: tuple[int, ...]
    reference: float
    kernel: float
    epsilon_diff: float
    abs_diff: float
    sources: tuple[str, ...]
    epsilon_shares: Mapping[str, float]

    @property
    def size(self) -> int:
        return len(self.sources)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "coords": list(self.coords), "reference": _jf(self.reference),
                "kernel": _jf(self.kernel), "epsilon_diff": _jf(self.epsilon_diff), "abs_diff": _jf(self.abs_diff),
                "sources": list(self.sources), "size": self.size,
                "epsilon_shares": {s: _jf(v) for s, v in self.epsilon_shares.items()}}


@dataclass
class Explanation:
    """What :func:`explain` found. ``metrics`` maps each metric name to its :class:`MetricShares`;
    ``elements`` are the worst elements; ``verdict`` the paragraph in words; ``inactive`` says which
    switches cannot change anything here and why; ``comparison`` is the full
    :class:`validation.metrics.ComparisonResult` of the kernel against the reference."""

    config: str
    direction: str
    shape: tuple[int, ...]
    hw: str | None
    kernel: str
    validator: str
    reference: str
    metrics: dict[str, MetricShares]
    elements: list[ElementExplanation]
    verdict: str
    inactive: dict[str, str]
    comparison: Any = field(repr=False, default=None)
    gemm_variants: int = 0
    compared_variants: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    #: with ``keep_arrays=True``: every variant's output (float32, the result tensor's shape), keyed
    #: like :attr:`MetricShares.values` ("none" is the reference, the five sources joined the kernel)
    arrays: dict[str, np.ndarray] | None = field(repr=False, default=None)

    def to_dict(self) -> dict[str, Any]:
        """``{"metrics": {METRIC: {"total", "shares", "interaction", …}}, "elements": [...],
        "verdict": "…"}`` plus the run's description; JSON-ready (non-finite floats as strings)."""
        return {
            "metrics": {k: m.to_dict() for k, m in self.metrics.items()},
            "elements": [e.to_dict() for e in self.elements],
            "verdict": self.verdict,
            "config": self.config, "direction": self.direction, "shape": list(self.shape), "hw": self.hw,
            "kernel": self.kernel, "validator": self.validator, "reference": self.reference,
            "sources": list(SOURCES), "inactive": dict(self.inactive),
            "element_sizes": _size_counts(self.elements),
            "gemm_variants": self.gemm_variants, "compared_variants": self.compared_variants,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }

    def format_text(self) -> str:
        ref = ("exact fp64 convolution (fp64 accumulation in the validator's order, rounded once to fp32)"
               if self.reference == "exact" else f"the validator {self.validator} (rounded to fp16 as the verifier did)")
        lines = [f"{self.config}: {self.direction}, result {'x'.join(map(str, self.shape))}",
                 f"kernel {self.kernel}" + (f" on {self.hw}" if self.hw else "") + f"; reference: {ref}"]
        for s, why in self.inactive.items():
            lines.append(f"  {s}: no effect here ({why})")
        width = max(len(s) for s in SOURCES)
        for name, m in self.metrics.items():
            lines.append(f"{_METRIC_TITLES.get(name, name)} = {m.total:.6g}")
            for s in SOURCES:
                v = m.shares[s]
                pct = f"{100 * v / m.total:6.1f}%" if m.total and math.isfinite(v) else "      -"
                lines.append(f"  {s:<{width}}  {v:12.6g}  {pct}")
            lines.append(f"  {'interaction':<{width}}  {m.interaction:12.6g}")
        if self.elements:
            lines.append(f"worst {len(self.elements)} elements by epsilonDiff (smallest set of sources reproducing "
                         f"the kernel's value bit for bit):")
            for e in self.elements:
                lines.append(f"  {e.coords}: ref {e.reference!r} kernel {e.kernel!r} eps {e.epsilon_diff:g} "
                             f"← {' + '.join(e.sources) or 'none'} ({e.size})")
            sizes = _size_counts(self.elements)
            lines.append("  sizes: " + ", ".join(f"{k} source(s): {v}" for k, v in sizes.items()))
        lines.append("verdict: " + self.verdict)
        lines.append(f"({self.gemm_variants} GEMM variants, {self.compared_variants} distinct outputs measured, "
                     f"{self.seconds.get('total', 0.0):.1f} s)")
        return "\n".join(lines)

    def summary(self) -> str:
        return self.format_text()

    def plot(self, ax: Any = None) -> Any:
        """Stacked bars of the shares per metric, each as a fraction of the metric's total
        (negative shares stack below zero); returns the matplotlib Axes."""
        import matplotlib.pyplot as plt  # optional dependency, imported only here

        if ax is None:
            _, ax = plt.subplots(figsize=(1.6 + 1.4 * max(1, len(self.metrics)), 3.8))
        names = list(self.metrics)
        colors = dict(zip(SOURCES + ("interaction",), plt.get_cmap("tab10").colors))
        pos = np.zeros(len(names))
        neg = np.zeros(len(names))
        for part in SOURCES + ("interaction",):
            fr = np.array([_fraction(self.metrics[n], part) for n in names])
            base = np.where(fr >= 0, pos, neg)
            ax.bar(range(len(names)), fr, bottom=base, color=colors[part], label=part.replace("_", " "))
            pos += np.where(fr >= 0, fr, 0)
            neg += np.where(fr < 0, fr, 0)
        ax.set_xticks(range(len(names)), [_METRIC_TITLES.get(n, n) for n in names])
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_ylabel("share of the total")
        ax.set_title(f"{self.kernel} on {self.hw or '-'}: error sources")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return ax


def _fraction(m: MetricShares, part: str) -> float:
    value = m.interaction if part == "interaction" else m.shares[part]
    if not m.total or not math.isfinite(value) or not math.isfinite(m.total):
        return 0.0
    return value / m.total


def _size_counts(elements: Sequence[ElementExplanation]) -> dict[int, int]:
    out: dict[int, int] = {}
    for e in elements:
        out[e.size] = out.get(e.size, 0) + 1
    return dict(sorted(out.items()))


# ------------------------------------------------------------------------------------------------
# The two ends and the variants


@dataclass(frozen=True)
class _End:
    """One end of the design: what each switch is when off (reference) or on (kernel)."""

    flush: bool
    units: tuple[Unit, ...]
    orders: tuple[GemmOrder, ...]
    output_rounding: bool
    overflow: bool


def _kernel_end(model, problem) -> _End:
    plan = model.plan(problem)
    units = tuple(g.unit for g in plan)
    fp16_out = not model.validator
    return _End(any(u.flush_inputs for u in units), units, tuple(g.order for g in plan), fp16_out, fp16_out)


def _reference_end(validator, problem, reference: str) -> _End:
    plan = validator.plan(problem)
    orders = tuple(g.order for g in plan)
    if reference == "exact":
        fp64 = named_unit("fp64")
        return _End(False, tuple(fp64 for _ in plan), orders, False, False)
    units = tuple(g.unit for g in plan)
    # the 2022 verifier rounded the validation value to fp16 (RNE) before comparing
    return _End(any(u.flush_inputs for u in units), units, orders, True, True)


def _flushable(arrays) -> bool:
    """Whether flushing inputs can change anything: a subnormal or a −0 among the patterns."""
    for a in arrays:
        if a is None:
            continue
        bits = np.asarray(a)
        bits = bits.view(np.uint16) if bits.dtype == np.float16 else bits.astype(np.uint16, copy=False)
        if np.any(((bits & _FP16_EXP_MASK) == 0) & (bits != 0)):
            return True
    return False


def _gemm_setting(mask: int, kend: _End, rend: _End, flush_matters: bool):
    """(units, orders) of the GEMM variant with the switches of ``mask`` on."""
    flush = (kend.flush if mask & _FLUSH else rend.flush) and flush_matters
    base = kend.units if mask & _ROUND else rend.units
    units = tuple(u if bool(u.flush_inputs) == flush else dataclasses.replace(u, flush_inputs=flush) for u in base)
    orders = kend.orders if mask & _ORDER else rend.orders
    return units, orders


def _order_key(order: GemmOrder, k: int):
    """What of an order reaches the arithmetic: the gemmK sequence (padding included), the split
    and the combination order (``pad_k`` 4 on a K that is a multiple of 4 changes nothing)."""
    seed = order.combine_seed if order.combine == "random" and order.split_k > 1 else None
    return order.sequence(k).tobytes(), order.split_k, order.combine if order.split_k > 1 else None, seed


def _gemm_key(units, orders, ks):
    return tuple(u.params for u in units), tuple(_order_key(o, k) for o, k in zip(orders, ks))


def _run_gemms(op: ConvGemm, settings, n_chunk, progress: bool, desc: str) -> list[np.ndarray]:
    """Every GEMM setting over the convolution in one pass: each operand chunk is gathered once."""
    bar = progress_bar(sum(s.n for s in op.subs) * op.problem.groups, progress, desc)
    try:
        return op.compute([ConvArithmetic(tuple(units), tuple(orders)) for units, orders in settings], n_chunk,
                          progress=None if bar is None else bar.update)
    finally:
        if bar is not None:
            bar.close()


class _Post:
    """The elementwise post-passes of one GEMM output: the kernel's fp32 → fp16 cast (numpy: RNE,
    overflow to ±inf) applied to the elements that stay finite (output rounding) and/or to those
    that overflow (overflow)."""

    def __init__(self, x32: np.ndarray):
        self.x32 = x32
        with np.errstate(over="ignore", invalid="ignore"):
            self.r16 = x32.astype(np.float16).astype(np.float32)
        self.ovf = np.isinf(self.r16) & np.isfinite(x32)
        self.has_overflow = bool(self.ovf.any())
        changed = self.r16.view(np.uint32) != x32.view(np.uint32)
        self.rounds = bool(np.any(changed & ~self.ovf))

    def effective(self, rounding: bool, overflow: bool) -> tuple[bool, bool]:
        return rounding and self.rounds, overflow and self.has_overflow

    def array(self, rounding: bool, overflow: bool) -> np.ndarray:
        rounding, overflow = self.effective(rounding, overflow)
        if rounding and overflow:
            return self.r16
        if rounding:
            return np.where(self.ovf, self.x32, self.r16)
        if overflow:
            return np.where(self.ovf, self.r16, self.x32)
        return self.x32


# ------------------------------------------------------------------------------------------------
# Options


def _metric_names(metrics) -> tuple[str, ...]:
    if isinstance(metrics, str):
        metrics = [m for m in (p.strip() for p in metrics.split(",")) if m]
    names = tuple(metrics)
    if not names:
        raise ValueError(f"metric: give at least one of {', '.join(metrics_mod.METRIC_NAMES)}")
    for name in names:
        if name not in metrics_mod.METRIC_NAMES:
            raise ValueError(f"metric: {name!r} is not one of {', '.join(metrics_mod.METRIC_NAMES)}")
    return tuple(dict.fromkeys(names))


def _top(top) -> int:
    try:
        value = int(top)
    except (TypeError, ValueError):
        raise ValueError(f"top: {top!r} is not a whole number ≥ 0") from None
    if value < 0 or value != float(top):
        raise ValueError(f"top: {top!r} is not a whole number ≥ 0")
    return value


# ------------------------------------------------------------------------------------------------
# The design


def explain_problem(problem: ConvProblem, kernel_model, validator_model, *, x=None, w=None, dy=None,
                    reference: str = "exact", metrics=DEFAULT_METRICS, top: int = 10, progress: bool = False,
                    n_chunk: int | None = None, name: str | None = None, keep_arrays: bool = False) -> Explanation:
    """Attribute the error of ``kernel_model`` (a :class:`models.kernels.KernelModel`) on
    ``problem`` with the tensors ``x`` / ``w`` / ``dy`` (float16 or uint16, as
    :class:`emu.conv.ConvGemm` takes them) to the five sources. ``validator_model`` gives the
    reference's order (and, with ``reference="validator"``, the whole reference end).
    ``keep_arrays``: keep every variant's output in :attr:`Explanation.arrays` (memory: up to 32
    result-sized float32 arrays)."""
    t_start = time.perf_counter()
    reference = choice(reference, REFERENCES, "reference")
    names = _metric_names(metrics)
    top = _top(top)
    op = ConvGemm(problem, x=x, w=w, dy=dy)
    kend = _kernel_end(kernel_model, problem)
    rend = _reference_end(validator_model, problem, reference)
    roles = {"filter": w, "input": x, "output": dy}
    flush_matters = _flushable(roles[r] for r in harness.DIRECTION_TENSORS[problem.direction])

    inactive: dict[str, str] = {}
    if kend.flush == rend.flush:
        inactive["subnormal_flush"] = ("neither end flushes subnormal inputs" if not kend.flush
                                       else "both ends flush subnormal inputs")
    elif not flush_matters:
        inactive["subnormal_flush"] = "no input is subnormal (or −0)"
    ks = [sub.k for sub in op.subs]
    if [_order_key(o, k) for o, k in zip(kend.orders, ks)] == [_order_key(o, k) for o, k in zip(rend.orders, ks)]:
        inactive["order"] = "the kernel's accumulation order is the reference's"
    if tuple(u.params for u in kend.units) == tuple(u.params for u in rend.units):
        inactive["accumulation_rounding"] = "the kernel's unit is the reference's"

    # 1. the GEMM variants (flush × order × accumulation rounding), deduplicated by setting
    gemm_masks = [m for m in range(1 << 3)]
    settings, key_of_mask, index_of_key = [], {}, {}
    for m in gemm_masks:
        units, orders = _gemm_setting(m, kend, rend, flush_matters)
        key = _gemm_key(units, orders, ks)
        if key not in index_of_key:
            index_of_key[key] = len(settings)
            settings.append((units, orders))
        key_of_mask[m] = index_of_key[key]
    t0 = time.perf_counter()
    gemm_out = _run_gemms(op, settings, n_chunk, progress, f"explain: {len(settings)} GEMM variants")
    t_gemm = time.perf_counter() - t0
    # equal outputs from different settings are one array (e.g. exact sums in every order)
    rep = list(range(len(gemm_out)))
    for i in range(len(gemm_out)):
        for j in range(i):
            if rep[j] == j and np.array_equal(gemm_out[i].view(np.uint32), gemm_out[j].view(np.uint32)):
                rep[i] = j
                break
    posts: dict[int, _Post] = {}

    def post(g: int) -> _Post:
        if g not in posts:
            posts[g] = _Post(gemm_out[g])
        return posts[g]

    def variant_key(mask: int):
        g = rep[key_of_mask[mask & 0b111]]
        rounding = bool(kend.output_rounding if mask & _OUT else rend.output_rounding)
        overflow = bool(kend.overflow if mask & _OVF else rend.overflow)
        return (g, *post(g).effective(rounding, overflow))

    shape = problem.tensor_shape(problem.result_role)

    def array(key) -> np.ndarray:
        g, rounding, overflow = key
        return post(g).array(rounding, overflow).reshape(shape)

    # 2. measure every distinct variant against the reference, one GEMM output at a time (its
    #    post-passes then dropped); the kernel first, for its worst elements
    t0 = time.perf_counter()
    keys = {0: variant_key(0), _ALL: variant_key(_ALL)}
    ref = array(keys[0])
    kern = array(keys[_ALL])
    measured: dict[Any, Any] = {}
    measured[keys[_ALL]] = kernel_cmp = metrics_mod.compare(ref, kern, dtype_hint="fp16", top=top)
    picked = [e for e in kernel_cmp.nonfinite_elements] + [e for e in kernel_cmp.worst if e.epsilon_diff > 0]
    picked = picked[:top]
    idx = np.array([e.index for e in picked], dtype=np.int64)
    at: dict[Any, np.ndarray] = {keys[_ALL]: kern.reshape(-1)[idx]}
    kept: dict[Any, np.ndarray] = {keys[_ALL]: kern} if keep_arrays else {}
    for g in dict.fromkeys(rep[key_of_mask[m & 0b111]] for m in range(1 << _N)):
        for mask in range(1 << _N):
            if rep[key_of_mask[mask & 0b111]] != g:
                continue
            keys[mask] = key = variant_key(mask)
            if key in measured:
                continue
            arr = array(key)
            measured[key] = metrics_mod.compare(ref, arr, dtype_hint="fp16", top=0)
            at[key] = arr.reshape(-1)[idx]
            if keep_arrays:
                kept[key] = arr
            del arr
        posts.pop(g, None)  # ref and kern keep their arrays alive; the rest is freed
        if g not in (keys[0][0], keys[_ALL][0]):
            gemm_out[g] = None
    t_cmp = time.perf_counter() - t0

    # 3. Shapley shares per metric
    table: dict[str, MetricShares] = {}
    for mname in names:
        values = [measured[keys[mask]].metric(mname) for mask in range(1 << _N)]
        shares = shapley(values)
        total = values[_ALL]
        with np.errstate(invalid="ignore"):
            interaction = total - math.fsum(shares) if all(map(math.isfinite, shares)) else math.nan
        table[mname] = MetricShares(
            name=mname, total=total, shares=dict(zip(SOURCES, shares)), interaction=interaction,
            main_effects={s: values[1 << i] - values[0] for i, s in enumerate(SOURCES)},
            values={_subset_label(mask): values[mask] for mask in range(1 << _N)})

    # 4. the worst elements: smallest reproducing set, per-element shares of epsilonDiff
    primary = _primary_metric(table)
    rank = _shapley_rank(table.get(primary) if primary else None)
    subsets = sorted(range(1 << _N), key=lambda m: (bin(m).count("1"), sorted(rank.index(i) for i in range(_N) if m >> i & 1)))
    ref_flat = ref.reshape(-1)
    elements = []
    for j, e in enumerate(picked):
        r = ref_flat[idx[j]]
        kbits = np.float32(at[keys[_ALL]][j]).view(np.uint32)
        smallest = next(m for m in subsets if np.float32(at[keys[m]][j]).view(np.uint32) == kbits)
        eps = [_epsilon(r, at[keys[mask]][j]) for mask in range(1 << _N)]
        elements.append(ElementExplanation(
            index=int(e.index), coords=tuple(e.coords), reference=float(r), kernel=float(at[keys[_ALL]][j]),
            epsilon_diff=float(e.epsilon_diff), abs_diff=float(e.abs_diff),
            sources=tuple(s for i, s in enumerate(SOURCES) if smallest >> i & 1),
            epsilon_shares=dict(zip(SOURCES, shapley(eps)))))

    out = Explanation(
        config=name or "problem", direction=problem.direction, shape=tuple(shape),
        hw=getattr(kernel_model, "hw", None), kernel=kernel_model.name, validator=validator_model.name,
        reference=reference, metrics=table, elements=elements, verdict="", inactive=inactive,
        comparison=kernel_cmp, gemm_variants=len(settings), compared_variants=len(measured),
        seconds={"gemm": t_gemm, "compare": t_cmp},
        arrays={_subset_label(mask): kept[keys[mask]] for mask in range(1 << _N)} if keep_arrays else None)
    eps_shares = table.get("max_epsilon_diff")
    if eps_shares is None:
        values = [measured[keys[mask]].metric("max_epsilon_diff") for mask in range(1 << _N)]
        eps_shares = MetricShares("max_epsilon_diff", values[_ALL], dict(zip(SOURCES, shapley(values))), 0.0, {}, {})
    out.verdict = _verdict(out, kend, eps_shares)
    out.seconds["total"] = time.perf_counter() - t_start
    return out


def _epsilon(ref: float, value: float) -> float:
    """epsilonDiff of one value against the reference, in fp16 ulps (validation.metrics.spacing)."""
    r, v = float(ref), float(value)
    if r == v or (math.isnan(r) and math.isnan(v)):
        return 0.0
    if not (math.isfinite(r) and math.isfinite(v)):
        return math.inf
    return abs(r - v) / float(metrics_mod.spacing(min(abs(r), abs(v)), "fp16", "ulp"))


def _primary_metric(table: Mapping[str, MetricShares]) -> str | None:
    """The metric the verdict speaks of: RMS if asked for and non-zero, else the first non-zero."""
    ok = [n for n, m in table.items() if n not in _AGREEMENT and m.total and math.isfinite(m.total)
          and all(math.isfinite(v) for v in m.shares.values())]
    if "rms" in ok:
        return "rms"
    return ok[0] if ok else None


def _shapley_rank(m: MetricShares | None) -> list[int]:
    """Source indices by descending share (ties and no metric: switch order)."""
    if m is None:
        return list(range(_N))
    return sorted(range(_N), key=lambda i: (-m.shares[SOURCES[i]] if math.isfinite(m.shares[SOURCES[i]]) else 0.0, i))


# ------------------------------------------------------------------------------------------------
# The verdict


_FAMILY_WORDS = {
    Family.FUSED_EXACT: "exact fused dot products with one fp32 rounding per group of {g}",
    Family.PAIRWISE: "a pairwise fp32 adder tree over groups of {g}",
    Family.TRUNCATED_FUSED: "truncated fused dot products over groups of {g}",
    Family.TWO_STAGE: "two-stage truncated fused dot products over groups of {g}",
    Family.FMA: "one fp32 rounding per product (sequential FMA)",
    Family.FP64: "an fp64 accumulator",
}


def _describe(source: str, expl: Explanation, kend: _End) -> str:
    hw = (expl.hw or "").upper()
    unit = kend.units[0] if kend.units else None
    matrix = unit is not None and unit.family not in (Family.FMA, Family.FP64)
    if source == "subnormal_flush":
        return f"subnormal inputs flushed by the {hw} matrix unit" if matrix and hw else "subnormal inputs flushed"
    if source == "order":
        split = max((o.split_k for o in kend.orders), default=1)
        extra = f" with split-K over {split} chunks" if split > 1 else ""
        ref = "the validator's loop order" if expl.reference == "validator" else "the reference's loop order"
        return f"the accumulation order (the kernel's gemmK order{extra} against {ref})"
    if source == "accumulation_rounding":
        words = _FAMILY_WORDS[Family(unit.family)].format(g=unit.group_size) if unit is not None else "the unit"
        against = "the validator's arithmetic" if expl.reference == "validator" else "fp64"
        who = f"the {hw} matrix unit: " if matrix and hw else ""
        return f"rounding inside the accumulation ({who}{words}, against {against})"
    if source == "output_rounding":
        return "the final rounding to fp16"
    return "overflow to ±inf beyond the fp16 range"


_ADVICE = {
    "subnormal_flush": "use inputs away from zero (e.g. [1, 5]) or flush subnormal inputs in the validator "
                       "(--validator cpu-ftz)",
    "order": "accumulate the validation in the kernel's gemmK order, or budget the order's error in the threshold "
             "(it grows with the reduction length)",
    "accumulation_rounding": "let the validator mimic the unit (e.g. cpu-acc4 for fused groups of 4) or derive the "
                             "threshold from the unit's rounding error bound",
    "output_rounding": "round the validation to fp16 (RNE) before comparing, or allow one fp16 ulp",
    "overflow": "use a smaller input range, or count infinities apart from the error metrics",
}


def _culprit(m: MetricShares) -> tuple[str, str | None]:
    """(the largest source, the largest one besides the final fp16 rounding, if any is > 0)."""
    ranked = sorted(SOURCES, key=lambda s: -m.shares[s])
    rest = [s for s in ranked if s != "output_rounding" and m.shares[s] > 0]
    return ranked[0], (rest[0] if rest else None)


def _pct(value: float, of: float) -> str:
    p = 100 * value / of
    if 99.95 <= p < 100:
        return ">99.9%"
    if 0 < p < 0.05:
        return "<0.1%"
    if 99.5 <= p < 99.95 or 0 < p < 0.5:
        return f"{p:.1f}%"
    return f"{p:.0f}%"


def _verdict(expl: Explanation, kend: _End, eps_shares: MetricShares | None) -> str:
    primary = _primary_metric(expl.metrics)
    cmp_ = expl.comparison
    nonfinite = cmp_.nonfinite.n_mismatch if cmp_ is not None else 0
    ref = "the validator" if expl.reference == "validator" else "the exact (fp64) convolution"
    lead = ""
    if nonfinite:
        lead = (f"{nonfinite:,} of {cmp_.n:,} outputs ({_pct(nonfinite, cmp_.n)}) are ±inf where {ref} is finite: "
                f"overflow beyond the fp16 range (the finite metrics skip them). ")
    if primary is None:
        if nonfinite:
            return lead + f"Nothing else differs. Advice: {_ADVICE['overflow']}."
        if any(m.total for n, m in expl.metrics.items() if n not in _AGREEMENT):
            return "The metrics are not finite; no share can be computed (see the per-variant values)."
        return f"The kernel reproduces {ref}: every chosen metric is 0, nothing to attribute."
    m = expl.metrics[primary]
    title = _METRIC_TITLES.get(primary, primary)
    first, besides = _culprit(m)
    text = lead + (f"{_pct(m.shares[first], m.total)} of the {title} ({m.total:.3g}) against {ref} comes from "
                   f"{_describe(first, expl, kend)}")
    if first == "output_rounding" and besides is not None:
        rest = m.total - m.shares["output_rounding"]
        text += (f", which every fp16 output carries; of the remaining {rest:.3g}, {_pct(m.shares[besides], rest)} "
                 f"comes from {_describe(besides, expl, kend)}")
    else:
        others = [s for s in SOURCES if s != first and m.shares[s] / m.total >= 0.05]
        if others:
            text += "; " + ", ".join(f"{_pct(m.shares[s], m.total)} from {_describe(s, expl, kend)}" for s in others)
    text += "."
    if abs(m.interaction) > 1e-9 * abs(m.total):
        text += f" An interaction of {m.interaction:.3g} remains unattributed."
    culprit = besides if first == "output_rounding" and besides is not None else first
    if cmp_ is not None:
        eps = cmp_.max_epsilon_diff
        if eps <= 1:
            text += f" Every {'finite ' if nonfinite else ''}error stays within one fp16 ulp (maxEpsilonDiff {eps:.3g})."
        elif eps_shares is not None and eps_shares.total:
            e_first = max(SOURCES, key=lambda s: eps_shares.shares[s])
            text += (f" The largest {'finite ' if nonfinite else ''}error, {eps:.3g} fp16 ulps, is "
                     f"{_pct(eps_shares.shares[e_first], eps_shares.total)} {SOURCE_TITLES[e_first]}.")
            if e_first != "output_rounding":
                culprit = e_first
    if nonfinite:
        culprit = "overflow"
    n_in = sum(culprit in e.sources for e in expl.elements)
    if n_in:
        text += (f" {SOURCE_TITLES[culprit].capitalize()} is in the smallest set of sources that reproduces "
                 f"{n_in} of the {len(expl.elements)} worst elements bit for bit.")
    if cmp_ is not None and cmp_.max_epsilon_diff <= 1 and not nonfinite:
        return text + " Nothing beyond one fp16 ulp: a threshold of one ulp (maxEpsilonDiff ≤ 1) passes this kernel."
    return text + f" Advice: {_ADVICE[culprit]}."


# ------------------------------------------------------------------------------------------------
# From a config


def explain(config, *, hw: str = "mi200", kernel: str | None = None, validator: str = "cpu",
            reference: str = "exact", perf_config: str | None = None, rand_min: int | None = None,
            rand_max: int | None = None, rand_type: str | None = None, seed: int | None = None,
            metrics=DEFAULT_METRICS, top: int = 10, progress: bool | None = None,
            n_chunk: int | None = None, keep_arrays: bool = False) -> Explanation:
    """Explain ``config`` (a :class:`validation.configs.Config` or any text
    :func:`validation.configs.parse_config` accepts, e.g. a suite test name) on ``hw``.

    ``kernel``: xdlops / nonxdlops (default: the config's own); ``validator``: cpu, gpu, cpu-acc4,
    cpu-ftz, mlir (the reference's loop order, or the whole reference with
    ``reference="validator"``); ``rand_min``/``rand_max``/``rand_type``/``seed`` override the
    config's random data; ``metrics``: names of :data:`validation.metrics.METRIC_NAMES` (a list or
    "rms,max_abs_diff"); ``top``: how many worst elements to explain."""
    config, kmodel, vmodel = plan(config, hw=hw, kernel=kernel, validator=validator, perf_config=perf_config)
    hw = kmodel.hw or choice(hw, HW_CHOICES, "hw")
    reference = choice(reference, REFERENCES, "reference")
    if vmodel.count == "inbounds":
        raise ValueError("validator: +inbounds is not one of the explanation's switches; explain the test with "
                         "the same validator without it")
    names = _metric_names(metrics)
    top = _top(top)
    if rand_type is not None:
        rand_type = choice(rand_type, ("float", "int"), "rand_type")
    problem = config.problem
    kw = config.harness_kwargs()
    for key, value in (("seed", seed), ("rand_min", rand_min), ("rand_max", rand_max), ("rand_type", rand_type)):
        if value is not None:
            kw[key] = value
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        inputs = harness.harness_inputs(problem, **kw)
    t_inputs = time.perf_counter() - t0
    macs = sum(s.g * s.m * s.n * s.k for s in config.gemms)
    out = explain_problem(problem, kmodel, vmodel, x=inputs.get("input"), w=inputs.get("filter"),
                          dy=inputs.get("output"), reference=reference, metrics=names, top=top,
                          progress=progress if progress is not None else macs > 2e9, n_chunk=n_chunk,
                          name=config.name or " ".join(config.source.split())[:100], keep_arrays=keep_arrays)
    out.hw = hw
    out.seconds = {"inputs": t_inputs, **out.seconds, "total": out.seconds["total"] + t_inputs}
    return out


# ------------------------------------------------------------------------------------------------
# Command line


def register_cli(subparsers):
    """Add the ``explain`` subcommand to an argparse ``subparsers``; its handler (``func``)
    returns the exit code (0). Bad option values raise ValueError naming the option and the
    allowed values."""
    p = subparsers.add_parser(
        "explain", help="attribute a test's error to its sources (Shapley shares over 5 switches)",
        description="CONFIG: a miopen-gen/rocmlir-gen argument string, a lit RUN line, an MIOpenDriver conv command, "
                    "or a suite test name (quote it). Runs the 2^5 factorial design over the error sources "
                    f"({', '.join(SOURCES)}) between the exact fp64 convolution and the emulated kernel.")
    p.add_argument("config", nargs="?")
    p.add_argument("--config", dest="config_option", default=None, help="the CONFIG, when it starts with '-'")
    p.add_argument("--hw", default="mi200", help=f"{', '.join(HW_CHOICES)} (default mi200)")
    p.add_argument("--kernel", default=None, help="xdlops or nonxdlops (default: the config's own)")
    p.add_argument("--validator", default="cpu", help=f"{', '.join(VALIDATOR_CHOICES)} (default cpu): the reference's order")
    p.add_argument("--reference", default="exact", help="exact (fp64 convolution, default) or validator")
    p.add_argument("--perf-config", default=None, help="rocMLIR tuning string (default: the 2022 default)")
    p.add_argument("--rand-min", type=int, default=None)
    p.add_argument("--rand-max", type=int, default=None)
    p.add_argument("--rand-type", default=None, help="float or int (default: the config's)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--metric", default=",".join(DEFAULT_METRICS),
                   help=f"comma-separated metrics (default {','.join(DEFAULT_METRICS)})")
    p.add_argument("--top", default="10", help="worst elements to explain (default 10)")
    p.add_argument("--format", default="text", help="text or json")
    p.add_argument("--plot", default=None, metavar="FILE", help="save the stacked-bar chart of the shares")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_explain)
    return p


def _cmd_explain(args) -> int:
    import json

    fmt = choice(args.format, FORMATS, "--format")
    config = args.config if args.config is not None else args.config_option
    if not config:
        raise ValueError("explain: give a CONFIG (an argument string, a RUN line, an MIOpenDriver command or a suite "
                         "test name)")
    try:
        top = _top(args.top)
    except ValueError:
        raise ValueError(f"--top: {args.top!r} is not a whole number ≥ 0") from None
    try:
        names = _metric_names(args.metric)
    except ValueError as err:
        raise ValueError(f"--{err}") from None
    result = explain(config, hw=args.hw, kernel=args.kernel, validator=args.validator, reference=args.reference,
                     perf_config=args.perf_config, rand_min=args.rand_min, rand_max=args.rand_max,
                     rand_type=args.rand_type, seed=args.seed, metrics=names, top=top,
                     progress=False if args.no_progress else None)
    if fmt == "json":
        print(json.dumps(result.to_dict(), indent=1, allow_nan=False))
    else:
        print(result.format_text())
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        ax = result.plot()
        ax.figure.savefig(args.plot, bbox_inches="tight")
    return 0
