"""The chunked streaming reducers the accumulator is built from: the first maximum, the
sequential (C order) and pairwise sums, the top k, and the distinct mismatch pairs. Each takes one
chunk at a time and keeps a few numbers (the top k: k; the distinct pairs: up to
:data:`~validation.metrics.DIFF4_DISTINCT_LIMIT`), so memory does not grow with the tensor."""

from __future__ import annotations

import math

import numpy as np

from .constants import DIFF4_DISTINCT_LIMIT


class FirstMax:
    """max(values) with the index of its first occurrence, skipping NaN, starting at 0.

    The C verifiers' ``if (x > best) { best = x; where = i; }``: a later equal value does not
    move the index, NaN never compares greater.
    """

    def __init__(self) -> None:
        self.value = 0.0
        self.index: int | None = None

    def add(self, values: np.ndarray, index: np.ndarray) -> None:
        if values.size == 0:
            return
        m = float(np.fmax.reduce(values))
        if m > self.value:  # False for NaN (all-NaN chunk)
            self.value = m
            self.index = int(index[int(np.argmax(values == m))])


class SeqSum:
    """A double sum taken strictly in element order, as ``sum += x`` in C (study mode).

    A NaN result keeps the sign of the first NaN term (x86 returns the NaN operand; terms are
    never −inf, so no new NaN is made).
    """

    def __init__(self) -> None:
        self.value = 0.0

    def add(self, terms: np.ndarray) -> None:
        if terms.size == 0 or math.isnan(self.value):
            return
        nan = np.isnan(terms)
        if nan.any():
            self.value = float(terms[int(np.argmax(nan))])
            return
        self.value = float(np.cumsum(np.concatenate(([self.value], terms)))[-1])


class PairSum:
    """A float64 sum: numpy's pairwise sum per chunk, the chunk sums added exactly (fsum)."""

    def __init__(self) -> None:
        self.parts: list[float] = []

    def add(self, terms: np.ndarray) -> None:
        if terms.size:
            self.parts.append(float(np.sum(terms)))

    @property
    def value(self) -> float:
        return math.fsum(self.parts)


class TopK:
    """The k largest ε with their flat indices; ties go to the lower index; NaN is skipped."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.eps = np.empty(0)
        self.index = np.empty(0, dtype=np.int64)

    def add(self, eps: np.ndarray, index: np.ndarray) -> None:
        if self.k <= 0 or eps.size == 0:
            return
        keep = ~np.isnan(eps)
        eps, index = eps[keep], index[keep]
        if eps.size > self.k:
            # Pre-select: all above the k-th largest, then the first of those equal to it (the
            # batch is in index order, so these are the lowest indices among the ties).
            kth = np.partition(eps, eps.size - self.k)[eps.size - self.k]
            above = eps > kth
            n_tie = self.k - int(np.count_nonzero(above))
            tie = np.flatnonzero(eps == kth)[:n_tie]
            sel = np.sort(np.concatenate((np.flatnonzero(above), tie)))
            eps, index = eps[sel], index[sel]
        eps = np.concatenate((self.eps, eps))
        index = np.concatenate((self.index, index))
        order = np.lexsort((index, -eps))[: self.k]
        self.eps, self.index = eps[order], index[order]


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Distinct rows of a uint64 array (1-D, or 2-D compared row-wise), sorted.

    Sort-based: numpy 2's hash-based ``np.unique`` is much slower on these keys.
    """
    if keys.ndim == 1:
        keys = np.sort(keys)
        return keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if keys.size else keys
    keys = keys[np.lexsort(keys.T[::-1])]
    if keys.shape[0] == 0:
        return keys
    new = np.concatenate(([True], np.any(keys[1:] != keys[:-1], axis=1)))
    return keys[new]


class DistinctPairs:
    """Distinct (v, k) mismatch pairs with k > v and with k < v (MLU-OPS diff4).

    Exact up to :data:`DIFF4_DISTINCT_LIMIT` stored pairs; beyond that the sets are dropped
    (``overflow``) and diff4 falls back to the shares over all mismatching elements. The verdict
    does not change: n ≥ 100 is then certain, and the mismatches are one-sided exactly when the
    distinct pairs are.
    """

    def __init__(self, pack32: bool) -> None:
        self.pack32 = pack32
        self.gt: list[np.ndarray] = []
        self.lt: list[np.ndarray] = []
        self._pending = 0
        self.overflow = False

    def _keys(self, v: np.ndarray, k: np.ndarray) -> np.ndarray:
        v = v + 0.0  # −0 → +0: the evaluator's tuple compares values, and −0 == +0
        k = k + 0.0
        if self.pack32:  # values of ≤ 32-bit formats: both patterns in one uint64
            vb = v.astype(np.float32).view(np.uint32).astype(np.uint64)
            kb = k.astype(np.float32).view(np.uint32).astype(np.uint64)
            return _sorted_unique((vb << np.uint64(32)) | kb)
        return _sorted_unique(np.stack([v.view(np.uint64), k.view(np.uint64)], axis=1))

    def add(self, v: np.ndarray, k: np.ndarray) -> None:
        if v.size == 0 or self.overflow:
            return
        up = k > v
        for part, sel in ((self.gt, up), (self.lt, ~up)):
            if sel.any():
                part.append(self._keys(v[sel], k[sel]))
                self._pending += len(part[-1])
        if self._pending > DIFF4_DISTINCT_LIMIT // 4:
            self._consolidate()

    def _consolidate(self) -> None:
        for part in (self.gt, self.lt):
            if len(part) > 1:
                merged = _sorted_unique(np.concatenate(part))
                part.clear()
                part.append(merged)
        self._pending = 0
        if sum(len(p[0]) for p in (self.gt, self.lt) if p) > DIFF4_DISTINCT_LIMIT:
            self.overflow = True
            self.gt.clear()
            self.lt.clear()

    def counts(self) -> tuple[int, int] | None:
        """(pairs with k > v, pairs with k < v), or None after an overflow."""
        if self.overflow:
            return None
        self._consolidate()
        if self.overflow:
            return None
        return (len(self.gt[0]) if self.gt else 0, len(self.lt[0]) if self.lt else 0)
