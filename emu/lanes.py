"""fp32 dot products split across the lanes of a warp: the CUDA-core GEMV orders.

cuBLAS's GEMV kernels (``internal::gemvx::kernel``, what ``torch.mm`` runs in fp32 when M or N
is 1) give each output to a group of threads ("lanes"). Every lane accumulates its share of
the k range as a chain of IEEE fp32 fused multiply-adds from +0, c ← RN32(a_k·b_k + c), in k
ascending order; the lanes' partial sums are then combined by a warp shuffle reduction
(``__shfl_down_sync`` with offsets n/2, n/4, …, 1: lane i adds lane i + offset, so lane 0
ends with ((p0 + p_{n/2}) + …): a *halving* tree), or pairwise, or one after the other. The
CUDA Programming Guide's warp shuffle section ("Warp Shuffle Functions", docs.nvidia.com/cuda/
cuda-c-programming-guide) gives this reduction as its example.

Two ways of dealing k to ``lanes`` lanes are modelled (:func:`lane_of_k`):

* ``"strided"``: lane (k // grain) mod lanes (each lane reads ``grain`` consecutive elements,
  then skips the others' — coalesced loads, as a warp reading a row of a column-major matrix);
* ``"chunked"``: lane l takes the contiguous block [l·w, (l + 1)·w) with w = ⌈K / lanes⌉
  rounded up to a multiple of ``grain`` (each thread walking its own stretch of a contiguous
  row);
* ``"tiled"``: k cut into tiles of ``grain`` k, tile i going to block i mod (lanes / grain), and
  within a block one lane per position in the tile: lane (i mod blocks)·grain + k mod grain
  (thread blocks taking strided tiles, each thread's registers separate chains — cuBLAS's
  ``dot_kernel``: a tile of 128 threads × V consecutive k).

Lanes that get no k contribute +0 and still take their place in the tree. The combination
with C follows CUTLASS's ``LinearCombination`` (github.com/NVIDIA/cutlass,
``include/cutlass/epilogue/thread/linear_combination.h``): RN32(alpha·acc + RN32(beta·C)) as one
FMA, or RN32(alpha·acc) when there is no C.

Everything is numpy on float32 / float64 (:func:`emu.gemm.fma32`: the exact fp32 FMA of fp32
operands), so nothing here needs a compile; the cost is K vectorised steps over (lanes, M, N).
"""

from __future__ import annotations

import numpy as np

from .gemm import fma32
from .simt import fp32_values

__all__ = ["LAYOUTS", "LANE_REDUCTIONS", "lane_of_k", "lane_partials", "reduce_lanes", "lane_gemm"]

LAYOUTS = ("strided", "chunked", "tiled")
LANE_REDUCTIONS = ("halving", "tree", "sequential")


