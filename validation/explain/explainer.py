"""The factorial design: every variant between the reference and the kernel computed and measured
(:func:`explain_problem`), the Shapley shares per metric, the worst elements' smallest reproducing
set of sources, and :func:`explain`, which does this for a config."""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from typing import Any

import numpy as np

from emu.conv import ConvGemm, ConvProblem
from emu.formats import resolve_format
from models import harness
from models.hardware import check_hardware

from .. import metrics as metrics_mod
from ..configs import check_rand_bound, check_seed
from ..progress import auto_progress, progress_bar
from ..run.inputs import resolve_inputs, user_tensors
from ..run.runner import choice, plan
from .results import ElementExplanation, Explanation, MetricShares
from .sources import (
    ALL_ON,
    N_SOURCES,
    OUT_BIT,
    OVF_BIT,
    SOURCES,
    shapley,
    subset_label,
)
from .variants import (
    Post,
    flushable,
    gemm_key,
    gemm_setting,
    kernel_end,
    order_key,
    reference_end,
    run_gemms,
)
from .verdict import primary_metric, write_verdict

DEFAULT_METRICS = ("rms", "max_abs_diff", "max_epsilon_diff")
REFERENCES = ("exact", "validator")


def metric_names(metrics) -> tuple[str, ...]:
    """The metric names asked for (a sequence or "rms,max_abs_diff"), checked against
    :data:`validation.metrics.METRIC_NAMES`, duplicates dropped; ValueError naming the bad one."""
    if isinstance(metrics, str):
        metrics = [m for m in (p.strip() for p in metrics.split(",")) if m]
    names = tuple(metrics)
    if not names:
        raise ValueError(f"metric: give at least one of {', '.join(metrics_mod.METRIC_NAMES)}")
    for name in names:
        if name not in metrics_mod.METRIC_NAMES:
            raise ValueError(f"metric: {name!r} is not one of {', '.join(metrics_mod.METRIC_NAMES)}")
    return tuple(dict.fromkeys(names))


def check_top(top) -> int:
    """``top`` as a whole number ≥ 0 (how many worst elements to explain); ValueError otherwise."""
    try:
        value = int(top)
    except (TypeError, ValueError):
        raise ValueError(f"top: {top!r} is not a whole number ≥ 0") from None
    if value < 0 or value != float(top):
        raise ValueError(f"top: {top!r} is not a whole number ≥ 0")
    return value


