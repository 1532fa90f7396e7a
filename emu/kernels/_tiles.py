"""The tiling shared by every unit kernel: parallel over output tiles, never over K.

A kernel computes ``out[m, n] = unit(A-row, B-column, C[m, n])``. The outputs are cut into
tasks of up to ``ROWS`` rows × ``LANES`` columns (:func:`task_grid`, :func:`task_bounds`); the
tasks run in parallel (every kernel takes a task range ``t0, t1``; :func:`emu.jit.run_tasks` cuts
the tasks into one range per thread) and each output is computed by exactly one task, whatever
the thread count. Inside a task the rows are done one after another, and for one row the loops
run over k outside and lanes inside, so each output keeps its own strict k order while LLVM
vectorises across lanes. The rows of a task share the task's block of B (K × LANES values),
which stays in cache, and any per-task table computed from it.

Two operand layouts, told apart by A's number of dimensions at compile time (:func:`a_of`):
GEMM layout: A is (M, K), B is (K, N): a is shared by the lanes of a row.
Batched layout: A is (1, K, N), B is (K, N), M == 1: every lane has its own a and b.
A and B hold fp16 values (as float32; fp8 values are fp16 values): every kernel's float32 code
relies on it (products exact, multiples of 2^-48 below 2^32). For the wide input formats (bf16,
tf32: 8-bit exponents) A and B are float64 arrays and every kernel is compiled a second time,
where the helpers that depend on it (:func:`a_table`, the kernels' own overloads) take the
general path.

C broadcasts against the (M, N) output: its shape is (M or 1, N or 1) (:func:`c_at`), so a zero
or per-row/per-column accumulator need not be materialised.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from ..jit import jit

LANES = 128
ROWS = 16
#: k values per block in kernels that run every row of a task over one block of B at a time
K_BLOCK = 256
FP16_EMIN = -14

# Layout of the int64 parameter vector every kernel takes (emu.units.UnitParams order).
(
    P_FAMILY,
    P_GROUP,
    P_F,
    P_F2,
    P_ALIGN,
    P_CALIGN,
    P_OUT_ROUND,
    P_ZERO_EXP,
    P_OUT_FMT,
    P_FLUSH_IN,
    P_FLUSH_C,
    P_FLUSH_PROD,
    P_FLUSH_PART,
    P_FLUSH_OUT,
    P_ROUND_EACH,
    P_IN_FMT,
    P_OUT_FB,
    P_INTERLEAVE,
    P_B_IN_FMT,
    P_IN_EMIN,  # A's subnormal field exponent, appended by emu.units.kernel_vector
    P_IN_EMIN_B,  # B's (mixed fp8 operands differ)
) = range(21)


def task_count(M: int, N: int) -> int:
    """The number of tasks of an (M, N) output (:func:`task_grid`'s first value), in Python."""
    return -(-N // LANES) * -(-M // ROWS)


@jit
def task_grid(M, N):
    """(number of tasks, number of row blocks)."""
    n_rb = (M + ROWS - 1) // ROWS
    return ((N + LANES - 1) // LANES) * n_rb, n_rb


@jit
def task_bounds(t, n_rb, M, N):
    """(n0, w, m0, m1): the task's columns n0 … n0+w−1 and rows m0 … m1−1."""
    cb = t // n_rb
    rb = t - cb * n_rb
    n0 = cb * LANES
    m0 = rb * ROWS
    return n0, min(LANES, N - n0), m0, min(M, m0 + ROWS)


@jit
def c_at(C, m, n):
    """C[m, n] with C broadcast to the output shape (a dimension of size 1 repeats)."""
    return C[m if C.shape[0] > 1 else 0, n if C.shape[1] > 1 else 0]


def is_wide(B):
    """True for float64 operands (bf16, tf32: the general code), False for fp16 values in float32;
    a compile-time constant inside the kernels."""
    return B.dtype == np.float64


@overload(is_wide)
def _is_wide(B):
    if B.dtype == types.float64:
        return lambda B: True
    return lambda B: False


def a_of(A, m, k, n0, w):
    """The a operand(s) of row m at k for the lanes n0 … n0+w−1: a scalar (GEMM layout) or a
    1-D view of w values (batched layout); index it with :func:`lane`."""
    return A[0, k, n0 : n0 + w] if A.ndim == 3 else A[m, k]


@overload(a_of)
def _a_of(A, m, k, n0, w):
    if A.ndim == 3:
        return lambda A, m, k, n0, w: A[0, k, n0 : n0 + w]
    return lambda A, m, k, n0, w: A[m, k]


def lane(x, j):
    """x[j] for a per-lane view, x itself for a scalar shared by the lanes."""
    return x[j] if isinstance(x, np.ndarray) else x


@overload(lane)
def _lane(x, j):
    if isinstance(x, types.Array):
        return lambda x, j: x[j]
    return lambda x, j: x


def a_at(A, m, k, n):
    """The a operand of output (m, n) at k, for either layout (a scalar)."""
    return A[0, k, n] if A.ndim == 3 else A[m, k]


@overload(a_at)
def _a_at(A, m, k, n):
    if A.ndim == 3:
        return lambda A, m, k, n: A[0, k, n]
    return lambda A, m, k, n: A[m, k]


def a_table(A, K):
    """A per-task table with one entry per a operand of a row, of A's dtype: (K,) for the GEMM
    layout, (K, LANES) for the batched layout; index it by k, then with :func:`lane`."""
    return np.empty((K, LANES) if A.ndim == 3 else K, A.dtype)


@overload(a_table)
def _a_table(A, K):
    if A.ndim == 3:
        return lambda A, K: np.empty((K, LANES), A.dtype)
    return lambda A, K: np.empty(K, A.dtype)
