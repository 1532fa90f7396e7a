"""Rates with exact binomial confidence intervals, and thresholds at a false-alarm rate.

Clopper & Pearson (Biometrika 26(4), 1934): for x failures in n runs, the two-sided (1 − α)
interval is [B(α/2; x, n − x + 1), B(1 − α/2; x + 1, n − x)] with B the beta quantile
(0 below when x = 0, 1 above when x = n).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Rate", "clopper_pearson", "threshold_at"]

CONFIDENCE = 0.95


def clopper_pearson(x: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact two-sided interval of a binomial rate; (0, 1) when n = 0."""
    if n <= 0:
        return 0.0, 1.0
    from scipy.stats import beta  # imported here: the CLI starts without scipy

    a = 1.0 - confidence
    lo = 0.0 if x <= 0 else float(beta.ppf(a / 2, x, n - x + 1))
    hi = 1.0 if x >= n else float(beta.ppf(1 - a / 2, x + 1, n - x))
    return lo, hi


@dataclass(frozen=True)
class Rate:
    """``failed`` of ``runs``, its rate and Clopper–Pearson interval."""

    failed: int
    runs: int

    @property
    def rate(self) -> float:
        return self.failed / self.runs if self.runs else math.nan

    @property
    def interval(self) -> tuple[float, float]:
        return clopper_pearson(self.failed, self.runs)

    def to_dict(self) -> dict:
        lo, hi = self.interval
        return {"runs": self.runs, "failed": self.failed, "rate": None if not self.runs else self.rate,
                "ci_low": lo, "ci_high": hi, "confidence": CONFIDENCE}  # fmt: skip

    def format(self) -> str:
        if not self.runs:
            return "n/a"
        lo, hi = self.interval
        return f"{self.failed}/{self.runs} [{lo:.2f},{hi:.2f}]"


def threshold_at(values: Sequence[float], rate: float) -> tuple[float, Rate]:
    """The smallest observed value that at most ⌊rate·n⌋ of ``values`` exceed (the empirical
    (1 − rate) quantile, the maximum when rate·n < 1), and the rate of values above it with
    its interval: the threshold's estimated false-alarm rate."""
    vals = sorted(float(v) for v in values if not math.isnan(v))
    if not vals:
        return math.nan, Rate(0, 0)
    allowed = int(math.floor(rate * len(vals)))
    t = vals[len(vals) - 1 - allowed]
    return t, Rate(sum(v > t for v in vals), len(vals))