def explain_problem(
    problem: ConvProblem,
    kernel_model,
    validator_model,
    *,
    x=None,
    w=None,
    dy=None,
    reference: str = "exact",
    metrics=DEFAULT_METRICS,
    top: int = 10,
    progress: bool = False,
    n_chunk: int | None = None,
    name: str | None = None,
    keep_arrays: bool = False,
) -> Explanation:
    """Attribute the error of ``kernel_model`` (a :class:`models.kernels.KernelModel`) on
    ``problem`` with the tensors ``x`` / ``w`` / ``dy`` to the five sources. The tensors are of
    the models' format (``kernel_model.input``: fp16 as float16 or uint16 patterns, bf16 as
    ``ml_dtypes.bfloat16`` or uint16 patterns, as :class:`emu.conv.ConvGemm` takes them); the
    switches then mean that format's flush (below its smallest normal, where the unit flushes),
    its output rounding and overflow, and epsilonDiff is in its ulps. ``validator_model`` (of the
    same format) gives the reference's order (and, with ``reference="validator"``, the whole
    reference end). ``keep_arrays``: keep every variant's output in :attr:`Explanation.arrays`
    (memory: up to 32 result-sized float32 arrays). ValueError when the two models' formats
    differ."""
    t_start = time.perf_counter()
    reference = choice(reference, REFERENCES, "reference")
    names = metric_names(metrics)
    top = check_top(top)
    fmt = getattr(kernel_model, "input", "fp16")
    v_fmt = getattr(validator_model, "input", "fp16")
    if v_fmt != fmt:
        raise ValueError(f"validator_model: multiplies {v_fmt} tensors, the kernel {fmt}; give both one format")
    op = ConvGemm(problem, x=x, w=w, dy=dy, fmt=fmt)
    kend = kernel_end(kernel_model, problem)
    rend = reference_end(validator_model, problem, reference)
    roles = {"filter": w, "input": x, "output": dy}
    flush_matters = flushable((roles[r] for r in harness.DIRECTION_TENSORS[problem.direction]), fmt)

    inactive: dict[str, str] = {}
    if kend.flush == rend.flush:
        inactive["subnormal_flush"] = (
            "neither end flushes subnormal inputs" if not kend.flush else "both ends flush subnormal inputs"
        )
    elif not flush_matters:
        inactive["subnormal_flush"] = (
            "no input is subnormal (or −0)" if fmt == "fp16" else f"no input is {fmt}-subnormal (below 2^-126) or −0"
        )
    ks = [sub.k for sub in op.subs]
    if [order_key(o, k) for o, k in zip(kend.orders, ks)] == [order_key(o, k) for o, k in zip(rend.orders, ks)]:
        inactive["order"] = "the kernel's accumulation order is the reference's"
    if tuple(u.params for u in kend.units) == tuple(u.params for u in rend.units):
        inactive["accumulation_rounding"] = "the kernel's unit is the reference's"

    # 1. the GEMM variants (flush × order × accumulation rounding), deduplicated by setting
    gemm_masks = [m for m in range(1 << 3)]
    settings, key_of_mask, index_of_key = [], {}, {}
    for m in gemm_masks:
        units, orders = gemm_setting(m, kend, rend, flush_matters)
        key = gemm_key(units, orders, ks)
        if key not in index_of_key:
            index_of_key[key] = len(settings)
            settings.append((units, orders))
        key_of_mask[m] = index_of_key[key]
    t0 = time.perf_counter()
    gemm_out = run_gemms(op, settings, n_chunk, progress, f"explain: {len(settings)} GEMM variants")
    t_gemm = time.perf_counter() - t0
    # equal outputs from different settings are one array (e.g. exact sums in every order)
    rep = list(range(len(gemm_out)))
    for i in range(len(gemm_out)):
        for j in range(i):
            if rep[j] == j and np.array_equal(gemm_out[i].view(np.uint32), gemm_out[j].view(np.uint32)):
                rep[i] = j
                break
    if fmt != "fp16" and not any(_overflows(g, fmt) for g in gemm_out):
        f = resolve_format(fmt)
        inactive["overflow"] = (
            f"no output reaches {fmt}'s overflow (|x| ≥ {_overflow_limit(fmt):.4g}, the top of fp32's range: "
            f"{fmt} has {f.exponent_bits} exponent bits, as fp32)"
        )
    posts: dict[int, Post] = {}

    def post(g: int) -> Post:
        if g not in posts:
            posts[g] = Post(gemm_out[g], fmt)
        return posts[g]

    def variant_key(mask: int):
        g = rep[key_of_mask[mask & 0b111]]
        rounding = bool(kend.output_rounding if mask & OUT_BIT else rend.output_rounding)
        overflow = bool(kend.overflow if mask & OVF_BIT else rend.overflow)
        return (g, *post(g).effective(rounding, overflow))

    shape = problem.tensor_shape(problem.result_role)

    def array(key) -> np.ndarray:
        g, rounding, overflow = key
        return post(g).array(rounding, overflow).reshape(shape)

    # 2. measure every distinct variant against the reference, one GEMM output at a time (its
    #    post-passes then dropped); the kernel first, for its worst elements
    t0 = time.perf_counter()
    keys = {0: variant_key(0), ALL_ON: variant_key(ALL_ON)}
    ref = array(keys[0])
    kern = array(keys[ALL_ON])
    measured: dict[Any, Any] = {}
    measured[keys[ALL_ON]] = kernel_cmp = metrics_mod.compare(ref, kern, dtype_hint=fmt, top=top)
    picked = [e for e in kernel_cmp.nonfinite_elements] + [e for e in kernel_cmp.worst if e.epsilon_diff > 0]
    picked = picked[:top]
    idx = np.array([e.index for e in picked], dtype=np.int64)
    at: dict[Any, np.ndarray] = {keys[ALL_ON]: kern.reshape(-1)[idx]}
    kept: dict[Any, np.ndarray] = {keys[ALL_ON]: kern} if keep_arrays else {}
    bar = progress_bar(1 << N_SOURCES, progress, "explain: measuring the variants", unit="variant")
    try:
        for g in dict.fromkeys(rep[key_of_mask[m & 0b111]] for m in range(1 << N_SOURCES)):
            for mask in range(1 << N_SOURCES):
                if rep[key_of_mask[mask & 0b111]] != g:
                    continue
                if bar is not None:
                    bar.update(1)
                keys[mask] = key = variant_key(mask)
                if key in measured:
                    continue
                arr = array(key)
                measured[key] = metrics_mod.compare(ref, arr, dtype_hint=fmt, top=0)
                at[key] = arr.reshape(-1)[idx]
                if keep_arrays:
                    kept[key] = arr
                del arr
            posts.pop(g, None)  # ref and kern keep their arrays alive; the rest is freed
            if g not in (keys[0][0], keys[ALL_ON][0]):
                gemm_out[g] = None
    finally:
        if bar is not None:
            bar.close()
    t_cmp = time.perf_counter() - t0

    # 3. Shapley shares per metric
    table: dict[str, MetricShares] = {}
    for mname in names:
        values = [measured[keys[mask]].metric(mname) for mask in range(1 << N_SOURCES)]
        shares = shapley(values)
        total = values[ALL_ON]
        with np.errstate(invalid="ignore"):
            interaction = total - math.fsum(shares) if all(map(math.isfinite, shares)) else math.nan
        table[mname] = MetricShares(
            name=mname,
            total=total,
            shares=dict(zip(SOURCES, shares)),
            interaction=interaction,
            main_effects={s: values[1 << i] - values[0] for i, s in enumerate(SOURCES)},
            values={subset_label(mask): values[mask] for mask in range(1 << N_SOURCES)},
        )

    # 4. the worst elements: smallest reproducing set, per-element shares of epsilonDiff
    primary = primary_metric(table)
    rank = _shapley_rank(table.get(primary) if primary else None)
    subsets = sorted(
        range(1 << N_SOURCES),
        key=lambda m: (m.bit_count(), sorted(rank.index(i) for i in range(N_SOURCES) if m >> i & 1)),
    )
    ref_flat = ref.reshape(-1)
    elements = []
    for j, e in enumerate(picked):
        r = ref_flat[idx[j]]
        kbits = np.float32(at[keys[ALL_ON]][j]).view(np.uint32)
        smallest = next(m for m in subsets if np.float32(at[keys[m]][j]).view(np.uint32) == kbits)
        eps = [_epsilon(r, at[keys[mask]][j], fmt) for mask in range(1 << N_SOURCES)]
        elements.append(
            ElementExplanation(
                index=int(e.index),
                coords=tuple(e.coords),
                reference=float(r),
                kernel=float(at[keys[ALL_ON]][j]),
                epsilon_diff=float(e.epsilon_diff),
                abs_diff=float(e.abs_diff),
                sources=tuple(s for i, s in enumerate(SOURCES) if smallest >> i & 1),
                epsilon_shares=dict(zip(SOURCES, shapley(eps))),
            )
        )

    out = Explanation(
        config=name or "problem",
        direction=problem.direction,
        shape=tuple(shape),
        hw=getattr(kernel_model, "hw", None),
        kernel=kernel_model.name,
        validator=validator_model.name,
        reference=reference,
        metrics=table,
        elements=elements,
        verdict="",
        inactive=inactive,
        comparison=kernel_cmp,
        gemm_variants=len(settings),
        compared_variants=len(measured),
        seconds={"gemm": t_gemm, "compare": t_cmp},
        arrays={subset_label(mask): kept[keys[mask]] for mask in range(1 << N_SOURCES)} if keep_arrays else None,
        format=fmt,
    )
    eps_shares = table.get("max_epsilon_diff")
    if eps_shares is None:
        values = [measured[keys[mask]].metric("max_epsilon_diff") for mask in range(1 << N_SOURCES)]
        eps_shares = MetricShares("max_epsilon_diff", values[ALL_ON], dict(zip(SOURCES, shapley(values))), 0.0, {}, {})
    out.verdict = write_verdict(out, kend, eps_shares)
    out.seconds["total"] = time.perf_counter() - t_start
    return out


