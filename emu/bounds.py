"""Rounding-error bounds of a dot product or convolution, per output element, from its inputs.

For ŝ the floating-point value of s = Σ_k a_k·b_k computed with ``depth`` roundings of unit
roundoff ``u`` along any element's accumulation chain:

* worst case (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1):
  |ŝ − s| ≤ γ_depth · Σ|a_k||b_k|, γ_n = n·u / (1 − n·u);
* probabilistic (Higham & Mary, SIAM J. Sci. Comput. 41(5), 2019, Thm 3.1): with probability at
  least 1 − 2·exp(−λ²(1−u)²/2), |ŝ − s| ≤ λ·√depth·u·Σ|a_k||b_k| (to first order).

:func:`abs_product_sums` gives Σ|a||b| for every element of a convolution, as its GEMMs in fp64
(one extra GEMM per sub-GEMM).
"""

from __future__ import annotations

import math

import numpy as np

from .conv import ConvGemm, ConvProblem

__all__ = ["FP16_MIN_NORMAL", "U_FP16", "U_FP32", "U_FP64", "gamma", "worst_case", "probabilistic", "abs_product_sums"]

U_FP16 = 2.0**-11
U_FP32 = 2.0**-24
U_FP64 = 2.0**-53


def gamma(n: int, u: float) -> float:
    """γ_n = n·u / (1 − n·u), +inf when n·u ≥ 1."""
    nu = float(n) * float(u)
    return math.inf if nu >= 1.0 else nu / (1.0 - nu)


def worst_case(abs_sums: np.ndarray, depth: int, u: float) -> np.ndarray:
    """γ_depth · Σ|a||b| per element (float64)."""
    return gamma(depth, u) * np.asarray(abs_sums, np.float64)


def probabilistic(abs_sums: np.ndarray, depth: int, u: float, lam: float = 1.0) -> np.ndarray:
    """λ · √depth · u · Σ|a||b| per element (float64)."""
    return float(lam) * math.sqrt(max(int(depth), 1)) * float(u) * np.asarray(abs_sums, np.float64)


#: fp16 values below this magnitude are subnormal (flushed by units that flush inputs).
FP16_MIN_NORMAL = 2.0**-14


def abs_product_sums(problem: ConvProblem, x=None, w=None, dy=None, *, below: float | None = None) -> np.ndarray:
    """Σ_k |a_k|·|b_k| of every result element (flat, result memory order; float64 computed,
    stored rounded up to the next float32 so it stays an upper bound); pixels no GEMM writes
    are 0. With ``below``, only the products with |a_k| or |b_k| below it (e.g.
    :data:`FP16_MIN_NORMAL`: what flushing subnormal inputs can lose)."""
    op = ConvGemm(problem, x, w, dy)
    out = op.new_result()
    for sub, sg in enumerate(op.subs):
        for group in range(problem.groups):
            a = np.abs(op.a(sub, group).astype(np.float64))
            chunk = op.default_n_chunk()
            for start in range(0, sg.n, chunk):
                b = np.abs(op.b(sub, group, start, min(start + chunk, sg.n)).astype(np.float64))
                if below is None:
                    s = a @ b
                else:
                    small_a = np.where(a < below, a, 0.0)
                    s = small_a @ b + (a - small_a) @ np.where(b < below, b, 0.0)
                s32 = s.astype(np.float32)
                s32 = np.where(s32.astype(np.float64) < s, np.nextafter(s32, np.float32(np.inf)), s32)
                op.scatter(out, s32, sub, group, start)
    return out.astype(np.float64)