def lane_of_k(K: int, lanes: int, grain: int = 1, layout: str = "strided") -> np.ndarray:
    """The lane (0 … lanes − 1) that accumulates each k in range(K) (see the module docstring)."""
    for name, v in (("K", K), ("lanes", lanes), ("grain", grain)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < (0 if name == "K" else 1):
            raise ValueError(f"{name}: must be a whole number ≥ {0 if name == 'K' else 1}, got {v!r}")
    k = np.arange(K)
    if layout == "strided":
        return (k // grain) % lanes
    if layout == "chunked":
        width = -(-max(K, 1) // lanes)
        width = -(-width // grain) * grain
        return k // width
    if layout == "tiled":
        if lanes % grain:
            raise ValueError(f"lanes: 'tiled' needs a multiple of the tile of {grain} k, got {lanes}")
        return ((k // grain) % (lanes // grain)) * grain + k % grain
    raise ValueError(f"layout: {layout!r} is not one of {', '.join(map(repr, LAYOUTS))}")


def lane_partials(A, B, lanes: int, grain: int = 1, layout: str = "strided") -> np.ndarray:
    """(lanes, M, N) float32: lane l's chain of fp32 FMAs from +0 over its k (ascending) for
    every output of A (M, K) · B (K, N); +0 for a lane without k."""
    A, B = fp32_values(A, "A"), fp32_values(B, "B")
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"A, B: need (M, K) and (K, N), got {A.shape} and {B.shape}")
    M, K = A.shape
    N = B.shape[1]
    lane = lane_of_k(K, lanes, grain, layout)
    ks = [np.flatnonzero(lane == j) for j in range(lanes)]
    steps = max((len(x) for x in ks), default=0)
    acc = np.zeros((lanes, M, N), np.float32)
    for i in range(steps):
        live = np.array([i < len(x) for x in ks])
        kk = np.array([x[i] if i < len(x) else 0 for x in ks])
        a = A[:, kk].T[:, :, None]  # (lanes, M, 1)
        b = B[kk][:, None, :]  # (lanes, 1, N)
        new = fma32(a, b, acc)
        acc = np.where(live[:, None, None], new, acc)
    return acc


def reduce_lanes(partials, reduction: str = "halving") -> np.ndarray:
    """The lanes' partial sums (lanes, …) combined by fp32 adds (RNE): ``"halving"`` (lane i +=
    lane i + h, h = ⌈n/2⌉, repeated: a shuffle-down tree), ``"tree"`` (neighbours pairwise:
    (p0 + p1) + (p2 + p3) …) or ``"sequential"`` (p0 + p1 + p2 … in lane order)."""
    level = list(np.asarray(partials, np.float32))
    with np.errstate(invalid="ignore", over="ignore"):
        if reduction == "halving":
            while len(level) > 1:
                h = (len(level) + 1) // 2
                level = [level[i] + level[i + h] if i + h < len(level) else level[i] for i in range(h)]
        elif reduction == "tree":
            while len(level) > 1:
                level = [level[i] + level[i + 1] if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
        elif reduction == "sequential":
            acc = level[0]
            for p in level[1:]:
                acc = acc + p
            level = [acc]
        else:
            raise ValueError(f"reduction: {reduction!r} is not one of {', '.join(map(repr, LANE_REDUCTIONS))}")
    return np.asarray(level[0], np.float32)


def lane_gemm(
    A,
    B,
    C=None,
    *,
    lanes: int = 32,
    grain: int = 1,
    layout: str = "strided",
    reduction: str = "halving",
    alpha: float = 1.0,
    beta: float = 1.0,
) -> np.ndarray:
    """alpha·(A·B) + beta·C with every output's k range dealt to ``lanes`` lanes (``layout``,
    ``grain``: :func:`lane_of_k`), each lane an fp32 FMA chain from +0, the lanes combined as
    ``reduction`` says, then RN32(alpha·acc + RN32(beta·C)) as one FMA (C float32 broadcastable
    to (M, N), or None: RN32(alpha·acc)). ``lanes=1`` is one k-ascending chain.

    cuBLAS's ``internal::gemvx::kernel`` on an H200 (PyTorch 2.11, CUDA 13.0): with the
    contiguous operand along k (torch's N = 1) ``lanes=32, layout="chunked"``; with the strided
    one (torch's M = 1) ``lanes=32, layout="strided"``; both ``reduction="halving"``."""
    A, B = fp32_values(A, "A"), fp32_values(B, "B")
    acc = reduce_lanes(lane_partials(A, B, lanes, grain, layout), reduction)
    a = np.float32(alpha)
    if C is None:
        return acc if a == 1 else (a * acc).astype(np.float32)
    C = fp32_values(C, "C")
    if np.broadcast_shapes(C.shape, acc.shape) != acc.shape:
        raise ValueError(f"C: shape {C.shape} does not broadcast to the output's {acc.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        beta_c = (np.float32(beta) * np.broadcast_to(C, acc.shape)).astype(np.float32)
    return fma32(a, acc, beta_c)
