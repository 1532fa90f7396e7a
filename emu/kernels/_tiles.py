"""The tiling shared by every unit kernel: parallel over output tiles, never over K.

A kernel computes ``out[m, n] = unit(A-row, B-column, C[m, n])`` over tiles of ``LANES`` outputs
of one row m. Inside a tile the loops run over k outside and lanes inside, so each output keeps
its own strict k order while LLVM vectorises across lanes.

Two operand layouts, chosen by ``per_lane`` (a runtime flag tested outside the lane loops):
GEMM layout (False): A is (M, K), B is (K, N): a is shared by the lanes of a row.
Batched layout (True): M == 1, A and B are both (K, N): every lane has its own a and b.
"""

from __future__ import annotations

import numpy as np

from .._jit import jit
from ._scalar import field_exponent

LANES = 128
FP16_EMIN = -14

# Layout of the int64 parameter vector every kernel takes (emu.units.UnitParams order).
(P_FAMILY, P_GROUP, P_F, P_F2, P_ALIGN, P_CALIGN, P_OUT_ROUND, P_ZERO_EXP, P_OUT_FMT, P_FLUSH_IN,
 P_FLUSH_C, P_FLUSH_PROD, P_FLUSH_PART, P_FLUSH_OUT, P_ROUND_EACH) = range(15)


@jit(inline="always")
def tile_bounds(t, n_tiles_per_row, n_cols):
    m = t // n_tiles_per_row
    n0 = (t - m * n_tiles_per_row) * LANES
    w = min(LANES, n_cols - n0)
    return m, n0, w


@jit(inline="always")
def load_products(A, B, m, k, n0, w, per_lane, prod, pexp):
    """prod[j] = a·b exactly (float64) and pexp[j] = field exponent of a + that of b."""
    Bk = B[k, n0:n0 + w]
    if per_lane:
        Ak = A[k, n0:n0 + w]
        for j in range(w):
            a = np.float64(Ak[j])
            b = np.float64(Bk[j])
            prod[j] = a * b
            pexp[j] = field_exponent(a, FP16_EMIN) + field_exponent(b, FP16_EMIN)
    else:
        a = np.float64(A[m, k])
        ea = field_exponent(a, FP16_EMIN)
        for j in range(w):
            b = np.float64(Bk[j])
            prod[j] = a * b
            pexp[j] = ea + field_exponent(b, FP16_EMIN)
