"""Emulated against measured: one :class:`LineResult` per measured line.

An exact-mode line must equal the measured line in every printed field (as text). An ensemble
(split-K atomic orders) or a fair_rand0 seed set passes a field when the measured value lies
within the range its members span; fair_rand0's (val, kern) pairs at the maxima are compared only
where every seed gives the same pair (where the maximum lies depends on the inputs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .measured import MeasuredLine

__all__ = ["LineResult", "judge", "range_check", "num", "seed_position", "PAIR_FIELDS"]

#: The (validation, kernel) value pairs printed at the maxima.
PAIR_FIELDS = ("val_at_max_eps", "kern_at_max_eps", "val_at_max_rel_old", "kern_at_max_rel_old")


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
    distinct: dict | None = None  # field -> whether the members' numeric values are pairwise distinct

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
        x = num(self.emulated.get(f, "nan"))
        return (x, x)


def num(s: str) -> float:
    """A printed field as a float (NaN for text that is not a number)."""
    try:
        return float(s)
    except ValueError:
        return math.nan


def seed_position(r: LineResult, field: str) -> str | None:
    """Where a seeds-mode (fair_rand0) line's measured value of ``field`` lies against the values
    its seeds gave: "below" them all, "inside" their range (ends included) or "above" them all;
    None where there is nothing to place (a field not compared across seeds, such as a (val, kern)
    pair whose place moves with the inputs, or a value that is not a number). Whether the seeds'
    values were pairwise distinct is ``r.distinct[field]``."""
    if r.mode != "seeds" or r.bounds is None or r.emulated.get(field) == "(varies)":
        return None
    m = num(r.fields.get(field, "nan"))
    lo, hi = r.bounds.get(field, (math.nan, math.nan))
    if math.isnan(m) or math.isnan(lo) or math.isnan(hi):
        return None
    return "below" if m < lo else "above" if m > hi else "inside"


def range_check(measured: str, values: list[str]) -> tuple[bool, str]:
    """(whether ``measured`` lies within the values' range, the range as text "lo..hi", or the value)."""
    if all(v == values[0] for v in values):
        return measured == values[0], values[0]
    m = num(measured)
    nums = [num(v) for v in values]
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


def judge(m: MeasuredLine, results: list[dict], mode: str) -> LineResult:
    """``m`` against its emulated results (cached dicts): "exact", "ensemble" or "seeds" mode."""
    fields = m.line.fields()
    if mode == "exact":
        em = results[0]["fields"]
        equal = {f: em.get(f) == v for f, v in fields.items()}
        return LineResult(
            m,
            "exact",
            fields,
            {f: em.get(f, "") for f in fields},
            equal,
            emulated_line=results[0]["line"],
            recipe=results[0].get("recipe", ""),
        )
    members = [mem for r in results for mem in (r["members"] if r["mode"] == "ensemble" else [r])]
    equal, emulated = {}, {}
    for f, v in fields.items():
        values = [mem["fields"].get(f, "") for mem in members]
        if mode == "seeds" and f in PAIR_FIELDS and len(set(values)) > 1:
            # where the maximum lies depends on the inputs: not comparable across seeds
            equal[f], emulated[f] = True, "(varies)"
            continue
        equal[f], emulated[f] = range_check(v, values)
    exact = sum(all(mem["fields"].get(f) == v for f, v in fields.items()) for mem in members if "envelope" not in mem)
    n_sampled = sum("envelope" not in mem for mem in members)
    bounds, distinct = {}, {}
    for f in fields:
        nums = [x for x in (num(mem["fields"].get(f, "nan")) for mem in members) if not math.isnan(x)]
        bounds[f] = (min(nums), max(nums)) if nums else (math.nan, math.nan)
        distinct[f] = len(nums) == len(members) and len(set(nums)) == len(nums)
    return LineResult(
        m,
        mode,
        fields,
        emulated,
        equal,
        exact_members=exact,
        n_members=n_sampled,
        emulated_line=members[0]["line"],
        recipe=results[0].get("recipe", ""),
        bounds=bounds,
        distinct=distinct,
    )
