"""Split-K partial sums and the fp32 atomic adds that combine them, in counter-based orders.

A split-K kernel cuts a GEMM's K sequence into ``S`` contiguous chunks, accumulates each from +0
and adds the chunk results into a zeroed fp32 workspace with atomic adds: ``ws ← RNE32(ws + p)``
per partial ``p``. With three or more partials the order of the adds changes the result, and on a
GPU that order varies from run to run. :class:`SplitPartials` holds the partial sums of every
output element and draws add orders from a counter-based generator:

* a **member** is one order per element (or per output tile, or one for the whole GEMM): member
  ``index`` of element ``i`` is a Fisher–Yates shuffle driven by splitmix64 over the key
  ``(seed, index, key(i))``, so any member can be drawn alone, in parallel, identically on every
  run and for any thread count;
* an **envelope** is, per element, the fp16 outcome closest to and farthest from a reference over
  many orders (members 0 … count−1 and four sorted orders), plus a deeper search over more orders
  for the elements farthest from the reference. Any such per-element choice is itself an order
  the hardware can produce, so a measured value outside the envelope is outside what the model
  allows.

Sources: the fp32 atomic add is RNE (AMD CDNA ISA, ``global_atomic_add_f32``; CUDA ``atomicAdd``
on float); splitmix64 is Steele, Lea & Flood, "Fast splittable pseudorandom number generators"
(OOPSLA 2014); Fisher–Yates with Lemire's multiply-shift range reduction (ACM TOMACS 2019).
Parallel over elements only; every sum runs in one thread in its order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .jit import jit, run_tasks
from .kernels._scalar import round_to_fp16_rne
from .rounding import fp32_to_fp16

__all__ = [
    "GRANULARITIES",
    "SplitPartials",
    "outcome_distance",
    "extreme_elements",
    "add_order",
    "orders_landing_in",
]

#: How add orders are keyed: one order per output element, per output tile, or one per GEMM.
GRANULARITIES = ("element", "tile", "gemm")

_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _to_fp16(x: np.ndarray) -> np.ndarray:
    """RNE to fp16 (``v_cvt_f16_f32``): float32 through :func:`emu.rounding.fp32_to_fp16`,
    which keeps its speed where most results overflow or are subnormal."""
    if x.dtype == np.float32:
        return fp32_to_fp16(x)
    with np.errstate(over="ignore"):
        return x.astype(np.float16)


def outcome_distance(k16: np.ndarray, v16: np.ndarray) -> np.ndarray:
    """|k − v| in float64 of fp16 outcomes ``k16`` from a reference ``v16``; NaN (inf − inf, a NaN
    outcome) counts as infinitely far."""
    with np.errstate(invalid="ignore"):
        d = np.abs(k16.astype(np.float64) - v16)
    return np.where(np.isnan(d), np.inf, d)


@jit
def _splitmix(x):
    """splitmix64's finaliser: a well-mixed uint64 of a uint64."""
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


@jit
def _order_state(key, seed, index):
    """The generator state member ``index`` starts from for ``key``."""
    return _splitmix(seed * _GOLDEN + _splitmix(np.uint64(index) * _GOLDEN + _splitmix(np.uint64(key))))


@jit
def _pick(state, j):
    """The Fisher–Yates pick in 0 … j from a state: Lemire's multiply-shift of 53 random bits."""
    return np.int64(((_splitmix(state) >> np.uint64(11)) * np.uint64(j + 1)) >> np.uint64(53))


@jit
def _draw_order(s, key, seed, index, perm):
    """perm[0:s] = the add order of member ``index`` for ``key`` (Fisher–Yates over the stream
    keyed by (seed, index, key))."""
    state = _order_state(key, seed, index)
    for j in range(s):
        perm[j] = j
    for j in range(s - 1, 0, -1):
        state = state + _GOLDEN
        pick = _pick(state, j)  # < j + 1
        perm[j], perm[pick] = perm[pick], perm[j]


