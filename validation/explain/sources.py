"""The five error sources (the switches of the design), subsets of them as bit masks, and the
Shapley value over those subsets.

The Shapley value (L. S. Shapley, "A value for n-person games", 1953; used to attribute a model's
output to its inputs by Lundberg & Lee, "A unified approach to interpreting model predictions",
NeurIPS 2017) of player i is Σ_{S∌i} |S|!(n−|S|−1)!/n! · (v(S∪{i}) − v(S)); the values sum to
v(all) − v(∅).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

#: The error sources, in switch order (bit i of a subset mask is SOURCES[i]).
SOURCES = ("subnormal_flush", "order", "accumulation_rounding", "output_rounding", "overflow")
#: How the text names each source, for fp16 tensors (:func:`source_title` for any format).
SOURCE_TITLES: Mapping[str, str] = {
    "subnormal_flush": "subnormal inputs flushed",
    "order": "accumulation order",
    "accumulation_rounding": "rounding inside the accumulation",
    "output_rounding": "final rounding to fp16",
    "overflow": "overflow to infinity",
}


def source_title(source: str, fmt: str = "fp16") -> str:
    """How the text names ``source`` for tensors of ``fmt`` ("fp16" or "bf16"): the final
    rounding is to the tensors' own format."""
    if source == "output_rounding":
        return f"final rounding to {fmt}"
    return SOURCE_TITLES[source]


FLUSH_BIT, ORDER_BIT, ROUND_BIT, OUT_BIT, OVF_BIT = (1 << i for i in range(len(SOURCES)))
N_SOURCES = len(SOURCES)
ALL_ON = (1 << N_SOURCES) - 1


def subset_label(mask: int) -> str:
    """The sources on in ``mask``, joined by "+", or "none"."""
    return "+".join(s for i, s in enumerate(SOURCES) if mask >> i & 1) or "none"


def shapley(values: Sequence[float], n: int = N_SOURCES) -> list[float]:
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
                    total += weight[mask.bit_count()] * (float(values[mask | bit]) - float(values[mask]))
        out.append(total)
    return out
