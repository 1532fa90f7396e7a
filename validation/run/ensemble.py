"""The verifier's metrics over a split-K kernel's atomic add orders: each metric's range, and how
many orders pass (what ``fp16emu run`` prints for a kernel whose result depends on the add order)."""

from __future__ import annotations

from collections.abc import Mapping

from models.kernels import ATOMIC_ORDERS

from ..verify import measure

__all__ = ["ENSEMBLE_KEYS", "ensemble_summary"]

#: the metrics whose range over the add orders is reported
ENSEMBLE_KEYS = ("n_exact", "max_epsilon_diff", "max_abs_diff", "max_rel_diff", "rms")


def ensemble_summary(
    result, verifier: str, members: int | None = None, thresholds: Mapping[str, float] | None = None
) -> dict:
    """{n_split, members, granularity, seed, ranges: {metric: [lo, hi]}, members_passing} of
    ``members`` random add orders (default :data:`models.kernels.ATOMIC_ORDERS`'s count) of a
    :class:`~validation.run.RunResult` whose kernel has an atomic ensemble, each judged by the
    preset ``verifier`` (limits in ``thresholds`` replacing the preset's)."""
    members = ATOMIC_ORDERS.members if members is None else members
    if members < 1:
        raise ValueError(f"--members: must be a positive integer, got {members}")
    values: dict[str, list[float]] = {k: [] for k in ENSEMBLE_KEYS}
    passed = 0
    validation = result.validation_output.reshape(result.shape)
    for k16 in result.members(members):
        comparison, verdict = measure(validation, k16.reshape(result.shape), verifier, thresholds=thresholds)
        d = comparison.to_dict()
        for k in ENSEMBLE_KEYS:
            values[k].append(float(d[k]))
        passed += verdict is not None and verdict.exit_code == 0
    return {
        "n_split": result.ensemble.n_split,
        "members": members,
        "granularity": ATOMIC_ORDERS.granularity,
        "seed": ATOMIC_ORDERS.seed,
        "ranges": {k: [min(v), max(v)] for k, v in values.items()},
        "members_passing": passed,
    }