#: Orders drawn side by side by :func:`_order_sums4`.
_LANES = 4


@jit
def _order_sums4(col, key, seed, index, perm, w):
    """w[t] = :func:`_col_sum` of member ``index + t`` for t < 4 over one element's partials
    ``col`` (contiguous: a column of ``parts`` is strided, and where its stride is a multiple of
    4 KiB every partial falls in the same cache set): the same shuffles and the same sums, interleaved so that four independent fp32 add chains and four generators overlap
    in the CPU's pipeline (each sum still adds its partials one by one in its own order).
    ``perm`` (4, s) is scratch."""
    s = col.shape[0]
    s0 = _order_state(key, seed, index)
    s1 = _order_state(key, seed, index + 1)
    s2 = _order_state(key, seed, index + 2)
    s3 = _order_state(key, seed, index + 3)
    for j in range(s):
        perm[0, j] = j
        perm[1, j] = j
        perm[2, j] = j
        perm[3, j] = j
    for j in range(s - 1, 0, -1):
        s0 = s0 + _GOLDEN
        s1 = s1 + _GOLDEN
        s2 = s2 + _GOLDEN
        s3 = s3 + _GOLDEN
        p0 = _pick(s0, j)
        p1 = _pick(s1, j)
        p2 = _pick(s2, j)
        p3 = _pick(s3, j)
        perm[0, j], perm[0, p0] = perm[0, p0], perm[0, j]
        perm[1, j], perm[1, p1] = perm[1, p1], perm[1, j]
        perm[2, j], perm[2, p2] = perm[2, p2], perm[2, j]
        perm[3, j], perm[3, p3] = perm[3, p3], perm[3, j]
    w0 = np.float32(0.0)
    w1 = np.float32(0.0)
    w2 = np.float32(0.0)
    w3 = np.float32(0.0)
    for j in range(s):
        w0 = w0 + col[perm[0, j]]
        w1 = w1 + col[perm[1, j]]
        w2 = w2 + col[perm[2, j]]
        w3 = w3 + col[perm[3, j]]
    w[0] = w0
    w[1] = w1
    w[2] = w2
    w[3] = w3


@jit
def _col_sum(col, key, seed, index, perm):
    """The fp32 sum of one element's partials ``col`` (contiguous) added one by one onto +0 in
    the order of member ``index`` for ``key``; ``perm`` is scratch."""
    _draw_order(col.shape[0], key, seed, index, perm)
    ws = np.float32(0.0)
    for j in range(col.shape[0]):
        ws = ws + col[perm[j]]
    return ws


@jit
def _add_order(s, key, seed, index, perm):
    _draw_order(s, key, seed, index, perm)


def add_order(n_split: int, seed: int, index: int, key: int = 0) -> np.ndarray:
    """The order (a permutation of range(n_split)) in which member ``index`` of the generator
    seeded ``seed`` adds the partials of the element (or tile) keyed ``key``."""
    perm = np.empty(int(n_split), np.int64)
    _add_order(int(n_split), np.uint64(key), np.uint64(seed), np.uint64(index), perm)
    return perm


@jit
def _distance_to(x, v):
    """|x − v| in float64 for an fp16 outcome ``x``; NaN counts as infinitely far."""
    d = abs(np.float64(x) - v)
    if d != d:
        return np.inf
    return d


#: elements per task of the ensemble kernels (:func:`_member_sums`, :func:`_envelope`), each
#: block copied into contiguous scratch once
_ELEMENT_BLOCK = 1024


