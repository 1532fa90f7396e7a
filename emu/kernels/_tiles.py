"""The tiling shared by every unit kernel: parallel over output tiles, never over K.

A kernel computes ``out[m, n] = unit(A-row, B-column, C[m, n])`` over tiles of ``LANES`` outputs
of one row m. Inside a tile the loops run over k outside and lanes inside, so each output keeps
its own strict k order while LLVM vectorises across lanes.

Two operand layouts, told apart by A's number of dimensions at compile time (:func:`a_at`):
GEMM layout: A is (M, K), B is (K, N): a is shared by the lanes of a row.
Batched layout: A is (1, K, N), B is (K, N), M == 1: every lane has its own a and b.
"""

from __future__ import annotations

from numba.extending import overload

from .._jit import jit

LANES = 128
FP16_EMIN = -14

# Layout of the int64 parameter vector every kernel takes (emu.units.UnitParams order).
(P_FAMILY, P_GROUP, P_F, P_F2, P_ALIGN, P_CALIGN, P_OUT_ROUND, P_ZERO_EXP, P_OUT_FMT, P_FLUSH_IN,
 P_FLUSH_C, P_FLUSH_PROD, P_FLUSH_PART, P_FLUSH_OUT, P_ROUND_EACH) = range(15)


def a_at(A, m, k, col):
    """The a operand of output (m, col) at k, for either layout."""
    return A[0, k, col] if A.ndim == 3 else A[m, k]


@overload(a_at, inline="always")
def _a_at(A, m, k, col):
    if A.ndim == 3:
        return lambda A, m, k, col: A[0, k, col]
    return lambda A, m, k, col: A[m, k]


@jit(inline="always")
def tile_bounds(t, n_tiles_per_row, n_cols):
    m = t // n_tiles_per_row
    n0 = (t - m * n_tiles_per_row) * LANES
    w = min(LANES, n_cols - n0)
    return m, n0, w