def _epsilon(ref: float, value: float, fmt: str = "fp16") -> float:
    """epsilonDiff of one value against the reference, in ulps of ``fmt`` (validation.metrics.spacing)."""
    r, v = float(ref), float(value)
    if r == v or (math.isnan(r) and math.isnan(v)):
        return 0.0
    if not (math.isfinite(r) and math.isfinite(v)):
        return math.inf
    return abs(r - v) / float(metrics_mod.spacing(min(abs(r), abs(v)), fmt, "ulp"))


def _overflow_limit(fmt: str) -> float:
    """The smallest magnitude that rounds (RNE) to ±inf in ``fmt``: the largest finite value plus
    half its ulp (the tie rounds up: the largest value's last fraction bit is odd)."""
    f = resolve_format(fmt)
    return f.max_finite + 2.0 ** (f.emax - f.fraction_bits - 1)


def _overflows(x32: np.ndarray, fmt: str) -> bool:
    """Whether a finite fp32 output of ``x32`` overflows when rounded to ``fmt``."""
    a = np.abs(x32)
    return bool(np.any((a >= _overflow_limit(fmt)) & np.isfinite(a)))


def _shapley_rank(m: MetricShares | None) -> list[int]:
    """Source indices by descending share (ties and no metric: switch order)."""
    if m is None:
        return list(range(N_SOURCES))
    return sorted(
        range(N_SOURCES), key=lambda i: (-m.shares[SOURCES[i]] if math.isfinite(m.shares[SOURCES[i]]) else 0.0, i)
    )