def _member_sums(parts, keys, seed, index, out):
    """out[i] = the fp32 sum of parts[:, i] added one by one onto +0 in the order of member
    ``index`` for key keys[i]. Each block of elements is first copied element by element into
    contiguous scratch (the columns of ``parts`` are strided; the sums are the same). Parallel
    over elements only."""
    run_tasks(
        lambda t0, t1: _member_sums_tasks(parts, keys, seed, index, out, t0, t1), -(-parts.shape[1] // _ELEMENT_BLOCK)
    )


@jit
def _member_sums_tasks(parts, keys, seed, index, out, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`_member_sums`."""
    s, size = parts.shape
    block = _ELEMENT_BLOCK
    for b in range(t0, min(t1, (size + block - 1) // block)):
        perm = np.empty(s, np.int64)
        lo = b * block
        hi = min(size, lo + block)
        cols = np.empty((hi - lo, s), np.float32)
        for k in range(s):
            for i in range(lo, hi):
                cols[i - lo, k] = parts[k, i]
        for i in range(lo, hi):
            out[i] = _col_sum(cols[i - lo], keys[i], seed, index, perm)


@jit
def _keep_extremes(x, index, i, v16, near, far, dn, df):
    """Order ``index``'s fp16 outcome ``x`` of element i, against every reference row v: it
    replaces near[v, i] / far[v, i] where strictly closer to / farther from v16[v, i] (or where it
    is the first, ``index`` 0); dn, df hold their distances."""
    for v in range(v16.shape[0]):
        d = _distance_to(x, v16[v, i])
        if index == 0 or d < dn[v]:
            near[v, i] = x
            dn[v] = d
        if index == 0 or d > df[v]:
            far[v, i] = x
            df[v] = d


def _envelope(parts, keys, seed, count, v16, near, far, kept):
    """Per element i and reference row v, over the orders of members 0 … count−1: near[v, i] the
    fp16 outcome closest to ``v16[v, i]`` (a reference in fp16, as float64), far[v, i] the
    farthest (NaN distances count as infinite; ties keep the first). kept[j, i] = the fp32 sum
    of order j for j < kept.shape[0]. Orders are summed four at a time (:func:`_order_sums4`)
    and then looked at one by one in order, so the result is that of one order at a time.
    Parallel over elements only."""
    run_tasks(
        lambda t0, t1: _envelope_tasks(parts, keys, seed, count, v16, near, far, kept, t0, t1),
        -(-parts.shape[1] // _ELEMENT_BLOCK),
    )


@jit
def _envelope_tasks(parts, keys, seed, count, v16, near, far, kept, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`_envelope`."""
    s, size = parts.shape
    nv = v16.shape[0]
    n_keep = kept.shape[0]
    lanes = count - count % _LANES
    block = _ELEMENT_BLOCK
    for b in range(t0, min(t1, (size + block - 1) // block)):
        perm = np.empty(s, np.int64)
        perm4 = np.empty((_LANES, s), np.int32)
        w = np.empty(_LANES, np.float32)
        dn = np.empty(nv, np.float64)
        df = np.empty(nv, np.float64)
        col = np.empty(s, np.float32)
        for i in range(b * block, min(size, (b + 1) * block)):
            key = keys[i]
            for k in range(s):
                col[k] = parts[k, i]
            for first in range(0, lanes, _LANES):
                _order_sums4(col, key, seed, first, perm4, w)
                for t in range(_LANES):
                    index = first + t
                    if index < n_keep:
                        kept[index, i] = w[t]
                    _keep_extremes(round_to_fp16_rne(np.float64(w[t])), index, i, v16, near, far, dn, df)
            for index in range(lanes, count):
                ws = _col_sum(col, key, seed, index, perm)
                if index < n_keep:
                    kept[index, i] = ws
                _keep_extremes(round_to_fp16_rne(np.float64(ws)), index, i, v16, near, far, dn, df)


@jit
def _widen(x, j, v16, searched, near, far, dn, df):
    """:func:`_keep_extremes` for the deep search: x replaces near[v, j] / far[v, j] only where
    strictly closer / farther, and only for the rows v where searched[v, j]."""
    for v in range(v16.shape[0]):
        if searched[v, j]:
            d = _distance_to(x, v16[v, j])
            if d < dn[v]:
                near[v, j] = x
                dn[v] = d
            if d > df[v]:
                far[v, j] = x
                df[v] = d


def _envelope_at(parts, keys, at, seed, first, stop, v16, searched, near, far):
    """:func:`_envelope` continued on the elements ``at`` (keys[j] is element at[j]'s key) over
    orders ``first`` … ``stop − 1``, each order's sum computed once for every reference row v
    where searched[v, j]: near[v, j] and far[v, j] (the outcomes found so far) are replaced by
    any outcome strictly closer to / farther from v16[v, j]. Orders are summed four at a time
    and looked at in order. Parallel over elements only."""
    run_tasks(
        lambda t0, t1: _envelope_at_tasks(parts, keys, at, seed, first, stop, v16, searched, near, far, t0, t1), at.size
    )


@jit
def _envelope_at_tasks(parts, keys, at, seed, first, stop, v16, searched, near, far, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`_envelope_at`."""
    s = parts.shape[0]
    nv = v16.shape[0]
    lanes = first + (stop - first) - (stop - first) % _LANES
    for j in range(t0, min(t1, at.size)):
        perm = np.empty(s, np.int64)
        perm4 = np.empty((_LANES, s), np.int32)
        w = np.empty(_LANES, np.float32)
        dn = np.empty(nv, np.float64)
        df = np.empty(nv, np.float64)
        for v in range(nv):
            dn[v] = _distance_to(near[v, j], v16[v, j])
            df[v] = _distance_to(far[v, j], v16[v, j])
        col = parts[:, at[j]].copy()
        key = keys[j]
        for index in range(first, lanes, _LANES):
            _order_sums4(col, key, seed, index, perm4, w)
            for t in range(_LANES):
                _widen(round_to_fp16_rne(np.float64(w[t])), j, v16, searched, near, far, dn, df)
        for index in range(lanes, stop):
            ws = _col_sum(col, key, seed, index, perm)
            _widen(round_to_fp16_rne(np.float64(ws)), j, v16, searched, near, far, dn, df)


def _sum_in_order(by_element, order, out):
    """out[i] = the fp32 sum of by_element[i, :] (element i's partials, contiguous) added one by
    one onto +0 in the order order[i, :]."""
    run_tasks(lambda t0, t1: _sum_in_order_tasks(by_element, order, out, t0, t1), by_element.shape[0])


@jit
def _sum_in_order_tasks(by_element, order, out, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`_sum_in_order`."""
    size, s = by_element.shape
    for i in range(t0, min(t1, size)):
        ws = np.float32(0.0)
        for j in range(s):
            ws = ws + by_element[i, order[i, j]]
        out[i] = ws


def extreme_elements(v16: np.ndarray, far16: np.ndarray, count: int) -> np.ndarray:
    """The elements whose farthest outcome ``far16`` is farthest from the reference ``v16``: the
    top ``count`` by absolute distance, by relative distance and by distance in fp16 ulps of the
    smaller magnitude (a verifier's maxAbs, maxRel and maxEps), sorted, without repeats. Elements
    already at an infinite distance (an overflow or NaN on either side) are left out: no order
    takes them farther, and where many outputs overflow they would fill every pick."""
    d = outcome_distance(far16, v16)
    mag = np.minimum(np.abs(v16), np.abs(far16.astype(np.float64)))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ulp = np.exp2(np.floor(np.log2(np.maximum(mag, 2.0**-14))) - 10)  # fp16 spacing at mag
        scores = (d, d / np.maximum(np.abs(v16), 2.0**-24), d / ulp)
    finite = np.isfinite(d)
    picks = []
    for x in scores:
        x = np.where(finite & np.isfinite(x), x, -np.inf)
        order = np.argsort(-x, kind="stable")[:count]
        picks.append(order[finite[order]])
    return np.unique(np.concatenate(picks)).astype(np.int64)


class SplitPartials:
    """The split-K partial sums of every output element, and their atomic-add orders.

    ``parts`` (n_split, size) float32: partial ``s`` of element ``i`` (elements in the result's
    memory order); ``tiles`` (size,): the output tile each element belongs to (for orders keyed
    per tile); ``seed``: the generator's seed. Fill ``parts`` and ``tiles`` (e.g. with
    :meth:`emu.conv.ConvGemm.compute`), then draw members and envelopes.
    """

    def __init__(self, n_split: int, size: int, seed: int = 0, shape: tuple[int, ...] | None = None):
        if n_split < 1:
            raise ValueError(f"n_split: must be ≥ 1, got {n_split}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**64:
            raise ValueError(f"seed: must be a whole number in 0 … 2^64 − 1, got {seed!r}")
        if shape is not None and int(np.prod(shape)) != size:
            raise ValueError(f"shape: {shape} does not hold {size} elements")
        self.parts = np.zeros((n_split, size), np.float32)
        self.tiles = np.zeros(size, np.float32)
        self.seed = int(seed)
        #: the output's shape: :meth:`member` and :meth:`member_fp32` return it (flat when None)
        self.shape = None if shape is None else tuple(int(d) for d in shape)
        self._sorted: list[np.ndarray] | None = None

    @property
    def n_split(self) -> int:
        return int(self.parts.shape[0])

    @property
    def size(self) -> int:
        return int(self.parts.shape[1])

    def keys(self, granularity: str) -> np.ndarray:
        """The key each element's add order is drawn for: its index ("element"), its tile
        ("tile") or 0 for all ("gemm")."""
        if granularity == "tile":
            return self.tiles.astype(np.int64)
        if granularity == "element":
            return np.arange(self.size, dtype=np.int64)
        if granularity == "gemm":
            return np.zeros(self.size, np.int64)
        raise ValueError(f"granularity: {granularity!r} is not one of {', '.join(GRANULARITIES)}")

    def ascending(self) -> np.ndarray:
        """fp32: the partials added onto +0 in ascending chunk order (RNE each add)."""
        ws = np.zeros(self.size, np.float32)
        for p in self.parts:
            ws = ws + p
        return ws

    def member_fp32(self, index: int, granularity: str = "element") -> np.ndarray:
        """Member ``index`` before its fp16 rounding: for every element the partials added onto a
        zeroed fp32 workspace (RNE each add) in the random order of member ``index`` for the
        element's key."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < 2**63:
            raise ValueError(f"index: a member is a whole number ≥ 0, got {index!r}")
        out = np.empty(self.size, np.float32)
        _member_sums(self.parts, self.keys(granularity), np.uint64(self.seed), np.uint64(index), out)
        return out if self.shape is None else out.reshape(self.shape)

    def member(self, index: int, granularity: str = "element") -> np.ndarray:
        """Member ``index``, RNE to fp16 (what the kernel writes)."""
        return _to_fp16(self.member_fp32(index, granularity))

    def envelope(self, reference16: np.ndarray, count: int, granularity: str = "element"):
        """(closest, farthest) fp16 outcome per element over ``count`` random orders (members
        0 … count−1) and the four sorted orders."""
        (pair,), _ = self.envelopes([reference16], count, granularity)
        return pair[0], pair[1]

    def envelopes(
        self,
        references16: Sequence[np.ndarray],
        count: int,
        granularity: str = "element",
        keep: int = 0,
        deep_elements: int = 0,
        deep_orders: int = 0,
    ) -> tuple[list[tuple[np.ndarray, ...]], np.ndarray]:
        """:meth:`envelope` for several references (fp16 values as float64) in one pass over the
        orders, which do not depend on the reference; also returns the fp32 sums of the first
        ``keep`` orders (row i: member i before its fp16 rounding, shape (keep, size)). With
        ``deep_orders``, each reference's pair becomes (closest, farthest, deep closest, deep
        farthest): the last two also give the ``deep_elements`` farthest elements (by each of
        three distances, :func:`extreme_elements`) orders ``count`` … ``count + deep_orders − 1``.
        The first two are kept as they are, so a range only widens."""
        size = self.size
        keys = self.keys(granularity)
        seed = np.uint64(self.seed)
        v16 = np.ascontiguousarray(np.stack([np.asarray(v, np.float64).reshape(-1) for v in references16]))
        near = np.empty((len(v16), size), np.float32)
        far = np.empty((len(v16), size), np.float32)
        kept = np.empty((min(keep, count), size), np.float32)
        _envelope(self.parts, keys, seed, count, v16, near, far, kept)
        sorted16 = self.sorted_members()
        plain = []
        for v, n32, f32 in zip(v16, near, far):
            n16, f16 = _to_fp16(n32), _to_fp16(f32)
            dn, df = outcome_distance(n16, v), outcome_distance(f16, v)
            for k16 in sorted16:
                d = outcome_distance(k16, v)
                closer, farther = d < dn, d > df
                n16[closer], dn = k16[closer], np.where(closer, d, dn)
                f16[farther], df = k16[farther], np.where(farther, d, df)
            plain.append((n16, f16))
        if deep_orders <= 0 or deep_elements <= 0:
            return plain, kept
        # each reference's own extreme elements, but one pass over the orders for all of them
        # (an element's sums do not depend on the reference)
        picks = [extreme_elements(v, f16, deep_elements) for v, (_, f16) in zip(v16, plain)]
        union = np.unique(np.concatenate(picks)).astype(np.int64)
        searched = np.stack([np.isin(union, at) for at in picks])
        n_at = np.stack([n16[union] for n16, _ in plain]).astype(np.float32)
        f_at = np.stack([f16[union] for _, f16 in plain]).astype(np.float32)
        _envelope_at(
            self.parts,
            keys[union],
            union,
            seed,
            count,
            count + deep_orders,
            np.ascontiguousarray(v16[:, union]),
            searched,
            n_at,
            f_at,
        )
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
                ws = np.empty(self.size, np.float32)
                _sum_in_order(by_element, order, ws)
                out.append(_to_fp16(ws))
            self._sorted = out
        return self._sorted


def orders_landing_in(P, perms, lo_mid, hi_mid, lo_inc, hi_inc, always, ever):
    """always[e] / ever[e]: whether the partials P[:, e] added in order (fp32 adds onto +0) land in
    [lo_mid[e], hi_mid[e]] (each end included when its flag is set) for every / some order: the rows of ``perms`` and four
    per-element sorted orders (by value and by magnitude, each ascending and descending). Parallel
    over elements only."""
    run_tasks(
        lambda t0, t1: _orders_landing_in_tasks(P, perms, lo_mid, hi_mid, lo_inc, hi_inc, always, ever, t0, t1),
        P.shape[1],
    )


@jit
def _orders_landing_in_tasks(P, perms, lo_mid, hi_mid, lo_inc, hi_inc, always, ever, t0, t1):
    """Tasks ``t0`` … ``t1`` − 1 of :func:`orders_landing_in`."""
    S, E = P.shape
    R = perms.shape[0]
    for e in range(t0, min(t1, E)):
        a = True
        v = False
        col = P[:, e].copy()
        srt = np.argsort(col)
        mags = np.argsort(np.abs(col))
        for r in range(R + 4):
            ws = np.float32(0.0)
            for s in range(S):
                if r < R:
                    i = perms[r, s]
                elif r == R:
                    i = srt[s]
                elif r == R + 1:
                    i = srt[S - 1 - s]
                elif r == R + 2:
                    i = mags[s]
                else:
                    i = mags[S - 1 - s]
                ws = ws + col[i]
            x = np.float64(ws)
            ok = ((x > lo_mid[e]) or (lo_inc[e] and x == lo_mid[e])) and (
                (x < hi_mid[e]) or (hi_inc[e] and x == hi_mid[e])
            )
            a = a and ok
            v = v or ok
        always[e] = a
        ever[e] = v
