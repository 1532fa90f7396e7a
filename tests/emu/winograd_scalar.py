"""Scalar pieces the Winograd order tests share (tests/emu/test_winograd_wgrad.py,
test_winograd_fprop.py): numpy float32 scalars, one rounding per operation, the fused steps
through exact Fractions."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from exact_reference import rn32

F32 = np.float32


def fma_scalar(a, b, c) -> np.float32:
    return rn32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def data_rows(d):  # one row of 6 -> 6, the documented steps
    r0 = F32(F32(F32(0.25) * d[0] + F32(F32(-1.25) * d[2])) + d[4])
    r5 = F32(F32(F32(0.25) * d[1] + F32(F32(-1.25) * d[3])) + d[5])
    t0, t1 = F32(d[4] - F32(0.25) * d[2]), F32(d[3] - F32(0.25) * d[1])
    t2, t3 = F32(d[4] - d[2]), F32(d[3] - d[1])
    return [r0, F32(t0 + t1), F32(t0 - t1), F32(t2 + F32(0.5) * t3), F32(t2 - F32(0.5) * t3), r5]


def two_pass(f, tile, n_out):
    rows = [f(list(col)) for col in zip(*tile)]  # the first pass runs down each column
    first = [[rows[j][i] for j in range(len(rows))] for i in range(n_out)]
    return first, [f(r) for r in first]


def random_values(rng, shape, spread):
    v = rng.uniform(-1, 1, shape) * np.exp2(rng.integers(-spread, spread + 1, shape))
    return v.astype(np.float32)