def explain(
    config,
    *,
    hw: str = "mi200",
    kernel: str | None = None,
    validator: str = "cpu",
    reference: str = "exact",
    perf_config: str | None = None,
    rand_min: int | None = None,
    rand_max: int | None = None,
    rand_type: str | None = None,
    seed: int | None = None,
    metrics=DEFAULT_METRICS,
    top: int = 10,
    progress: bool | None = None,
    n_chunk: int | None = None,
    keep_arrays: bool = False,
    inputs=None,
) -> Explanation:
    """Explain ``config`` (a :class:`validation.configs.Config` or any text
    :func:`validation.configs.parse_config` accepts, e.g. a suite test name) on ``hw``.

    ``kernel``: xdlops / nonxdlops (default: the config's own); ``validator``: cpu, gpu, cpu-acc4,
    cpu-ftz, mlir (the reference's loop order, or the whole reference with
    ``reference="validator"``); ``rand_min``/``rand_max``/``rand_type``/``seed`` override the
    config's random data; ``metrics``: names of :data:`validation.metrics.METRIC_NAMES` (a list or
    "rms,max_abs_diff"); ``top``: how many worst elements to explain; ``inputs``: the user's own
    tensors instead of the harness's (as :func:`validation.run.run`)."""
    seed = check_seed(seed)
    rand_min, rand_max = check_rand_bound(rand_min, "--rand-min"), check_rand_bound(rand_max, "--rand-max")
    config, kmodel, vmodel = plan(config, hw=hw, kernel=kernel, validator=validator, perf_config=perf_config)
    hw = kmodel.hw or check_hardware(hw)
    reference = choice(reference, REFERENCES, "reference")
    if vmodel.count == "inbounds":
        raise ValueError(
            "validator: +inbounds is not one of the explanation's switches; explain the test with "
            "the same validator without it"
        )
    names = metric_names(metrics)
    top = check_top(top)
    if rand_type is not None:
        rand_type = choice(rand_type, ("float", "int"), "rand_type")
    problem = config.problem
    t0 = time.perf_counter()
    files = None
    if inputs is not None:
        inputs, files = user_tensors(inputs, problem, kmodel.input)
    kw, inputs_info = resolve_inputs(
        config, rand_min=rand_min, rand_max=rand_max, seed=seed, rand_type=rand_type, files=files
    )
    if inputs is None:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            inputs = harness.harness_inputs(problem, **kw)
    t_inputs = time.perf_counter() - t0
    out = explain_problem(
        problem,
        kmodel,
        vmodel,
        x=inputs.get("input"),
        w=inputs.get("filter"),
        dy=inputs.get("output"),
        reference=reference,
        metrics=names,
        top=top,
        progress=progress if progress is not None else auto_progress(),
        n_chunk=n_chunk,
        name=config.label,
        keep_arrays=keep_arrays,
    )
    out.hw = hw
    out.inputs = inputs_info
    out.seconds = {"inputs": t_inputs, **out.seconds, "total": out.seconds["total"] + t_inputs}
    if config.gemm is not None:  # report the matrix C: shape (G, M, N) and (g, m, n) indices
        out.gemm = config.gemm
        out.shape = config.gemm.c_shape
        out.elements = [dataclasses.replace(e, coords=tuple(e.coords[:3])) for e in out.elements]
    return out
