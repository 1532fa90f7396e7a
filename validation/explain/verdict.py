"""The verdict: a paragraph in words naming the largest source of the error (its share of the
primary metric and of the largest element error), what the kernel's unit does, and advice."""

from __future__ import annotations

import math
from collections.abc import Mapping

from emu.units import Family

from .results import METRIC_TITLES, Explanation, MetricShares
from .sources import SOURCES, source_title
from .variants import End

#: metrics that count agreement (their reference value is N, not 0): never the verdict's subject
_AGREEMENT = ("n", "n_exact")


def primary_metric(table: Mapping[str, MetricShares]) -> str | None:
    """The metric the verdict speaks of: RMS if asked for and non-zero, else the first non-zero."""
    ok = [
        n
        for n, m in table.items()
        if n not in _AGREEMENT
        and m.total
        and math.isfinite(m.total)
        and all(math.isfinite(v) for v in m.shares.values())
    ]
    if "rms" in ok:
        return "rms"
    return ok[0] if ok else None


_FAMILY_WORDS = {
    Family.FUSED_EXACT: "exact fused dot products with one fp32 rounding per group of {g}",
    Family.PAIRWISE: "a pairwise fp32 adder tree over groups of {g}",
    Family.TRUNCATED_FUSED: "truncated fused dot products over groups of {g}",
    Family.TWO_STAGE: "two-stage truncated fused dot products over groups of {g}",
    Family.FMA: "one fp32 rounding per product (sequential FMA)",
    Family.FP64: "an fp64 accumulator",
}


def _describe(source: str, expl: Explanation, kend: End) -> str:
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
        return f"the final rounding to {expl.format}"
    return f"overflow to ±inf beyond the {expl.format} range"


_ADVICE_FP16 = {
    "subnormal_flush": "use inputs away from zero (e.g. [1, 5]) or flush subnormal inputs in the validator "
    "(--validator cpu-ftz)",
    "order": "accumulate the validation in the kernel's gemmK order, or budget the order's error in the threshold "
    "(it grows with the reduction length)",
    "accumulation_rounding": "let the validator mimic the unit (e.g. cpu-acc4 for fused groups of 4) or derive the "
    "threshold from the unit's rounding error bound",
    "output_rounding": "round the validation to fp16 (RNE) before comparing, or allow one fp16 ulp",
    "overflow": "use a smaller input range, or count infinities apart from the error metrics",
}


def _advice(source: str, fmt: str) -> str:
    """The advice for ``source`` on tensors of ``fmt``: the output rounding is to that format."""
    if source == "output_rounding":
        return f"round the validation to {fmt} (RNE) before comparing, or allow one {fmt} ulp"
    return _ADVICE_FP16[source]


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


def write_verdict(expl: Explanation, kend: End, eps_shares: MetricShares | None) -> str:
    """The verdict paragraph of ``expl`` (its metrics, worst elements and comparison filled in);
    ``kend`` is the kernel end, ``eps_shares`` the shares of maxEpsilonDiff."""
    primary = primary_metric(expl.metrics)
    fmt = expl.format
    cmp_ = expl.comparison
    nonfinite = cmp_.nonfinite.n_mismatch if cmp_ is not None else 0
    ref = "the validator" if expl.reference == "validator" else "the exact (fp64) convolution"
    lead = ""
    if nonfinite:
        lead = (
            f"{nonfinite:,} of {cmp_.n:,} outputs ({_pct(nonfinite, cmp_.n)}) are ±inf where {ref} is finite: "
            f"overflow beyond the {fmt} range (the finite metrics skip them). "
        )
    if primary is None:
        if nonfinite:
            return lead + f"Nothing else differs. Advice: {_advice('overflow', fmt)}."
        if any(m.total for n, m in expl.metrics.items() if n not in _AGREEMENT):
            return "The metrics are not finite; no share can be computed (see the per-variant values)."
        return f"The kernel reproduces {ref}: every chosen metric is 0, nothing to attribute."
    m = expl.metrics[primary]
    title = METRIC_TITLES.get(primary, primary)
    first, besides = _culprit(m)
    text = lead + (
        f"{_pct(m.shares[first], m.total)} of the {title} ({m.total:.3g}) against {ref} comes from "
        f"{_describe(first, expl, kend)}"
    )
    if first == "output_rounding" and besides is not None:
        rest = m.total - m.shares["output_rounding"]
        text += (
            f", which every {fmt} output carries; of the remaining {rest:.3g}, {_pct(m.shares[besides], rest)} "
            f"comes from {_describe(besides, expl, kend)}"
        )
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
            text += (
                f" Every {'finite ' if nonfinite else ''}error stays within one {fmt} ulp (maxEpsilonDiff {eps:.3g})."
            )
        elif eps_shares is not None and eps_shares.total:
            e_first = max(SOURCES, key=lambda s: eps_shares.shares[s])
            text += (
                f" The largest {'finite ' if nonfinite else ''}error, {eps:.3g} {fmt} ulps, is "
                f"{_pct(eps_shares.shares[e_first], eps_shares.total)} {source_title(e_first, fmt)}."
            )
            if e_first != "output_rounding":
                culprit = e_first
    if nonfinite:
        culprit = "overflow"
    n_in = sum(culprit in e.sources for e in expl.elements)
    if n_in:
        text += (
            f" {source_title(culprit, fmt).capitalize()} is in the smallest set of sources that reproduces "
            f"{n_in} of the {len(expl.elements)} worst elements bit for bit."
        )
    if cmp_ is not None and cmp_.max_epsilon_diff <= 1 and not nonfinite:
        return text + f" Nothing beyond one {fmt} ulp: a threshold of one ulp (maxEpsilonDiff ≤ 1) passes this kernel."
    return text + f" Advice: {_advice(culprit, fmt)}."
