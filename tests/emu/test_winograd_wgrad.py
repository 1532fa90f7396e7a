"""emu.winograd's Toom-Cook tiles and cuDNN's F(3×3, 4×4) weight-gradient order
(:func:`emu.winograd.cudnn_wgrad_f3x3_4x4`): the construction reproduces Lavin & Gray's
F(4×4, 3×3) and is exact at cuDNN's points; the vectorised order matches, bit for bit, a scalar
reference of the documented steps written here (numpy float32 scalars, one rounding per
operation; the fused steps and the unrounded difference through exact Fractions), on random and
adversarial fp32 data, with and without padding and partial tiles."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from exact_reference import rn32
from winograd_scalar import data_rows, fma_scalar, random_values, two_pass

from emu.winograd import CUDNN_WGRAD_POINTS, TILES, cudnn_wgrad_f3x3_4x4, toom_cook_tile

F32 = np.float32


C23 = F32(2 / 3)


def _delta(e, fused_12=True):  # one row of 4 -> 6
    c = C23
    if fused_12:
        ev1, od1 = fma_scalar(c, e[0], F32(c * e[2])), fma_scalar(c, e[1], F32(c * e[3]))
    else:
        ev1, od1 = F32(F32(c * e[0]) + F32(c * e[2])), F32(F32(c * e[1]) + F32(c * e[3]))
    ev3 = fma_scalar(F32(-4) * c, e[0], F32(-c * e[2]))
    od3 = fma_scalar(F32(-2) * c, e[1], F32(F32(-0.5) * c * e[3]))
    return [F32(4) * e[0], F32(ev1 + od1), F32(ev1 - od1), F32(ev3 + od3), F32(ev3 - od3), e[3]]


def _out(m):  # one row of 6 -> 3
    t0, t1 = F32(m[1] + m[2]), F32(m[3] + m[4])
    a = F32(m[1] - m[2])
    r1 = rn32(Fraction(float(a)) + (Fraction(float(m[3])) - Fraction(float(m[4]))) / 2)
    return [F32(F32(m[0] + t0) + t1), r1, F32(F32(m[5] + t0) + F32(0.25) * t1)]


def _reference(x, dy, pad):
    N, C, H, W = x.shape
    K, P, Q = dy.shape[1:]
    th, tw = -(-P // 4), -(-Q // 4)
    xp = np.zeros((N, C, 4 * th + 2, 4 * tw + 2), np.float32)
    xp[:, :, pad[0] : pad[0] + H, pad[1] : pad[1] + W] = x
    ep = np.zeros((N, K, 4 * th, 4 * tw), np.float32)
    ep[:, :, :P, :Q] = dy
    V, U = {}, {}
    for n, i, j in itertools.product(range(N), range(th), range(tw)):
        for c in range(C):
            V[n, i, j, c] = two_pass(data_rows, xp[n, c, 4 * i : 4 * i + 6, 4 * j : 4 * j + 6].tolist(), 6)[1]
        for k in range(K):
            first, second = two_pass(_delta, ep[n, k, 4 * i : 4 * i + 4, 4 * j : 4 * j + 4].tolist(), 6)
            second[5] = _delta(first[5], fused_12=False)
            U[n, i, j, k] = second
    out = np.zeros((K, C, 3, 3), np.float32)
    for k, c in itertools.product(range(K), range(C)):
        M = [[F32(0.0)] * 6 for _ in range(6)]
        for xi, nu in itertools.product(range(6), range(6)):
            acc = F32(0.0)
            for n, i, j in itertools.product(range(N), range(th), range(tw)):  # (image, tile row, tile column)
                acc = fma_scalar(U[n, i, j, k][xi][nu], V[n, i, j, c][xi][nu], acc)
            M[xi][nu] = acc
        out[k, c] = np.array(two_pass(_out, M, 3)[1], np.float32)
    return out


def test_toom_cook_reproduces_lavin_and_gray():
    t = toom_cook_tile(4, 3, (0, 1, -1, 2, -2))
    ref = TILES["F(4x4,3x3)"]
    assert (t.BT, t.G, t.AT) == (ref.BT, ref.G, ref.AT)


def test_toom_cook_at_cudnn_points_is_exact_and_reciprocal():
    """At (0, ±1, ±1/2): Aᵀ[(G g) ⊙ (Bᵀ d)] is the correlation, in exact arithmetic, on random
    integers; Bᵀ row 0 is d4 − 5/4 d2 + d0/4 (Lavin's row 0 reversed and scaled)."""
    t = toom_cook_tile(4, 3, CUDNN_WGRAD_POINTS)
    assert t.BT[0] == tuple(map(Fraction, (Fraction(1, 4), 0, Fraction(-5, 4), 0, 1, 0)))
    rng = np.random.default_rng(3)
    for _ in range(20):
        d = [Fraction(int(v)) for v in rng.integers(-50, 50, 6)]
        g = [Fraction(int(v)) for v in rng.integers(-50, 50, 3)]
        m = [sum(a * b for a, b in zip(t.G[j], g)) * sum(a * b for a, b in zip(t.BT[j], d)) for j in range(6)]
        y = [sum(t.AT[i][j] * m[j] for j in range(6)) for i in range(4)]
        assert y == [sum(g[k] * d[i + k] for k in range(3)) for i in range(4)]


def test_toom_cook_rejects_repeated_or_missing_points():
    with pytest.raises(ValueError, match="distinct"):
        toom_cook_tile(4, 3, (0, 1, 1, 2, -2))
    with pytest.raises(ValueError, match="points"):
        toom_cook_tile(4, 3, (0, 1, -1))


@pytest.mark.parametrize(
    "N, C, K, H, W, pad, spread",
    [
        (1, 2, 3, 6, 6, (0, 0), 0),  # one 4×4 dy tile
        (2, 2, 2, 7, 9, (1, 1), 2),  # partial tiles, padding, rectangular
        (1, 3, 2, 5, 6, (1, 0), 12),  # wide exponent spread (cancellation, absorbed terms)
    ],
)
def test_matches_the_scalar_reference_bit_for_bit(N, C, K, H, W, pad, spread):
    rng = np.random.default_rng(N * 100 + H * 10 + spread)
    x = random_values(rng, (N, C, H, W), spread)
    P, Q = H + 2 * pad[0] - 2, W + 2 * pad[1] - 2
    dy = random_values(rng, (N, K, P, Q), spread)
    got = cudnn_wgrad_f3x3_4x4(x, dy, pad)
    want = _reference(x, dy, pad)
    assert got.dtype == np.float32 and got.shape == (K, C, 3, 3)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_is_a_rounded_weight_gradient():
    """A weight gradient: near the fp64 one on random data, and rounded (not exact)."""
    rng = np.random.default_rng(7)
    x, dy = random_values(rng, (2, 4, 10, 10), 1), random_values(rng, (2, 4, 8, 8), 1)
    got = cudnn_wgrad_f3x3_4x4(x, dy)
    exact = np.zeros((4, 4, 3, 3))
    for r, s in itertools.product(range(3), range(3)):
        exact[:, :, r, s] = np.einsum(
            "nkpq,ncpq->kc", dy.astype(np.float64), x[:, :, r : r + 8, s : s + 8].astype(np.float64)
        )
    assert np.count_nonzero(got != exact.astype(np.float32)) > 0  # rounding happens
    assert np.abs(got - exact).max() < 1e-4 * np.abs(exact).max()  # and it is a weight gradient


def test_rejects_bad_shapes():
    x = np.zeros((1, 2, 6, 6), np.float32)
    with pytest.raises(ValueError, match="dy"):
        cudnn_wgrad_f3x3_4x4(x, np.zeros((1, 3, 5, 5), np.float32))
    with pytest.raises(ValueError, match="x, dy"):
        cudnn_wgrad_f3x3_4x4(x, np.zeros((2, 3, 4, 4), np.float32))
