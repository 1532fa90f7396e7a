"""Split-K atomic ensembles: the lines of sampled add orders and of each element's extreme outcomes.

A backward-weight xdlops kernel whose split-K adds three or more partial sums with fp32 atomics
cannot be pinned to one order. Its lines are an ensemble: ``members`` sampled add orders (each
compared with every validation and run set of the job), plus, per validation, the envelope lines
(each element at its closest and farthest outcome over many more orders and the sorted ones, and
the deep search's) of :class:`emu.atomics.SplitPartials`. A measured line is inside when every
field lies within the range these lines span (:mod:`.judge`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from emu.atomics import SplitPartials
from emu.rounding import fp32_to_fp16
from models.kernels import ATOMIC_ORDERS, AtomicOrders

from .lines import differing_elements, line_fields

__all__ = ["ensemble_results", "ENVELOPE_NAMES", "MEMBER_ELEMENTS"]

#: Members × elements whose fp32 sums the envelope pass keeps (4 bytes each), so that the members
#: are not drawn a second time; above it they are drawn one at a time.
MEMBER_ELEMENTS = 40_000_000
ENVELOPE_NAMES = ("closest", "farthest", "closest, deep", "farthest, deep")


def ensemble_results(
    partials: SplitPartials,
    validations: Mapping,
    lines: Sequence[tuple],
    n_members: int,
    granularity: str,
    orders: AtomicOrders = ATOMIC_ORDERS,
) -> dict[tuple, dict]:
    """The ensemble result of every line ``(validator, quirks)`` of one atomic kernel:
    ``{"mode": "ensemble", "members": [line fields …], "granularity", "n_split"}``, the members
    first, then the envelope lines (marked ``envelope``). ``validations[validator]``: its flat
    fp32 output. Each member is drawn once and compared with every validation; the envelope of
    all validations comes from one pass over the orders, which also keeps the members' sums when
    they fit in :data:`MEMBER_ELEMENTS`."""
    size = partials.size
    vs = list(dict.fromkeys(v for v, _ in lines))
    n_orders = orders.envelope_order_count(n_members, partials.parts.size)
    keep = n_members if n_members * size <= MEMBER_ELEMENTS else 0
    v16s = [fp32_to_fp16(validations[v]).astype(np.float64) for v in vs]
    pairs, kept = partials.envelopes(
        v16s, n_orders, granularity, keep=keep, deep_elements=orders.deep_elements, deep_orders=orders.deep_orders
    )
    envelope = dict(zip(vs, pairs))
    member_fields: dict[tuple, list] = {line: [] for line in lines}
    for i in range(n_members):
        k16 = fp32_to_fp16(kept[i]) if keep else partials.member(i, granularity)
        for v in vs:
            d = differing_elements(validations[v], k16)
            for lv, q in lines:
                if lv == v:
                    member_fields[(lv, q)].append(line_fields(validations[v], k16, q, d))
    del kept
    out = {}
    for v, q in lines:
        out[(v, q)] = {
            "mode": "ensemble",
            "members": member_fields[(v, q)]
            + [
                dict(line_fields(validations[v], k16, q), envelope=name)
                for name, k16 in zip(ENVELOPE_NAMES, envelope[v])
            ],
            "granularity": granularity,
            "n_split": partials.n_split,
        }
    return out
