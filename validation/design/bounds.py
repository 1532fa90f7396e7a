"""Analytic error bounds of a kernel against its validation, per element and per metric.

For each model (kernel and validator) and sub-GEMM, the accumulation chain of one output has
``depth`` roundings of unit roundoff ``u`` (:func:`chain`): sequential FMA K roundings (fp32);
a fused group of g products one rounding per group (MI100); pairwise groups (MI200)
⌈K/g⌉ + log2 g; truncating units (MI300, NVIDIA) one truncation per group with
u = 2^-23 + (g + 1)·2^(1−F) for F kept fraction bits; the fp64 CPU loops K roundings of 2^-53
and one to fp32; split-K adds its chunk count. With S = Σ|a||b| (:func:`emu.bounds.abs_product_sums`),
a bound on |kernel_fp16 − validation_fp16| is

    B = E_kernel + E_validator + 2·(u16·(|v| + E_kernel + E_validator) + 2^-25)

(2^-25: half the fp16 spacing in the subnormal range, where rounding error is absolute)

with E = γ_depth·S (``worst``), λ·√depth·u·S (``probabilistic``, Higham & Mary 2019, λ = 3
by default), or the same γ form with the unit-specific depth and u (``unit``), which adds what
input flushing can lose (Σ|a||b| over products with a subnormal fp16 operand, for units and
validators that flush) and 2^-126 per step for flushed fp32 subnormals. ``worst`` and
``probabilistic`` use the textbook fp32 model (one rounding per product, u = 2^-24); ``unit``
the emulated unit's. Metric bounds follow from B element by element (:func:`metric_bounds`).

For bf16 tensors (the kernel model's ``input``) the output format's constants replace fp16's:
u16 becomes bf16's unit roundoff 2^-8, 2^-25 half bf16's smallest subnormal spacing 2^-134, and
the flushed inputs are those below bf16's smallest normal 2^-126 (:func:`output_constants`).
"""

from __future__ import annotations

import math

import numpy as np

from emu.bounds import (
    FP16_MIN_NORMAL,
    U_FP16,
    U_FP32,
    U_FP64,
    abs_product_sums,
    gamma,
    probabilistic,
    worst_case,
)
from emu.conv import sub_gemms
from emu.formats import resolve_format
from emu.units import Family

__all__ = ["chain", "element_bounds", "metric_bounds", "output_constants", "BOUND_KINDS", "BOUND_METRICS", "LAMBDA"]

BOUND_KINDS = ("worst", "probabilistic", "unit")
BOUND_METRICS = ("max_abs_diff", "max_rel_diff", "rms", "diff1", "diff2")
LAMBDA = 3.0
FP16_SUBNORMAL_HALF_ULP = 2.0**-25
FP32_MIN_NORMAL = 2.0**-126


def chain(model, problem) -> tuple[int, float, int]:
    """(depth, u, K) of ``model``'s longest accumulation chain on ``problem`` (module docstring)."""
    best = (0, U_FP32, 0)
    for g, s in zip(model.plan(problem), sub_gemms(problem)):
        u_, k = g.unit, s.k
        length = len(g.order.sequence(k))
        size = max(1, int(u_.group_size))
        groups = -(-length // size)
        fam = Family(u_.family)
        if fam == Family.FMA:
            depth, u = length, U_FP32
        elif fam == Family.FUSED_EXACT:
            depth, u = groups, U_FP32
        elif fam == Family.PAIRWISE:
            depth, u = groups + int(math.ceil(math.log2(size))), U_FP32
        elif fam in (Family.TRUNCATED_FUSED, Family.TWO_STAGE):
            f = int(u_.fraction_bits) or 23
            depth, u = groups, 2.0**-23 + (size + 1) * 2.0 ** (1 - f)
        else:  # FP64 accumulation, rounded to fp32 every group or once
            depth, u = length, U_FP64
        depth += max(0, g.order.split_k - 1)
        if gamma(depth, u) > gamma(best[0], best[1]):
            best = (depth, u, k)
    return best


def output_constants(fmt: str = "fp16") -> tuple[float, float, float]:
    """(unit roundoff, half the smallest subnormal spacing, smallest normal) of the output and
    input format ``fmt``: fp16 (2^-11, 2^-25, 2^-14) or bf16 (2^-8, 2^-134, 2^-126)."""
    if fmt == "fp16":
        return U_FP16, FP16_SUBNORMAL_HALF_ULP, FP16_MIN_NORMAL
    f = resolve_format(fmt)
    return 2.0**-f.precision, f.smallest_subnormal / 2, f.smallest_normal


def _flushes(model, problem) -> int:
    return int(any(g.unit.flush_inputs for g in model.plan(problem)))


def _fp64_final(model) -> float:
    return U_FP32 if Family(model.unit.family) == Family.FP64 else 0.0


def element_bounds(problem, kmodel, vmodel, inputs, validation: np.ndarray, lam: float = LAMBDA) -> dict:
    """Per element, B of each kind in :data:`BOUND_KINDS` (float64, flat), and the chains; the
    output format's constants those of ``kmodel.input`` (:func:`output_constants`)."""
    u_out, half_sub, min_normal = output_constants(getattr(kmodel, "input", "fp16"))
    tensors = {"x": inputs.get("input"), "w": inputs.get("filter"), "dy": inputs.get("output")}
    s = abs_product_sums(problem, **tensors)
    kd, ku, k = chain(kmodel, problem)
    vd, vu, _ = chain(vmodel, problem)
    v = np.abs(np.asarray(validation, np.float64))
    k_len = max(k, 1)
    flushing = sum(_flushes(m, problem) for m in (kmodel, vmodel))
    lost = abs_product_sums(problem, **tensors, below=min_normal) * flushing if flushing else 0.0
    e = {
        "worst": 2 * worst_case(s, k_len, U_FP32),
        "probabilistic": 2 * probabilistic(s, k_len, U_FP32, lam),
        # + products lost to input flushing, + fp32 subnormal flushes (≤ 2^-126 each step)
        "unit": worst_case(s, kd, ku)
        + worst_case(s, vd, vu)
        + _fp64_final(vmodel) * v
        + lost
        + (kd + vd) * FP32_MIN_NORMAL,
    }
    # each output rounding: relative u for normal results, absolute half a spacing in the subnormal range
    out = {name: err + 2 * (u_out * (v + err) + half_sub) for name, err in e.items()}
    out["chains"] = {"kernel": (kd, ku), "validator": (vd, vu), "K": k}
    return out


def metric_bounds(bound: np.ndarray, validation: np.ndarray) -> dict[str, float]:
    """Upper bounds of :data:`BOUND_METRICS` given per-element bounds B on |k − v|."""
    v = np.abs(np.asarray(validation, np.float64))
    b = np.asarray(bound, np.float64)
    nz = v > 0
    vmax = float(v.max()) if v.size else 0.0
    out = {
        "max_abs_diff": float(b.max()) if b.size else 0.0,
        "max_rel_diff": float((b[nz] / v[nz]).max()) if nz.any() else 0.0,
        "rms": float(math.sqrt(np.mean(b**2)) / vmax) if vmax > 0 else math.inf,
        "diff1": float(b.sum() / v.sum()) if v.sum() > 0 else math.inf,
        "diff2": float(math.sqrt((b**2).sum() / (v**2).sum())) if (v**2).sum() > 0 else math.inf,
    }
    return out
